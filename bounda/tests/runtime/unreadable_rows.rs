//! Rows a store cannot decode, as a careless operator's hand edit leaves them (issue 43): a
//! process state, an event, a scheduler entry's payload, a due moment. Each fails alone,
//! named by its table, key and position; everything else runs, and the operator's commands
//! read around it. SQLite files, edited with a second connection: PostgreSQL's columns are
//! typed, and its own case (metadata of another shape) is the last test.

#![cfg(feature = "cli")]
#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use crate::support;

use std::process::ExitCode;
use std::sync::Arc;

use bounda::cli::{CheckArgs, DeadlineArgs, ExplainArgs, Operator, execute};
use bounda::prelude::*;
use bounda::store::Store;
use bounda_sqlite::{ScratchFile, SqliteStore};
use support::storefront::*;

/// An app on a new file running the order-payment process and the delayed confirmation, with
/// orders `o-1`, `o-2` and `o-3` placed and handled; the file, to edit.
async fn storefront() -> (TestApp, ScratchFile) {
    let file = ScratchFile::new();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(file.path()).unwrap());
    let app = TestApp::new(
        App::builder_shared(store)
            .only_listed()
            .process::<OrderPayment>()
            .policy::<ConfirmLater>(),
    )
    .await
    .unwrap()
    .expecting_letters();
    for id in ["o-1", "o-2", "o-3"] {
        app.dispatch(place(id)).await.unwrap();
    }
    app.run_until_idle().await.unwrap();
    (app, file)
}

/// Runs `sql` on `file` with a connection of its own, as an operator's `sqlite3` would.
fn edit(file: &ScratchFile, sql: &str) {
    let conn = rusqlite::Connection::open(file.path()).unwrap();
    conn.execute_batch(sql).unwrap();
}

/// What operator command `command` prints and exits with, or the error it returns.
async fn operator(app: &TestApp, command: Operator) -> Result<(ExitCode, String), String> {
    let mut out = Vec::new();
    match execute(app.app(), command, &mut out).await {
        Ok(code) => Ok((code, String::from_utf8(out).unwrap())),
        Err(error) => Err(error.to_string()),
    }
}

fn explain(id: &str) -> Operator {
    Operator::Explain(ExplainArgs {
        process: "OrderPayment".into(),
        id: id.into(),
        json: false,
    })
}

/// The operator page's overview of `app`, which answers.
#[cfg(feature = "page")]
async fn overview(app: &TestApp) -> String {
    use support::page::{answer, request};
    let page = bounda::page::router(app.app().clone(), bounda::page::Options::default());
    let got = answer(&page, request("GET", "/").body(Default::default()).unwrap()).await;
    assert_eq!(got.status, axum::http::StatusCode::OK, "{}", got.body);
    got.body
}

/// The reminders instance `id` has reached.
async fn reminders(app: &TestApp, id: &str) -> u32 {
    support::state::<OrderPayment>(app, id).await.reminders
}

