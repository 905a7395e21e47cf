use bounda::prelude::*;
use bounda_ui_tests::*;

#[derive(Debug, Serialize, Deserialize)]
pub struct CancelOrder {
    pub order_id: String,
}

#[command(delay = "1m")]
impl Command for CancelOrder {
    const NAME: &'static str = "CancelOrder";
    type Aggregate = Order;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.order_id
    }

    fn decide(&self, _: &Order) -> Decision<Self> {
        Ok(vec![])
    }
}

fn main() {}
