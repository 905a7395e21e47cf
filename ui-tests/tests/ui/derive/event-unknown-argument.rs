use bounda::prelude::*;

#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = bounda_ui_tests::Order, schema = 2)]
pub struct OrderShipped {
    order_id: String,
}

fn main() {}
