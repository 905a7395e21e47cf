use bounda::prelude::*;
use bounda_ui_tests::*;

#[policy]
async fn welcome_on_order_placed<T: Default>(_cx: Reaction<'_, OrderPlaced>) -> Result<T> {
    Ok(T::default())
}

fn main() {}
