//! Read models on the suite's store: a table kept from the log, a batch written once with its
//! checkpoint, a failing projection holding its read model just before the event, queries with
//! pages and plain SQL.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

mod support;

use std::cell::Cell;

use bounda::Error;
use bounda::prelude::*;
use bounda::read_model::{Select, SqlValue};
use support::storefront::*;

thread_local! {
    /// The order total whose projection fails, while set: each test runs on its own thread.
    static BROKEN_TOTAL: Cell<Option<u64>> = const { Cell::new(None) };
}

/// One order as a page lists it.
#[read_model(name = "order-list")]
#[derive(Debug, Clone, PartialEq)]
pub struct OrderRow {
    #[key]
    pub order_id: String,
    #[index]
    pub status: String,
    pub total: u64,
    pub paid_at: Option<Instant>,
    /// How many events this row has taken: a batch applied twice would count twice.
    pub events: u32,
}

#[read_model]
impl OrderRow {
    async fn on_order_placed(
        event: Projected<'_, OrderPlaced>,
        table: &mut Table<'_, Self>,
    ) -> Result<()> {
        if BROKEN_TOTAL.get() == Some(event.total) {
            anyhow::bail!("the projection cannot take a total of {}", event.total);
        }
        let inserted = table
            .insert(&OrderRow {
                order_id: event.order_id.clone(),
                status: "placed".into(),
                total: event.total,
                paid_at: None,
                events: 1,
            })
            .await?;
        assert!(inserted, "an order is placed once");
        Ok(())
    }

    async fn on_order_paid(
        event: Projected<'_, OrderPaid>,
        table: &mut Table<'_, Self>,
    ) -> Result<()> {
        let Some(mut row) = table.get(&event.order_id).await? else {
            anyhow::bail!("order `{}` was paid before it was placed", event.order_id);
        };
        row.status = "paid".into();
        row.paid_at = Some(event.at());
        row.events += 1;
        table.upsert(&row).await?;
        Ok(())
    }

    async fn on_order_cancelled(
        event: Projected<'_, OrderCancelled>,
        table: &mut Table<'_, Self>,
    ) -> Result<()> {
        table
            .update(
                OrderRow::ORDER_ID.eq(&event.order_id),
                [OrderRow::STATUS.set("cancelled")],
            )
            .await?;
        Ok(())
    }
}

/// Payments, a read model no order event touches.
#[read_model(name = "payment-list")]
#[derive(Debug, Clone, PartialEq)]
pub struct PaymentRow {
    #[key]
    pub payment_id: String,
    #[unique]
    pub order_id: Option<String>,
}

#[read_model]
impl PaymentRow {
    async fn on_payment_settled(
        event: Projected<'_, PaymentSettled>,
        table: &mut Table<'_, Self>,
    ) -> Result<()> {
        table
            .upsert(&PaymentRow {
                payment_id: event.payment_id.clone(),
                order_id: event.order_id.clone(),
            })
            .await?;
        Ok(())
    }
}

/// Which order each payment pays, an order paid once: its projection swallows a failed insert,
/// as a careless one might.
#[read_model(name = "payment-orders")]
#[derive(Debug, Clone, PartialEq)]
pub struct PaymentOrder {
    #[key]
    pub payment_id: String,
    #[unique]
    pub order_id: String,
}

#[read_model]
impl PaymentOrder {
    async fn on_payment_settled(
        event: Projected<'_, PaymentSettled>,
        table: &mut Table<'_, Self>,
    ) -> Result<()> {
        let Some(order_id) = event.order_id.clone() else {
            return Ok(());
        };
        let row = PaymentOrder {
            payment_id: event.payment_id.clone(),
            order_id,
        };
        let _ = table.insert(&row).await;
        Ok(())
    }
}

async fn app() -> TestApp {
    let store = support::database::store().await;
    TestApp::new(App::builder_shared(store)).await.unwrap()
}

async fn place(app: &TestApp, id: &str, total: u64) {
    app.dispatch(PlaceOrder {
        order_id: id.into(),
        total,
    })
    .await
    .unwrap();
}

