use bounda::prelude::*;
use bounda_ui_tests::*;

#[read_model(name = "orders")]
pub struct Orders {
    #[key]
    pub order_id: Option<String>,
}

#[read_model]
impl Orders {
    async fn on_order_placed(event: Projected<'_, OrderPlaced>, table: &mut Table<'_, Self>) -> Result<()> {
        let _ = (event, table);
        Ok(())
    }
}

fn main() {}
