//! The order-payment process of seed 001: remind the customer every 24 hours, three times at
//! most, and give up on the order if it is not paid within 72 hours.

use bounda::prelude::*;

use crate::order::{
    CancelOrder, Order, OrderCancelled, OrderFulfilled, OrderPaid, OrderPlaced, SendReminder,
};

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

/// How often to remind: `REMINDER_EVERY`, `300ms` by default (the real storefront: `24h`).
pub fn reminder_every() -> Result<Duration, DurationError> {
    env_duration("REMINDER_EVERY", millis(300))
}

/// How long the customer has to pay: `PAYMENT_WINDOW`, `1s` by default (the real storefront:
/// `72h`).
pub fn payment_window() -> Result<Duration, DurationError> {
    env_duration("PAYMENT_WINDOW", seconds(1))
}

#[process]
impl OrderPayment {
    async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<OrderPaymentPatch> {
        Ok(OrderPaymentPatch::default()
            .next_reminder(cx.after(reminder_every()?))
            .payment_deadline(cx.after(payment_window()?)))
    }

    async fn on_order_paid(cx: On<'_, Self, OrderPaid>) -> Result<OrderPaymentPatch> {
        Ok(OrderPaymentPatch::default()
            .paid_at(Some(cx.event_time()))
            .next_reminder(Deadline::none())
            .payment_deadline(Deadline::none()))
    }

    // The return type requires `next_reminder`: leaving it out does not compile.
    async fn at_next_reminder(cx: At<'_, Self>) -> Result<AtNextReminder> {
        cx.send(SendReminder { order_id: cx.id() }).await?;
        let reminders = cx.state().reminders + 1;
        let next = if reminders < MAX_REMINDERS {
            cx.after(reminder_every()?)
        } else {
            Deadline::none()
        };
        Ok(AtNextReminder::new(next).reminders(reminders))
    }

    async fn at_payment_deadline(cx: At<'_, Self>) -> Result<AtPaymentDeadline> {
        cx.send(CancelOrder {
            order_id: cx.id(),
            reason: "not paid in time".into(),
        })
        .await?;
        Ok(AtPaymentDeadline::new(Deadline::none()).next_reminder(Deadline::none()))
    }
}
