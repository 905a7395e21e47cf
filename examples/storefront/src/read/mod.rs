//! The storefront's read models: what a page shows of the orders without folding the log.

pub mod my_orders;
pub mod order_summary;
