//! `order-summary`: one row per order, with its payment, kept from the order's and the
//! payment's events; the customer's orders with what they have open and have spent.

use bounda::prelude::*;
use bounda::read_model::{Filter, Page, Select};
use bounda::{Error, Instant};

use crate::order::{
    ConfirmationSent, OrderCancelled, OrderFulfilled, OrderLockedForPayment, OrderPaid,
    OrderPaymentFailed, OrderPlaced, ReminderSent,
};
use crate::payment::{
    PaymentCancelled, PaymentDeclined, PaymentProcessing, PaymentRefunded, PaymentRequested,
    PaymentSettled,
};

/// One order as the shop's pages show it.
#[read_model(name = "order-summary")]
#[derive(Debug, Clone, PartialEq)]
pub struct OrderSummary {
    /// The order.
    #[key]
    pub order_id: String,
    /// Who ordered.
    #[index]
    pub customer_id: String,
    /// `placed`, `paying`, `paid`, `fulfilled` or `cancelled`.
    #[index]
    pub status: String,
    /// What it costs, in cents.
    pub total: u64,
    /// How many items, all lines together.
    pub item_count: u32,
    /// Whether the confirmation went out.
    pub confirmation_sent: bool,
    /// Whether the reminder went out.
    pub reminder_sent: bool,
    /// Its payment, once requested.
    #[unique]
    pub payment_id: Option<String>,
    /// `requested`, `processing`, `settled`, `declined`, `cancelled` or `refunded`.
    pub payment_status: Option<String>,
    /// When it was placed.
    #[index]
    pub placed_at: Instant,
    /// When it was paid.
    pub paid_at: Option<Instant>,
    /// When it was fulfilled.
    pub fulfilled_at: Option<Instant>,
    /// When it was cancelled.
    pub cancelled_at: Option<Instant>,
}

type Summaries<'t> = Table<'t, OrderSummary>;

/// Sets `sets` on order `order_id`'s row.
async fn set(
    table: &mut Summaries<'_>,
    order_id: &str,
    sets: impl IntoIterator<Item = bounda::read_model::Set<OrderSummary>>,
) -> Result<()> {
    table
        .update(OrderSummary::ORDER_ID.eq(order_id), sets)
        .await?;
    Ok(())
}

#[read_model]
impl OrderSummary {
    async fn on_order_placed(
        event: Projected<'_, OrderPlaced>,
        table: &mut Summaries<'_>,
    ) -> Result<()> {
        let row = OrderSummary {
            order_id: event.order_id.clone(),
            customer_id: event.customer_id.clone(),
            status: "placed".into(),
            total: event.amount,
            item_count: event.items.iter().map(|item| item.quantity).sum(),
            confirmation_sent: false,
            reminder_sent: false,
            payment_id: None,
            payment_status: None,
            placed_at: event.at(),
            paid_at: None,
            fulfilled_at: None,
            cancelled_at: None,
        };
        table.upsert(&row).await?;
        Ok(())
    }

    async fn on_order_locked_for_payment(
        event: Projected<'_, OrderLockedForPayment>,
        table: &mut Summaries<'_>,
    ) -> Result<()> {
        set(table, &event.order_id, [OrderSummary::STATUS.set("paying")]).await
    }

    async fn on_order_payment_failed(
        event: Projected<'_, OrderPaymentFailed>,
        table: &mut Summaries<'_>,
    ) -> Result<()> {
        set(table, &event.order_id, [OrderSummary::STATUS.set("placed")]).await
    }

    async fn on_order_paid(
        event: Projected<'_, OrderPaid>,
        table: &mut Summaries<'_>,
    ) -> Result<()> {
        let sets = [
            OrderSummary::STATUS.set("paid"),
            OrderSummary::PAID_AT.set(event.at()),
        ];
        set(table, &event.order_id, sets).await
    }

    async fn on_order_fulfilled(
        event: Projected<'_, OrderFulfilled>,
        table: &mut Summaries<'_>,
    ) -> Result<()> {
        let sets = [
            OrderSummary::STATUS.set("fulfilled"),
            OrderSummary::FULFILLED_AT.set(event.at()),
        ];
        set(table, &event.order_id, sets).await
    }

    async fn on_order_cancelled(
        event: Projected<'_, OrderCancelled>,
        table: &mut Summaries<'_>,
    ) -> Result<()> {
        let sets = [
            OrderSummary::STATUS.set("cancelled"),
            OrderSummary::CANCELLED_AT.set(event.at()),
        ];
        set(table, &event.order_id, sets).await
    }

