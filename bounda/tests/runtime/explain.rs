//! The story of one instance (issue 13): `App::explain` tells each step with its cause, the state
//! it changed and the deadlines it set, moved or cleared, then what is pending now.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use crate::support;

use bounda::explain::{DeadlineChange, StepKind};
use bounda::prelude::*;
use bounda::{ProcessStatus, Retried};
use serde_json::json;
use support::storefront::*;

async fn app() -> TestApp {
    support::order_payments().await
}

/// Places order `id` (its events are not handled yet).
async fn place(app: &TestApp, id: &str) {
    app.dispatch(PlaceOrder {
        order_id: id.into(),
        total: 1,
    })
    .await
    .unwrap();
}

/// Marks order `id` paid (its events are not handled yet).
async fn pay(app: &TestApp, id: &str) {
    app.dispatch(MarkOrderPaid {
        order_id: id.into(),
    })
    .await
    .unwrap();
}

/// The story of instance `id` of `P`, which has started.
async fn story_of<P: Process>(app: &TestApp, id: &str) -> bounda::explain::Explained {
    app.app().explain::<P>(id).await.unwrap().expect("a story")
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
    pay(&app, "o-1").await;
    app.run_until_idle().await.unwrap();

    let story = story_of::<OrderPayment>(&app, "o-1").await;
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
                local: None,
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

/// Whether `Picky` refuses reminders: each test that breaks it uses its own order.
static BROKEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// A process whose reminder step fails while its order is in `BROKEN`.
mod picky {
    use super::*;

    #[process(on = Order, started_by = [OrderPlaced], completed_by = [OrderCancelled])]
    #[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Picky {
        pub reminded: bool,
        pub paid: bool,
    }

    #[process]
    impl Picky {
        async fn on_order_placed(_cx: On<'_, Self, OrderPlaced>) -> Result<()> {
            Ok(())
        }

        async fn on_reminder_sent(cx: On<'_, Self, ReminderSent>) -> Result<PickyPatch> {
            if BROKEN.lock().unwrap().contains(&cx.event().order_id) {
                anyhow::bail!("the warehouse is closed");
            }
            Ok(PickyPatch::default().reminded(true))
        }

        async fn on_order_paid(_cx: On<'_, Self, OrderPaid>) -> Result<PickyPatch> {
            Ok(PickyPatch::default().paid(true))
        }
    }
}

// Issue 13: a failed step, the events parked behind it and its letter are part of the story;
// after the letter's retry, the story goes on: resumed, the parked event handled, the letter
// retried.
#[tokio::test]
async fn a_failure_its_parked_events_and_its_letter_are_told_and_so_is_the_retry() {
    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .process::<picky::Picky>(),
    )
    .await
    .unwrap()
    .expecting_letters();
    BROKEN.lock().unwrap().push("o-picky".into());
    place(&app, "o-picky").await;
    app.dispatch(SendReminder {
        order_id: "o-picky".into(),
    })
    .await
    .unwrap();
    app.advance(minutes(1)).await.unwrap();
    pay(&app, "o-picky").await;
    app.run_until_idle().await.unwrap();

    let story = story_of::<picky::Picky>(&app, "o-picky").await;
    assert_eq!(story.status, ProcessStatus::Failed);
    let letter = &story.letters[..];
    assert_eq!(letter.len(), 1, "{letter:?}");
    assert_eq!(letter[0].status, bounda::store::LetterStatus::Failed);
    assert!(letter[0].error.contains("the warehouse is closed"));
    assert_eq!(letter[0].failed.as_deref(), Some("ReminderSent"));
    let failed = story
        .steps
        .iter()
        .find(|step| matches!(step.what, StepKind::Failed { .. }))
        .expect("a failed step");
    let StepKind::Failed { letter_id, .. } = &failed.what else {
        unreachable!()
    };
    assert_eq!(letter_id, &letter[0].id);
    assert_eq!(
        failed.cause.as_ref().unwrap().event_type.as_deref(),
        Some("ReminderSent")
    );
    assert!(story.steps.iter().any(|step| step.what == StepKind::Parked));
    let parked: Vec<&str> = story.parked.iter().map(|p| p.event_type.as_str()).collect();
    assert_eq!(parked, ["OrderPaid"]);
    // A failed instance runs nothing: its deadlines are told as held by its letter (issue 19).
    assert!(!story.pending.is_empty());
    assert!(
        story
            .pending
            .iter()
            .all(|due| due.held_by.as_deref() == Some(letter[0].id.as_str()) && !due.waiting),
        "{:?}",
        story.pending
    );

    BROKEN.lock().unwrap().retain(|order| order != "o-picky");
    let retried = app.app().dead_letters().retry(&letter[0].id).await.unwrap();
    assert!(matches!(retried, Retried::Done), "{retried:?}");
    app.run_until_idle().await.unwrap();
    let story = story_of::<picky::Picky>(&app, "o-picky").await;
    assert_eq!(story.status, ProcessStatus::Started);
    assert!(
        story
            .steps
            .iter()
            .any(|step| step.what == StepKind::Resumed)
    );
    assert!(story.parked.is_empty(), "drained");
    assert_eq!(
        story.letters[0].status,
        bounda::store::LetterStatus::Retried
    );
    let told: Vec<(String, Option<String>)> = story
        .steps
        .iter()
        .map(|step| {
            let verb = step.describe().split(' ').next().unwrap_or("").to_owned();
            (verb, step.cause.as_ref().and_then(|c| c.event_type.clone()))
        })
        .collect();
    let told: Vec<(&str, Option<&str>)> = told
        .iter()
        .map(|(verb, cause)| (verb.as_str(), cause.as_deref()))
        .collect();
    assert_eq!(
        told,
        [
            ("started", Some("OrderPlaced")),
            ("failed", Some("ReminderSent")),
            ("parked", Some("OrderPaid")),
            ("handled", Some("ReminderSent")),
            ("handled", Some("OrderPaid")),
            ("resumed", None),
        ],
        "the failed step, retried, then the parked event drained"
    );
    let paid = &story.steps[4];
    assert!(paid.changes.iter().any(|c| c.field == "paid"));
}

