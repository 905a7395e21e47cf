//! The story of one instance (issue 13): `App::explain` tells each step with its cause, the state
//! it changed and the deadlines it set, moved or cleared, then what is pending now.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

mod support;

use bounda::explain::{DeadlineChange, StepKind};
use bounda::prelude::*;
use serde_json::json;
use support::storefront::*;

async fn app() -> TestApp {
    TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .process::<OrderPayment>(),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn the_story_of_an_instance_tells_each_step_its_cause_and_its_changes() {
    let app = app().await;
    let placed = app
        .dispatch(PlaceOrder {
            order_id: "o-1".into(),
            total: 1,
        })
        .await
        .unwrap();
    let start = app.now();
    app.advance(hours(24)).await.unwrap();
    app.dispatch(MarkOrderPaid {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();

    let story = app
        .app()
        .explain::<OrderPayment>("o-1")
        .await
        .unwrap()
        .expect("the instance started");
    assert_eq!(story.process, "OrderPayment");
    assert_eq!(
        story.status,
        bounda::ProcessStatus::Started,
        "paid, not ended"
    );
    let kinds: Vec<&StepKind> = story.steps.iter().map(|s| &s.what).collect();
    assert_eq!(
        kinds,
        [
            &StepKind::Started,
            &StepKind::DeadlineReached {
                field: "next_reminder".into(),
                due: start + hours(24),
            },
            &StepKind::Handled,
        ]
    );

    let started = &story.steps[0];
    let cause = started.cause.as_ref().unwrap();
    assert_eq!(cause.event_id, placed.event_ids[0]);
    assert_eq!(cause.event_type.as_deref(), Some("OrderPlaced"));
    assert_eq!(cause.stream.as_deref(), Some("Order:o-1"));
    assert_eq!(
        cause.correlation_id.as_deref(),
        Some(started.correlation_id.as_str())
    );
    assert_eq!(
        started.deadlines,
        [
            DeadlineChange {
                field: "next_reminder".into(),
                from: None,
                to: Some(start + hours(24)),
            },
            DeadlineChange {
                field: "payment_deadline".into(),
                from: None,
                to: Some(start + hours(72)),
            },
        ]
    );
    assert!(
        started
            .changes
            .iter()
            .any(|c| c.field == "reminders" && c.to == json!(0)),
        "the first state's fields, from nothing: {:?}",
        started.changes
    );

    let reminded = &story.steps[1];
    assert!(reminded.cause.is_none(), "a deadline, not an event");
    assert_eq!(
        reminded.deadlines,
        [DeadlineChange {
            field: "next_reminder".into(),
            from: Some(start + hours(24)),
            to: Some(start + hours(48)),
        }]
    );
    assert_eq!(reminded.deadlines[0].verb(), "moved");
    assert_eq!(
        (
            reminded.changes[0].field.as_str(),
            &reminded.changes[0].from,
            &reminded.changes[0].to
        ),
        ("reminders", &json!(0), &json!(1))
    );

    let paid = &story.steps[2];
    assert_eq!(
        paid.cause.as_ref().unwrap().event_type.as_deref(),
        Some("OrderPaid")
    );
    let verbs: Vec<(&str, &str)> = paid
        .deadlines
        .iter()
        .map(|d| (d.field.as_str(), d.verb()))
        .collect();
    assert_eq!(
        verbs,
        [
            ("next_reminder", "cleared"),
            ("payment_deadline", "cleared")
        ]
    );
    assert!(paid.changes.iter().any(|c| c.field == "paid_at"));
    assert!(
        story
            .steps
            .windows(2)
            .all(|w| w[0].position < w[1].position),
        "in log order"
    );

    // Only the lifetime is left pending.
    let pending: Vec<(&str, Instant)> = story
        .pending
        .iter()
        .map(|p| (p.field.as_str(), p.at))
        .collect();
    assert_eq!(pending, [("timeout", start + days(30))]);
    assert_eq!(story.timeout_at, Some(start + days(30)));
    assert!(story.parked.is_empty() && story.letters.is_empty());
}

#[tokio::test]
async fn an_instance_that_never_started_has_no_story_and_an_unknown_process_is_named() {
    let app = app().await;
    assert_eq!(
        app.app().explain::<OrderPayment>("o-9").await.unwrap(),
        None
    );
    let error = app
        .app()
        .explain_named("OrderPaymnet", "o-1")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("OrderPaymnet") && error.contains("OrderPayment"),
        "names the mistake and this app's processes: {error}"
    );
}
