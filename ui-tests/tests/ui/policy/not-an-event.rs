use bounda::prelude::*;
use bounda_ui_tests::*;

#[policy]
async fn notify_on_not_an_event(_cx: Reaction<'_, NotAnEvent>) -> Result<()> {
    Ok(())
}

fn main() {}
