//! The order's policies: a reminder scheduled as a delayed command, and a welcome sent by a
//! delayed policy. Their delays come from the environment, short by default so the example
//! finishes quickly.

use bounda::prelude::*;

use crate::order::{OrderPlaced, RecordWelcome, SendReminder};

/// Schedules a reminder `REMINDER_DELAY` after an order is placed (default `1s`; the real
/// storefront waits `24h`). The reminder decides when it runs: a paid order gets none.
pub struct ScheduleReminderOnOrderPlaced;

impl Policy for ScheduleReminderOnOrderPlaced {
    const NAME: &'static str = "schedule_reminder_on_order_placed";
    type Event = OrderPlaced;

    async fn handle(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
        let delay = env_duration("REMINDER_DELAY", seconds(1))?;
        let order_id = cx.event().order_id.clone();
        cx.send_after(SendReminder { order_id }, delay).await?;
        Ok(())
    }
}

/// Welcomes the customer `WELCOME_DELAY` after the order is placed (default `500ms`), whatever
/// happened meanwhile: a delayed policy acts later, it does not decide later.
pub struct WelcomeOnOrderPlaced;

impl Policy for WelcomeOnOrderPlaced {
    const NAME: &'static str = "welcome_on_order_placed";
    type Event = OrderPlaced;

    fn delay() -> Result<Option<Duration>, DurationError> {
        env_duration("WELCOME_DELAY", millis(500)).map(Some)
    }

    async fn handle(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
        cx.send(RecordWelcome {
            order_id: cx.event().order_id.clone(),
        })
        .await?;
        Ok(())
    }
}
