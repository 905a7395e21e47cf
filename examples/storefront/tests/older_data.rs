//! Data the storefront wrote before `OrderPlaced` version 2 (`total` renamed `amount`) and
//! `OrderLifecycle` version 2 (`payment_deadline` renamed `pay_by`, a payment reminder added),
//! run by today's storefront (issue 20): read, migrated, re-armed, every deadline fired once at
//! its moment; `check`, `copy` and `preview` report it. On a SQLite file, and on PostgreSQL
//! (the same data brought onto a server through a copy).

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use bounda::clock::SimulatedClock;
use bounda::prelude::*;
use bounda::store::{CopyStore, LetterFilter, Store};
use bounda_sqlite::SqliteStore;
use storefront::order::{Order, OrderStatus};
use storefront::ports::{FakeGateway, GatewayPort, MemoryNotifier, NotifierPort};

const BINARY: &str = env!("CARGO_BIN_EXE_storefront");

/// Where the older build left its clock: `fixtures/README.md`.
const WRITTEN_UNTIL: &str = "2026-01-02T06:00:00Z";

fn at(text: &str) -> Instant {
    Instant::parse(text).unwrap()
}

/// The older build's file, restored into `dir`.
fn older_file(dir: &Path) -> PathBuf {
    let path = dir.join("storefront-v1.db");
    rusqlite::Connection::open(&path)
        .and_then(|conn| conn.execute_batch(include_str!("fixtures/storefront-v1.sql")))
        .unwrap();
    path
}

/// Today's storefront on `store`, its clock where the older build left it, with the original's
/// timing (the older build's).
async fn todays(store: Arc<dyn Store>) -> TestApp {
    let clock = Arc::new(SimulatedClock::at(at(WRITTEN_UNTIL)));
    let builder = storefront::app(
        App::builder_shared(store),
        Arc::new(MemoryNotifier::default()) as NotifierPort,
        Arc::new(FakeGateway::default()) as GatewayPort,
        storefront::Timing::default(),
    )
    .clock(clock.clone());
    TestApp::with_app(builder.build().await.unwrap(), clock)
}

/// Each deadline `instance` reached: (field, due, when it ran).
async fn reached(app: &TestApp, instance: &str) -> Vec<(String, Instant, Instant)> {
    app.app()
        .store()
        .read_stream("process:OrderLifecycle", instance)
        .await
        .unwrap()
        .iter()
        .filter(|e| e.event_type == "ProcessDeadlineReached" || e.event_type == "ProcessTimedOut")
        .map(|e| {
            let field = e.payload["field"].as_str().unwrap_or("timeout").to_owned();
            (field, at(e.payload["at"].as_str().unwrap()), e.timestamp)
        })
        .collect()
}

/// What today's build must do with the older data on `store`: read it, migrate it, re-arm it,
/// fire each deadline once at its moment.
async fn runs_the_older_data(store: Arc<dyn Store>) {
    let app = todays(store).await;
    let check = app.app().preflight().await.unwrap();
    // Only the drifted entries, which fail the check until re-armed (issue 40).
    assert_eq!(check.problems(), 2, "{check:?}");
    assert_eq!((check.events, check.instances), (44, 5));
    let drifted: Vec<&str> = check
        .drifted_entries
        .iter()
        .map(|d| d.instance.as_str())
        .collect();
    assert_eq!(
        drifted,
        ["o-1", "o-4"],
        "the open orders' entries hold the old payment deadline; their reminders come first"
    );
    // The older `OrderPlaced` reads through its upcast; the store keeps what was written.
    assert_eq!(
        app.app().load::<Order>("o-1").await.unwrap().state.total,
        13_900
    );
    let placed = &app.app().events_of::<Order>("o-1").await.unwrap()[0];
    assert_eq!(placed.payload["amount"], 13_900);
    let stored = &app.app().store().read_stream("Order", "o-1").await.unwrap()[0];
    assert_eq!(
        (
            stored.payload["total"].as_u64(),
            stored.metadata.schema_version
        ),
        (Some(13_900), 1),
        "never rewritten"
    );

    app.advance(bounda::days(40)).await.unwrap();

    let on_time = |field: &str, due: &str| (field.to_owned(), at(due), at(due));
    assert_eq!(
        reached(&app, "o-1").await,
        [
            on_time("payment_reminder", "2026-01-03T12:00:00Z"),
            on_time("pay_by", "2026-01-04T00:00:00Z"),
        ],
        "the migrated reminder, 12 hours before the renamed deadline, then the deadline"
    );
    assert_eq!(
        reached(&app, "o-4").await,
        [
            on_time("payment_reminder", "2026-01-04T08:00:00Z"),
            on_time("pay_by", "2026-01-04T20:00:00Z"),
        ]
    );
    assert_eq!(
        reached(&app, "o-2").await,
        [on_time("timeout", "2026-01-31T00:00:00Z")],
        "the order left paying times out at the end of its 30 days"
    );
    for ended in ["o-3", "o-5"] {
        assert!(reached(&app, ended).await.is_empty(), "{ended} had ended");
    }
    for (order, status) in [
        ("o-1", OrderStatus::Cancelled),
        ("o-2", OrderStatus::Cancelled),
        ("o-3", OrderStatus::Fulfilled),
        ("o-4", OrderStatus::Cancelled),
        ("o-5", OrderStatus::Cancelled),
    ] {
        let order_state = app.app().load::<Order>(order).await.unwrap().state;
        assert_eq!(order_state.status, Some(status), "{order}");
    }
    for order in ["o-1", "o-4"] {
        let events = app.events_of::<Order>(order).await.unwrap();
        let types = events.types();
        assert_eq!(
            types
                .iter()
                .filter(|t| **t == "PaymentReminderSent")
                .count(),
            1,
            "{order}: {types:?}"
        );
        assert_eq!(
            types.iter().filter(|t| **t == "ReminderSent").count(),
            1,
            "{order}: its delayed reminder, once: {types:?}"
        );
    }
    assert_eq!(app.lag().await.unwrap().max_lag, 0);
    let letters = app
        .app()
        .dead_letters()
        .count(&LetterFilter::default())
        .await
        .unwrap();
    assert_eq!(letters, 0);
    assert_eq!(app.app().next_due_at().await.unwrap(), None, "nothing left");
    assert!(
        app.app()
            .drifted(bounda::Rearm::All)
            .await
            .unwrap()
            .is_empty()
    );
}

