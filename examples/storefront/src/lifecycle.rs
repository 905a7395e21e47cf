//! The `OrderLifecycle` process: requests the payment, reminds the customer to pay before the
//! payment window closes, gives up on it then, and compensates in one place,
//! `on_order_cancelled`, however the order ends.

use bounda::calendar::Zone;
use bounda::prelude::*;

use crate::order::*;
use crate::payment::{
    CancelPayment, PaymentDeclined, PaymentProcessing, PaymentSettled, RequestPayment,
};
use crate::ports::GatewayPort;

/// How long a customer has to pay (72 hours in the original), a port so a test or the demo
/// can set it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaymentWindow(pub Duration);

/// How long before the payment window closes the customer is reminded to pay: at most this,
/// at most half the window.
pub const PAYMENT_REMINDER_LEAD: Duration = hours(12);

/// When to remind the customer to pay for a window that closes at `pay_by` after `window`.
fn payment_reminder(pay_by: Instant, window: Duration) -> Instant {
    let half = bounda::millis(window.as_millis() / 2);
    pay_by - PAYMENT_REMINDER_LEAD.min(half)
}

/// `OrderLifecycle` as the first storefront stored it: one deadline, `payment_deadline`.
#[derive(Debug, Clone, Deserialize)]
pub struct OrderLifecycleV1 {
    /// The payment requested for the order.
    pub payment_id: Option<String>,
    /// When an unpaid order is given up on.
    pub payment_deadline: Deadline,
}

/// The payment deadline is `pay_by` now, and an order still waiting for its payment gets its
/// reminder [`PAYMENT_REMINDER_LEAD`] before it: the old state does not hold its window.
impl From<OrderLifecycleV1> for OrderLifecycle {
    fn from(old: OrderLifecycleV1) -> OrderLifecycle {
        let reminder = old
            .payment_deadline
            .moment()
            .map(|pay_by| pay_by - PAYMENT_REMINDER_LEAD);
        OrderLifecycle {
            payment_id: old.payment_id,
            pay_by: old.payment_deadline,
            payment_reminder: reminder.map_or_else(Deadline::none, Deadline::at),
        }
    }
}

/// Follows an order from placement to fulfilment or cancellation.
#[process(
    on = Order,
    started_by = [OrderPlaced],
    completed_by = [OrderFulfilled, OrderCancelled],
    timeout = "30d",
    version = 2,
    migrate = [OrderLifecycleV1],
    ports = [GatewayPort, PaymentWindow],
)]
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderLifecycle {
    /// The payment requested for the order.
    pub payment_id: Option<String>,
    /// When an unpaid order is given up on.
    #[deadline]
    pub pay_by: Deadline,
    /// When the customer is reminded to pay.
    #[deadline]
    pub payment_reminder: Deadline,
}

/// No payment to wait for: neither the reminder nor the deadline.
fn payment_settled() -> OrderLifecyclePatch {
    OrderLifecyclePatch::default()
        .pay_by(Deadline::none())
        .payment_reminder(Deadline::none())
}

#[process]
impl OrderLifecycle {
    async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<OrderLifecyclePatch> {
        let placed = cx.event();
        let payment_id = cx.key_for("payment")?;
        // The gateway call comes first, with its own key: a retry makes the same call (spec 136).
        let intent_id = cx.port::<GatewayPort>()?.create_intent(
            &payment_id,
            &placed.order_id,
            placed.amount,
            &cx.key_for("create-intent")?,
        )?;
        cx.send(RequestPayment {
            payment_id: payment_id.clone(),
            order_id: placed.order_id.clone(),
            amount: placed.amount,
            intent_id,
        })
        .await?;
        let window = cx.port::<PaymentWindow>()?.0;
        let pay_by = cx.now() + window;
        let before_close = Deadline::at(payment_reminder(pay_by, window));
        // At 09:00 the next morning where the customer lives, when the window is still open
        // then; otherwise, and for an order placed before zones were kept, before it closes.
        let reminder = match &placed.zone {
            Some(zone) => {
                let next_morning = cx.days_later(1, bounda::time!("09:00"), &Zone::named(zone)?)?;
                match next_morning.moment() {
                    Some(at) if at < pay_by => next_morning,
                    _ => before_close,
                }
            }
            None => before_close,
        };
        Ok(OrderLifecyclePatch::default()
            .payment_id(Some(payment_id))
            .pay_by(Deadline::at(pay_by))
            .payment_reminder(reminder))
    }

