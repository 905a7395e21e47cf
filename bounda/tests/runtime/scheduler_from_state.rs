//! A process state changed under live instances, and the scheduler re-derived from state
//! (issue 20). A build whose state no longer reads a stored deadline is refused before it runs
//! anything, naming the instances; rolled back, the deadline runs. A state migrated to a new
//! version may add a deadline earlier than the instance's entry. `pending_deadlines`,
//! `explain` and `lag` show such an entry with the reason, and the worker re-arms it when it
//! starts, as the operator can for one instance.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use crate::clinic;

use bounda::prelude::*;
use bounda::{Rearm, hours};
use clinic::{Clinic, v1, v1_renamed, v2};

/// A clinic where a-9 is booked 48 hours ahead by the first build and reminded: its entry
/// waits at the no-show, 15 minutes after the slot. Returns it with the slot.
async fn reminded() -> (Clinic, Instant) {
    let clinic = Clinic::new().await;
    let slot = clinic.in_hours(48);
    let first = clinic.deploy(v1::build).await;
    first
        .dispatch(v1::Book {
            appointment_id: "a-9".into(),
            slot,
        })
        .await
        .unwrap();
    first.advance(hours(25)).await.unwrap();
    assert_eq!(clinic.outbox.sent(), ["v1 reminds a-9"]);
    (clinic, slot)
}

/// The moments `clinic`'s scheduler holds for process deadlines, soonest first.
async fn armed(clinic: &Clinic) -> Vec<Instant> {
    let entries = clinic
        .store
        .scheduled_of_type("bounda.ProcessDeadline")
        .await
        .unwrap();
    entries.iter().map(|entry| entry.execute_at).collect()
}

// issue 20: the clinic's sequence, a deadline renamed without an alias and the rename undone
#[tokio::test]
async fn a_build_that_would_lose_a_stored_deadline_is_refused_and_the_rollback_runs_it() {
    let (clinic, slot) = reminded().await;
    let no_show = slot + minutes(15);

    let renamed = clinic.deploy(v1_renamed::build).await;
    let error = renamed.advance(hours(24)).await.unwrap_err();
    let text = error.to_string();
    for part in [
        "`AppointmentFlow`",
        "`no_show`",
        "a-9 at",
        "nothing has run",
    ] {
        assert!(text.contains(part), "{part} in {text}");
    }
    assert_eq!(clinic.outbox.sent(), ["v1 reminds a-9"], "nothing ran");
    assert_eq!(
        armed(&clinic).await,
        [no_show],
        "the entry is where the state says"
    );

    let rolled_back = clinic.deploy(v1::build).await;
    rolled_back.advance(hours(24)).await.unwrap();
    assert_eq!(clinic.outbox.sent(), ["v1 reminds a-9", "v1 no-show a-9"]);
    let flow = rolled_back
        .app()
        .process_instance::<v1::AppointmentFlow>("a-9")
        .await
        .unwrap()
        .unwrap();
    assert!(flow.state.missed);
}

// issue 20
#[tokio::test]
async fn a_deadline_a_migration_adds_before_the_entry_is_shown_and_rearmed_when_the_worker_starts()
{
    let (clinic, slot) = reminded().await;
    let (call, no_show) = (slot - hours(2), slot + minutes(15));
    let second = clinic.deploy(v2::build).await;
    let app = second.app();

    // Before its worker starts, every read says why the call would not run at its moment.
    let pending = app.pending_deadlines().await.unwrap();
    let due = pending
        .iter()
        .find(|due| due.instance == "a-9" && due.field == "call")
        .expect("the migrated state's call is listed");
    assert_eq!(due.at, call);
    let drift = due.drift.as_ref().expect("shown as drifted");
    assert_eq!(drift.entry_at, Some(no_show));
    assert_eq!(
        drift.state_next.map(|next| (next.field, next.at)),
        Some(("call", call))
    );
    assert!(
        drift.to_string().contains("next deadline is `call`"),
        "{drift}"
    );
    assert_eq!(app.lag().await.unwrap().drifted_entries, 1);
    let story = app
        .explain_named("AppointmentFlow", "a-9")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(story.drift.as_ref(), Some(drift));
    assert_eq!(
        app.drifted(Rearm::All).await.unwrap(),
        std::slice::from_ref(drift)
    );

    // The worker's first pass re-arms the entry from the migrated state.
    second.run_until_idle().await.unwrap();
    assert_eq!(armed(&clinic).await, [call]);
    assert_eq!(app.lag().await.unwrap().drifted_entries, 0);
    second.advance(hours(21)).await.unwrap();
    assert_eq!(clinic.outbox.sent(), ["v1 reminds a-9", "v2 calls a-9"]);
    second.advance(hours(3)).await.unwrap();
    assert_eq!(
        clinic.outbox.sent(),
        ["v1 reminds a-9", "v2 calls a-9", "v2 no-show a-9"]
    );
    let flow = app
        .process_instance::<v2::AppointmentFlow>("a-9")
        .await
        .unwrap()
        .unwrap();
    assert!(flow.state.missed);
}