// A deadline that is due while an earlier event of its instance is unhandled waits; a reader
// with no runner of its own (the operator's CLI, the page) sees it waiting, from the store.
#[tokio::test]
async fn a_held_deadline_is_waiting_for_any_reader() {
    let app = app().await;
    place(&app, "o-1").await;
    app.run_until_idle().await.unwrap();
    // Paid a second before the reminder, and not handled yet when the reminder comes due.
    app.clock().advance(hours(24) - seconds(1));
    pay(&app, "o-1").await;
    app.clock().advance(seconds(2));

    let story = story_of::<OrderPayment>(&app, "o-1").await;
    assert_eq!(story.pending[0].field, "next_reminder");
    assert!(story.pending[0].waiting, "{:?}", story.pending);
    assert!(
        story.pending[1..].iter().all(|due| !due.waiting),
        "only the first can be held"
    );
    let pending = app.app().pending_deadlines().await.unwrap();
    assert!(
        pending
            .iter()
            .any(|due| due.field == "next_reminder" && due.waiting)
    );
    assert_eq!(app.lag().await.unwrap().waiting_deadlines, 1);

    app.run_until_idle().await.unwrap();
    let story = story_of::<OrderPayment>(&app, "o-1").await;
    assert!(story.pending.iter().all(|due| !due.waiting));
    assert_eq!(app.lag().await.unwrap().waiting_deadlines, 0);
}

// A state this build does not read still has its story; what it waits for is unknown, and why.
#[tokio::test]
async fn an_unreadable_state_keeps_its_story_and_says_why_its_pending_is_unknown() {
    let app = app().await;
    place(&app, "o-odd").await;
    app.run_until_idle().await.unwrap();
    let odd = json!({ "reminders": "two", "next_reminder": "soon" });
    support::write_state(&app, "OrderPayment", "o-odd", odd).await;
    let story = story_of::<OrderPayment>(&app, "o-odd").await;
    assert_eq!(story.steps[0].what, StepKind::Started);
    // A deadline stored as something that is not a moment is told as it is stored, not as a
    // deadline cleared.
    let odd = story.steps.last().unwrap();
    assert!(
        odd.changes
            .iter()
            .any(|c| c.field == "next_reminder" && c.to == json!("soon")),
        "{:?}",
        odd.changes
    );
    assert!(odd.deadlines.iter().all(|d| d.field != "next_reminder"));
    assert!(story.pending.is_empty());
    let why = story.unreadable.expect("says why");
    assert!(why.contains("at `next_reminder`"), "names the field: {why}");
}
