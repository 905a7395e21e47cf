// A process state without `Default`: one error, at the state, saying to derive it.
use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(on = Order, started_by = [OrderPlaced])]
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    paid: bool,
    #[deadline]
    remind_at: Deadline,
}

#[process]
impl OrderPayment {
    async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<OrderPaymentPatch> {
        Ok(OrderPaymentPatch::default().remind_at(cx.after(hours(24))))
    }

    async fn at_remind_at(_cx: At<'_, Self>) -> Result<AtRemindAt> {
        Ok(AtRemindAt::new(Deadline::none()))
    }
}

fn main() {}
