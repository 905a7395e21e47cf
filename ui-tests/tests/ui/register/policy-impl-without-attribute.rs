use bounda::prelude::*;
use bounda_ui_tests::*;

pub struct Welcome;

impl Policy for Welcome {
    const NAME: &'static str = "welcome";
    type Event = OrderPlaced;

    async fn handle(_cx: Reaction<'_, OrderPlaced>) -> Result<()> {
        Ok(())
    }
}

fn main() {}
