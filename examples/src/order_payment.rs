//! The order-payment process of seed 001: remind the customer every 24 hours, three times at
//! most, and give up on the order if it is not paid within 72 hours.

use bounda::prelude::*;

use crate::order::{Order, OrderCancelled, OrderFulfilled, OrderPaid, OrderPlaced};

/// Reminds the customer daily and cancels the order if it is not paid within 72 hours.
#[process(
    on = Order,
    started_by = [OrderPlaced],
    completed_by = [OrderFulfilled, OrderCancelled],
    timeout = "30d",
)]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    /// Reminders sent so far.
    pub reminders: u32,
    /// When the next reminder goes out.
    #[deadline]
    pub next_reminder: Deadline,
    /// When an unpaid order is cancelled.
    #[deadline]
    pub payment_deadline: Deadline,
    /// When the order was paid: recorded, nothing runs for it.
    pub paid_at: Option<Instant>,
}

/// Reminders sent at most.
pub const MAX_REMINDERS: u32 = 3;

#[process]
impl OrderPayment {
    async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<OrderPaymentPatch> {
        Ok(OrderPaymentPatch::default()
            .next_reminder(cx.after(hours(24)))
            .payment_deadline(cx.after(hours(72))))
    }

    async fn on_order_paid(cx: On<'_, Self, OrderPaid>) -> Result<OrderPaymentPatch> {
        Ok(OrderPaymentPatch::default()
            .paid_at(Some(cx.event_time()))
            .next_reminder(Deadline::none())
            .payment_deadline(Deadline::none()))
    }

    // The return type requires `next_reminder`: leaving it out does not compile.
    async fn at_next_reminder(cx: At<'_, Self>) -> Result<AtNextReminder> {
        let reminders = cx.state().reminders + 1;
        let next = if reminders < MAX_REMINDERS {
            cx.after(hours(24))
        } else {
            Deadline::none()
        };
        Ok(AtNextReminder::new(next).reminders(reminders))
    }

    async fn at_payment_deadline(_cx: At<'_, Self>) -> Result<AtPaymentDeadline> {
        Ok(AtPaymentDeadline::new(Deadline::none()).next_reminder(Deadline::none()))
    }
}
