use bounda::prelude::*;

#[derive(Debug, Serialize, Deserialize, Event)]
pub struct OrderShipped {
    order_id: String,
}

fn main() {}