async fn pay(app: &TestApp, id: &str) {
    app.dispatch(MarkOrderPaid {
        order_id: id.into(),
    })
    .await
    .unwrap();
}

const SUBSCRIBER: &str = "read-model:order-list";

/// `order-list`'s line of the app's lag.
async fn order_list_lag(app: &TestApp) -> bounda::SubscriberLag {
    let lag = app.lag().await.unwrap();
    lag.subscribers
        .into_iter()
        .find(|s| s.subscriber == SUBSCRIBER)
        .expect("order-list is in the lag")
}

#[tokio::test]
async fn a_read_model_keeps_its_table_from_the_log_and_answers_queries() {
    let app = app().await;
    for (id, total) in [("o-1", 10), ("o-2", 20), ("o-3", 30)] {
        place(&app, id, total).await;
    }
    pay(&app, "o-2").await;
    app.run_until_idle().await.unwrap();

    let orders = app.app().read::<OrderRow>();
    let paid = orders.get("o-2").await.unwrap().unwrap();
    assert_eq!(paid.status, "paid");
    assert_eq!(paid.events, 2, "each event counted once");
    assert_eq!(paid.paid_at, Some(app.now()));
    assert_eq!(orders.get("o-9").await.unwrap(), None);
    let placed = orders
        .find(Select::filter(OrderRow::STATUS.eq("placed")).order(OrderRow::TOTAL.desc()))
        .await
        .unwrap();
    let ids: Vec<&str> = placed.iter().map(|row| row.order_id.as_str()).collect();
    assert_eq!(ids, ["o-3", "o-1"]);
    assert_eq!(orders.count(OrderRow::TOTAL.ge(20u64)).await.unwrap(), 2);

    let page = orders
        .page(Select::all().order(OrderRow::TOTAL.asc()), 2, 2)
        .await
        .unwrap();
    assert_eq!((page.total, page.pages, page.page), (3, 2, 2));
    assert_eq!(page.rows.len(), 1);
    assert_eq!(page.rows[0].order_id, "o-3");
    // Issue 43: a page past the last holds nothing; its offset was once beyond what the
    // database takes, an error naming a number nobody asked for.
    let past = orders
        .page(Select::all(), i64::MAX as u64, 20)
        .await
        .unwrap();
    assert_eq!(
        (past.page, past.pages, past.rows.len()),
        (i64::MAX as u64, 1, 0)
    );

    // What the table API cannot say, in SQL on the store's own connection.
    let table = app.app().read_table_name::<OrderRow>().unwrap();
    let rows = app
        .app()
        .read_sql(
            &format!("SELECT status, SUM(total) AS amount FROM {table} WHERE total > $1 GROUP BY status ORDER BY status"),
            &[SqlValue::Integer(5)],
        )
        .await
        .unwrap();
    let sums: Vec<(String, i64)> = rows
        .iter()
        .map(|row| (row.get("status").unwrap(), row.get("amount").unwrap()))
        .collect();
    assert_eq!(sums, [("paid".to_owned(), 20), ("placed".to_owned(), 40)]);

    let model = order_list_lag(&app).await;
    assert_eq!((model.lag, model.failing.clone()), (0, None));
}

#[tokio::test]
async fn a_read_model_projects_the_history_stored_before_it() {
    let store = support::database::store().await;
    let before = TestApp::new(
        App::builder_shared(store.clone())
            .only_listed()
            .command::<PlaceOrder>(),
    )
    .await
    .unwrap();
    place(&before, "o-1", 10).await;
    place(&before, "o-2", 20).await;

    // Issue 44: a query of a read model the app does not keep names it and says how to add it,
    // rather than answer `no such table`.
    let unkept = before
        .app()
        .read::<OrderRow>()
        .get("o-1")
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        unkept,
        "invalid configuration: read model `order-list` is not in this app, so its table is not \
         kept: add `.read_model::<OrderRow>()` to the app"
    );

    let app = TestApp::new(App::builder_shared(store)).await.unwrap();
    app.run_until_idle().await.unwrap();
    assert_eq!(
        app.app()
            .read::<OrderRow>()
            .count(bounda::read_model::Filter::all())
            .await
            .unwrap(),
        2
    );
}

