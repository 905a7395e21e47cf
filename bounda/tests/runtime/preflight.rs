//! A check before a deploy (issue 20): `App::preflight` and the operator's `check` read every
//! stored event and open instance through a build, and match every scheduler entry with what
//! runs it, reporting what would fail, changing nothing.

#![cfg(feature = "cli")]
#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use crate::clinic;
use crate::support;

use std::process::ExitCode;

use bounda::cli::{CheckArgs, Operator};
use bounda::prelude::*;
use bounda::{AppBuilder, DispatchOptions, StateProblem, hours};
use clinic::{Clinic, v1, v1_renamed, v2};

/// A clinic whose first build booked and reminded a-1 and a-9, and scheduled a-9's reminder
/// command for later by hand.
async fn first_builds_store() -> Clinic {
    let clinic = Clinic::new().await;
    let first = clinic.deploy(v1::build).await;
    for id in ["a-1", "a-9"] {
        first
            .dispatch(v1::Book {
                appointment_id: id.into(),
                slot: clinic.in_hours(48),
            })
            .await
            .unwrap();
    }
    first.advance(hours(25)).await.unwrap();
    first
        .dispatch_with(
            v1::Remind {
                appointment_id: "a-9".into(),
            },
            DispatchOptions::default().delay(hours(2)),
        )
        .await
        .unwrap();
    clinic
}

async fn check(
    clinic: &Clinic,
    build: impl FnOnce(AppBuilder) -> AppBuilder,
) -> (TestApp, bounda::Preflight) {
    let app = support::another_app(&clinic.store, &clinic.clock, build).await;
    let report = app.app().preflight().await.unwrap();
    (app, report)
}

// issue 20
#[tokio::test]
async fn the_next_build_reads_everything_the_first_stored_and_names_the_entries_it_rearms() {
    let clinic = first_builds_store().await;
    let (store, outbox) = (&clinic.store, &clinic.outbox);
    let before = store.read_all(0, 1_000).await.unwrap();
    let (app, report) = check(&clinic, |b| v2::build(b, outbox)).await;
    // Issue 40: entries that disagree with their state fail the check until re-armed.
    assert_eq!(report.problems(), 2, "{report:#?}");
    assert!(!report.passes());
    assert_eq!(report.events, before.len() as u64);
    assert_eq!(report.instances, 2);
    let drifted: Vec<&str> = report
        .drifted_entries
        .iter()
        .map(|drift| drift.instance.as_str())
        .collect();
    assert_eq!(drifted, ["a-1", "a-9"], "the migration's calls come first");
    assert_eq!(
        store.read_all(0, 1_000).await.unwrap(),
        before,
        "nothing written"
    );

    let (code, text) =
        support::operator(app.app(), Operator::Check(CheckArgs { json: false })).await;
    assert_eq!(code, ExitCode::from(3), "{text}");
    assert!(
        text.contains("`rearm` re-arms them from it")
            && text.contains("AppointmentFlow:a-9: its scheduler entry is armed at")
            && text.contains("check failed: 2 problem(s)"),
        "{text}"
    );
    app.app().rearm(bounda::Rearm::All).await.unwrap();
    let (code, text) =
        support::operator(app.app(), Operator::Check(CheckArgs { json: false })).await;
    assert_eq!(code, ExitCode::SUCCESS, "{text}");
    assert!(text.contains("check passed"), "{text}");
}

// Issue 40: an entry whose due moment was moved by hand (to 2099) while it still carries the
// state's moment is drifted: it would not run before 2099. `check` fails naming when it runs,
// `deadlines` and `explain` mark it, and `rearm` puts it back at the state's moment.
#[tokio::test]
async fn an_entry_whose_due_moment_moved_is_drifted() {
    let app = support::order_payments().await;
    app.dispatch(support::storefront::place("o-1"))
        .await
        .unwrap();
    app.run_until_idle().await.unwrap();
    let store = app.app().store();
    let mut entry = store
        .scheduled_of_type("bounda.ProcessDeadline")
        .await
        .unwrap()
        .pop()
        .unwrap();
    let due = entry.execute_at;
    entry.execute_at = Instant::parse("2099-01-01T00:00:00Z").unwrap();
    let moved = bounda::store::WriteSet {
        schedule: vec![entry.clone()],
        ..bounda::store::WriteSet::default()
    };
    store.commit(&moved).await.unwrap();

    let report = app.app().preflight().await.unwrap();
    assert_eq!(report.drifted_entries.len(), 1, "{report:#?}");
    let (code, text) =
        support::operator(app.app(), Operator::Check(CheckArgs { json: false })).await;
    assert_eq!(code, ExitCode::from(3), "{text}");
    assert!(
        text.contains(&format!(
            "its scheduler entry is armed at {due} but runs at 2099-01-01T00:00:00.000Z"
        )),
        "{text}"
    );
    let (_, deadlines) = support::operator(
        app.app(),
        Operator::Deadlines(bounda::cli::DeadlineArgs::default()),
    )
    .await;
    assert!(
        deadlines.contains("entry disagrees") && deadlines.contains("runs at 2099"),
        "{deadlines}"
    );
    let explain = bounda::cli::ExplainArgs {
        process: "OrderPayment".into(),
        id: "o-1".into(),
        json: false,
    };
    let (_, story) = support::operator(app.app(), Operator::Explain(explain)).await;
    assert!(
        story.contains("scheduler: its scheduler entry is armed at"),
        "{story}"
    );
    assert!(story.contains("runs at 2099"), "{story}");

    let rearmed = app.app().rearm(bounda::Rearm::All).await.unwrap();
    assert_eq!(rearmed.len(), 1);
    let entry = store.scheduled(&entry.dedupe_key).await.unwrap().unwrap();
    assert_eq!(entry.execute_at, due, "back at the state's moment");
    assert!(app.app().preflight().await.unwrap().passes());
}

