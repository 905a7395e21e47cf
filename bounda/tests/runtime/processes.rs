//! Processes and their deadlines at run time, on simulated time and the SQLite store
//! (spec §6–§11).

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use crate::support;

use bounda::prelude::*;
use bounda::store::{LetterFilter, LetterKind};
use bounda::{PROCESSES, RecordedEvent};
use support::storefront::*;
use support::{lifecycle, state, types};

mod payment {
    use std::cell::Cell;

    use bounda::prelude::*;

    use crate::support::storefront::*;

    thread_local! {
        /// Whether `on_confirmation_sent` fails, per test thread.
        pub static BROKEN: Cell<bool> = const { Cell::new(false) };
        /// Whether `at_timeout` fails, per test thread.
        pub static TIMEOUT_BROKEN: Cell<bool> = const { Cell::new(false) };
    }

    /// Reminds daily, three times at most; cancels the order after 72 hours; on timeout, cancels
    /// it too, and the cancellation's handler compensates.
    #[process(
        on = Order,
        started_by = [OrderPlaced],
        completed_by = [OrderFulfilled, OrderCancelled],
        timeout = "30d",
    )]
    #[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Payment {
        pub reminders: u32,
        #[deadline]
        pub next_reminder: Deadline,
        #[deadline]
        pub payment_deadline: Deadline,
        pub paid_at: Option<Instant>,
        pub compensated: bool,
        pub late_by: Vec<Duration>,
    }

    #[process]
    impl Payment {
        async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<PaymentPatch> {
            Ok(PaymentPatch::default()
                .next_reminder(cx.after(hours(24)))
                .payment_deadline(cx.after(hours(72))))
        }

        async fn on_order_paid(cx: On<'_, Self, OrderPaid>) -> Result<PaymentPatch> {
            Ok(PaymentPatch::default()
                .paid_at(Some(cx.event_time()))
                .next_reminder(Deadline::none())
                .payment_deadline(Deadline::none()))
        }

        /// Moves the payment deadline to 48 hours after the confirmation.
        async fn on_confirmation_sent(cx: On<'_, Self, ConfirmationSent>) -> Result<PaymentPatch> {
            if BROKEN.with(Cell::get) {
                anyhow::bail!("the confirmation service is down");
            }
            Ok(PaymentPatch::default().payment_deadline(cx.after(hours(48))))
        }

        async fn on_order_cancelled(_cx: On<'_, Self, OrderCancelled>) -> Result<PaymentPatch> {
            Ok(PaymentPatch::default().compensated(true))
        }

        async fn at_next_reminder(cx: At<'_, Self>) -> Result<AtNextReminder> {
            cx.send(SendReminder { order_id: cx.id() }).await?;
            let reminders = cx.state().reminders + 1;
            let next = if reminders < 3 {
                cx.after(hours(24))
            } else {
                Deadline::none()
            };
            let mut late_by = cx.state().late_by.clone();
            late_by.push(cx.lateness());
            Ok(AtNextReminder::new(next)
                .reminders(reminders)
                .late_by(late_by))
        }

        async fn at_payment_deadline(cx: At<'_, Self>) -> Result<AtPaymentDeadline> {
            cx.send(CancelOrder {
                order_id: cx.id(),
                reason: "not paid in time".into(),
            })
            .await?;
            Ok(AtPaymentDeadline::new(Deadline::none()).next_reminder(Deadline::none()))
        }

        async fn at_timeout(cx: At<'_, Self>) -> Result<PaymentPatch> {
            if TIMEOUT_BROKEN.with(Cell::get) {
                anyhow::bail!("the timeout handler is broken");
            }
            cx.send(CancelOrder {
                order_id: cx.id(),
                reason: "timed out".into(),
            })
            .await?;
            Ok(PaymentPatch::default().next_reminder(Deadline::none()))
        }
    }
}

use payment::Payment;

async fn app() -> TestApp {
    TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .process::<Payment>(),
    )
    .await
    .unwrap()
}

// spec 55, 62, 65, 71, 78
#[tokio::test]
async fn a_starting_event_starts_the_instance_with_its_handler_in_the_same_step() {
    let app = app().await;
    app.dispatch(place("o-1")).await.unwrap();
    let start = app.now();
    app.run_until_idle().await.unwrap();
    let events = lifecycle::<Payment>(&app, "o-1").await;
    assert_eq!(types(&events), ["ProcessStarted", "ProcessHandled"]);
    let started = &events[0];
    assert!(
        started.metadata.system,
        "lifecycle events are the runtime's"
    );
    assert_eq!(
        started.payload["timeoutAt"],
        serde_json::json!((start + days(30)).to_string())
    );
    assert_eq!(
        started.payload["state"]["next_reminder"],
        serde_json::Value::Null,
        "`ProcessStarted` holds the initial state"
    );
    assert_eq!(
        events[1].payload["state"]["next_reminder"],
        serde_json::json!((start + hours(24)).to_string()),
        "`ProcessHandled` holds what the handler made of it"
    );
    assert_eq!(events[1].payload["eventId"], started.payload["eventId"]);
    let entries = app.app().pending_deadlines().await.unwrap();
    assert_eq!(
        entries.iter().map(|d| (d.field, d.at)).collect::<Vec<_>>(),
        [
            ("next_reminder", start + hours(24)),
            ("payment_deadline", start + hours(72)),
            ("timeout", start + days(30))
        ]
    );
    assert_eq!(
        app.app().next_due_at().await.unwrap(),
        Some(start + hours(24)),
        "one entry, at the earliest"
    );
    assert_eq!(app.lag().await.unwrap().max_lag, 0);
}

