use bounda::prelude::*;
use bounda_ui_tests::*;

#[policy]
fn notify_on_order_placed(_cx: Reaction<'_, OrderPlaced>) -> Result<()> {
    Ok(())
}

fn main() {}
