use bounda::prelude::*;
use bounda::read_model::{Json, Select};
use bounda_ui_tests::*;

/// Every column type, an index and a unique column.
#[read_model(name = "order-summary")]
#[derive(Debug, Clone, PartialEq)]
pub struct OrderSummary {
    #[key]
    pub order_id: String,
    #[index]
    pub status: String,
    #[unique]
    pub payment_id: Option<String>,
    pub total: u64,
    pub share: f64,
    pub paid: bool,
    pub placed_at: Instant,
    pub paid_at: Option<Instant>,
    pub lines: Json<Vec<String>>,
    pub extra: serde_json::Value,
}

#[read_model]
impl OrderSummary {
    async fn on_order_placed(event: Projected<'_, OrderPlaced>, table: &mut Table<'_, Self>) -> Result<()> {
        table
            .upsert(&OrderSummary {
                order_id: event.order_id.clone(),
                status: "placed".into(),
                payment_id: None,
                total: 0,
                share: 0.0,
                paid: false,
                placed_at: event.at(),
                paid_at: None,
                lines: Json(Vec::new()),
                extra: serde_json::Value::Null,
            })
            .await?;
        Ok(())
    }

    async fn on_order_paid(event: Projected<'_, OrderPaid>, table: &mut Table<'_, Self>) -> Result<()> {
        table
            .update(
                OrderSummary::ORDER_ID.eq(&event.order_id),
                [OrderSummary::PAID.set(true), OrderSummary::PAID_AT.set(event.at())],
            )
            .await?;
        Ok(())
    }
}

/// Queries live in another block.
impl OrderSummary {
    pub async fn open(app: &App) -> Result<Vec<OrderSummary>> {
        let select = Select::filter(OrderSummary::PAID.eq(false).and(OrderSummary::STATUS.ne("cancelled")))
            .order(OrderSummary::PLACED_AT.desc())
            .limit(10);
        Ok(app.read::<OrderSummary>().find(select).await?)
    }
}

fn main() {}
