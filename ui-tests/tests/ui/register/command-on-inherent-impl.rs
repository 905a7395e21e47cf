use bounda::prelude::*;

#[derive(Debug, Serialize, Deserialize)]
pub struct CancelOrder {
    pub order_id: String,
}

#[command]
impl CancelOrder {
    pub fn new(order_id: &str) -> CancelOrder {
        CancelOrder {
            order_id: order_id.to_owned(),
        }
    }
}

fn main() {}
