//! Hand-written policies and commands, registered with their attributes.

use bounda::prelude::*;
use bounda_ui_tests::*;

#[derive(Debug, Serialize, Deserialize)]
pub struct CancelOrder {
    pub order_id: String,
}

#[command]
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

pub struct CancelLater;

#[policy]
impl Policy for CancelLater {
    const NAME: &'static str = "cancel_later";
    type Event = OrderPlaced;

    async fn handle(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
        let order_id = cx.event().order_id.clone();
        cx.send_after(CancelOrder { order_id }, hours(1)).await?;
        Ok(())
    }
}

fn main() {}
