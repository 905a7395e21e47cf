use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(on = Order, started_by = [])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {}

#[process]
impl OrderPayment {}

fn main() {}
