//! The storefront's policies.

use bounda::prelude::*;

use crate::order::{OrderPlaced, RecordConfirmationSent, SendReminder};
use crate::payment::{RecordRefund, RefundRequested};
use crate::ports::{GatewayPort, Notification, NotifierPort};

/// How long after the order the reminder goes (24 hours in the original), a port so a test or
/// the demo can set it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReminderDelay(pub Duration);

/// Tells the customer their order is placed, with the run's key, then records it.
#[policy(ports = [NotifierPort])]
pub async fn send_confirmation_on_order_placed(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
    let placed = cx.event();
    cx.port::<NotifierPort>()?.notify(Notification {
        order_id: placed.order_id.clone(),
        customer_id: placed.customer_id.clone(),
        total: placed.amount,
        idempotency_key: cx.idempotency_key().to_owned(),
    })?;
    cx.send(RecordConfirmationSent {
        order_id: placed.order_id.clone(),
    })
    .await?;
    Ok(())
}

/// Reminds the customer a day later; the reminder decides then whether there is anything to
/// remind of.
#[policy(ports = [ReminderDelay])]
pub async fn schedule_reminder_on_order_placed(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
    let order_id = cx.event().order_id.clone();
    let delay = cx.port::<ReminderDelay>()?.0;
    cx.send_after(SendReminder { order_id }, delay).await?;
    Ok(())
}

/// Gives the money back, with the run's key, then records it.
#[policy(ports = [GatewayPort])]
pub async fn refund_on_refund_requested(cx: Reaction<'_, RefundRequested>) -> Result<()> {
    let requested = cx.event();
    let refund_id = cx.port::<GatewayPort>()?.refund(
        &requested.intent_id,
        requested.amount,
        cx.idempotency_key(),
    )?;
    cx.send(RecordRefund {
        payment_id: requested.payment_id.clone(),
        refund_id,
    })
    .await?;
    Ok(())
}
