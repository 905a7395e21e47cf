// A projection that takes the aggregate instead of one of its events: told to take an event,
// not to rename itself after the aggregate.
use bounda::prelude::*;
use bounda_ui_tests::*;

#[read_model(name = "orders")]
pub struct Orders {
    #[key]
    pub order_id: String,
}

#[read_model]
impl Orders {
    async fn on_order_placed(event: Projected<'_, Order>, table: &mut Table<'_, Self>) -> Result<()> {
        let _ = (event, table);
        Ok(())
    }
}

fn main() {}
