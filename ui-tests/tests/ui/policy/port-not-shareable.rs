use std::cell::Cell;

use bounda::prelude::*;
use bounda_ui_tests::*;

#[policy(ports = [Cell<u32>])]
async fn count_on_order_placed(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
    let _ = cx;
    Ok(())
}

fn main() {}