#[tokio::test]
async fn a_failing_projection_holds_its_read_model_just_before_the_event_until_it_projects() {
    let app = app().await;
    place(&app, "o-1", 10).await;
    place(&app, "o-2", 13).await;
    place(&app, "o-3", 30).await;
    BROKEN_TOTAL.set(Some(13));

    let error = app.run_until_idle().await.unwrap_err();
    let Error::Projection {
        read_model,
        event_type,
        position,
        message,
        ..
    } = &error
    else {
        panic!("expected a projection failure, got {error}");
    };
    assert_eq!(
        (read_model.as_str(), event_type.as_str()),
        ("order-list", "OrderPlaced")
    );
    assert!(message.contains("cannot take a total of 13"), "{message}");
    let held_at = *position;

    // What came before it is written, with the checkpoint just before it; nothing after.
    let store = app.app().store();
    assert_eq!(
        store.checkpoint(SUBSCRIBER).await.unwrap(),
        Some(held_at - 1)
    );
    let orders = app.app().read::<OrderRow>();
    assert!(orders.get("o-1").await.unwrap().is_some());
    assert_eq!(orders.get("o-3").await.unwrap(), None);

    // Tried again, it fails again at the same event, counted.
    let _ = app.run_until_idle().await.unwrap_err();
    let model = order_list_lag(&app).await;
    let failing = model.failing.clone().expect("the read model is held");
    assert_eq!((failing.position, failing.attempts), (held_at, 2));
    assert!(failing.message.contains("cannot take a total of 13"));
    assert!(model.lag >= 2, "{model:?}");

    // Mended, it goes on from the event it was held at, skipping none.
    BROKEN_TOTAL.set(None);
    app.run_until_idle().await.unwrap();
    for id in ["o-1", "o-2", "o-3"] {
        let row = orders.get(id).await.unwrap().unwrap();
        assert_eq!(row.events, 1, "{id} projected once");
    }
    let model = order_list_lag(&app).await;
    assert_eq!((model.lag, model.failing.clone()), (0, None));
}

