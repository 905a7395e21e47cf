use bounda::prelude::*;
use bounda_ui_tests::*;

/// The state as version 1 stored it; it forgot its derive.
#[derive(Debug)]
pub struct OrderPaymentV1 {
    sent: u32,
}

impl From<OrderPaymentV1> for OrderPayment {
    fn from(old: OrderPaymentV1) -> OrderPayment {
        OrderPayment { reminders: old.sent }
    }
}

#[process(on = Order, started_by = [OrderPlaced], version = 2, migrate = [OrderPaymentV1])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    reminders: u32,
}

#[process]
impl OrderPayment {}

fn main() {}
