use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(on = Order, started_by = [OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    paid_at: Option<Instant>,
}

#[process]
impl OrderPayment {
    async fn on_order_paid(_cx: On<'_, Self, OrderPaid>) -> Result<OrderPaymentPatch> {
        Ok(OrderPaymentPatch::default().paid_at(Some("2026-01-04T00:00:00Z")))
    }
}

fn main() {}