#[tokio::test]
async fn a_batch_moves_its_checkpoint_with_its_rows_or_not_at_all() {
    let app = app().await;
    place(&app, "o-1", 10).await;
    app.run_until_idle().await.unwrap();
    let head = app.app().store().head().await.unwrap();
    assert_eq!(
        app.app().store().checkpoint(SUBSCRIBER).await.unwrap(),
        Some(head)
    );

    // Another process that moved the checkpoint first wins: this batch writes nothing.
    pay(&app, "o-1").await;
    let head_after = app.app().store().head().await.unwrap();
    assert!(
        app.app()
            .store()
            .move_checkpoint(SUBSCRIBER, Some(head), head_after)
            .await
            .unwrap()
    );
    app.run_until_idle().await.unwrap();
    let row = app
        .app()
        .read::<OrderRow>()
        .get("o-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((row.status.as_str(), row.events), ("placed", 1));
}

// Issue 22: read your writes: after a command, the read models its events touch have projected
// it; the others are not waited for.
#[tokio::test]
async fn a_command_waits_for_the_read_models_its_events_touch_and_no_others() {
    let app = app().await;
    let settled = app
        .dispatch(SettlePayment {
            payment_id: "p-1".into(),
            order_id: Some("o-1".into()),
        })
        .await
        .unwrap();
    let placed = app
        .dispatch(PlaceOrder {
            order_id: "o-1".into(),
            total: 10,
        })
        .await
        .unwrap();
    let caught = app.app().catch_up(&placed).await.unwrap();
    assert_eq!(caught.caught_up, ["order-list"]);
    assert!(caught.is_complete());
    let row = app.app().read::<OrderRow>().get("o-1").await.unwrap();
    assert_eq!(row.map(|row| row.status), Some("placed".to_owned()));
    assert_eq!(
        app.app()
            .store()
            .checkpoint("read-model:payment-list")
            .await
            .unwrap(),
        Some(0),
        "the payments were not waited for"
    );

    let cancelled = app
        .dispatch(CancelOrder {
            order_id: "o-1".into(),
            reason: "changed my mind".into(),
        })
        .await
        .unwrap();
    app.app().catch_up(&cancelled).await.unwrap();
    let row = app
        .app()
        .read::<OrderRow>()
        .get("o-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.status, "cancelled");

    app.app().catch_up(&settled).await.unwrap();
    let payment = app
        .app()
        .read::<PaymentRow>()
        .find_one(PaymentRow::ORDER_ID.eq("o-1"))
        .await
        .unwrap();
    assert_eq!(payment.map(|p| p.payment_id), Some("p-1".to_owned()));
}

// Issue 22: a read model held by a failing projection is not waited for.
#[tokio::test]
async fn a_read_model_held_by_its_projection_is_not_waited_for() {
    let app = app().await;
    BROKEN_TOTAL.set(Some(13));
    let placed = app
        .dispatch(PlaceOrder {
            order_id: "o-1".into(),
            total: 13,
        })
        .await
        .unwrap();
    let caught = app.app().catch_up(&placed).await.unwrap();
    assert_eq!(caught.behind, ["order-list"]);
    // Backing off now, it is not projected again until its back-off ends.
    let again = app.app().catch_up(&placed).await.unwrap();
    assert_eq!(again.behind, ["order-list"]);
    let model = order_list_lag(&app).await;
    assert_eq!(model.failing.as_ref().map(|f| f.attempts), Some(1));
    assert!(model.paused_until.is_some());
}

/// Every row's (id, status, total), in key order.
async fn rows(app: &TestApp) -> Vec<(String, String, u64)> {
    app.app()
        .read::<OrderRow>()
        .find(Select::all())
        .await
        .unwrap()
        .into_iter()
        .map(|row| (row.order_id, row.status, row.total))
        .collect()
}

// Issue 22: a rebuild replays the whole log into a shadow table while the live one keeps
// serving and being fed, resumes where it stopped, and swaps in one transaction.
#[tokio::test]
async fn a_rebuild_replays_the_log_beside_the_live_table_resumes_and_swaps_it_in() {
    let store = support::database::store().await;
    let app = TestApp::new(App::builder_shared(store.clone()))
        .await
        .unwrap();
    for (id, total) in [("o-1", 10), ("o-2", 20), ("o-3", 30)] {
        place(&app, id, total).await;
    }
    pay(&app, "o-2").await;
    app.run_until_idle().await.unwrap();
    let before = rows(&app).await;
    // Damage the live table, as a projection with a bug would have.
    let table = app.app().read_table_name::<OrderRow>().unwrap();
    app.app()
        .read_sql(&format!("UPDATE {table} SET total = 0"), &[])
        .await
        .unwrap();

    let started = app.app().start_rebuild("order-list").await.unwrap();
    assert_eq!((started.position, started.swapped), (0, false));
    let first = app.app().rebuild_slice("order-list", 2).await.unwrap();
    assert!(!first.swapped && first.position > 0, "{first:?}");

    // Meanwhile the live table serves, and is fed.
    assert_eq!(rows(&app).await.len(), 3);
    place(&app, "o-4", 40).await;
    app.run_until_idle().await.unwrap();
    assert_eq!(rows(&app).await.len(), 4);

    // A process that stopped mid-rebuild; another, of the same code, resumes it.
    let clock = app.clock().clone();
    drop(app);
    let app = support::another_app(&store, &clock, |builder| {
        builder
            .read_model::<OrderRow>()
            .command::<PlaceOrder>()
            .command::<MarkOrderPaid>()
    })
    .await;
    let resumed = app.app().start_rebuild("order-list").await.unwrap();
    assert_eq!(resumed.position, first.position, "resumed where it stopped");
    let mut seen = Vec::new();
    let done = app
        .app()
        .rebuild("order-list", |progress| seen.push(progress.position))
        .await
        .unwrap();
    assert!(done.swapped);
    assert!(seen.windows(2).all(|pair| pair[0] <= pair[1]), "{seen:?}");

    let mut expected = before;
    expected.push(("o-4".to_owned(), "placed".to_owned(), 40));
    assert_eq!(rows(&app).await, expected, "rebuilt from the log");
    let head = app.app().store().head().await.unwrap();
    assert_eq!(
        app.app().store().checkpoint(SUBSCRIBER).await.unwrap(),
        Some(head)
    );
    // The swapped table is fed as the old one was.
    pay(&app, "o-4").await;
    app.run_until_idle().await.unwrap();
    let row = app
        .app()
        .read::<OrderRow>()
        .get("o-4")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((row.status.as_str(), row.events), ("paid", 2));
    // A rebuild is keyed by the code: one under way of other code is superseded, and its
    // next slice says so.
    let tables = app.app().store().capabilities().read_models().unwrap();
    app.app().start_rebuild("order-list").await.unwrap();
    tables
        .start_rebuild(
            <OrderRow as bounda::read_model::ReadModel>::TABLE,
            "0123456789abcdef",
        )
        .await
        .unwrap();
    let error = app.app().rebuild_slice("order-list", 10).await.unwrap_err();
    assert_eq!(error.code(), "REBUILD_SUPERSEDED", "{error}");
}

// Issue 22: a failing projection aborts the rebuild and leaves the live table alone.
#[tokio::test]
async fn a_failing_projection_abandons_the_rebuild_and_leaves_the_live_table() {
    let app = app().await;
    place(&app, "o-1", 10).await;
    place(&app, "o-2", 13).await;
    app.run_until_idle().await.unwrap();
    let before = rows(&app).await;
    BROKEN_TOTAL.set(Some(13));
    let error = app.app().rebuild("order-list", |_| {}).await.unwrap_err();
    assert!(
        error.to_string().contains("the rebuild was abandoned"),
        "{error}"
    );
    assert_eq!(rows(&app).await, before);
    let tables = app.app().store().capabilities().read_models().unwrap();
    assert_eq!(tables.rebuilding("order-list").await.unwrap(), None);
    BROKEN_TOTAL.set(None);
    let done = app.app().rebuild("order-list", |_| {}).await.unwrap();
    assert!(done.swapped);
    assert_eq!(rows(&app).await, before);
}

/// `order-list` as a later build declares it, its total retyped to a real: written by hand
/// (not registered), so only the apps that list it have it.
struct RetypedOrderRow;

const RETYPED: bounda::read_model::TableDef = bounda::read_model::TableDef {
    name: "order-list",
    columns: &[
        bounda::read_model::ColumnDef {
            name: "order_id",
            sql_type: bounda::read_model::SqlType::Text,
            nullable: false,
            key: true,
            unique: false,
            index: false,
        },
        bounda::read_model::ColumnDef {
            name: "total",
            sql_type: bounda::read_model::SqlType::Real,
            nullable: false,
            key: false,
            unique: false,
            index: false,
        },
    ],
};

impl bounda::read_model::ReadModel for RetypedOrderRow {
    const NAME: &'static str = "order-list";
    const TABLE: &'static bounda::read_model::TableDef = &RETYPED;
    type Key = String;

    fn to_row(&self) -> Vec<SqlValue> {
        Vec::new()
    }

    fn from_row(_: Vec<SqlValue>) -> Result<Self, bounda::read_model::ColumnError> {
        Ok(RetypedOrderRow)
    }
}

impl bounda::read_model::Projections for RetypedOrderRow {
    const EVENTS: &'static [bounda::EventKey] = &[];
    const SHAPES: &'static [&'static [bounda::EventShape]] = &[];
    const CODE: &'static str = "retyped";

    fn project<'a>(
        _: &'a bounda::RecordedEvent,
        _: &'a mut Table<'_, Self>,
    ) -> Option<bounda::read_model::ProjectionFuture<'a>> {
        None
    }
}

