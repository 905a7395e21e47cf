use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(on = Order, started_by = [OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    #[deadline]
    next_reminder: Deadline,
}

// The handlers are here, but `#[process]` is missing above the `impl`.
impl OrderPayment {
    async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<OrderPaymentPatch> {
        Ok(OrderPaymentPatch::default().next_reminder(cx.after(hours(1))))
    }

    async fn at_next_reminder(_cx: At<'_, Self>) -> Result<AtNextReminder> {
        Ok(AtNextReminder::new(Deadline::none()))
    }
}

fn main() {}
