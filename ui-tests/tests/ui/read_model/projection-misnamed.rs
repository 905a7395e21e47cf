use bounda::prelude::*;
use bounda_ui_tests::*;

#[read_model(name = "orders")]
pub struct Orders {
    #[key]
    pub order_id: String,
}

#[read_model]
impl Orders {
    async fn when_placed(event: Projected<'_, OrderPlaced>, table: &mut Table<'_, Self>) -> Result<()> {
        let _ = (event, table);
        Ok(())
    }

    async fn on_order_paid(table: &mut Table<'_, Self>) -> Result<()> {
        let _ = table;
        Ok(())
    }

    fn on_order_cancelled(event: Projected<'_, OrderCancelled>, table: &mut Table<'_, Self>) -> Result<()> {
        let _ = (event, table);
        Ok(())
    }

    const LIMIT: u64 = 10;
}

fn main() {}
