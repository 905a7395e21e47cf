use bounda::prelude::*;

#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = bounda_ui_tests::Order)]
pub enum OrderShipped {
    ByPost { order_id: String },
    ByCourier { order_id: String },
}

fn main() {}
