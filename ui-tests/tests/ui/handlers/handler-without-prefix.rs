use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(on = Order, started_by = [OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    #[deadline]
    pub payment_deadline: Deadline,
}

#[process]
impl OrderPayment {
    async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<OrderPaymentPatch> {
        Ok(OrderPaymentPatch::default().payment_deadline(cx.after(hours(72))))
    }

    async fn order_paid(_cx: On<'_, Self, OrderPaid>) -> Result<()> {
        Ok(())
    }

    async fn at_payment_deadline(_cx: At<'_, Self>) -> Result<AtPaymentDeadline> {
        Ok(AtPaymentDeadline::new(Deadline::none()))
    }

    async fn payment_deadline_reached(_cx: At<'_, Self>) -> Result<AtPaymentDeadline> {
        Ok(AtPaymentDeadline::new(Deadline::none()))
    }
}

fn main() {}
