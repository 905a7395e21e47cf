//! A generic command: `#[command]` marks it, and an app lists each of its types, since there is
//! no one type to register.

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

/// Lists the one type of the generic command this app runs.
fn listed(builder: bounda::AppBuilder) -> bounda::AppBuilder {
    builder.command::<CancelOrder<String>>()
}

fn main() {
    let _ = listed;
}
