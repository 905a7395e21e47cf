//! A full process: two deadlines, a recorded moment, a timeout handler, an event of another
//! aggregate routed by its `order_id` field, and one routed by a correlator (which may then
//! complete the process, though it names no order in its payload).
use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(
    on = Order,
    started_by = [OrderPlaced],
    completed_by = [OrderCancelled, CustomerMoved],
    timeout = "30d",
)]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    reminders: u32,
    #[deadline]
    next_reminder: Deadline,
    #[deadline]
    payment_deadline: Deadline,
    paid_at: Option<Instant>,
    moved_to: Option<String>,
}

#[process]
impl OrderPayment {
    async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<OrderPaymentPatch> {
        Ok(OrderPaymentPatch::default()
            .next_reminder(cx.after(hours(24)))
            .payment_deadline(cx.after("72h".parse()?)))
    }

    async fn on_order_paid(cx: On<'_, Self, OrderPaid>) -> Result<OrderPaymentPatch> {
        Ok(OrderPaymentPatch::default()
            .paid_at(Some(cx.event_time()))
            .next_reminder(Deadline::none())
            .payment_deadline(Deadline::none()))
    }

    async fn on_payment_settled(_cx: On<'_, Self, PaymentSettled>) -> Result<()> {
        Ok(())
    }

    #[correlate(Self::order_of)]
    async fn on_customer_moved(cx: On<'_, Self, CustomerMoved>) -> Result<OrderPaymentPatch> {
        Ok(OrderPaymentPatch::default().moved_to(Some(cx.event().address.clone())))
    }

    async fn at_next_reminder(cx: At<'_, Self>) -> Result<AtNextReminder> {
        let reminders = cx.state().reminders + 1;
        let next = if reminders < 3 { cx.after(hours(24)) } else { Deadline::none() };
        Ok(AtNextReminder::new(next).reminders(reminders))
    }

    async fn at_payment_deadline(_cx: At<'_, Self>) -> Result<AtPaymentDeadline> {
        Ok(AtPaymentDeadline::new(Deadline::none()).next_reminder(Deadline::none()))
    }

    async fn at_timeout(_cx: At<'_, Self>) -> Result<()> {
        Ok(())
    }

    fn order_of(moved: &CustomerMoved) -> Option<String> {
        moved.address.strip_prefix("order:").map(str::to_owned)
    }
}

fn main() {
    assert_eq!(<OrderPayment as ProcessState>::TIMEOUT, Some(days(30)));
}
