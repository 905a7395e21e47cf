use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(on = Order, completed_by = [OrderCancelled])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {}

#[process]
impl OrderPayment {}

fn main() {}
