use bounda::prelude::*;
use bounda_ui_tests::*;

/// Marked as an order event, but `OrderEvent` has no variant for it.
#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Order)]
pub struct OrderShipped {
    pub order_id: String,
}

#[policy]
async fn notify_on_order_shipped(_cx: Reaction<'_, OrderShipped>) -> Result<()> {
    Ok(())
}

pub struct Thank;

#[policy]
impl Policy for Thank {
    const NAME: &'static str = "thank";
    type Event = OrderShipped;

    async fn handle(_cx: Reaction<'_, OrderShipped>) -> Result<()> {
        Ok(())
    }
}

fn main() {}
