use bounda::prelude::*;
use bounda_ui_tests::*;

#[policy(delay = "1m", delay = "5m")]
async fn welcome_on_order_placed(_cx: Reaction<'_, OrderPlaced>) -> Result<()> {
    Ok(())
}

fn main() {}