// issue 20
#[tokio::test]
async fn a_build_that_drops_a_stored_deadline_and_a_command_fails_the_check_naming_them() {
    let clinic = first_builds_store().await;
    let outbox = &clinic.outbox;
    // The build that renamed the no-show without an alias.
    let (app, report) = check(&clinic, |b| v1_renamed::build(b, outbox)).await;
    assert!(!report.passes());
    let lost: Vec<(&str, &str)> = report
        .lost_moments
        .iter()
        .map(|lost| (lost.instance.as_str(), lost.field.as_str()))
        .collect();
    assert_eq!(lost, [("a-1", "no_show"), ("a-9", "no_show")]);
    assert!(
        report
            .unreadable_states
            .iter()
            .all(|state| state.problem == StateProblem::Dropped(vec!["no_show".into()])),
        "{report:#?}"
    );
    assert_eq!(report.unreadable_events, []);
    assert_eq!(report.orphan_entries, []);

    let json = support::operator(app.app(), Operator::Check(CheckArgs { json: true })).await;
    assert_eq!(json.0, ExitCode::from(3));
    let json: serde_json::Value = serde_json::from_str(&json.1).unwrap();
    assert_eq!(json["lostMoments"][0]["field"], "no_show");
}

// issue 20
#[tokio::test]
async fn an_older_build_on_a_newer_store_fails_the_check_on_its_events_states_and_entries() {
    let clinic = first_builds_store().await;
    let outbox = &clinic.outbox;
    let second = clinic.deploy(v2::build).await;
    second.advance(hours(1)).await.unwrap();
    second
        .dispatch(v2::Book {
            appointment_id: "a-2".into(),
            starts_at: clinic.in_hours(72),
        })
        .await
        .unwrap();
    second
        .dispatch(v2::Remind {
            appointment_id: "a-2".into(),
            channel: "email".into(),
        })
        .await
        .unwrap();
    second.run_until_idle().await.unwrap();

    // The first build, deployed again, with its commands but not its process.
    let (app, report) = check(&clinic, |b| b.command::<v1::Book>().port(outbox.clone())).await;
    assert!(!report.passes());
    let events: Vec<(&str, u64)> = report
        .unreadable_events
        .iter()
        .map(|problem| (problem.event_type.as_str(), problem.count))
        .collect();
    assert_eq!(events, [("AppointmentBooked", 1), ("ReminderSent", 1)]);
    let reminder = &report.unreadable_events[1];
    assert!(
        reminder.reason.contains("up to version 1"),
        "{}",
        reminder.reason
    );
    assert_eq!(reminder.stream, "Appointment:a-2");
    let orphans: Vec<&str> = report
        .orphan_entries
        .iter()
        .map(|orphan| orphan.runs.as_str())
        .collect();
    assert_eq!(orphans, ["command `Remind`", "process `AppointmentFlow`"]);

    let (code, text) =
        support::operator(app.app(), Operator::Check(CheckArgs { json: false })).await;
    assert_eq!(code, ExitCode::from(3));
    for part in [
        "events this build does not read:",
        "Appointment.ReminderSent: 1 event(s)",
        "scheduler entries nothing in this build runs:",
        "check failed",
    ] {
        assert!(text.contains(part), "{part} in {text}");
    }
}

// issue 20: an event of another aggregate a process takes is read through its shapes, even in
// an app with no command of that aggregate
#[tokio::test]
async fn a_process_reads_the_events_of_another_aggregate_it_takes() {
    use support::storefront::OrderPayment;
    let app = TestApp::new(
        bounda::App::builder_shared(support::database::store().await)
            .only_listed()
            .process::<OrderPayment>(),
    )
    .await
    .unwrap();
    let settled = bounda::store::WriteSet {
        appends: vec![bounda::store::Append {
            aggregate_type: "Payment".into(),
            aggregate_id: "p-1".into(),
            expected_version: 0,
            events: vec![bounda::store::NewEvent {
                id: "settled".into(),
                event_type: "PaymentSettled".into(),
                payload: serde_json::json!({ "payment_id": "p-1", "order_id": "o-1" }),
                timestamp: app.now(),
                metadata: bounda::store::Metadata::of_command("c-1"),
            }],
        }],
        ..Default::default()
    };
    app.app().store().commit(&settled).await.unwrap();
    let report = app.app().preflight().await.unwrap();
    assert_eq!(
        report.unknown_aggregates,
        Vec::<String>::new(),
        "{report:#?}"
    );
    assert!(report.passes(), "{report:#?}");
}