// Issue 22: a retyped field is refused at start, naming the rebuild, which an operator can
// run on the same build; once rebuilt, the app runs.
#[tokio::test]
async fn a_table_the_build_cannot_keep_is_refused_at_start_until_it_is_rebuilt() {
    let store = support::database::store().await;
    let app = TestApp::new(App::builder_shared(store.clone()))
        .await
        .unwrap();
    place(&app, "o-1", 10).await;
    app.run_until_idle().await.unwrap();
    let clock = app.clock().clone();

    let later = support::another_app(&store, &clock, |b| b.read_model::<RetypedOrderRow>()).await;
    let refused = later.run_until_idle().await.unwrap_err().to_string();
    assert!(
        refused.contains("field `total` was integer and is now real"),
        "{refused}"
    );
    assert!(refused.contains("`rebuild order-list`"), "{refused}");

    assert!(
        later
            .app()
            .rebuild("order-list", |_| {})
            .await
            .unwrap()
            .swapped
    );
    // Rebuilt, it runs, in the same process as in the next.
    later.run_until_idle().await.unwrap();
    let rebuilt = support::another_app(&store, &clock, |b| b.read_model::<RetypedOrderRow>()).await;
    rebuilt.run_until_idle().await.unwrap();
}

// Issue 22: the operator's `rebuild` command, and `lag` listing the read models.
#[cfg(feature = "cli")]
#[tokio::test]
async fn an_operator_rebuilds_a_read_model_and_sees_its_lag() {
    use bounda::cli::{Operator, RebuildArgs};
    let app = app().await;
    place(&app, "o-1", 10).await;
    app.run_until_idle().await.unwrap();
    let (code, out) = support::operator(
        app.app(),
        Operator::Rebuild(RebuildArgs {
            read_model: "order-list".into(),
            afresh: true,
        }),
    )
    .await;
    assert_eq!(code, std::process::ExitCode::SUCCESS);
    let head = app.app().store().head().await.unwrap();
    assert!(
        out.contains(&format!(
            "rebuilt order-list from the log through position {head}"
        )),
        "{out}"
    );
    // Afresh abandons a rebuild under way; there is none now.
    assert!(!app.app().abandon_rebuild("order-list").await.unwrap());
    app.app().start_rebuild("order-list").await.unwrap();
    assert!(app.app().abandon_rebuild("order-list").await.unwrap());
    let (_, lag) = support::operator(app.app(), Operator::Lag).await;
    assert!(lag.contains("read-model:order-list"), "{lag}");
    assert!(lag.contains("read-model:payment-list"), "{lag}");
}

