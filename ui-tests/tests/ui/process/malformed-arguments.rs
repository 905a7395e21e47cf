use bounda::prelude::*;

#[process(on bounda_ui_tests::Order, started_by = [bounda_ui_tests::OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    paid: bool,
}

fn main() {}