// (a) The latest state of o-1 is not JSON: o-1's deadline fails alone, as a letter naming the
// row; the other instances' deadlines run, and the operator's commands answer.
#[tokio::test]
async fn an_unreadable_state_fails_its_instance_alone() {
    let (app, file) = storefront().await;
    edit(
        &file,
        "UPDATE bounda_events SET payload = '{\"state\": {1: 2}}'
         WHERE aggregate_type = 'process:OrderPayment' AND aggregate_id = 'o-1'
           AND version = (SELECT max(version) FROM bounda_events
                          WHERE aggregate_type = 'process:OrderPayment' AND aggregate_id = 'o-1');
         DELETE FROM bounda_snapshots;",
    );
    let position: u64 = rusqlite::Connection::open(file.path())
        .unwrap()
        .query_row(
            "SELECT position FROM bounda_events WHERE payload = '{\"state\": {1: 2}}'",
            [],
            |row| row.get(0),
        )
        .unwrap();

    let (code, lag) = operator(&app, Operator::Lag).await.unwrap();
    assert_eq!(code, ExitCode::SUCCESS, "{lag}");
    let (code, deadlines) = operator(&app, Operator::Deadlines(DeadlineArgs::default()))
        .await
        .unwrap();
    assert_eq!(code, ExitCode::SUCCESS, "{deadlines}");
    assert!(deadlines.contains("o-2"), "{deadlines}");
    let (code, report) = operator(&app, Operator::Check(CheckArgs { json: false }))
        .await
        .unwrap();
    assert_eq!(code, ExitCode::from(3), "check fails: {report}");
    assert!(report.contains("OrderPayment:o-1"), "{report}");
    assert!(report.contains("bounda_events"), "{report}");
    assert!(report.contains(&format!("position {position}")), "{report}");
    #[cfg(feature = "page")]
    assert!(overview(&app).await.contains("o-1"));
    let (code, story) = operator(&app, explain("o-2")).await.unwrap();
    assert_eq!(code, ExitCode::SUCCESS, "{story}");
    let broken = operator(&app, explain("o-1")).await.unwrap_err();
    assert!(
        broken.contains(&format!("position {position}")) && broken.contains("column `payload`"),
        "{broken}"
    );

    app.advance(hours(25)).await.unwrap();
    assert_eq!(reminders(&app, "o-2").await, 1);
    assert_eq!(reminders(&app, "o-3").await, 1);
    let letters = support::letters(&app).await;
    assert_eq!(letters.len(), 1, "{letters:#?}");
    assert_eq!(letters[0].aggregate_id.as_deref(), Some("o-1"));
    let list = support::list_letters(false);
    let (code, listed) = operator(&app, list).await.unwrap();
    assert_eq!(code, ExitCode::SUCCESS, "{listed}");
    assert!(listed.contains("bounda_events"), "{listed}");
    #[cfg(feature = "page")]
    overview(&app).await;
    // A broken instance can still be paused, as any other.
    let paused = app
        .app()
        .pause(
            bounda::store::PauseTarget::Instance {
                process: "OrderPayment".into(),
                id: "o-1".into(),
            },
            "erin",
            None,
        )
        .await
        .unwrap();
    assert!(paused);
    let message = &letters[0].error_message;
    assert!(
        message.contains(&format!("position {position}"))
            && message.contains("bounda_events")
            && message.contains("{1: 2}"),
        "{message}"
    );
}

// (b) One event's payload is not JSON: its process step and its policy fail for it alone, each
// a letter naming it; the other orders' events run.
#[tokio::test]
async fn an_unreadable_event_fails_its_handlers_alone() {
    let (app, file) = storefront().await;
    app.dispatch(PlaceOrder {
        order_id: "o-4".into(),
        total: 1,
    })
    .await
    .unwrap();
    app.dispatch(place("o-5")).await.unwrap();
    edit(
        &file,
        "UPDATE bounda_events SET payload = 'not json'
         WHERE aggregate_type = 'Order' AND aggregate_id = 'o-4'",
    );
    app.advance(hours(2)).await.unwrap();
    assert_eq!(
        app.events_of::<Order>("o-5").await.unwrap().types(),
        ["OrderPlaced", "ConfirmationSent"],
        "the event after the unreadable one ran"
    );
    assert!(app.instance::<OrderPayment>("o-5").await.unwrap().is_some());
    let letters = support::letters(&app).await;
    let handlers: Vec<&str> = letters.iter().map(|l| l.handler.as_str()).collect();
    assert_eq!(letters.len(), 2, "{letters:#?}");
    assert!(handlers.contains(&"OrderPayment") && handlers.contains(&"confirm_later"));
    for letter in &letters {
        assert_eq!(letter.aggregate_id.as_deref(), Some("o-4"));
        assert!(
            letter.error_message.contains("stream `Order:o-4`")
                && letter
                    .error_message
                    .contains("column `payload` of `bounda_events`")
                && letter.error_message.contains("not json"),
            "{}",
            letter.error_message
        );
    }
    let (code, report) = operator(&app, Operator::Check(CheckArgs { json: false }))
        .await
        .unwrap();
    assert_eq!(code, ExitCode::from(3), "check fails: {report}");
    assert!(report.contains("not JSON"), "{report}");
}