    async fn on_payment_processing(
        cx: On<'_, Self, PaymentProcessing>,
    ) -> Result<OrderLifecyclePatch> {
        cx.send(LockOrderForPayment {
            order_id: cx.event().order_id.clone(),
        })
        .await?;
        Ok(payment_settled())
    }

    async fn on_payment_settled(cx: On<'_, Self, PaymentSettled>) -> Result<OrderLifecyclePatch> {
        let paid = cx
            .send(MarkOrderPaid {
                order_id: cx.event().order_id.clone(),
            })
            .await?;
        if let Some(MarkOrderPaidRejection::NotOpen { .. }) = paid.rejection() {
            cx.send(CancelPayment {
                payment_id: cx.event().payment_id.clone(),
                reason: "order no longer open".into(),
            })
            .await?;
        }
        Ok(payment_settled())
    }

    async fn on_payment_declined(cx: On<'_, Self, PaymentDeclined>) -> Result<OrderLifecyclePatch> {
        let order_id = cx.event().order_id.clone();
        cx.send(RecordPaymentFailure {
            order_id: order_id.clone(),
            reason: cx.event().reason.clone(),
        })
        .await?;
        // This command sees the order back at `placed` (spec 26).
        cx.send(CancelOrder {
            order_id,
            reason: "payment declined".into(),
        })
        .await?;
        Ok(payment_settled())
    }

    async fn on_order_paid(cx: On<'_, Self, OrderPaid>) -> Result<()> {
        cx.send(FulfillOrder {
            order_id: cx.event().order_id.clone(),
        })
        .await?;
        Ok(())
    }

    /// The single compensation point: runs for any cancellation, and as a follow-up of the
    /// timeout.
    async fn on_order_cancelled(cx: On<'_, Self, OrderCancelled>) -> Result<()> {
        if let Some(payment_id) = cx.state().payment_id.clone() {
            cx.send(CancelPayment {
                payment_id,
                reason: cx.event().reason.clone(),
            })
            .await?;
        }
        Ok(())
    }

    async fn at_payment_reminder(cx: At<'_, Self>) -> Result<AtPaymentReminder> {
        cx.send(RemindToPay { order_id: cx.id() }).await?;
        Ok(AtPaymentReminder::new(Deadline::none()))
    }

    async fn at_pay_by(cx: At<'_, Self>) -> Result<AtPayBy> {
        cx.send(CancelOrder {
            order_id: cx.id(),
            reason: "not paid in time".into(),
        })
        .await?;
        Ok(AtPayBy::new(Deadline::none()))
    }

    async fn at_timeout(cx: At<'_, Self>) -> Result<()> {
        // Release the lock, then cancel: the cancellation reaches `on_order_cancelled` as a
        // follow-up, which cancels the payment.
        cx.send(RecordPaymentFailure {
            order_id: cx.id(),
            reason: "timed out".into(),
        })
        .await?;
        cx.send(CancelOrder {
            order_id: cx.id(),
            reason: "timed out".into(),
        })
        .await?;
        // The order may be cancelled already by a cancellation stored after the lifetime's
        // end (the deadline that cancels an unpaid order, run late after an outage): this
        // instance never handles it, so the payment is cancelled here too. A second cancel of a
        // payment does nothing. (Found by the simulation, `tests/simulation.rs`.)
        if let Some(payment_id) = cx.state().payment_id.clone() {
            cx.send(CancelPayment {
                payment_id,
                reason: "timed out".into(),
            })
            .await?;
        }
        Ok(())
    }
}
