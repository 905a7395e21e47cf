//! The order's policy: a welcome sent by a delayed policy, whose delay comes from the
//! environment, short by default so the example finishes quickly.

use bounda::prelude::*;

use crate::order::{OrderPlaced, RecordWelcome};

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
