//! Commands from outside the runtime, on the SQLite store in memory.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use crate::support;

use std::sync::Arc;

use bounda::clock::SimulatedClock;
use bounda::ids::Sequential;
use bounda::{Aggregate, App, DispatchError, Rejection};
use support::racing::Racing;
use support::storefront::*;

async fn app() -> App {
    App::builder_shared(support::database::store().await)
        .only_listed()
        .clock(Arc::new(SimulatedClock::default()))
        .ids(Arc::new(Sequential::default()))
        .build()
        .await
        .expect("an app")
}

// spec 1, 11
#[tokio::test]
async fn a_command_appends_its_events_and_answers_what_it_decided() {
    let app = app().await;
    let decided = app.dispatch(place("o-1")).await.unwrap();
    assert_eq!(decided.aggregate_type, "Order");
    assert_eq!(decided.aggregate_id, "o-1");
    assert_eq!(decided.event_types, ["OrderPlaced"]);
    assert_eq!(decided.event_ids, ["id-2"], "id-1 is the command's own id");
    assert_eq!((decided.version, decided.position), (1, Some(1)));

    let decided = app
        .dispatch(PayAndFulfil {
            order_id: "o-1".into(),
        })
        .await
        .unwrap();
    assert_eq!(decided.event_types, ["OrderPaid", "OrderFulfilled"]);
    assert_eq!(
        (decided.version, decided.position),
        (3, Some(3)),
        "the last event's"
    );
    let order = app.load::<Order>("o-1").await.unwrap();
    assert_eq!(
        (order.state.status, order.version),
        (Some(OrderStatus::Fulfilled), 3)
    );
}

// spec 2, 143
#[tokio::test]
async fn events_of_an_outside_command_carry_its_id_as_cause_and_correlation() {
    let app = app().await;
    app.dispatch(place("o-1")).await.unwrap();
    let events = app.events_of::<Order>("o-1").await.unwrap();
    let metadata = &events[0].metadata;
    assert_eq!(
        (
            metadata.correlation_id.as_str(),
            metadata.causation_id.as_str()
        ),
        ("id-1", "id-1")
    );
    assert_eq!(metadata.depth, 0);
    assert!(!metadata.system);
    assert_eq!(
        events[0].timestamp.to_string(),
        "2026-01-01T00:00:00.000Z",
        "the clock's time"
    );
}

// spec 3, 12
#[tokio::test]
async fn versions_count_each_aggregate_instance_on_its_own() {
    let app = app().await;
    app.dispatch(place("o-1")).await.unwrap();
    let second = app.dispatch(place("o-2")).await.unwrap();
    assert_eq!((second.version, second.position), (1, Some(2)));
    let paid = app
        .dispatch(MarkOrderPaid {
            order_id: "o-1".into(),
        })
        .await
        .unwrap();
    assert_eq!((paid.version, paid.position), (2, Some(3)));
}

// spec 6
#[tokio::test]
async fn an_empty_decision_is_already_done_not_a_rejection() {
    let app = app().await;
    app.dispatch(place("o-1")).await.unwrap();
    app.dispatch(MarkOrderPaid {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    let again = app
        .dispatch(MarkOrderPaid {
            order_id: "o-1".into(),
        })
        .await
        .unwrap();
    assert!(again.event_types.is_empty());
    assert_eq!((again.version, again.position), (2, None));
    assert_eq!(app.store().head().await.unwrap(), 2, "nothing stored");
}

// spec 15, 16, 17, 18, 19
#[tokio::test]
async fn a_rejection_is_typed_stores_nothing_and_carries_its_message() {
    let app = app().await;
    app.dispatch(place("o-1")).await.unwrap();
    let error = app.dispatch(place("o-1")).await.unwrap_err();
    let DispatchError::Rejected(rejection) = &error else {
        panic!("expected a rejection, got {error:?}")
    };
    assert_eq!(
        rejection,
        &PlaceOrderRejection::AlreadyPlaced {
            order_id: "o-1".into()
        }
    );
    assert_eq!(rejection.code(), "AlreadyPlaced");
    assert_eq!(rejection.message(), "order `o-1` is placed already");
    assert_eq!(error.code(), "DOMAIN_ERROR");
    assert_eq!(
        error.to_string(),
        "rejected with `AlreadyPlaced`: order `o-1` is placed already"
    );
    assert_eq!(app.store().head().await.unwrap(), 1);

    let never_placed = app
        .dispatch(MarkOrderPaid {
            order_id: "o-9".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        never_placed.rejection().map(|r| r.message()).as_deref(),
        Some("only open orders can be paid; this one is new")
    );
}

// spec 7
#[tokio::test]
async fn a_command_whose_stream_moved_decides_again_on_the_new_state() {
    // A rival places the order between our load and our append: the rerun sees it placed.
    let app = App::builder(Racing::losing(1).await)
        .only_listed()
        .build()
        .await
        .expect("an app");
    let error = app.dispatch(place("o-1")).await.unwrap_err();
    assert_eq!(
        error.rejection(),
        Some(&PlaceOrderRejection::AlreadyPlaced {
            order_id: "o-1".into()
        })
    );
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().len(),
        1,
        "the rival's event only"
    );
}

// spec 7
#[tokio::test]
async fn a_conflict_within_the_reruns_succeeds_on_the_fresh_state() {
    let app = App::builder(Racing::losing(3).await)
        .only_listed()
        .build()
        .await
        .expect("an app");
    let decided = app
        .dispatch(PayAndFulfil {
            order_id: "o-1".into(),
        })
        .await
        .unwrap();
    // Three rivals appended one event each; the fourth run appended after them.
    assert_eq!(decided.version, 5);
    assert_eq!(app.events_of::<Order>("o-1").await.unwrap().len(), 5);
}

// spec 7
#[tokio::test]
async fn a_stream_that_keeps_moving_fails_with_a_concurrency_error_after_three_reruns() {
    let app = App::builder(Racing::losing(4).await)
        .only_listed()
        .build()
        .await
        .expect("an app");
    let error = app
        .dispatch(PayAndFulfil {
            order_id: "o-1".into(),
        })
        .await
        .unwrap_err();
    let DispatchError::Failed(bounda::Error::Concurrency {
        aggregate_id,
        expected_version,
        actual_version,
        ..
    }) = &error
    else {
        panic!("expected a concurrency error, got {error:?}");
    };
    assert_eq!(
        (aggregate_id.as_str(), *expected_version, *actual_version),
        ("o-1", 3, 4)
    );
    assert_eq!(error.code(), "CONCURRENCY_CONFLICT");
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().len(),
        4,
        "only the rivals' events"
    );
}

#[tokio::test]
async fn a_stored_event_the_aggregate_cannot_read_is_a_typed_error_and_nothing_is_decided() {
    let app = app().await;
    app.dispatch(place("o-1")).await.unwrap();
    let odd = bounda::store::WriteSet {
        appends: vec![bounda::store::Append {
            aggregate_type: Order::NAME.into(),
            aggregate_id: "o-1".into(),
            expected_version: 1,
            events: vec![bounda::store::NewEvent {
                id: "odd".into(),
                event_type: "OrderLost".into(),
                payload: serde_json::json!({}),
                timestamp: app.clock().now(),
                metadata: bounda::store::Metadata::of_command("x"),
            }],
        }],
        ..Default::default()
    };
    app.store().commit(&odd).await.unwrap();
    let error = app
        .dispatch(MarkOrderPaid {
            order_id: "o-1".into(),
        })
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("no event type `OrderLost`"),
        "{error}"
    );
    assert_eq!(app.store().head().await.unwrap(), 2);
}

