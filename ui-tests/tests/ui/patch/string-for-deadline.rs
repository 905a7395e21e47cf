use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(on = Order, started_by = [OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    #[deadline]
    payment_deadline: Deadline,
}

#[process]
impl OrderPayment {
    async fn on_order_placed(_cx: On<'_, Self, OrderPlaced>) -> Result<OrderPaymentPatch> {
        Ok(OrderPaymentPatch::default().payment_deadline("2026-01-04T00:00:00Z"))
    }

    async fn at_payment_deadline(_cx: At<'_, Self>) -> Result<AtPaymentDeadline> {
        Ok(AtPaymentDeadline::new(Deadline::none()))
    }
}

fn main() {}
