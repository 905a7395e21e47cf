//! Changing an event while its streams live (issue 20): an event type renamed, a field renamed
//! and a field added, each read from what the first build stored through `renamed_from` and
//! typed upcasts, the store never rewritten; an event a newer build wrote is refused, naming it,
//! before a handler does anything outside, and its letter is retried by the newer build.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use crate::clinic;
use crate::support;

use bounda::prelude::*;
use clinic::{Clinic, v1, v2};

// spec 12, issue 20
#[tokio::test]
async fn events_the_first_build_stored_read_renamed_and_upcast_and_stay_as_stored() {
    let clinic = Clinic::new().await;
    let first = clinic.deploy(v1::build).await;
    let slot = clinic.in_hours(72);
    first
        .dispatch(v1::Book {
            appointment_id: "a-1".into(),
            slot,
        })
        .await
        .unwrap();
    first.run_until_idle().await.unwrap();
    // Booked by the first build, not yet seen by its process: the second build starts it.
    first
        .dispatch(v1::Book {
            appointment_id: "a-2".into(),
            slot,
        })
        .await
        .unwrap();

    let second = clinic.deploy(v2::build).await;
    second.run_until_idle().await.unwrap();
    let flow = second
        .app()
        .process_instance::<v2::AppointmentFlow>("a-2")
        .await
        .unwrap()
        .expect("the second build started a-2 from the event the first stored");
    assert_eq!(flow.state.missed_at, Deadline::at(slot + minutes(15)));

    // The reminder of a-1, armed by the first build, runs in the second: it folds the first
    // build's `SlotBooked` as an `AppointmentBooked` and decides a version-2 `ReminderSent`.
    second.advance(hours(49)).await.unwrap();
    assert_eq!(clinic.outbox.sent(), ["v2 reminds a-1", "v2 reminds a-2"]);
    let appointment = second.app().load::<v2::Appointment>("a-1").await.unwrap();
    assert_eq!(appointment.state.starts_at, Some(slot));
    assert_eq!(appointment.state.reminded_by.as_deref(), Some("sms"));

    // Read through the app, each event has today's name and shape; the store keeps the first
    // build's name, payload and version.
    let read = second.events_of::<v2::Appointment>("a-1").await.unwrap();
    assert_eq!(read.types(), ["AppointmentBooked", "ReminderSent"]);
    let booked = &read.0[0];
    assert_eq!(booked.metadata.schema_version, 2);
    assert_eq!(booked.payload["starts_at"], serde_json::json!(slot));
    let stored = clinic
        .store
        .read_stream("Appointment", "a-1")
        .await
        .unwrap();
    assert_eq!(stored[0].event_type, "SlotBooked");
    assert_eq!(stored[0].metadata.schema_version, 1);
    assert_eq!(stored[0].payload["slot"], serde_json::json!(slot));
    assert_eq!(stored[1].event_type, "ReminderSent");
    assert_eq!(
        stored[1].metadata.schema_version, 2,
        "written at this build's version"
    );
}

// issue 20
#[tokio::test]
async fn an_older_payload_that_does_not_read_is_refused_naming_the_event_and_its_version() {
    let clinic = Clinic::new().await;
    let first = clinic.deploy(v1::build).await;
    first
        .dispatch(v1::Book {
            appointment_id: "a-1".into(),
            slot: clinic.in_hours(72),
        })
        .await
        .unwrap();
    // A version-1 `SlotBooked` that lost its slot, as a hand-edited row might.
    let stored = clinic
        .store
        .read_stream("Appointment", "a-1")
        .await
        .unwrap();
    let mut broken = stored[0].clone();
    broken.payload = serde_json::json!({ "appointment_id": "a-1" });
    let error = v2::AppointmentEvent::read(&broken).unwrap_err();
    let text = error.to_string();
    for part in [
        "Appointment.SlotBooked",
        "version 1 payload",
        "missing field `slot`",
    ] {
        assert!(text.contains(part), "{part} in {text}");
    }
}

// issue 20
#[tokio::test]
async fn a_command_on_a_stream_a_newer_build_wrote_to_is_refused_and_appends_nothing() {
    let clinic = Clinic::new().await;
    let first = clinic.deploy(v1::build).await;
    first
        .dispatch(v1::Book {
            appointment_id: "a-1".into(),
            slot: clinic.in_hours(72),
        })
        .await
        .unwrap();
    let second = clinic.deploy(v2::build).await;
    second
        .dispatch(v2::Remind {
            appointment_id: "a-1".into(),
            channel: "email".into(),
        })
        .await
        .unwrap();

    // The first build is deployed again, by mistake: its `ReminderSent` is version 1.
    let error = first
        .dispatch(v1::Remind {
            appointment_id: "a-1".into(),
        })
        .await
        .unwrap_err();
    let text = error.to_string();
    for part in [
        "Appointment.ReminderSent",
        "stream `Appointment:a-1`",
        "version 2",
        "up to version 1",
    ] {
        assert!(text.contains(part), "{part} in {text}");
    }
    assert_eq!(
        clinic
            .store
            .read_stream("Appointment", "a-1")
            .await
            .unwrap()
            .len(),
        2,
        "nothing appended"
    );
}

// issue 20
#[tokio::test]
async fn a_deadline_on_a_stream_a_newer_build_wrote_to_fails_before_its_handler_and_the_newer_build_retries_it()
 {
    let clinic = Clinic::new().await;
    let first = clinic.deploy(v1::build).await.expecting_letters();
    first
        .dispatch(v1::Book {
            appointment_id: "a-1".into(),
            slot: clinic.in_hours(72),
        })
        .await
        .unwrap();
    first.run_until_idle().await.unwrap();
    // A newer build, deployed beside the first, reminds a-1 by email.
    let second = clinic.deploy(v2::build).await;
    second
        .dispatch(v2::Remind {
            appointment_id: "a-1".into(),
            channel: "email".into(),
        })
        .await
        .unwrap();

    // The first build's worker reaches a-1's reminder: the stream holds an event from the
    // future, so the step fails before its handler sends anything.
    first.advance(hours(49)).await.unwrap();
    assert_eq!(
        clinic.outbox.sent(),
        Vec::<String>::new(),
        "no reminder sent"
    );
    let letters = support::letters(&first).await;
    assert_eq!(letters.len(), 1, "{letters:#?}");
    let letter = &letters[0];
    assert!(
        letter.error_message.contains("written at version 2"),
        "{}",
        letter.error_message
    );
    assert_eq!(letter.attempts, 1, "not retried: waiting does not mend it");

    // The newer build retries the letter: its handler reads the stream and the reminder goes.
    second.app().dead_letters().retry(&letter.id).await.unwrap();
    assert_eq!(clinic.outbox.sent(), ["v2 reminds a-1"]);
    second.advance(hours(24)).await.unwrap();
    assert_eq!(
        clinic.outbox.sent(),
        ["v2 reminds a-1", "v2 calls a-1", "v2 no-show a-1"]
    );
}
