//! What goes wrong around a reaction, and what the runtime makes of it.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use crate::support;

use std::sync::Arc;

use crate::listed::ConfirmOnOrderPlaced;
use bounda::clock::{Clock, SimulatedClock};
use bounda::config::Config;
use bounda::prelude::*;
use bounda::store::{LetterFilter, Store};
use support::racing::Racing;
use support::storefront::*;

/// Calls a provider that takes a simulated minute: the test's clock moves while it waits.
struct Stuck;

#[policy]
impl Policy for Stuck {
    const NAME: &'static str = "stuck";
    type Event = OrderPlaced;
    const PORTS: &'static [bounda::PortDecl] = &[bounda::PortDecl::of::<Arc<SimulatedClock>>()];

    async fn handle(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
        cx.port::<Arc<SimulatedClock>>()?.advance(minutes(1));
        std::future::pending::<()>().await;
        Ok(())
    }
}

// spec 26, 133: the rerun decides on the new state, and the race spends no attempt.
#[tokio::test]
async fn a_reaction_that_loses_a_race_reruns_on_the_new_state_without_spending_an_attempt() {
    let app = TestApp::new(
        App::builder(Racing::after_first_commit(1).await)
            .only_listed()
            .policy::<ConfirmOnOrderPlaced>(),
    )
    .await
    .unwrap();
    app.dispatch(PlaceOrder {
        order_id: "o-1".into(),
        total: 1,
    })
    .await
    .unwrap();
    let start = app.now();
    app.run_until_idle().await.unwrap();
    let events = app.events_of::<Order>("o-1").await.unwrap().0;
    assert_eq!(
        events
            .iter()
            .map(|e| e.event_type.as_str())
            .collect::<Vec<_>>(),
        ["OrderPlaced", "ConfirmationSent"],
        "the rerun saw the rival's confirmation and decided nothing more"
    );
    assert!(events[1].id.starts_with("rival-"), "{}", events[1].id);
    assert_eq!(
        app.now(),
        start,
        "no back-off waited: the race cost no attempt"
    );
    assert_eq!(
        app.app()
            .dead_letters()
            .count(&LetterFilter::default())
            .await
            .unwrap(),
        0
    );
    assert_eq!(app.lag().await.unwrap().max_lag, 0);
}

// spec 124, 126, 129
#[tokio::test]
async fn an_event_claimed_by_another_runner_is_held_until_its_lease_lapses() {
    let store: Arc<dyn Store> = support::database::store().await;
    let clock = Arc::new(SimulatedClock::default());
    let app = App::builder_shared(store.clone())
        .only_listed()
        .clock(clock.clone())
        .policy::<ConfirmOnOrderPlaced>()
        .build()
        .await
        .unwrap();
    let test = TestApp::with_app(app, clock.clone());
    test.dispatch(PlaceOrder {
        order_id: "o-1".into(),
        total: 1,
    })
    .await
    .unwrap();
    let placed = store.read_stream("Order", "o-1").await.unwrap().remove(0);
    // Another runner claimed the event and crashed: its claim holds for the lease (2 × 30 s).
    store
        .claim_inbox(
            "confirm_on_order_placed",
            &placed.id,
            "crashed",
            clock.now(),
            seconds(60),
        )
        .await
        .unwrap();
    let idle = test.run_until_idle().await.unwrap();
    assert!(idle.idle);
    assert_eq!(
        test.events_of::<Order>("o-1").await.unwrap().len(),
        1,
        "held, not run twice at once"
    );
    assert_eq!(
        test.lag().await.unwrap().max_lag,
        1,
        "the hold shows as lag"
    );
    test.advance(seconds(60)).await.unwrap();
    assert_eq!(
        test.events_of::<Order>("o-1").await.unwrap().len(),
        1,
        "a lease that ends now has not passed yet"
    );
    test.advance(millis(1)).await.unwrap();
    assert_eq!(
        test.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced", "ConfirmationSent"]
    );
    assert_eq!(test.lag().await.unwrap().max_lag, 0);
}

