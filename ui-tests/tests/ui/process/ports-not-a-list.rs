use bounda::prelude::*;
use bounda_ui_tests::*;

pub struct Gateway;

#[process(on = Order, started_by = [OrderPlaced], ports = Gateway)]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    paid: bool,
}

#[process]
impl OrderPayment {}

fn main() {}
