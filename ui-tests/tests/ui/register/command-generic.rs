use bounda::prelude::*;
use bounda_ui_tests::*;

#[derive(Debug, Serialize, Deserialize)]
pub struct CancelOrder<T> {
    pub order_id: String,
    pub reason: T,
}

#[command]
impl<T> Command for CancelOrder<T>
where
    T: std::fmt::Debug + Serialize + serde::de::DeserializeOwned + Send + Sync + 'static,
{
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
