//! The `OrderLifecycle` process: requests the payment, gives up on it after the
//! payment window, and compensates in one place, `on_order_cancelled`, however the order ends.

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

/// Follows an order from placement to fulfilment or cancellation.
#[process(
    on = Order,
    started_by = [OrderPlaced],
    completed_by = [OrderFulfilled, OrderCancelled],
    timeout = "30d",
)]
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderLifecycle {
    /// The payment requested for the order.
    pub payment_id: Option<String>,
    /// When an unpaid order is given up on.
    #[deadline]
    pub payment_deadline: Deadline,
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
            placed.total,
            &cx.key_for("create-intent")?,
        )?;
        cx.send(RequestPayment {
            payment_id: payment_id.clone(),
            order_id: placed.order_id.clone(),
            amount: placed.total,
            intent_id,
        })
        .await?;
        Ok(OrderLifecyclePatch::default()
            .payment_id(Some(payment_id))
            .payment_deadline(cx.after(cx.port::<PaymentWindow>()?.0)))
    }

    async fn on_payment_processing(
        cx: On<'_, Self, PaymentProcessing>,
    ) -> Result<OrderLifecyclePatch> {
        cx.send(LockOrderForPayment {
            order_id: cx.event().order_id.clone(),
        })
        .await?;
        Ok(OrderLifecyclePatch::default().payment_deadline(Deadline::none()))
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
        Ok(OrderLifecyclePatch::default().payment_deadline(Deadline::none()))
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
        Ok(OrderLifecyclePatch::default().payment_deadline(Deadline::none()))
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

    async fn at_payment_deadline(cx: At<'_, Self>) -> Result<AtPaymentDeadline> {
        cx.send(CancelOrder {
            order_id: cx.id(),
            reason: "not paid in time".into(),
        })
        .await?;
        Ok(AtPaymentDeadline::new(Deadline::none()))
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
        Ok(())
    }
}
