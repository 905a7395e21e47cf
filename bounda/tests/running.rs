//! The app on the real clock: passes every `pollInterval` until shut down.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

mod support;

use std::sync::Arc;
use std::time::Duration as StdDuration;

use bounda::config::Config;
use bounda::prelude::*;
use bounda::store::Store;
use support::storefront::*;

struct RemindSoon;

#[policy]
impl Policy for RemindSoon {
    const NAME: &'static str = "remind_soon";
    type Event = OrderPlaced;

    async fn handle(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
        let order_id = cx.event().order_id.clone();
        cx.send_after(SendReminder { order_id }, millis(50)).await?;
        Ok(())
    }
}

struct ConfirmLater;

#[policy]
impl Policy for ConfirmLater {
    const NAME: &'static str = "confirm_later";
    type Event = OrderPlaced;

    fn delay() -> Result<Option<Duration>, DurationError> {
        Ok(Some(millis(30)))
    }

    async fn handle(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
        cx.send(RecordConfirmationSent {
            order_id: cx.event().order_id.clone(),
        })
        .await?;
        Ok(())
    }
}

fn fast() -> Config {
    let mut config = Config::default();
    config.dispatcher.poll_interval = millis(5);
    config
}

/// Waits until `o-1` has `count` events, at most 30 seconds.
async fn until_events(store: Arc<dyn Store>, count: usize) {
    // Up to 30 s: a loaded machine (the whole suite at once) may take seconds; it returns as soon
    // as the events are there.
    for _ in 0..6_000 {
        if store.read_stream("Order", "o-1").await.unwrap().len() >= count {
            return;
        }
        tokio::time::sleep(StdDuration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn a_delayed_command_and_a_delayed_policy_run_on_the_real_clock() {
    let store: Arc<dyn Store> = support::database::store().await;
    let app = App::builder_shared(store.clone())
        .only_listed()
        .config(fast())
        .policy::<RemindSoon>()
        .policy::<ConfirmLater>()
        .command::<SendReminder>()
        .build()
        .await
        .unwrap();
    app.dispatch(PlaceOrder {
        order_id: "o-1".into(),
        total: 1,
    })
    .await
    .unwrap();
    app.run_until(until_events(store.clone(), 3)).await.unwrap();
    let events = app.events_of::<Order>("o-1").await.unwrap();
    // The delays count from the event's own time.
    let placed_at = events[0].timestamp;
    let mut types: Vec<_> = events.iter().map(|e| e.event_type.as_str()).collect();
    types.sort_unstable();
    assert_eq!(types, ["ConfirmationSent", "OrderPlaced", "ReminderSent"]);
    for event in &events[1..] {
        assert!(
            event.timestamp >= placed_at + millis(30),
            "never early: {}",
            event.timestamp
        );
    }
    assert_eq!(app.lag().await.unwrap().max_lag, 0);
    assert_eq!(app.next_due_at().await.unwrap(), None);
}

// spec 188: shut down at once, nothing is lost; the next run does the rest.
#[tokio::test]
async fn work_left_at_shutdown_is_done_by_the_next_run() {
    let store: Arc<dyn Store> = support::database::store().await;
    let builder = || {
        App::builder_shared(store.clone())
            .only_listed()
            .config(fast())
            .policy::<RemindSoon>()
            .command::<SendReminder>()
    };
    let app = builder().build().await.unwrap();
    app.dispatch(PlaceOrder {
        order_id: "o-1".into(),
        total: 1,
    })
    .await
    .unwrap();
    app.run_until(std::future::ready(())).await.unwrap();
    assert!(store.read_stream("Order", "o-1").await.unwrap().len() <= 2);

    let again = builder().build().await.unwrap();
    again
        .run_until(until_events(store.clone(), 2))
        .await
        .unwrap();
    assert_eq!(
        again
            .events_of::<Order>("o-1")
            .await
            .unwrap()
            .iter()
            .map(|e| e.event_type.as_str())
            .collect::<Vec<_>>(),
        ["OrderPlaced", "ReminderSent"]
    );
}

#[tokio::test]
async fn an_invalid_policy_delay_refuses_the_app_naming_the_policy() {
    struct Broken;
    #[policy]
    impl Policy for Broken {
        const NAME: &'static str = "broken";
        type Event = OrderPlaced;
        fn delay() -> Result<Option<Duration>, DurationError> {
            "soon".parse().map(Some)
        }
        async fn handle(_: Reaction<'_, OrderPlaced>) -> Result<()> {
            Ok(())
        }
    }
    let error = App::builder_shared(support::database::store().await)
        .only_listed()
        .policy::<Broken>()
        .build()
        .await
        .unwrap_err();
    assert_eq!(error.code(), "INVALID_CONFIGURATION");
    assert!(
        error
            .to_string()
            .contains("policy `broken` has an invalid delay: `soon` is not a duration"),
        "{error}"
    );
}

// Issue 9: a configuration given in code is checked as one read from JSON: a time limit of 0
// refuses the app, naming the key.
#[tokio::test]
async fn a_time_limit_of_zero_refuses_the_app_naming_the_key() {
    let mut config = bounda::config::Config::default();
    config.processes.handler_timeout = millis(0);
    let error = App::builder_shared(support::database::store().await)
        .only_listed()
        .config(config)
        .build()
        .await
        .unwrap_err();
    assert_eq!(error.code(), "INVALID_CONFIGURATION");
    assert!(
        error.to_string().contains("`processes.handlerTimeout`"),
        "{error}"
    );
}

// Issue 12: a runner's name goes before its claims' ids, so it must be plain: one that is not
// refuses the app, naming it.
#[tokio::test]
async fn a_runner_name_that_is_not_plain_refuses_the_app_naming_it() {
    for name in ["", "machine 1", "a/b"] {
        let error = App::builder_shared(support::database::store().await)
            .only_listed()
            .runner_name(name)
            .build()
            .await
            .unwrap_err();
        assert_eq!(error.code(), "INVALID_CONFIGURATION");
        assert!(
            error
                .to_string()
                .contains(&format!("the runner name `{name}`")),
            "{error}"
        );
    }
    App::builder_shared(support::database::store().await)
        .only_listed()
        .runner_name("machine-1.eu:7")
        .build()
        .await
        .unwrap();
}