// spec 154, 214: a payload the policy cannot read is terminal.
#[tokio::test]
async fn an_event_whose_payload_does_not_fit_is_dead_lettered_at_once_and_kept() {
    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .policy::<ConfirmOnOrderPlaced>(),
    )
    .await
    .unwrap()
    .expecting_letters();
    let odd = bounda::store::WriteSet {
        appends: vec![bounda::store::Append {
            aggregate_type: "Order".into(),
            aggregate_id: "o-1".into(),
            expected_version: 0,
            events: vec![bounda::store::NewEvent {
                id: "odd".into(),
                event_type: "OrderPlaced".into(),
                payload: serde_json::json!({ "order_id": 7 }),
                timestamp: app.now(),
                metadata: bounda::store::Metadata::of_command("x"),
            }],
        }],
        ..Default::default()
    };
    app.app().store().commit(&odd).await.unwrap();
    app.run_until_idle().await.unwrap();
    let letters = support::letters(&app).await;
    assert_eq!(letters.len(), 1);
    assert_eq!(
        (letters[0].error_type.as_str(), letters[0].attempts),
        ("terminal", 1)
    );
    assert!(
        letters[0]
            .error_message
            .contains("has a version 1 payload its type cannot read"),
        "{}",
        letters[0].error_message
    );
    assert!(
        app.app().store().read_event("odd").await.unwrap().is_some(),
        "nothing stored is lost"
    );
}

// spec 158, 185: the run fails on the test clock, is retried, and is dead-lettered.
#[tokio::test]
async fn a_handler_that_runs_past_its_time_limit_fails_its_attempt() {
    let mut config = Config::default();
    config.policies.timeout = millis(20);
    // The limit counts the test's simulated time, not the machine's: the provider's simulated
    // minute runs past it at once, however fast or slow the machine is (spec 185).
    let clock = Arc::new(SimulatedClock::default());
    let app = App::builder_shared(support::database::store().await)
        .only_listed()
        .clock(clock.clone())
        .config(config)
        .port(clock.clone())
        .policy::<Stuck>()
        .build()
        .await
        .unwrap();
    let app = TestApp::with_app(app, clock).expecting_letters();
    app.dispatch(PlaceOrder {
        order_id: "o-1".into(),
        total: 1,
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    let letters = support::letters(&app).await;
    assert_eq!(letters.len(), 1);
    assert_eq!(
        (letters[0].attempts, letters[0].error_type.as_str()),
        (3, "retriable_exhausted")
    );
    assert!(
        letters[0]
            .error_message
            .contains("ran past its limit of 20ms"),
        "{}",
        letters[0].error_message
    );
}

/// Takes real time, none on the test clock: a slow machine, not a slow provider.
struct SlowMachine;

#[policy]
impl Policy for SlowMachine {
    const NAME: &'static str = "slow_machine";
    type Event = OrderPlaced;

    async fn handle(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
        tokio::time::sleep(std::time::Duration::from_millis(60)).await;
        cx.send(RecordConfirmationSent {
            order_id: cx.event().order_id.clone(),
        })
        .await?;
        Ok(())
    }
}

// spec 185: on the test clock a time limit counts simulated time, so a machine that is slow
// (here, 60 ms of real time against a 20 ms limit) does not fail a handler.
#[tokio::test]
async fn a_time_limit_counts_the_test_clock_not_the_machine() {
    let mut config = Config::default();
    config.policies.timeout = millis(20);
    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .config(config)
            .policy::<SlowMachine>(),
    )
    .await
    .unwrap();
    app.dispatch(PlaceOrder {
        order_id: "o-1".into(),
        total: 1,
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced", "ConfirmationSent"]
    );
    assert_eq!(
        app.app()
            .dead_letters()
            .count(&LetterFilter::default())
            .await
            .unwrap(),
        0
    );
}
