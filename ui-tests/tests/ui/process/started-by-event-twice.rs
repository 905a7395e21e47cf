use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(on = Order, started_by = [OrderPlaced, OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {}

#[process]
impl OrderPayment {}

fn main() {}