    async fn on_confirmation_sent(
        event: Projected<'_, ConfirmationSent>,
        table: &mut Summaries<'_>,
    ) -> Result<()> {
        set(
            table,
            &event.order_id,
            [OrderSummary::CONFIRMATION_SENT.set(true)],
        )
        .await
    }

    async fn on_reminder_sent(
        event: Projected<'_, ReminderSent>,
        table: &mut Summaries<'_>,
    ) -> Result<()> {
        set(
            table,
            &event.order_id,
            [OrderSummary::REMINDER_SENT.set(true)],
        )
        .await
    }

    async fn on_payment_requested(
        event: Projected<'_, PaymentRequested>,
        table: &mut Summaries<'_>,
    ) -> Result<()> {
        let sets = [
            OrderSummary::PAYMENT_ID.set(event.payment_id.clone()),
            OrderSummary::PAYMENT_STATUS.set("requested"),
        ];
        set(table, &event.order_id, sets).await
    }

    async fn on_payment_processing(
        event: Projected<'_, PaymentProcessing>,
        table: &mut Summaries<'_>,
    ) -> Result<()> {
        set(
            table,
            &event.order_id,
            [OrderSummary::PAYMENT_STATUS.set("processing")],
        )
        .await
    }

    async fn on_payment_settled(
        event: Projected<'_, PaymentSettled>,
        table: &mut Summaries<'_>,
    ) -> Result<()> {
        set(
            table,
            &event.order_id,
            [OrderSummary::PAYMENT_STATUS.set("settled")],
        )
        .await
    }

    async fn on_payment_declined(
        event: Projected<'_, PaymentDeclined>,
        table: &mut Summaries<'_>,
    ) -> Result<()> {
        set(
            table,
            &event.order_id,
            [OrderSummary::PAYMENT_STATUS.set("declined")],
        )
        .await
    }

    async fn on_payment_cancelled(
        event: Projected<'_, PaymentCancelled>,
        table: &mut Summaries<'_>,
    ) -> Result<()> {
        set(
            table,
            &event.order_id,
            [OrderSummary::PAYMENT_STATUS.set("cancelled")],
        )
        .await
    }

    async fn on_payment_refunded(
        event: Projected<'_, PaymentRefunded>,
        table: &mut Summaries<'_>,
    ) -> Result<()> {
        set(
            table,
            &event.order_id,
            [OrderSummary::PAYMENT_STATUS.set("refunded")],
        )
        .await
    }
}

/// One customer's orders, with what is open and what they have spent.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomerOrders {
    /// Their orders, oldest first.
    pub orders: Vec<OrderSummary>,
    /// Orders placed or paying: not yet paid, fulfilled or cancelled.
    pub open: u64,
    /// What their fulfilled orders came to, in cents.
    pub spent: u64,
}

/// The largest page of [`OrderSummary::newest`].
pub const MAX_PAGE: u64 = 100;

impl OrderSummary {
    /// Order `order_id`'s summary.
    pub async fn get(app: &App, order_id: &str) -> Result<Option<OrderSummary>, Error> {
        app.read::<OrderSummary>().get(order_id).await
    }

    /// Customer `customer_id`'s orders, oldest first, with what is open and what they spent.
    pub async fn by_customer(app: &App, customer_id: &str) -> Result<CustomerOrders, Error> {
        let theirs = || OrderSummary::CUSTOMER_ID.eq(customer_id);
        let table = app.read::<OrderSummary>();
        let orders = table
            .find(Select::filter(theirs()).order(OrderSummary::PLACED_AT.asc()))
            .await?;
        let open = table
            .count(theirs().and(OrderSummary::STATUS.is_in(["placed", "paying"])))
            .await?;
        // A sum is beyond the table's calls: plain SQL on the store's connection.
        let sum = app
            .read_sql(
                &format!(
                    "SELECT COALESCE(SUM(total), 0) AS spent FROM {} WHERE customer_id = $1 AND status = 'fulfilled'",
                    app.read_table_name::<OrderSummary>()?
                ),
                &[customer_id.into()],
            )
            .await?;
        let spent = match sum.first() {
            Some(row) => row.get::<u64>("spent")?,
            None => 0,
        };
        Ok(CustomerOrders {
            orders,
            open,
            spent,
        })
    }

    /// Page `page` (from 1) of every order, newest first, `MAX_PAGE` at most per page.
    pub async fn newest(app: &App, page: u64, page_size: u64) -> Result<Page<OrderSummary>, Error> {
        let select = Select::filter(Filter::all()).order(OrderSummary::PLACED_AT.desc());
        app.read::<OrderSummary>()
            .page(select, page, page_size.min(MAX_PAGE))
            .await
    }
}