// issue 20
#[tokio::test]
async fn an_operator_rearms_one_instance_and_a_second_rearm_finds_nothing() {
    let (clinic, slot) = reminded().await;
    let second = clinic.deploy(v2::build).await;
    let app = second.app();
    let rearmed = app
        .rearm(Rearm::Instance("AppointmentFlow", "a-9"))
        .await
        .unwrap();
    assert_eq!(rearmed.len(), 1);
    assert_eq!(armed(&clinic).await, [slot - hours(2)]);
    assert_eq!(app.rearm(Rearm::All).await.unwrap(), []);
    assert!(matches!(
        app.rearm(Rearm::Process("Nope")).await,
        Err(bounda::Error::NotFound { .. })
    ));
}

// issue 20
#[tokio::test]
async fn a_state_a_newer_build_wrote_is_refused_naming_both_versions() {
    let (clinic, _) = reminded().await;
    // The second build steps a-9 (its state is written at version 2); then the first is
    // deployed again.
    let second = clinic.deploy(v2::build).await;
    second.advance(hours(21)).await.unwrap();
    let first = clinic.deploy(v1::build).await;
    let error = first
        .app()
        .process_instance::<v1::AppointmentFlow>("a-9")
        .await
        .unwrap_err();
    let text = error.to_string();
    for part in ["`AppointmentFlow`", "version 2", "up to version 1"] {
        assert!(text.contains(part), "{part} in {text}");
    }
}

// Issue 44: a deadline a migration renamed (`no_show` to `missed_at`) or added (`call`) was set
// by no step the history shows under its name; its run, and all that follows from it, keep the
// instance's correlation (that of the booking), never one made of the stream's name.
#[tokio::test]
async fn a_deadline_a_migration_renamed_keeps_its_instances_correlation() {
    let (clinic, _) = reminded().await;
    let booked = clinic
        .store
        .read_stream("Appointment", "a-9")
        .await
        .unwrap()[0]
        .metadata
        .correlation_id
        .clone();
    let second = clinic.deploy(v2::build).await;
    second.run_until_idle().await.unwrap();
    second.advance(hours(24)).await.unwrap();
    assert_eq!(
        clinic.outbox.sent(),
        ["v1 reminds a-9", "v2 calls a-9", "v2 no-show a-9"]
    );
    let stream = clinic
        .store
        .read_stream("process:AppointmentFlow", "a-9")
        .await
        .unwrap();
    let reached: Vec<_> = stream
        .iter()
        .filter(|event| event.event_type == "ProcessDeadlineReached")
        .map(|event| {
            (
                event.payload["field"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                event.metadata.correlation_id.clone(),
            )
        })
        .collect();
    assert_eq!(
        reached,
        [
            ("reminder".to_owned(), booked.clone()),
            ("call".to_owned(), booked.clone()),
            ("missed_at".to_owned(), booked.clone()),
        ]
    );
    let all = clinic.store.read_all(0, 1_000).await.unwrap();
    let cut: Vec<_> = all
        .iter()
        .filter(|event| event.metadata.correlation_id.starts_with("process:"))
        .map(|event| &event.event_type)
        .collect();
    assert!(cut.is_empty(), "events in a stream's name: {cut:?}");
}

// Issue 44: `explain` tells the first step after a deploy that migrated the state as such: the
// migration's own changes marked (`no_show` gone, `missed_at` and `call` added), and the step's
// changes told against the migrated state, so the renamed deadline is not told as set by it.
#[tokio::test]
async fn explain_marks_what_a_migration_changed_apart_from_the_steps_own_changes() {
    let (clinic, slot) = reminded().await;
    let second = clinic.deploy(v2::build).await;
    second.run_until_idle().await.unwrap();
    second.advance(hours(21)).await.unwrap();
    let story = second
        .app()
        .explain_named("AppointmentFlow", "a-9")
        .await
        .unwrap()
        .unwrap();
    let migrated: Vec<_> = story
        .steps
        .iter()
        .filter_map(|s| s.migrated.as_ref())
        .collect();
    let [migrated] = migrated.as_slice() else {
        panic!("one step read a migrated state: {:?}", story.steps);
    };
    assert_eq!((migrated.from, migrated.to), (1, 2));
    let fields: Vec<&str> = migrated.changes.iter().map(|c| c.field.as_str()).collect();
    for field in ["call", "missed_at", "no_show"] {
        assert!(fields.contains(&field), "{field} in {fields:?}");
    }
    let step = story
        .steps
        .iter()
        .find(|s| s.migrated.is_some())
        .expect("the step");
    assert!(
        step.deadlines.iter().all(|d| d.field != "missed_at"),
        "the migrated no-show is not told as set by the step: {:?}",
        step.deadlines
    );
    assert_eq!(
        step.deadlines
            .iter()
            .find(|d| d.field == "call")
            .map(|d| (d.from, d.to)),
        Some((Some(slot - hours(2)), None)),
        "the call the step ran is told as cleared"
    );
    let lines = step.details(|at| format!("{at:?}"));
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with("migrated from version 1 to 2: no_show: ")),
        "{lines:?}"
    );
}
