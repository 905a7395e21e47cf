//! Handlers of the storefront domain for apps that list what they run: not in `mod.rs`, since
//! every binary takes that in, and a binary whose apps take in every registered handler would
//! run these too.

use bounda::prelude::*;

use crate::support::storefront::{OrderPlaced, RecordConfirmationSent};

/// Confirms each order as it is placed.
pub struct ConfirmOnOrderPlaced;

#[policy]
impl Policy for ConfirmOnOrderPlaced {
    const NAME: &'static str = "confirm_on_order_placed";
    type Event = OrderPlaced;

    async fn handle(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
        cx.send(RecordConfirmationSent {
            order_id: cx.event().order_id.clone(),
        })
        .await?;
        Ok(())
    }
}