/// What a preview of today's build on a copy of the older data reports, from the copy's moment.
async fn previews_the_older_data(copy: &dyn Store) {
    let scratch = SqliteStore::in_memory_copy_of(copy, "the kept copy")
        .await
        .unwrap();
    let builder = storefront::app(
        App::builder(scratch),
        Arc::new(MemoryNotifier::default()) as NotifierPort,
        Arc::new(FakeGateway::default()) as GatewayPort,
        storefront::Timing::default(),
    );
    let preview = TestApp::over_copy(builder).await.unwrap();
    assert_eq!(preview.now(), at(WRITTEN_UNTIL), "from the copy's moment");
    let report = bounda::preview::run(&preview, bounda::days(40))
        .await
        .unwrap();
    let fired: Vec<(&str, &str, Instant)> = report
        .fired
        .iter()
        .map(|f| (f.instance.as_str(), f.field.as_str(), f.due))
        .collect();
    assert_eq!(
        fired,
        [
            ("o-1", "payment_reminder", at("2026-01-03T12:00:00Z")),
            ("o-1", "pay_by", at("2026-01-04T00:00:00Z")),
            ("o-4", "payment_reminder", at("2026-01-04T08:00:00Z")),
            ("o-4", "pay_by", at("2026-01-04T20:00:00Z")),
            ("o-2", "timeout", at("2026-01-31T00:00:00Z")),
        ]
    );
    assert_eq!(report.check.drifted_entries, 2);
    assert_eq!(report.events.get("Order.PaymentReminderSent"), Some(&2));
    assert_eq!(report.events.get("Order.OrderCancelled"), Some(&3));
    assert_eq!((report.total.instances_ended, report.total.letters), (3, 0));
    assert!(report.passes());
    assert_eq!(
        copy.head().await.unwrap(),
        44,
        "the kept copy is not written"
    );
}

#[tokio::test]
async fn todays_storefront_runs_a_file_an_older_one_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let file = older_file(dir.path());
    runs_the_older_data(Arc::new(SqliteStore::open(&file).unwrap())).await;
}

#[tokio::test]
async fn a_preview_on_a_copy_of_the_older_file_reports_what_todays_storefront_would_do() {
    let dir = tempfile::tempdir().unwrap();
    let file = SqliteStore::open(older_file(dir.path())).unwrap();
    let copy = SqliteStore::in_memory().unwrap();
    bounda::store::copy(&file, &copy, "storefront-v1.db", at(WRITTEN_UNTIL))
        .await
        .unwrap();
    previews_the_older_data(&copy).await;
}

// The same data on PostgreSQL: the older file transferred into a schema, as a user moving from
// one file to a server does; today's storefront runs it there, and a copy of the schema into
// SQLite, taken where the older build's clock stood, previews it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn todays_storefront_runs_the_older_data_on_postgresql_and_previews_a_copy_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = SqliteStore::open(older_file(dir.path())).unwrap();
    let server = bounda_postgres::testing::store("older-data", Default::default()).await;
    bounda::store::transfer(&file, &server).await.unwrap();
    assert_eq!(server.copied().await.unwrap(), None, "moved, not a copy");
    let pulled = SqliteStore::in_memory().unwrap();
    bounda::store::copy(&server, &pulled, "the server", at(WRITTEN_UNTIL))
        .await
        .unwrap();
    previews_the_older_data(&pulled).await;
    runs_the_older_data(Arc::new(server)).await;
}

