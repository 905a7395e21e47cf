use bounda::prelude::*;
use bounda_ui_tests::*;

/// The state as version 1 stored it; nothing brings it up to version 2.
#[derive(Debug, Deserialize)]
pub struct OrderPaymentV1 {
    sent: u32,
}

#[process(on = Order, started_by = [OrderPlaced], version = 2, migrate = [OrderPaymentV1])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    reminders: u32,
}

#[process]
impl OrderPayment {}

fn main() {}
