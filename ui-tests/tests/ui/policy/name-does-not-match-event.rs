use bounda::prelude::*;
use bounda_ui_tests::*;

#[policy]
async fn notify_on_order_paid(_cx: Reaction<'_, OrderPlaced>) -> Result<()> {
    Ok(())
}

fn main() {}