// (c) A delayed run's payload is not JSON: it becomes a letter keeping the stored text, and the
// other orders' delayed runs go on; `check` names it before it comes due.
#[tokio::test]
async fn an_unreadable_scheduler_entry_is_a_letter_keeping_its_text() {
    let (app, file) = storefront().await;
    edit(
        &file,
        "UPDATE bounda_scheduled_commands SET payload = '{\"policy\": confirm_later'
         WHERE command_type = 'bounda.PolicyRun' AND payload LIKE '%' || (SELECT id FROM bounda_events
             WHERE aggregate_type = 'Order' AND aggregate_id = 'o-1') || '%'",
    );
    let (code, report) = operator(&app, Operator::Check(CheckArgs { json: false }))
        .await
        .unwrap();
    assert_eq!(code, ExitCode::from(3), "check fails: {report}");
    assert!(
        report.contains("scheduler entries whose row does not read")
            && report.contains("column `payload` of `bounda_scheduled_commands`"),
        "{report}"
    );
    app.advance(hours(2)).await.unwrap();
    for id in ["o-2", "o-3"] {
        assert_eq!(
            app.events_of::<Order>(id).await.unwrap().types(),
            ["OrderPlaced", "ConfirmationSent"]
        );
    }
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced"]
    );
    let letters = support::letters(&app).await;
    assert_eq!(letters.len(), 1, "{letters:#?}");
    assert!(
        letters[0]
            .error_message
            .contains("{\\\"policy\\\": confirm_later"),
        "the stored text is kept: {}",
        letters[0].error_message
    );
}

// (d) A due moment that does not parse and sorts after every moment is never claimed: `lag`
// counts it, `check` names it, and the worker goes on with the rest. One that sorts before every
// moment is claimed at once, and becomes a letter naming it.
#[tokio::test]
async fn a_due_moment_that_does_not_parse_is_counted_and_named() {
    let (app, file) = storefront().await;
    for (moment, order) in [("soon", "o-1"), ("", "o-3")] {
        edit(
            &file,
            &format!(
                "UPDATE bounda_scheduled_commands SET execute_at = '{moment}'
                 WHERE command_type = 'bounda.PolicyRun' AND payload LIKE '%' ||
                     (SELECT id FROM bounda_events
                      WHERE aggregate_type = 'Order' AND aggregate_id = '{order}') || '%'"
            ),
        );
    }
    let lag = app.lag().await.unwrap();
    assert_eq!(lag.unclaimable_entries, 1);
    let (_, text) = operator(&app, Operator::Lag).await.unwrap();
    assert!(
        text.contains("1 scheduler entries whose due moment does not read"),
        "{text}"
    );
    let (code, report) = operator(&app, Operator::Check(CheckArgs { json: false }))
        .await
        .unwrap();
    assert_eq!(code, ExitCode::from(3), "check fails: {report}");
    assert!(
        report.contains("column `execute_at`") && report.contains("\"soon\""),
        "{report}"
    );
    app.advance(hours(2)).await.unwrap();
    assert_eq!(
        app.events_of::<Order>("o-2").await.unwrap().types(),
        ["OrderPlaced", "ConfirmationSent"]
    );
    let letters = support::letters(&app).await;
    assert_eq!(letters.len(), 1, "{letters:#?}");
    assert!(
        letters[0]
            .error_message
            .contains("column `execute_at` of `bounda_scheduled_commands` does not read"),
        "{}",
        letters[0].error_message
    );
    assert_eq!(app.lag().await.unwrap().unclaimable_entries, 1);
}

// A copy holds what the source holds: an unreadable row stops it, named, rather than be copied
// as something else.
#[tokio::test]
async fn a_copy_refuses_an_unreadable_row_naming_it() {
    let (app, file) = storefront().await;
    edit(
        &file,
        "UPDATE bounda_events SET metadata = '[]'
         WHERE aggregate_type = 'Order' AND aggregate_id = 'o-2'",
    );
    let to = SqliteStore::in_memory().unwrap();
    let refused = bounda::store::copy(app.app().store(), &to, "test", app.now())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("cannot be copied") && refused.contains("column `metadata`"),
        "{refused}"
    );
}
