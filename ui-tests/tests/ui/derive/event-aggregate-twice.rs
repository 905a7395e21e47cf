use bounda::prelude::*;

#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Order)]
#[event(aggregate = Order)]
pub struct OrderShipped {
    order_id: String,
}

fn main() {}
