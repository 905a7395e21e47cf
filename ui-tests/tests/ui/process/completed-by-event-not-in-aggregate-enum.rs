use bounda::prelude::*;
use bounda_ui_tests::*;

/// Marked as an order event, but `OrderEvent` has no variant for it.
#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Order)]
pub struct OrderShipped {
    pub order_id: String,
}

#[process(on = Order, started_by = [OrderPlaced], completed_by = [OrderShipped])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    reminders: u32,
}

#[process]
impl OrderPayment {}

fn main() {}
