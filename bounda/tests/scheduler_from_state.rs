//! The scheduler re-derived from state (issue 20): an instance's one entry is armed at the
//! earliest pending deadline its stored state holds. A deploy that broke that (a deadline
//! renamed, then the rename undone) is seen by `pending_deadlines`, `explain` and `lag` with
//! the reason, and mended by the worker when it starts, or by the operator for one instance.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

mod support;
// Not in `support/mod.rs`: its builds register two processes of one name, which an app built
// without `only_listed` refuses.
#[path = "support/clinic.rs"]
mod clinic;

use std::sync::Arc;

use bounda::clock::{Clock, SimulatedClock};
use bounda::prelude::*;
use bounda::store::Store;
use bounda::{Rearm, hours};
use clinic::{Outbox, v1, v1_renamed};

/// The clinic's sequence up to the rollback: a-9 booked 48 hours ahead and reminded under the
/// first build; then a build that renamed `no_show` ran past a-9's no-show, found no such
/// deadline in the state it reads, and moved the entry to the timeout. Returns the store, the
/// clock and the outbox, the first build about to be deployed again.
async fn drifted_clinic() -> (Arc<dyn Store>, Arc<SimulatedClock>, Arc<Outbox>, Instant) {
    let store = support::database::store().await;
    let clock = Arc::new(SimulatedClock::default());
    let outbox = Arc::new(Outbox::default());
    let first = support::another_app(&store, &clock, |b| v1::build(b, &outbox)).await;
    let slot = clock.now() + hours(48);
    first
        .dispatch(v1::Book {
            appointment_id: "a-9".into(),
            slot,
        })
        .await
        .unwrap();
    first.advance(hours(25)).await.unwrap();
    assert_eq!(outbox.sent(), ["v1 reminds a-9"]);

    let renamed = support::another_app(&store, &clock, |b| v1_renamed::build(b, &outbox)).await;
    renamed.advance(hours(24)).await.unwrap();
    assert_eq!(
        outbox.sent(),
        ["v1 reminds a-9"],
        "the renamed build ran no no-show"
    );
    (store, clock, outbox, slot + minutes(15))
}

// issue 20: the clinic sequence
#[tokio::test]
async fn an_entry_a_deploy_moved_from_its_state_is_shown_and_rearmed_when_the_worker_starts() {
    let (store, clock, outbox, no_show) = drifted_clinic().await;
    let rolled_back = support::another_app(&store, &clock, |b| v1::build(b, &outbox)).await;
    let app = rolled_back.app();

    // Before the worker starts, every read says why the overdue no-show has not run.
    let pending = app.pending_deadlines().await.unwrap();
    let due = pending
        .iter()
        .find(|due| due.instance == "a-9" && due.field == "no_show")
        .expect("the state's no-show is listed");
    assert_eq!(due.at, no_show);
    let drift = due.drift.as_ref().expect("shown as drifted");
    assert_eq!(
        drift.entry_at,
        Some(clock.now() - hours(49) + bounda::days(30))
    );
    assert_eq!(
        drift.state_next.map(|next| (next.field, next.at)),
        Some(("no_show", no_show))
    );
    assert!(
        drift.to_string().contains("next deadline is `no_show`"),
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

    // The worker's first pass re-arms it from the state, and the no-show fires.
    rolled_back.run_until_idle().await.unwrap();
    assert_eq!(outbox.sent(), ["v1 reminds a-9", "v1 no-show a-9"]);
    let flow = app
        .process_instance::<v1::AppointmentFlow>("a-9")
        .await
        .unwrap()
        .unwrap();
    assert!(flow.state.missed);
    assert_eq!(app.lag().await.unwrap().drifted_entries, 0);
    assert_eq!(app.drifted(Rearm::All).await.unwrap(), []);
}

// issue 20
#[tokio::test]
async fn an_operator_rearms_one_instance_and_a_second_rearm_finds_nothing() {
    let (store, clock, outbox, no_show) = drifted_clinic().await;
    let rolled_back = support::another_app(&store, &clock, |b| v1::build(b, &outbox)).await;
    let app = rolled_back.app();
    let rearmed = app
        .rearm(Rearm::Instance("AppointmentFlow", "a-9"))
        .await
        .unwrap();
    assert_eq!(rearmed.len(), 1);
    let entry = store
        .scheduled_of_type("bounda.ProcessDeadline")
        .await
        .unwrap();
    assert_eq!(entry.len(), 1);
    assert_eq!(entry[0].execute_at, no_show, "armed at the state's no-show");
    assert_eq!(app.rearm(Rearm::All).await.unwrap(), []);
    assert!(matches!(
        app.rearm(Rearm::Process("Nope")).await,
        Err(bounda::Error::NotFound { .. })
    ));
}
