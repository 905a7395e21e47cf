//! Paced work (issue 24): a limit per process, policy or scheduled command, counted in the
//! store, holds a catch-up to its rate; each instance's runs keep their order, every run
//! happens once, and lag says what a limit holds back.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use std::sync::Arc;

use crate::listed::ConfirmOnOrderPlaced;
use crate::support;

use bounda::AppBuilder;
use bounda::config::Config;
use bounda::prelude::*;
use bounda::store::Store;
use support::storefront::*;

/// The configuration of `limits` (the JSON inside `"limits"`).
fn limits(limits: &str) -> Config {
    Config::from_json(&format!(r#"{{ "limits": {limits} }}"#)).unwrap()
}

/// A shop whose payment process may start `rate` steps (`"100/s"`).
async fn shop(rate: &str) -> TestApp {
    TestApp::new(payments(rate, support::database::store().await))
        .await
        .unwrap()
}

/// The payment process, limited to `rate`, on `store`.
fn payments(rate: &str, store: Arc<dyn Store>) -> AppBuilder {
    App::builder_shared(store)
        .only_listed()
        .process::<OrderPayment>()
        .config(limits(&format!(
            r#"{{ "processes": {{ "OrderPayment": {{ "rate": "{rate}" }} }} }}"#
        )))
}

/// The moments `id`'s lifecycle events of `event_type` were stored at.
async fn moments(app: &TestApp, id: &str, event_type: &str) -> Vec<Instant> {
    support::lifecycle::<OrderPayment>(app, id)
        .await
        .into_iter()
        .filter(|event| event.event_type == event_type)
        .map(|event| event.timestamp)
        .collect()
}

// Issue 24: 1,000 deadlines due at once under a limit of 100/s take ten seconds of simulated
// time, 100 in each second, and each fires once; the events that started the instances were
// paced the same way.
#[tokio::test]
async fn a_thousand_deadlines_due_at_once_run_at_the_limits_rate() {
    let app = shop("100/s").await;
    let placed = app.now();
    let ids = support::place_orders(&app, "o-", 1_000).await;
    assert!(app.run_until_idle().await.unwrap().idle);
    let mut started = Vec::new();
    for id in &ids {
        started.extend(moments(&app, id, "ProcessStarted").await);
    }
    assert_eq!(started.len(), 1_000, "each instance started once");
    let by_second = support::per_second(&started);
    assert_eq!(by_second.len(), 10, "{by_second:?}");
    assert!(by_second.values().all(|&n| n == 100), "{by_second:?}");

    // Every first reminder is due at once, a day after the orders were placed.
    let due = placed + hours(24);
    app.advance(due.saturating_since(app.now()) - millis(1))
        .await
        .unwrap();
    app.clock().advance_to(due);
    // One round of passes at the moment they are due: the first hundred run, and lag says the
    // limit holds the other 900 until the second ends.
    app.run_until_idle_with(1).await.unwrap();
    let lag = app.lag().await.unwrap();
    let [limited] = lag.limited.as_slice() else {
        panic!("one limit holds work: {:?}", lag.limited)
    };
    assert_eq!(
        (limited.window.taken, limited.window.ends, limited.waiting),
        (100, due + seconds(1), 900)
    );
    assert_eq!(
        limited.to_string(),
        format!(
            "process `OrderPayment` at 100/s: 100 started in this window; 900 due wait until {}",
            due + seconds(1)
        )
    );
    // So does the page's lag panel.
    #[cfg(feature = "page")]
    {
        let (_, html, _) = crate::support::page::get(&app, None, "/lag").await;
        assert!(
            html.contains("limited: process `OrderPayment` at 100/s: 100 started in this window"),
            "{html}"
        );
    }
    assert!(app.run_until_idle().await.unwrap().idle);
    let mut reached = Vec::new();
    for id in &ids {
        let ran = moments(&app, id, "ProcessDeadlineReached").await;
        assert_eq!(
            ran.len(),
            1,
            "{id} reached its first reminder once: {ran:?}"
        );
        reached.extend(ran);
    }
    let by_second = support::per_second(&reached);
    assert!(by_second.values().all(|&n| n <= 100), "{by_second:?}");
    assert_eq!(
        by_second.len(),
        10,
        "ten seconds of 100 each: {by_second:?}"
    );
    let first = reached.iter().min().copied().unwrap();
    let last = reached.iter().max().copied().unwrap();
    assert_eq!(first, due, "the first hundred run when due");
    assert!(
        last >= due + seconds(9),
        "the last hundred run in the tenth second: {last}"
    );
}

// Issue 24: each instance's deadlines run in their order under a limit: after an outage, each
// order's three reminders and its payment deadline are due; one step a second runs each
// instance's in due order, and all of them in due order.
#[tokio::test]
async fn a_limit_keeps_each_instances_deadlines_in_order() {
    let app = shop("1/s").await;
    let ids = support::place_orders(&app, "o-", 3).await;
    assert!(app.run_until_idle().await.unwrap().idle);
    let out = app.now() + hours(80);
    app.clock().advance_to(out);
    assert!(app.run_until_idle().await.unwrap().idle);
    let mut all = Vec::new();
    for id in &ids {
        let reached = support::reached::<OrderPayment>(&app, id).await;
        let fields: Vec<&str> = reached.iter().map(|(field, ..)| field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "next_reminder",
                "next_reminder",
                "next_reminder",
                "payment_deadline"
            ],
            "{id}"
        );
        assert!(
            reached.is_sorted_by_key(|(_, at, _)| *at),
            "{id}: {reached:?}"
        );
        all.extend(reached);
    }
    all.sort_by_key(|(.., ran)| *ran);
    let ran: Vec<Instant> = all.iter().map(|(.., ran)| *ran).collect();
    let expected: Vec<Instant> = (0..12).map(|n| out + seconds(n)).collect();
    assert_eq!(ran, expected, "one a second");
    assert!(
        all.is_sorted_by_key(|(_, at, _)| *at),
        "in due order: {all:?}"
    );
}

// Issue 24: a limit is counted in the store, so two runners on it start no more than it allows
// between them: what one started in a second, the other does not start again.
#[tokio::test]
async fn two_runners_share_one_limit() {
    let one = shop("100/s").await;
    let ids = support::place_orders(&one, "o-", 300).await;
    assert!(one.run_until_idle().await.unwrap().idle);
    let other = TestApp::with_app(
        payments("100/s", one.app().store_arc())
            .clock(one.clock().clone())
            .ids(Arc::new(bounda::ids::UuidV7))
            .build()
            .await
            .unwrap(),
        one.clock().clone(),
    );
    let due = support::lifecycle::<OrderPayment>(&one, &ids[0]).await[0].timestamp + hours(24);
    let reached = || async {
        let mut count = 0;
        for id in &ids {
            count += support::lifecycle::<OrderPayment>(&one, id)
                .await
                .iter()
                .filter(|event| event.event_type == "ProcessDeadlineReached")
                .count();
        }
        count
    };
    one.clock().advance_to(due);
    for (turn, (first, second)) in [(&one, &other), (&other, &one), (&one, &other)]
        .into_iter()
        .enumerate()
    {
        // One round of passes each at this second: the first takes the second's permits.
        first.run_until_idle_with(1).await.unwrap();
        second.run_until_idle_with(1).await.unwrap();
        assert_eq!(reached().await, 100 * (turn + 1), "second {turn}");
        one.clock().advance_to(due + seconds(turn as u64 + 1));
    }
}

/// Sends a reminder two hours after each order is placed.
struct RemindInTwoHours;

#[policy]
impl Policy for RemindInTwoHours {
    const NAME: &'static str = "limits_remind_in_two_hours";
    type Event = OrderPlaced;

    async fn handle(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
        let reminder = SendReminder {
            order_id: cx.event().order_id.clone(),
        };
        cx.send_after(reminder, hours(2)).await?;
        Ok(())
    }
}

// Issue 24: a policy's limit paces its runs on events, a delayed policy's its delayed runs, and
// a command's its scheduled runs: 20 of each, 5 a second, take four seconds.
#[tokio::test]
async fn policies_and_scheduled_commands_run_at_their_limits_rate() {
    let on_events = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .policy::<ConfirmOnOrderPlaced>()
            .config(limits(
                r#"{ "policies": { "confirm_on_order_placed": { "rate": "5/s" } } }"#,
            )),
    )
    .await
    .unwrap();
    let ids = support::place_orders(&on_events, "o-", 20).await;
    assert!(on_events.run_until_idle().await.unwrap().idle);
    let confirmed = support::stored::<Order>(&on_events, &ids, "ConfirmationSent").await;
    assert_eq!(confirmed.len(), 20);
    let by_second = support::per_second(&confirmed);
    assert!(
        by_second.len() == 4 && by_second.values().all(|&n| n == 5),
        "{by_second:?}"
    );

    let delayed = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .policy::<ConfirmLater>()
            .policy::<RemindInTwoHours>()
            .command::<SendReminder>()
            .config(limits(
                r#"{ "policies": { "confirm_later": { "rate": "5/s" } },
                     "commands": { "SendReminder": { "rate": "5/s" } } }"#,
            )),
    )
    .await
    .unwrap();
    let placed = delayed.now();
    let ids = support::place_orders(&delayed, "o-", 20).await;
    // Scheduling the delayed runs takes no permit: all twenty are scheduled at once.
    assert!(delayed.run_until_idle().await.unwrap().idle);
    assert_eq!(delayed.now(), placed, "nothing waited for a window");
    assert!(delayed.advance(hours(3)).await.unwrap().idle);
    for (event_type, due) in [
        ("ConfirmationSent", placed + hours(1)),
        ("ReminderSent", placed + hours(2)),
    ] {
        let moments = support::stored::<Order>(&delayed, &ids, event_type).await;
        assert_eq!(moments.len(), 20, "{event_type}");
        let by_second = support::per_second(&moments);
        assert!(
            by_second.len() == 4 && by_second.values().all(|&n| n == 5),
            "{event_type}: {by_second:?}"
        );
        assert_eq!(moments.iter().min(), Some(&due), "{event_type}");
    }
}