// Issue 22: the operator page lists the read models with their lag, and rebuilds one.
#[cfg(feature = "page")]
#[tokio::test]
async fn the_page_lists_read_models_with_their_lag_and_rebuilds_one() {
    use axum::http::StatusCode;
    use support::page::{Desk, SAME};

    let app = app().await;
    place(&app, "o-1", 10).await;
    app.run_until_idle().await.unwrap();
    place(&app, "o-2", 20).await;
    let desk = Desk::signed_in(&app, "secret-operator-token", "erin").await;
    let overview = desk.get("/").await;
    assert_eq!(overview.status, StatusCode::OK);
    let body = overview.body;
    let section = &body[body
        .find("id=\"read-models\"")
        .expect("a read models section")..];
    assert!(section.contains("<code>order-list</code>"), "{section}");
    assert!(
        section.contains("/read-models/order-list/rebuild"),
        "{section}"
    );
    assert!(
        section.contains("class=\"num bad\">1<"),
        "order-list is one event behind: {section}"
    );

    let rebuild = "/read-models/order-list/rebuild";
    let refused = desk.post(rebuild, "csrf=wrong", SAME).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let started = desk.submit("/", rebuild, "").await;
    assert_eq!(started.status, StatusCode::SEE_OTHER);
    assert_eq!(started.location, "/?done=rebuild-started");
    // The rebuild runs beside the page; it is done once the log's head is in the new table.
    let tables = app.app().store().capabilities().read_models().unwrap();
    let head = app.app().store().head().await.unwrap();
    for _ in 0..500 {
        let checkpoint = app.app().store().checkpoint(SUBSCRIBER).await.unwrap();
        if tables.rebuilding("order-list").await.unwrap().is_none() && checkpoint == Some(head) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(
        app.app().store().checkpoint(SUBSCRIBER).await.unwrap(),
        Some(head)
    );
    assert_eq!(rows(&app).await.len(), 2, "rebuilt through the head");
}

// Issue 22: under `App::run`, a failing projection is logged with its cause and tried again
// with the back-off; it never stops the app, which goes on with its other work.
#[tokio::test]
async fn a_running_app_retries_a_failing_projection_with_its_back_off_and_keeps_running() {
    use bounda::testing::{Level, Logs};
    let logs = Logs::check();
    logs.expect(Level::WARN, "cannot take a total of 13");
    let store = support::database::store().await;
    let mut config = bounda::config::Config::default();
    config.dispatcher.poll_interval = bounda::millis(5);
    config.dispatcher.backoff.base_delay = bounda::millis(10);
    config.dispatcher.backoff.max_delay = bounda::millis(20);
    config.dispatcher.backoff.max_failures = 2;
    let app = App::builder_shared(store)
        .config(config)
        .build()
        .await
        .unwrap();
    BROKEN_TOTAL.set(Some(13));
    app.dispatch(PlaceOrder {
        order_id: "o-1".into(),
        total: 13,
    })
    .await
    .unwrap();
    let ran = app
        .run_until(tokio::time::sleep(std::time::Duration::from_millis(300)))
        .await;
    assert!(ran.is_ok(), "the app kept running: {ran:?}");
    let tries = logs
        .seen()
        .iter()
        .filter(|line| line.text.contains("cannot take a total of 13"))
        .count();
    assert!(tries >= 3, "tried again and again, each logged: {tries}");
    // Its processes went on meanwhile.
    let lag = app.lag().await.unwrap();
    let processes = lag.subscribers.iter().find(|s| s.subscriber == "processes");
    assert_eq!(processes.map(|s| s.lag), Some(0), "{lag:?}");
}

// Issue 22 (review): a statement that fails inside a batch fails it, even when the projection
// goes on without it: nothing is committed without it, on either store.
#[tokio::test]
async fn a_failed_statement_fails_its_batch_even_when_the_projection_goes_on() {
    let app = app().await;
    for payment in ["p-1", "p-2"] {
        app.dispatch(SettlePayment {
            payment_id: payment.into(),
            order_id: Some("o-1".into()),
        })
        .await
        .unwrap();
    }
    let error = app.run_until_idle().await.unwrap_err();
    assert!(
        error
            .to_string()
            .contains("a statement failed and the projection went on without it"),
        "{error}"
    );
    let Error::Projection { position, .. } = error else {
        panic!("a projection failure");
    };
    assert_eq!(
        app.app()
            .store()
            .checkpoint("read-model:payment-orders")
            .await
            .unwrap(),
        Some(position - 1),
        "held just before the second payment"
    );
    let first = app.app().read::<PaymentOrder>().get("p-1").await.unwrap();
    assert_eq!(first.map(|row| row.order_id), Some("o-1".to_owned()));
}

// Issue 46: read models' tables are a capability of the store; an app that keeps read models
// is refused when it is built on a store without them, naming what it lacks.
#[tokio::test]
async fn an_app_with_read_models_is_refused_at_start_on_a_store_that_keeps_none() {
    let store = std::sync::Arc::new(bounda::testing::CoreOnly(support::database::store().await));
    let refused = App::builder_shared(store).build().await.unwrap_err();
    assert!(
        matches!(&refused, Error::Configuration { message } if message.contains("keeps no read models")),
        "{refused}"
    );
}
