//! `my-orders`: what a customer sees of their orders, largest first.

use bounda::Error;
use bounda::prelude::*;
use bounda::read_model::Select;

use crate::order::{OrderCancelled, OrderPlaced};

/// One of a customer's orders.
#[read_model(name = "my-orders")]
#[derive(Debug, Clone, PartialEq)]
pub struct MyOrder {
    /// The order.
    #[key]
    pub order_id: String,
    /// Who ordered.
    #[index]
    pub customer_id: String,
    /// `placed` or `cancelled`.
    pub status: String,
    /// What it costs, in cents.
    pub total: u64,
}

#[read_model]
impl MyOrder {
    async fn on_order_placed(
        event: Projected<'_, OrderPlaced>,
        table: &mut Table<'_, Self>,
    ) -> Result<()> {
        let row = MyOrder {
            order_id: event.order_id.clone(),
            customer_id: event.customer_id.clone(),
            status: "placed".into(),
            total: event.amount,
        };
        table.upsert(&row).await?;
        Ok(())
    }

    async fn on_order_cancelled(
        event: Projected<'_, OrderCancelled>,
        table: &mut Table<'_, Self>,
    ) -> Result<()> {
        table
            .update(
                MyOrder::ORDER_ID.eq(&event.order_id),
                [MyOrder::STATUS.set("cancelled")],
            )
            .await?;
        Ok(())
    }
}

impl MyOrder {
    /// Customer `customer_id`'s orders, largest first.
    pub async fn of(app: &App, customer_id: &str) -> Result<Vec<MyOrder>, Error> {
        let select =
            Select::filter(MyOrder::CUSTOMER_ID.eq(customer_id)).order(MyOrder::TOTAL.desc());
        app.read::<MyOrder>().find(select).await
    }
}
