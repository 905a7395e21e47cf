use bounda::prelude::*;

#[read_model(name = "orders")]
pub struct Orders {
    #[key]
    pub order_id: String,
}

fn main() {}
