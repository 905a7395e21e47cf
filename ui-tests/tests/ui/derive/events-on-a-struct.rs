use bounda::prelude::*;
use bounda_ui_tests::*;

#[derive(Debug, Clone, Serialize, Deserialize, Events)]
pub struct OrderEvents {
    placed: OrderPlaced,
    paid: OrderPaid,
}

fn main() {}
