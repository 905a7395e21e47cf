//! The order's policies: a reminder scheduled as a delayed command, and a welcome sent by a
//! delayed policy. Their delays come from the environment, short by default so the example
//! finishes quickly.

use bounda::prelude::*;

use crate::order::{OrderPlaced, RecordWelcome, SendReminder};

/// The reminder's delay: `REMINDER_DELAY`, `1s` by default (the real storefront waits `24h`).
pub fn reminder_delay() -> Result<Duration, DurationError> {
    env_duration("REMINDER_DELAY", seconds(1))
}

/// Schedules a reminder after an order is placed. The reminder decides when it runs: a paid
/// order gets none.
#[policy]
pub async fn schedule_reminder_on_order_placed(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
    let order_id = cx.event().order_id.clone();
    cx.send_after(SendReminder { order_id }, reminder_delay()?)
        .await?;
    Ok(())
}

/// Welcomes the customer `WELCOME_DELAY` after the order is placed (`500ms` by default),
/// whatever happened meanwhile: a delayed policy acts later, it does not decide later.
#[policy(delay = env("WELCOME_DELAY", "500ms"))]
pub async fn welcome_on_order_placed(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
    cx.send(RecordWelcome {
        order_id: cx.event().order_id.clone(),
    })
    .await?;
    Ok(())
}
