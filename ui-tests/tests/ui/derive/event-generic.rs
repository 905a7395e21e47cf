use bounda::prelude::*;

#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = bounda_ui_tests::Order)]
pub struct OrderShipped<T> {
    order_id: String,
    carrier: T,
}

fn main() {}