// spec 77, 81, 83, 183: the first scenario.
#[tokio::test]
async fn three_daily_reminders_and_the_payment_deadline_run_in_order_in_one_advance() {
    let app = app().await;
    app.dispatch(place("o-1")).await.unwrap();
    let start = app.now();
    app.advance(hours(72)).await.unwrap();
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        [
            "OrderPlaced",
            "ReminderSent",
            "ReminderSent",
            "ReminderSent",
            "OrderCancelled"
        ]
    );
    let events = lifecycle::<Payment>(&app, "o-1").await;
    assert_eq!(
        types(&events),
        [
            "ProcessStarted",
            "ProcessHandled",
            "ProcessDeadlineReached",
            "ProcessDeadlineReached",
            "ProcessDeadlineReached",
            "ProcessDeadlineReached",
            "ProcessHandled",
            "ProcessCompleted"
        ]
    );
    let reached: Vec<_> = events
        .iter()
        .filter(|e| e.event_type == "ProcessDeadlineReached")
        .map(|e| {
            (
                e.payload["field"].as_str().unwrap().to_owned(),
                e.payload["at"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let at = |h| (start + hours(h)).to_string();
    assert_eq!(
        reached,
        [
            ("next_reminder".to_owned(), at(24)),
            ("next_reminder".to_owned(), at(48)),
            ("next_reminder".to_owned(), at(72)),
            ("payment_deadline".to_owned(), at(72)),
        ],
        "soonest first; at the same moment, the field name decides"
    );
    assert!(
        state::<Payment>(&app, "o-1").await.compensated,
        "the cancellation's handler ran before completion (spec 64)"
    );
    assert_eq!(
        app.app().next_due_at().await.unwrap(),
        None,
        "a completed instance has no entry (spec 105)"
    );
}

// spec 73, 79: moved before it came due, it runs once, at the new moment.
#[tokio::test]
async fn a_deadline_moved_before_it_came_due_runs_once_at_the_new_moment() {
    let app = app().await;
    app.dispatch(place("o-1")).await.unwrap();
    let start = app.now();
    app.advance(hours(48)).await.unwrap();
    app.dispatch(RecordConfirmationSent {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.advance(hours(60)).await.unwrap();
    let payment_runs: Vec<_> = lifecycle::<Payment>(&app, "o-1")
        .await
        .into_iter()
        .filter(|e| e.payload["field"] == "payment_deadline")
        .map(|e| e.payload["at"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        payment_runs,
        [(start + hours(96)).to_string()],
        "not at 72 h, once at 96 h"
    );
    let cancelled = app
        .events_of::<Order>("o-1")
        .await
        .unwrap()
        .0
        .into_iter()
        .find(|e| e.event_type == "OrderCancelled")
        .unwrap();
    assert_eq!(cancelled.timestamp, start + hours(96));
}

// spec 73, 79: cleared, it never runs.
#[tokio::test]
async fn a_cleared_deadline_never_runs() {
    let app = app().await;
    app.dispatch(place("o-1")).await.unwrap();
    app.advance(hours(10)).await.unwrap();
    app.dispatch(MarkOrderPaid {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.advance(days(29)).await.unwrap();
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced", "OrderPaid"]
    );
    assert!(!types(&lifecycle::<Payment>(&app, "o-1").await).contains(&"ProcessDeadlineReached"));
    let pending = app.app().pending_deadlines().await.unwrap();
    assert_eq!(
        pending.iter().map(|d| d.field).collect::<Vec<_>>(),
        ["timeout"],
        "only the lifetime is left"
    );
}

// spec 76, 77: five days down, then every missed occurrence in turn, each from its own moment.
#[tokio::test]
async fn an_outage_of_five_days_catches_up_in_order() {
    let app = app().await;
    app.dispatch(place("o-1")).await.unwrap();
    app.run_until_idle().await.unwrap();
    let start = app.now();
    app.clock().advance(days(5)); // the worker was down: nothing ran meanwhile
    app.run_until_idle().await.unwrap();
    let reached: Vec<_> = lifecycle::<Payment>(&app, "o-1")
        .await
        .into_iter()
        .filter(|e| e.event_type == "ProcessDeadlineReached")
        .map(|e| e.payload["at"].as_str().unwrap().to_owned())
        .collect();
    let at = |h| (start + hours(h)).to_string();
    assert_eq!(reached, [at(24), at(48), at(72), at(72)]);
    let late = state::<Payment>(&app, "o-1").await.late_by;
    assert_eq!(
        late,
        [hours(96), hours(72), hours(48)],
        "each handler saw how late it ran"
    );
    let reminders = app.events_of::<Order>("o-1").await.unwrap().0;
    assert!(
        reminders
            .iter()
            .filter(|e| e.event_type == "ReminderSent")
            .all(|e| e.timestamp == start + days(5))
    );
}

// spec 85: an `OrderPaid` stored a second before the payment deadline clears it first.
#[tokio::test]
async fn an_order_paid_a_second_before_the_payment_deadline_clears_it() {
    let app = app().await;
    app.dispatch(place("o-1")).await.unwrap();
    app.advance(hours(72) - seconds(1)).await.unwrap();
    app.dispatch(MarkOrderPaid {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.advance(seconds(1)).await.unwrap();
    let order = app.events_of::<Order>("o-1").await.unwrap();
    assert_eq!(
        order.types(),
        ["OrderPlaced", "ReminderSent", "ReminderSent", "OrderPaid"]
    );
    assert_eq!(
        state::<Payment>(&app, "o-1").await.payment_deadline,
        Deadline::none()
    );
}

// spec 82: never early.
#[tokio::test]
async fn a_deadline_never_runs_before_its_moment() {
    let app = app().await;
    app.dispatch(place("o-1")).await.unwrap();
    app.advance(hours(24) - millis(1)).await.unwrap();
    assert_eq!(app.events_of::<Order>("o-1").await.unwrap().len(), 1);
    app.advance(millis(1)).await.unwrap();
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced", "ReminderSent"]
    );
}

// spec 90, 91, 144: a deadline's lifecycle event starts a chain at depth 0; its commands are
// caused by it, one hop deeper.
#[tokio::test]
async fn a_deadline_starts_a_chain_and_its_commands_are_one_hop_deeper() {
    let app = app().await;
    app.dispatch(place("o-1")).await.unwrap();
    app.advance(hours(24)).await.unwrap();
    let placed = &app.events_of::<Order>("o-1").await.unwrap().0[0];
    let reminder = &app.events_of::<Order>("o-1").await.unwrap().0[1];
    let events = lifecycle::<Payment>(&app, "o-1").await;
    let (started, handled, reached) = (&events[0], &events[1], &events[2]);
    assert_eq!(
        reached.metadata.depth, 0,
        "the deadline's lifecycle event starts a chain"
    );
    assert_eq!(
        reminder.metadata.depth, 1,
        "its commands are one hop deeper, as any reaction's"
    );
    assert_eq!(reminder.metadata.causation_id, reached.id);
    assert_eq!(
        reached.metadata.causation_id, handled.id,
        "set by the step whose state set the moment"
    );
    assert_eq!(
        reached.metadata.correlation_id,
        placed.metadata.correlation_id
    );
    assert_eq!(
        reminder.metadata.correlation_id,
        placed.metadata.correlation_id
    );
    assert_eq!(
        (
            started.metadata.causation_id.as_str(),
            handled.metadata.causation_id.as_str()
        ),
        (placed.id.as_str(), placed.id.as_str()),
        "lifecycle events point at their event (spec 144)"
    );
}

// spec 60, 105, 107: events for a completed instance are skipped, deadlines never run.
#[tokio::test]
async fn events_without_an_open_instance_are_skipped_and_ended_instances_stay_ended() {
    let app = app().await;
    app.dispatch(place("o-1")).await.unwrap();
    app.dispatch(MarkOrderPaid {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    app.dispatch(PayAndFulfil {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    assert_eq!(
        types(&lifecycle::<Payment>(&app, "o-1").await).last(),
        Some(&"ProcessCompleted")
    );
    let before = lifecycle::<Payment>(&app, "o-1").await.len();
    app.dispatch(RecordConfirmationSent {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.advance(days(40)).await.unwrap();
    assert_eq!(
        lifecycle::<Payment>(&app, "o-1").await.len(),
        before,
        "nothing reaches a completed instance (spec 107)"
    );
}

// spec 95, 96, 98, 100, 101: the timeout ends the instance; what its commands cause still
// reaches the handlers, once.
#[tokio::test]
async fn the_timeout_ends_the_instance_and_its_compensation_runs_as_a_follow_up() {
    let app = app().await;
    app.dispatch(place("o-1")).await.unwrap();
    app.advance(hours(1)).await.unwrap();
    app.dispatch(MarkOrderPaid {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    let start = app.now() - hours(1);
    app.advance(days(30)).await.unwrap();
    let events = lifecycle::<Payment>(&app, "o-1").await;
    assert_eq!(
        types(&events),
        [
            "ProcessStarted",
            "ProcessHandled",
            "ProcessHandled",
            "ProcessTimedOut",
            "ProcessHandled"
        ],
        "the cancellation is handled after the timeout, and does not complete the instance"
    );
    let timed_out = &events[3];
    assert_eq!(
        timed_out.payload["at"],
        serde_json::json!((start + days(30)).to_string())
    );
    let cancelled = app
        .events_of::<Order>("o-1")
        .await
        .unwrap()
        .0
        .into_iter()
        .find(|e| e.event_type == "OrderCancelled")
        .unwrap();
    assert_eq!(
        timed_out.payload["followUps"],
        serde_json::json!([cancelled.id])
    );
    assert!(state::<Payment>(&app, "o-1").await.compensated);
    assert_eq!(app.app().next_due_at().await.unwrap(), None);
}

// spec 59: an event that does not start the process and finds no instance is skipped.
#[tokio::test]
async fn an_event_that_finds_no_instance_is_skipped() {
    let app = app().await;
    app.dispatch(PayAndFulfil {
        order_id: "o-5".into(),
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    assert!(
        lifecycle::<Payment>(&app, "o-5").await.is_empty(),
        "no instance was made"
    );
    let processes = app
        .lag()
        .await
        .unwrap()
        .subscribers
        .into_iter()
        .find(|s| s.subscriber == PROCESSES)
        .unwrap();
    assert_eq!(processes.lag, 0, "and the events were read past");
}

// spec 84, 88, 108: a deadline handler that returns the moment that came due fails the process.
#[tokio::test]
async fn a_deadline_returning_the_moment_that_came_due_fails_the_process_with_its_letter() {
    #[process(on = Order, started_by = [OrderPlaced])]
    #[derive(Debug, Default, Clone, Serialize, Deserialize)]
    struct Stubborn {
        #[deadline]
        retry: Deadline,
    }

    #[process]
    impl Stubborn {
        async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<StubbornPatch> {
            Ok(StubbornPatch::default().retry(cx.after(hours(1))))
        }

        async fn at_retry(cx: At<'_, Self>) -> Result<AtRetry> {
            Ok(AtRetry::new(cx.due_at()))
        }
    }

    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .process::<Stubborn>(),
    )
    .await
    .unwrap()
    .expecting_letters();
    app.dispatch(place("o-1")).await.unwrap();
    app.advance(hours(2)).await.unwrap();
    let events = app
        .app()
        .store()
        .read_stream("process:Stubborn", "o-1")
        .await
        .unwrap();
    assert_eq!(
        types(&events),
        ["ProcessStarted", "ProcessHandled", "ProcessFailed"]
    );
    let letters = support::letters(&app).await;
    assert_eq!(letters.len(), 1);
    assert_eq!(
        (letters[0].kind, letters[0].event_type.as_deref()),
        (LetterKind::Process, Some("deadline:retry"))
    );
    assert_eq!(
        events[2].payload["letterId"],
        serde_json::json!(letters[0].id)
    );
    assert_eq!(letters[0].error_type, "terminal");
}

/// Mends the confirmation handler and retries `letter`: o-1's lifecycle after the retry.
async fn healed_retry(app: &TestApp, letter: &str) -> Vec<bounda::RecordedEvent> {
    payment::BROKEN.with(|b| b.set(false));
    app.app().dead_letters().retry(letter).await.unwrap();
    lifecycle::<Payment>(app, "o-1").await
}

/// Breaks the instance: its confirmation handler fails three times, and the process fails.
async fn failed_instance(app: &TestApp) -> String {
    payment::BROKEN.with(|b| b.set(true));
    app.dispatch(place("o-1")).await.unwrap();
    app.dispatch(RecordConfirmationSent {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    let letters = support::letters(app).await;
    assert_eq!(letters.len(), 1);
    assert_eq!(
        types(&lifecycle::<Payment>(app, "o-1").await),
        ["ProcessStarted", "ProcessHandled", "ProcessFailed"]
    );
    letters[0].id.clone()
}

// spec 108, 109, 110, 111, 113, 121, 168: the last scenario.
#[tokio::test]
async fn a_failed_instance_parks_its_events_and_drains_them_in_order_when_its_letter_is_retried() {
    let app = app().await.expecting_letters();
    let letter = failed_instance(&app).await;
    let failed = &lifecycle::<Payment>(&app, "o-1").await[2];
    assert_eq!(failed.payload["letterId"], serde_json::json!(letter));
    // While failed: events that would do something are parked, deadlines wait.
    app.dispatch(MarkOrderPaid {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.advance(hours(100)).await.unwrap();
    assert_eq!(
        types(&lifecycle::<Payment>(&app, "o-1").await),
        [
            "ProcessStarted",
            "ProcessHandled",
            "ProcessFailed",
            "ProcessEventParked"
        ],
        "OrderPaid is parked, and no deadline ran: no reminder, no cancellation"
    );
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced", "ConfirmationSent", "OrderPaid"]
    );
    assert_eq!(
        app.app()
            .dead_letters()
            .get(&letter)
            .await
            .unwrap()
            .unwrap()
            .error_type,
        "retriable_exhausted"
    );

    payment::BROKEN.with(|b| b.set(false));
    assert_eq!(
        app.app().dead_letters().retry(&letter).await.unwrap(),
        bounda::Retried::Done
    );
    let events = lifecycle::<Payment>(&app, "o-1").await;
    assert_eq!(
        types(&events),
        [
            "ProcessStarted",
            "ProcessHandled",
            "ProcessFailed",
            "ProcessEventParked",
            "ProcessHandled",
            "ProcessHandled",
            "ProcessResumed"
        ]
    );
    assert_eq!(
        events[4].payload["eventType"], "ConfirmationSent",
        "the failed step first"
    );
    assert_eq!(
        events[5].payload["eventType"], "OrderPaid",
        "then what was parked, in order"
    );
    assert_eq!(
        app.app()
            .dead_letters()
            .get(&letter)
            .await
            .unwrap()
            .unwrap()
            .status,
        bounda::store::LetterStatus::Retried
    );
    let state = state::<Payment>(&app, "o-1").await;
    assert!(state.paid_at.is_some());
    assert_eq!(
        state.payment_deadline,
        Deadline::none(),
        "the parked payment cleared the deadline"
    );
    app.advance(hours(1)).await.unwrap();
    assert!(
        !app.events_of::<Order>("o-1")
            .await
            .unwrap()
            .types()
            .contains(&"OrderCancelled"),
        "resumed: nothing cancels a paid order"
    );
}

// spec 120: a discarded letter gives the instance up.
#[tokio::test]
async fn discarding_the_letter_gives_the_instance_up_and_drops_later_events() {
    let app = app().await.expecting_letters();
    let letter = failed_instance(&app).await;
    app.app().dead_letters().discard(&letter).await.unwrap();
    app.dispatch(MarkOrderPaid {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.advance(days(40)).await.unwrap();
    assert_eq!(
        types(&lifecycle::<Payment>(&app, "o-1").await),
        ["ProcessStarted", "ProcessHandled", "ProcessFailed"],
        "dropped, not parked; nothing ran"
    );
    assert!(matches!(
        app.app().dead_letters().retry(&letter).await,
        Err(bounda::Error::LetterSettled { .. })
    ));
}

// Issue 9: `parked` belongs to the letter: its instance's parked events while it is the
// current failure, 0 once it is discarded.
#[tokio::test]
async fn a_letter_counts_the_events_parked_behind_it_until_it_is_settled() {
    let app = app().await.expecting_letters();
    let letter = failed_instance(&app).await;
    app.dispatch(MarkOrderPaid {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    let letters = app.app().dead_letters();
    let parked = async || {
        letters
            .parked(&letters.get(&letter).await.unwrap().unwrap())
            .await
            .unwrap()
    };
    assert_eq!(
        parked().await,
        1,
        "the payment, not the letter's own failed event"
    );
    letters.discard(&letter).await.unwrap();
    assert_eq!(parked().await, 0, "a discarded letter holds nothing back");
}

// spec 113, 170: a retry whose failed step fails again changes nothing.
#[tokio::test]
async fn a_retry_whose_failed_step_fails_again_leaves_the_letter_failed() {
    let app = app().await.expecting_letters();
    let letter = failed_instance(&app).await;
    let error = app.app().dead_letters().retry(&letter).await.unwrap_err();
    assert_eq!(error.code(), "RETRY_FAILED");
    assert!(
        error
            .to_string()
            .contains("the confirmation service is down"),
        "{error}"
    );
    let status = app
        .app()
        .dead_letters()
        .get(&letter)
        .await
        .unwrap()
        .unwrap()
        .status;
    assert_eq!(status, bounda::store::LetterStatus::Failed);
    assert_eq!(
        types(&lifecycle::<Payment>(&app, "o-1").await),
        ["ProcessStarted", "ProcessHandled", "ProcessFailed"]
    );
}

// spec 88: a failing deadline is retried with the process's back-off, and succeeds.
#[tokio::test]
async fn a_failing_deadline_is_retried_with_the_process_back_off() {
    use std::cell::Cell;
    thread_local! {
        static FAILS: Cell<u32> = const { Cell::new(2) };
    }

    #[process(on = Order, started_by = [OrderPlaced])]
    #[derive(Debug, Default, Clone, Serialize, Deserialize)]
    struct Flaky {
        runs: u32,
        #[deadline]
        ping: Deadline,
    }

    #[process]
    impl Flaky {
        async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<FlakyPatch> {
            Ok(FlakyPatch::default().ping(cx.after(hours(1))))
        }

        async fn at_ping(cx: At<'_, Self>) -> Result<AtPing> {
            let left = FAILS.with(Cell::get);
            if left > 0 {
                FAILS.with(|f| f.set(left - 1));
                anyhow::bail!("ping failed");
            }
            cx.send(SendReminder { order_id: cx.id() }).await?;
            Ok(AtPing::new(Deadline::none()).runs(cx.state().runs + 1))
        }
    }

    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .process::<Flaky>(),
    )
    .await
    .unwrap();
    app.dispatch(place("o-1")).await.unwrap();
    let start = app.now();
    app.advance(hours(1)).await.unwrap();
    let events = app
        .app()
        .store()
        .read_stream("process:Flaky", "o-1")
        .await
        .unwrap();
    assert_eq!(
        types(&events),
        ["ProcessStarted", "ProcessHandled", "ProcessDeadlineReached"]
    );
    assert_eq!(
        events[2].payload["at"],
        serde_json::json!((start + hours(1)).to_string()),
        "the moment that came due"
    );
    assert_eq!(
        app.now(),
        start + hours(1) + seconds(3),
        "waited 1 s then 2 s"
    );
    let reminder = &app.events_of::<Order>("o-1").await.unwrap().0[1];
    assert_eq!(reminder.timestamp, start + hours(1) + seconds(3));
    assert_eq!(
        app.app()
            .dead_letters()
            .count(&LetterFilter::default())
            .await
            .unwrap(),
        0
    );
}

// spec 89: losing a race with another write to the instance costs no attempt.
#[tokio::test]
async fn a_process_step_that_loses_a_race_reruns_without_spending_an_attempt() {
    let app = TestApp::new(
        App::builder(support::racing::Racing::after_first_commit(1).await)
            .only_listed()
            .process::<Payment>(),
    )
    .await
    .unwrap();
    app.dispatch(place("o-1")).await.unwrap();
    let start = app.now();
    app.run_until_idle().await.unwrap();
    // The rival appended a copy of the process's `ProcessStarted`; the step reran on it and
    // found the event handled already.
    let events = lifecycle::<Payment>(&app, "o-1").await;
    assert_eq!(types(&events), ["ProcessStarted"]);
    assert!(events[0].id.starts_with("rival-"), "{}", events[0].id);
    assert_eq!(app.now(), start, "no back-off waited");
    assert_eq!(
        app.app()
            .dead_letters()
            .count(&LetterFilter::default())
            .await
            .unwrap(),
        0
    );
}

// A wave of due deadlines reads its instances, and the aggregates they follow, ahead: one read
// per stream type for the wave, instead of three reads of a stream per run in turn (what a
// store a round trip away waits for).
#[tokio::test]
async fn a_wave_of_deadlines_reads_its_streams_ahead_once_per_type() {
    let (racing, app) = orders_counting_reads().await;
    app.run_until_idle().await.unwrap();
    let before = racing.reads();
    // Every order's first reminder comes due at once.
    app.advance(hours(25)).await.unwrap();
    let (streams, tails) = racing.reads_since(before);
    for n in 0..ORDERS_READ_AHEAD {
        assert_eq!(
            types(&order_lifecycle(&racing, n).await),
            ["ProcessStarted", "ProcessHandled", "ProcessDeadlineReached"],
            "o-{n}"
        );
    }
    assert_eq!(tails, 2, "one read of the instances, one of the orders");
    assert_eq!(streams, 0, "no run read its streams itself");
}

// The process subscriber's steps run one after another, but the instances a wave of them
// routes to are read ahead, once for the wave, and so are their scheduler entries (issue 47).
#[tokio::test]
async fn a_wave_of_process_steps_reads_its_instances_ahead() {
    let (racing, app) = orders_counting_reads().await;
    let before = racing.reads();
    let entries_before = racing.entry_reads();
    app.run_until_idle().await.unwrap();
    let (streams, tails) = racing.reads_since(before);
    let entries = racing.entry_reads();
    assert_eq!(
        (entries.0 - entries_before.0, entries.1 - entries_before.1),
        (0, 1),
        "the wave's scheduler entries read at once, none by a step itself"
    );
    for n in 0..ORDERS_READ_AHEAD {
        assert_eq!(
            types(&order_lifecycle(&racing, n).await),
            ["ProcessStarted", "ProcessHandled"],
            "o-{n}"
        );
    }
    assert_eq!(tails, 1, "one read of the instances for the wave");
    assert_eq!(streams, 0, "no step read its instance itself");
}

// Issue 47: on a store a round trip away, a worker under load prepares its next batch (claims
// it and runs its handlers) while the last one commits; a batch whose events a process takes
// claims the next in its commit instead, so a deadline still waits for its instance's events.
#[tokio::test]
async fn a_worker_prepares_its_next_batch_beside_the_commit_unless_a_process_takes_its_events() {
    const ORDERS: usize = 25;
    let racing = std::sync::Arc::new(support::racing::Racing::pipelined().await);
    let mut config = bounda::config::Config::default();
    config.dispatcher.batch_size = 10;
    let app = TestApp::new(
        App::builder_shared(racing.clone())
            .only_listed()
            .config(config)
            .process::<Payment>(),
    )
    .await
    .unwrap();
    for n in 0..ORDERS {
        app.dispatch(place(&format!("o-{n}"))).await.unwrap();
    }
    app.run_until_idle().await.unwrap();
    // The first reminders: the handlers send reminders, which no process takes.
    let before = racing.claims();
    app.advance(hours(24)).await.unwrap();
    let (alone, in_commits, beside) = racing.claims();
    assert_eq!(
        in_commits - before.1,
        0,
        "no batch of reminders claimed the next in its commit"
    );
    assert!(
        alone - before.0 >= 3,
        "the batches after the first were claimed on their own: {} claims",
        alone - before.0
    );
    assert!(
        beside - before.2 >= 2,
        "the batches after the first were claimed while the one before committed: {}",
        beside - before.2
    );
    // The payment deadlines: each cancels its order, which the process takes.
    let before = racing.claims();
    app.advance(hours(48)).await.unwrap();
    assert!(
        racing.claims().1 - before.1 >= 2,
        "a batch whose cancellations the process takes claimed the next in its commit"
    );
    for n in 0..ORDERS {
        let id = format!("o-{n}");
        let events = lifecycle::<Payment>(&app, &id).await;
        let reached = |field: &str| {
            events
                .iter()
                .filter(|e| e.event_type == "ProcessDeadlineReached" && e.payload["field"] == field)
                .count()
        };
        assert_eq!(
            (reached("next_reminder"), reached("payment_deadline")),
            (3, 1),
            "{id}: each deadline once"
        );
        assert!(
            state::<Payment>(&app, &id).await.compensated,
            "{id}: the cancellation handled before the instance completed"
        );
    }
}

const ORDERS_READ_AHEAD: usize = 20;

/// The lifecycle of order `o-{n}`'s payment, read past the counting.
async fn order_lifecycle(racing: &support::racing::Racing, n: usize) -> Vec<RecordedEvent> {
    racing
        .inner
        .read_stream("process:OrderPayment", &format!("o-{n}"))
        .await
        .unwrap()
}

/// `ORDERS_READ_AHEAD` orders placed, nothing run yet, on a store that counts its reads.
async fn orders_counting_reads() -> (std::sync::Arc<support::racing::Racing>, TestApp) {
    let racing = std::sync::Arc::new(support::racing::Racing::losing(0).await);
    let app = TestApp::new(
        App::builder_shared(racing.clone())
            .only_listed()
            .process::<OrderPayment>(),
    )
    .await
    .unwrap();
    for n in 0..ORDERS_READ_AHEAD {
        app.dispatch(place(&format!("o-{n}"))).await.unwrap();
    }
    (racing, app)
}

// spec 96, 101: `at_timeout`'s patch is merged into the final state, and a follow-up sees it.
#[tokio::test]
async fn the_timeout_handlers_patch_is_the_final_state_a_follow_up_sees() {
    let app = app().await;
    app.dispatch(place("o-1")).await.unwrap();
    app.advance(hours(1)).await.unwrap();
    app.dispatch(MarkOrderPaid {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.dispatch(SendReminder {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.advance(days(31)).await.unwrap();
    let events = lifecycle::<Payment>(&app, "o-1").await;
    let timed_out = events
        .iter()
        .find(|e| e.event_type == "ProcessTimedOut")
        .unwrap();
    assert_eq!(
        timed_out.payload["state"]["next_reminder"],
        serde_json::Value::Null
    );
    let follow_up = events.last().unwrap();
    assert_eq!(follow_up.event_type, "ProcessHandled");
    assert_eq!(follow_up.payload["state"]["compensated"], true);
    assert!(
        follow_up.payload["state"]["paid_at"].is_string(),
        "the state the timeout left"
    );
}

// spec 113: during a retry, a deadline due before a parked event's arrival runs first.
#[tokio::test]
async fn a_deadline_due_before_a_parked_events_arrival_runs_before_it() {
    let app = app().await.expecting_letters();
    payment::BROKEN.with(|b| b.set(true));
    app.dispatch(place("o-1")).await.unwrap();
    let start = app.now();
    app.advance(hours(1)).await.unwrap();
    app.dispatch(RecordConfirmationSent {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    let letter = support::letters(&app).await[0].id.clone();
    app.advance(hours(29)).await.unwrap();
    app.dispatch(MarkOrderPaid {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    let events = healed_retry(&app, &letter).await;
    assert_eq!(
        types(&events),
        [
            "ProcessStarted",
            "ProcessHandled",
            "ProcessFailed",
            "ProcessEventParked",
            "ProcessHandled",
            "ProcessDeadlineReached",
            "ProcessHandled",
            "ProcessResumed"
        ]
    );
    assert_eq!(
        events[5].payload["at"],
        serde_json::json!((start + hours(24)).to_string()),
        "the reminder due at 24 h, before the payment parked at 30 h"
    );
    assert_eq!(events[6].payload["eventType"], "OrderPaid");
}

// spec 118: a parked event that completes the instance completes it; what is parked after it is
// dropped.
#[tokio::test]
async fn a_parked_completing_event_completes_the_instance_and_drops_the_rest() {
    let app = app().await.expecting_letters();
    let letter = failed_instance(&app).await;
    app.dispatch(PayAndFulfil {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.dispatch(PayAndFulfil {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    assert_eq!(
        types(&lifecycle::<Payment>(&app, "o-1").await)
            .iter()
            .filter(|t| **t == "ProcessEventParked")
            .count(),
        4
    );
    payment::BROKEN.with(|b| b.set(false));
    app.app().dead_letters().retry(&letter).await.unwrap();
    let types = types(&lifecycle::<Payment>(&app, "o-1").await)
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    assert_eq!(
        types[7..],
        ["ProcessHandled", "ProcessHandled", "ProcessCompleted"].map(str::to_owned),
        "the confirmation, the first payment, then the fulfilment completes it"
    );
    assert_eq!(
        app.app()
            .dead_letters()
            .get(&letter)
            .await
            .unwrap()
            .unwrap()
            .status,
        bounda::store::LetterStatus::Retried
    );
    assert_eq!(app.app().next_due_at().await.unwrap(), None);
}

// spec 119: retrying a failed timeout ends the instance as timed out.
#[tokio::test]
async fn retrying_a_failed_timeout_ends_the_instance_as_timed_out() {
    payment::TIMEOUT_BROKEN.with(|b| b.set(true));
    let app = app().await.expecting_letters();
    app.dispatch(place("o-1")).await.unwrap();
    app.advance(hours(1)).await.unwrap();
    app.dispatch(MarkOrderPaid {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.advance(days(31)).await.unwrap();
    assert_eq!(
        types(&lifecycle::<Payment>(&app, "o-1").await),
        [
            "ProcessStarted",
            "ProcessHandled",
            "ProcessHandled",
            "ProcessFailed"
        ]
    );
    let letter = support::letters(&app).await[0].clone();
    assert_eq!(letter.event_type.as_deref(), Some("deadline:timeout"));
    payment::TIMEOUT_BROKEN.with(|b| b.set(false));
    app.app().dead_letters().retry(&letter.id).await.unwrap();
    app.run_until_idle().await.unwrap();
    let events = types(&lifecycle::<Payment>(&app, "o-1").await)
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    assert_eq!(events[4], "ProcessTimedOut");
    assert!(!events.contains(&"ProcessResumed".to_owned()));
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types().last(),
        Some(&"OrderCancelled"),
        "what at_timeout caused still happens"
    );
    assert_eq!(
        events.last().map(String::as_str),
        Some("ProcessHandled"),
        "and reaches its follow-up"
    );
}

mod recompute {
    use std::cell::Cell;

    use bounda::prelude::*;

    use crate::support::storefront::*;

    thread_local! {
        pub static PING_FAILS: Cell<u32> = const { Cell::new(0) };
        pub static START_FAILS: Cell<bool> = const { Cell::new(false) };
    }

    /// Pings an hour after the order; a confirmation recomputes the ping from the order's time.
    #[process(on = Order, started_by = [OrderPlaced])]
    #[derive(Debug, Default, Clone, Serialize, Deserialize)]
    pub struct Recompute {
        pub placed_at: Option<Instant>,
        #[deadline]
        pub ping: Deadline,
    }

    #[process]
    impl Recompute {
        async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<RecomputePatch> {
            if START_FAILS.with(Cell::get) {
                anyhow::bail!("cannot start yet");
            }
            Ok(RecomputePatch::default()
                .placed_at(Some(cx.event_time()))
                .ping(cx.after(hours(1))))
        }

        async fn on_confirmation_sent(
            cx: On<'_, Self, ConfirmationSent>,
        ) -> Result<RecomputePatch> {
            let placed_at = cx.state().placed_at.unwrap_or(cx.event_time());
            Ok(RecomputePatch::default().ping(placed_at + hours(1)))
        }

        async fn at_ping(cx: At<'_, Self>) -> Result<AtPing> {
            let left = PING_FAILS.with(Cell::get);
            if left > 0 {
                PING_FAILS.with(|f| f.set(left - 1));
                anyhow::bail!("ping failed");
            }
            let _ = cx.due_at();
            Ok(AtPing::new(Deadline::none()))
        }
    }
}

async fn recompute_app() -> TestApp {
    TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .process::<recompute::Recompute>(),
    )
    .await
    .unwrap()
}

// spec 80: a (field, moment) pair comes due once, even if a handler sets it back.
#[tokio::test]
async fn a_deadline_set_back_to_a_moment_that_already_came_due_does_not_run_again() {
    let app = recompute_app().await;
    app.dispatch(place("o-1")).await.unwrap();
    app.advance(hours(2)).await.unwrap();
    app.dispatch(RecordConfirmationSent {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.advance(hours(2)).await.unwrap();
    let events = app
        .app()
        .store()
        .read_stream("process:Recompute", "o-1")
        .await
        .unwrap();
    assert_eq!(
        types(&events),
        [
            "ProcessStarted",
            "ProcessHandled",
            "ProcessDeadlineReached",
            "ProcessHandled"
        ]
    );
    assert!(
        app.app()
            .pending_deadlines()
            .await
            .unwrap()
            .iter()
            .all(|d| d.field == "timeout"),
        "the stale pair is not pending"
    );
}

// spec 88, 152: an event for the instance does not reset a failing deadline's back-off.
#[tokio::test]
async fn an_event_step_keeps_a_failing_deadlines_back_off() {
    recompute::PING_FAILS.with(|f| f.set(1));
    let app = recompute_app().await;
    app.dispatch(place("o-1")).await.unwrap();
    app.run_until_idle().await.unwrap();
    app.clock().advance(hours(1));
    app.run_until_idle_with(1).await.unwrap();
    let entry = async || {
        app.app()
            .store()
            .scheduled_of_type("bounda.ProcessDeadline")
            .await
            .unwrap()
            .remove(0)
    };
    let failed = entry().await;
    assert_eq!(
        (failed.attempts, failed.execute_at),
        (1, app.now() + seconds(1)),
        "waiting 1 s for its retry"
    );
    // An event the instance handles; its handler recomputes the same ping moment.
    app.dispatch(RecordConfirmationSent {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.run_until_idle_with(1).await.unwrap();
    let handled = app
        .app()
        .store()
        .read_stream("process:Recompute", "o-1")
        .await
        .unwrap();
    assert_eq!(
        types(&handled).last(),
        Some(&"ProcessHandled"),
        "the event step ran"
    );
    let after = entry().await;
    assert_eq!(
        (after.attempts, after.execute_at),
        (1, failed.execute_at),
        "the back-off stands"
    );
    app.run_until_idle().await.unwrap();
    let events = app
        .app()
        .store()
        .read_stream("process:Recompute", "o-1")
        .await
        .unwrap();
    assert!(types(&events).contains(&"ProcessDeadlineReached"));
}

// spec 108, 113: a starting event that fails for good fails the instance it would have started;
// retrying the letter starts it.
#[tokio::test]
async fn a_start_that_fails_for_good_is_retried_into_a_running_instance() {
    recompute::START_FAILS.with(|f| f.set(true));
    let app = recompute_app().await.expecting_letters();
    app.dispatch(place("o-1")).await.unwrap();
    app.run_until_idle().await.unwrap();
    assert_eq!(
        types(
            &app.app()
                .store()
                .read_stream("process:Recompute", "o-1")
                .await
                .unwrap()
        ),
        ["ProcessFailed"]
    );
    let letter = support::letters(&app).await[0].id.clone();
    recompute::START_FAILS.with(|f| f.set(false));
    app.app().dead_letters().retry(&letter).await.unwrap();
    let events = app
        .app()
        .store()
        .read_stream("process:Recompute", "o-1")
        .await
        .unwrap();
    assert_eq!(
        types(&events),
        [
            "ProcessFailed",
            "ProcessStarted",
            "ProcessHandled",
            "ProcessResumed"
        ]
    );
    app.advance(hours(1)).await.unwrap();
    let events = app
        .app()
        .store()
        .read_stream("process:Recompute", "o-1")
        .await
        .unwrap();
    assert_eq!(
        types(&events).last(),
        Some(&"ProcessDeadlineReached"),
        "running: its ping came due"
    );
}

// spec 91: causation follows the step that set a deadline, even when serde renames it.
#[tokio::test]
async fn deadline_causation_follows_serde_renames() {
    #[process(on = Order, started_by = [OrderPlaced])]
    #[derive(Debug, Default, Clone, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Renamed {
        #[deadline]
        follow_up_at: Deadline,
    }

    #[process]
    impl Renamed {
        async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<RenamedPatch> {
            Ok(RenamedPatch::default().follow_up_at(cx.after(hours(1))))
        }

        async fn on_confirmation_sent(cx: On<'_, Self, ConfirmationSent>) -> Result<RenamedPatch> {
            Ok(RenamedPatch::default().follow_up_at(cx.after(hours(2))))
        }

        async fn at_follow_up_at(cx: At<'_, Self>) -> Result<AtFollowUpAt> {
            cx.send(SendReminder { order_id: cx.id() }).await?;
            Ok(AtFollowUpAt::new(Deadline::none()))
        }
    }

    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .process::<Renamed>(),
    )
    .await
    .unwrap();
    app.dispatch(place("o-1")).await.unwrap();
    app.run_until_idle().await.unwrap();
    app.dispatch(RecordConfirmationSent {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.advance(hours(3)).await.unwrap();
    let events = app
        .app()
        .store()
        .read_stream("process:Renamed", "o-1")
        .await
        .unwrap();
    assert_eq!(
        types(&events),
        [
            "ProcessStarted",
            "ProcessHandled",
            "ProcessHandled",
            "ProcessDeadlineReached"
        ]
    );
    assert!(
        events[2].payload["state"].get("followUpAt").is_some(),
        "stored under its serde name"
    );
    assert_eq!(
        events[3].metadata.causation_id, events[2].id,
        "set by the confirmation's step"
    );
}

// Issue 19: one lifecycle shape. The completing event the process handles (OrderCancelled) writes
// `ProcessHandled` then `ProcessCompleted`, whether it arrives while the instance runs or is
// drained from the parked queue by a retry; the one it does not handle (OrderFulfilled) writes
// `ProcessCompleted` alone, both ways.
#[tokio::test]
async fn a_completing_event_writes_the_same_lifecycle_live_and_drained() {
    let cancel = || CancelOrder {
        order_id: "o-1".into(),
        reason: "changed mind".into(),
    };
    let fulfil = || PayAndFulfil {
        order_id: "o-1".into(),
    };
    let tail = |types: &[&str], from: usize| -> Vec<String> {
        types[from..].iter().map(|t| (*t).to_owned()).collect()
    };
    // Live.
    let live = app().await;
    live.dispatch(place("o-1")).await.unwrap();
    live.run_until_idle().await.unwrap();
    live.dispatch(cancel()).await.unwrap();
    live.run_until_idle().await.unwrap();
    let events = lifecycle::<Payment>(&live, "o-1").await;
    let handled_live = tail(&types(&events), 2);
    assert_eq!(handled_live, ["ProcessHandled", "ProcessCompleted"]);
    let live = app().await;
    live.dispatch(place("o-1")).await.unwrap();
    live.dispatch(fulfil()).await.unwrap();
    live.run_until_idle().await.unwrap();
    let events = lifecycle::<Payment>(&live, "o-1").await;
    let unhandled_live = tail(&types(&events), 2);
    // Drained.
    for (command, live) in [(0, handled_live), (1, unhandled_live)] {
        let app = app().await.expecting_letters();
        let letter = failed_instance(&app).await;
        match command {
            0 => app.dispatch(cancel()).await.map(drop).unwrap(),
            _ => app.dispatch(fulfil()).await.map(drop).unwrap(),
        }
        app.run_until_idle().await.unwrap();
        payment::BROKEN.with(|b| b.set(false));
        app.app().dead_letters().retry(&letter).await.unwrap();
        let events = lifecycle::<Payment>(&app, "o-1").await;
        let all = types(&events);
        // Started, handled, failed, parked (one or two: the payment and the fulfilment), then the
        // failed step again: what follows is the completing event's shape.
        let completed = all.iter().position(|t| *t == "ProcessCompleted").unwrap();
        let drained = tail(&all, completed + 1 - live.len());
        assert_eq!(drained, live, "the same shape drained as live");
    }
}

// Issue 19: a failed instance's deadlines stay in sight. It has no scheduler entry while it is
// failed, yet `pending_deadlines`, the page's window (`pending_until`), `explain` and `lag` show
// its deadlines as held by its letter, until the retry arms them again.
#[tokio::test]
async fn a_failed_instances_deadlines_are_shown_held_by_its_letter() {
    let app = app().await.expecting_letters();
    let letter = failed_instance(&app).await;
    let held = |pending: &[bounda::PendingDeadline]| -> Vec<(&str, Option<String>)> {
        pending
            .iter()
            .filter(|d| d.instance == "o-1")
            .map(|d| (d.field, d.held_by.clone()))
            .collect()
    };
    let by = Some(letter.clone());
    let expected = vec![
        ("next_reminder", by.clone()),
        ("payment_deadline", by.clone()),
        ("timeout", by.clone()),
    ];
    let pending = app.app().pending_deadlines().await.unwrap();
    assert_eq!(held(&pending), expected);
    let ahead = app
        .app()
        .pending_until(app.now() + days(3), 500)
        .await
        .unwrap();
    assert_eq!(
        held(&ahead.pending),
        expected[..2],
        "within the window only"
    );
    assert!(ahead.later, "the timeout comes after the window");
    assert_eq!(app.lag().await.unwrap().held_deadlines, 3);
    let story = app
        .app()
        .explain_named("Payment", "o-1")
        .await
        .unwrap()
        .unwrap();
    let told: Vec<_> = story
        .pending
        .iter()
        .map(|due| (due.field.as_str(), due.held_by.clone()))
        .collect();
    assert_eq!(told, expected);
    #[cfg(feature = "cli")]
    {
        let mut out = Vec::new();
        let command = bounda::cli::Operator::Deadlines(bounda::cli::DeadlineArgs::default());
        bounda::cli::execute(app.app(), command, &mut out)
            .await
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(&format!(
                "Payment:o-1  payment_deadline  held: its instance failed, letter {letter}"
            )),
            "{text}"
        );
        assert!(text.ends_with("3 pending, 0 waiting, 3 held\n"), "{text}");
    }
    // Retried: armed again, held by nothing.
    payment::BROKEN.with(|b| b.set(false));
    app.app().dead_letters().retry(&letter).await.unwrap();
    let pending = app.app().pending_deadlines().await.unwrap();
    assert!(
        held(&pending).iter().all(|(_, by)| by.is_none()) && !held(&pending).is_empty(),
        "{pending:?}"
    );
    assert_eq!(app.lag().await.unwrap().held_deadlines, 0);
}

// Issue 40: the completing event drained by a retry is recorded as handled, then completed, as
// live: a failure, then the completing event parked behind it, then the retry. The lifecycle
// names each step's event, so the retried event's `ProcessHandled` cannot stand in for the
// drained one's.
#[tokio::test]
async fn a_drained_completing_event_is_handled_then_completed() {
    let app = app().await.expecting_letters();
    let letter = failed_instance(&app).await;
    app.dispatch(CancelOrder {
        order_id: "o-1".into(),
        reason: "changed mind".into(),
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    let events = healed_retry(&app, &letter).await;
    let steps: Vec<(&str, &str)> = events
        .iter()
        .map(|event| {
            (
                event.event_type.as_str(),
                event.payload["eventType"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            ("ProcessStarted", "-"),
            ("ProcessHandled", "OrderPlaced"),
            ("ProcessFailed", "-"),
            ("ProcessEventParked", "OrderCancelled"),
            ("ProcessHandled", "ConfirmationSent"),
            ("ProcessHandled", "OrderCancelled"),
            ("ProcessCompleted", "-"),
        ]
    );
}
