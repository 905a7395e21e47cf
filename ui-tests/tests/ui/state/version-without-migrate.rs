use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(on = Order, started_by = [OrderPlaced], version = 2)]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    reminders: u32,
}

#[process]
impl OrderPayment {}

fn main() {}