// Issue 24: a limit naming what the app does not run is refused when the app is built, and a
// rate that does not read when the configuration is read, each saying how to fix it.
#[tokio::test]
async fn a_limit_of_nothing_or_of_no_rate_is_refused() {
    let refused = payments("1/s", support::database::store().await)
        .config(limits(
            r#"{ "processes": { "OrderPaymnet": { "rate": "1/s" } } }"#,
        ))
        .build()
        .await
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("`limits` name process `OrderPaymnet`, which this app does not run"),
        "{refused}"
    );
    let unread =
        Config::from_json(r#"{ "limits": { "commands": { "Ship": { "rate": "fast" } } } }"#)
            .unwrap_err();
    assert_eq!(unread.path, "limits.commands.Ship.rate");
    assert!(
        unread.message.contains("like `100/s`"),
        "{}",
        unread.message
    );
}

// Issue 44: a limit on a process holds its events too, and lag's limit line says where they
// wait, not only the entries it holds ("0 due wait" while the process runner lagged behind it).
#[tokio::test]
async fn a_limits_line_names_the_events_it_holds() {
    let app = shop("1/s").await;
    support::place_orders(&app, "o-", 3).await;
    app.run_until_idle_with(1).await.unwrap();
    let lag = app.lag().await.unwrap();
    let [limited] = lag.limited.as_slice() else {
        panic!("one limit holds work: {:?}", lag.limited)
    };
    let events = limited.events.clone().expect("the events it holds");
    assert_eq!(events.subscriber, "processes");
    let head = app.app().store().head().await.unwrap();
    assert!(
        events.from <= head && events.stored >= 2,
        "two orders' events wait: {events:?} (head {head})"
    );
    let line = limited.to_string();
    assert!(
        line.ends_with(&format!(
            "; its events wait in `processes` from position {} ({} stored since)",
            events.from, events.stored
        )),
        "{line}"
    );
    // Once all ran, nothing waits, though the last window may still be used up.
    assert!(app.run_until_idle().await.unwrap().idle);
    let lag = app.lag().await.unwrap();
    assert!(
        lag.limited.iter().all(|limit| limit.events.is_none()),
        "{:?}",
        lag.limited
    );
}

// Issue 46: limits are counted by the store for every runner on it; an app whose configuration
// has them is refused when it is built on a store that counts none, naming what it lacks, and
// the same app without them runs there.
#[tokio::test]
async fn an_app_with_limits_is_refused_at_start_on_a_store_that_counts_none() {
    let core_only = || -> Arc<dyn Store> {
        Arc::new(bounda::testing::CoreOnly(Arc::new(
            bounda_sqlite::SqliteStore::in_memory().unwrap(),
        )))
    };
    let refused = payments("100/s", core_only())
        .build()
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("`limits`") && refused.contains("keeps no limits"),
        "{refused}"
    );
    let app = TestApp::new(
        App::builder_shared(core_only())
            .only_listed()
            .process::<OrderPayment>(),
    )
    .await
    .unwrap();
    app.dispatch(PlaceOrder {
        order_id: "o-1".into(),
        total: 1,
    })
    .await
    .unwrap();
    assert!(app.advance(hours(80)).await.unwrap().idle);
    assert!(app.lag().await.unwrap().limited.is_empty());
}
