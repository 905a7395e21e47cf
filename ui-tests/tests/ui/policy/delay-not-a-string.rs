use bounda::prelude::*;
use bounda_ui_tests::*;

#[policy(delay = 5)]
async fn welcome_on_order_placed(_cx: Reaction<'_, OrderPlaced>) -> Result<()> {
    Ok(())
}

fn main() {}
