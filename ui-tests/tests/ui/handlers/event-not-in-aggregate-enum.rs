use bounda::prelude::*;
use bounda_ui_tests::*;

/// Marked as an order event, but `OrderEvent` has no variant for it.
#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Order)]
pub struct OrderShipped {
    pub order_id: String,
}

#[process(on = Order, started_by = [OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    shipped: bool,
}

#[process]
impl OrderPayment {
    async fn on_order_shipped(_cx: On<'_, Self, OrderShipped>) -> Result<OrderPaymentPatch> {
        Ok(OrderPaymentPatch::default().shipped(true))
    }
}

fn main() {}