// Issue 9: a command whose aggregate id is empty or blank is refused at dispatch, naming it.
#[tokio::test]
async fn a_command_with_an_empty_aggregate_id_is_refused() {
    let app = bounda::testing::TestApp::new(
        App::builder_shared(support::database::store().await).only_listed(),
    )
    .await
    .unwrap();
    for blank in ["", " \t"] {
        let refused = app
            .dispatch(PlaceOrder {
                order_id: blank.into(),
                total: 1,
            })
            .await
            .unwrap_err();
        assert_eq!(refused.code(), "VALIDATION_FAILED");
        assert!(
            refused
                .to_string()
                .contains("`PlaceOrder` has an empty aggregate id"),
            "{refused}"
        );
    }
    assert_eq!(app.app().store().head().await.unwrap(), 0, "nothing stored");
}

// Issue 9, spec 143: a caller's correlation id is kept on the command's events and on what they
// cause; a delayed command is stored, answered with its moment, and decided then on the state
// then.
#[tokio::test]
async fn dispatch_takes_a_correlation_and_a_delay() {
    use bounda::prelude::*;
    use bounda::{DispatchOptions, Dispatched};

    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .command::<SendReminder>()
            .command::<CancelOrder>(),
    )
    .await
    .unwrap();
    let placed = app
        .dispatch_with(
            PlaceOrder {
                order_id: "o-1".into(),
                total: 1,
            },
            DispatchOptions::default().correlation_id("request-7"),
        )
        .await
        .unwrap();
    assert!(matches!(placed, Dispatched::Decided(_)), "{placed:?}");
    let start = app.now();
    let reminder = app
        .dispatch_with(
            SendReminder {
                order_id: "o-1".into(),
            },
            DispatchOptions::default()
                .delay(hours(2))
                .correlation_id("request-7"),
        )
        .await
        .unwrap();
    let Dispatched::Scheduled(scheduled) = reminder else {
        panic!("stored to run later: {reminder:?}");
    };
    assert_eq!(scheduled.execute_at, start + hours(2));
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().len(),
        1,
        "not yet decided"
    );
    app.advance(hours(1)).await.unwrap();
    // Cancelled meanwhile: the reminder decides then, on the state then, and does nothing.
    app.dispatch(CancelOrder {
        order_id: "o-1".into(),
        reason: "changed my mind".into(),
    })
    .await
    .unwrap();
    app.dispatch_with(
        SendReminder {
            order_id: "o-1".into(),
        },
        DispatchOptions::default().delay(hours(2)),
    )
    .await
    .unwrap();
    app.advance(hours(3)).await.unwrap();
    let events = app.events_of::<Order>("o-1").await.unwrap();
    assert_eq!(events.types(), ["OrderPlaced", "OrderCancelled"]);
    assert_eq!(events.0[0].metadata.correlation_id, "request-7");
    assert_eq!(app.app().next_due_at().await.unwrap(), None, "both ran");
}

// Issue 9: a delayed command's events keep the caller's correlation.
#[tokio::test]
async fn a_delayed_command_keeps_the_callers_correlation() {
    use bounda::DispatchOptions;
    use bounda::prelude::*;

    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .command::<PlaceOrder>(),
    )
    .await
    .unwrap();
    app.dispatch_with(
        PlaceOrder {
            order_id: "o-1".into(),
            total: 1,
        },
        DispatchOptions::default()
            .delay(minutes(5))
            .correlation_id("request-8"),
    )
    .await
    .unwrap();
    app.advance(minutes(5)).await.unwrap();
    let events = app.events_of::<Order>("o-1").await.unwrap();
    assert_eq!(events.types(), ["OrderPlaced"]);
    assert_eq!(events.0[0].metadata.correlation_id, "request-8");
    assert_eq!(events.0[0].metadata.depth, 0);
}