/// `storefront` with `args`: its exit code and standard output.
fn storefront(args: &[&str]) -> (Option<i32>, String) {
    let output = Command::new(BINARY)
        .args(args)
        .env_remove("BOUNDA_DB")
        .output()
        .unwrap();
    assert!(
        output.stderr.is_empty(),
        "nothing on standard error: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    (
        output.status.code(),
        String::from_utf8(output.stdout).unwrap(),
    )
}

#[test]
fn the_operator_checks_copies_and_previews_the_older_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = older_file(dir.path());
    let db = file.to_str().unwrap();
    // A command that only reads does not upgrade the older file: `migrate` does (issue 43).
    let output = Command::new(BINARY)
        .args(["--db", db, "check"])
        .env_remove("BOUNDA_DB")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let refused = String::from_utf8_lossy(&output.stderr);
    assert!(
        refused.contains("has schema version 9") && refused.contains("Run `migrate`"),
        "{refused}"
    );
    let (code, migrated) = storefront(&["--db", db, "migrate"]);
    assert_eq!(code, Some(0), "{migrated}");
    // An entry that disagrees with its state fails the check until re-armed (issue 40); the
    // copy below keeps it as it is, for the preview to re-arm.
    let (code, check) = storefront(&["--db", db, "check"]);
    assert_eq!(code, Some(3), "{check}");
    assert!(
        check.starts_with("read 44 events and 5 process instances"),
        "{check}"
    );
    assert!(check.contains("OrderLifecycle:o-1: its scheduler entry is armed at 2026-01-04T00:00:00.000Z, but its state's next deadline is `payment_reminder` at 2026-01-03T12:00:00.000Z"), "{check}");
    assert!(
        check.ends_with("check failed: 2 problem(s) above would fail\n"),
        "{check}"
    );

    let copy_path = dir.path().join("copy.db");
    let copy = copy_path.to_str().unwrap();
    let (code, copied) = storefront(&["--db", db, "copy", copy]);
    assert_eq!(code, Some(0), "{copied}");
    assert!(copied.starts_with(&format!("copied {db} at ")), "{copied}");
    assert!(
        copied.ends_with(
            ": 44 events, 2 checkpoints, 22 inbox entries, 4 scheduler entries, 0 dead letters\n"
        ),
        "{copied}"
    );
    let again = Command::new(BINARY)
        .args(["--db", db, "copy", copy])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("exists: copy into a new file"),
        "a copy never overwrites a file"
    );

    let (code, json) = storefront(&["--db", copy, "preview", "--days", "60", "--json"]);
    assert_eq!(code, Some(0), "{json}");
    let report: bounda::preview::Report = serde_json::from_str(&json).unwrap();
    // Every deadline is overdue at the copy's moment: each instance's run in its due order.
    let mut fields: Vec<(&str, Instant, &str)> = report
        .fired
        .iter()
        .map(|f| (f.instance.as_str(), f.due, f.field.as_str()))
        .collect();
    let in_order_per_instance = ["o-1", "o-2", "o-4"].iter().all(|order| {
        let dues: Vec<Instant> = fields
            .iter()
            .filter(|f| f.0 == *order)
            .map(|f| f.1)
            .collect();
        dues.is_sorted()
    });
    assert!(in_order_per_instance, "{fields:?}");
    fields.sort();
    assert_eq!(
        fields,
        [
            ("o-1", at("2026-01-03T12:00:00Z"), "payment_reminder"),
            ("o-1", at("2026-01-04T00:00:00Z"), "pay_by"),
            ("o-2", at("2026-01-31T00:00:00Z"), "timeout"),
            ("o-4", at("2026-01-04T08:00:00Z"), "payment_reminder"),
            ("o-4", at("2026-01-04T20:00:00Z"), "pay_by"),
        ],
        "each overdue deadline once, from the moment of the copy"
    );
    assert!(report.fired.iter().all(|f| f.ran == report.from));
    let kept = dir.path().join("first.json");
    std::fs::write(&kept, &json).unwrap();

    // A second preview on the same copy sees the same data: the copy was not written.
    let (code, text) = storefront(&[
        "--db",
        copy,
        "preview",
        "--days",
        "60",
        "--against",
        kept.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("OrderLifecycle: deadlines fired pay_by 2, payment_reminder 2, timeout 1; 0 started, 2 completed, 1 timed out, 0 failed"), "{text}");
    assert!(text.contains("total: 5 deadlines fired"), "{text}");
    assert!(
        text.ends_with(&format!(
            "changes from {}:\n  none: both builds do the same\n",
            kept.display()
        )),
        "{text}"
    );
}
