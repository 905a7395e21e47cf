use bounda::prelude::*;

#[command]
#[derive(Debug, Serialize, Deserialize)]
pub struct CancelOrder {
    pub order_id: String,
}

fn main() {}
