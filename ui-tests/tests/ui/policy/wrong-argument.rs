use bounda::prelude::*;
use bounda_ui_tests::*;

#[policy]
async fn notify_on_order_placed(_event: OrderPlaced) -> Result<()> {
    Ok(())
}

fn main() {}
