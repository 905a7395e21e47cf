use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(on = Order, started_by = [OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    reminders: u32,
    #[deadline]
    next_reminder: Deadline,
}

#[process]
impl OrderPayment {
    // Forgets to move or clear `next_reminder`: it would come due again at once.
    async fn at_next_reminder(cx: At<'_, Self>) -> Result<OrderPaymentPatch> {
        Ok(OrderPaymentPatch::default().reminders(cx.state().reminders + 1))
    }
}

fn main() {}
