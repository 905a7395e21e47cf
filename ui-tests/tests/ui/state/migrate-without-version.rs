use bounda::prelude::*;
use bounda_ui_tests::*;

#[derive(Debug, Deserialize)]
pub struct OrderPaymentV1 {
    sent: u32,
}

#[process(on = Order, started_by = [OrderPlaced], migrate = [OrderPaymentV1])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    reminders: u32,
}

#[process]
impl OrderPayment {}

fn main() {}
