//! A deploy previewed on production's own data (issue 20): a store copied through the `Store`
//! trait into a SQLite store keeps every record as it was, and a build run on a copy on
//! simulated time reports what it would do; two builds' reports compare.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use crate::clinic;

use std::sync::Arc;

use bounda::prelude::*;
use bounda::preview::{self, Ending, PortCalls, Report};
use bounda::store::{
    CopyMark, DeadLetter, InboxEntry, InboxMark, InboxOutcome, LetterFilter, LetterKind,
    LetterStatus, ScheduledEntry, Store, WriteSet,
};
use bounda::{AppBuilder, days, hours, minutes};
use bounda_sqlite::SqliteStore;
use clinic::{Clinic, Outbox, v1, v1_renamed, v2};

/// A clinic whose first build booked a-1 (slot in 48 h), a-2 (in 30 h) and a-3 (in 10 days),
/// then ran 7 hours: a-2's reminder has gone out.
async fn live_clinic() -> Clinic {
    let clinic = Clinic::new().await;
    let first = clinic.deploy(v1::build).await;
    for (id, hours_ahead) in [("a-1", 48), ("a-2", 30), ("a-3", 240)] {
        first
            .dispatch(v1::Book {
                appointment_id: id.into(),
                slot: clinic.in_hours(hours_ahead),
            })
            .await
            .unwrap();
    }
    first.advance(hours(7)).await.unwrap();
    assert_eq!(clinic.outbox.sent(), ["v1 reminds a-2"]);
    clinic
}

/// A copy of `source` in memory, taken at `now`.
async fn copy_of(source: &dyn Store, now: Instant) -> Arc<dyn Store> {
    let copy = SqliteStore::in_memory().unwrap();
    bounda::store::copy(source, &copy, "the clinic", now)
        .await
        .unwrap();
    Arc::new(copy)
}

/// The copies `store` keeps, as the SQLite and PostgreSQL stores do.
fn copies(store: &dyn Store) -> &dyn bounda::store::CopyStore {
    store.capabilities().copies().unwrap()
}

/// The mark of a copy `store` holds, if it is one.
async fn mark_of(store: &dyn Store) -> Option<CopyMark> {
    copies(store).copied().await.unwrap()
}

/// Every inbox entry of `store`, read a page at a time.
async fn inbox(store: &dyn Store) -> Vec<InboxEntry> {
    let mut all: Vec<InboxEntry> = Vec::new();
    loop {
        let after = all
            .last()
            .map(|e| (e.handler.as_str(), e.event_id.as_str()));
        let page = copies(store).inbox_page(after, 2).await.unwrap();
        if page.is_empty() {
            return all;
        }
        all.extend(page);
    }
}

/// Every scheduler entry of `store`, by type and key.
async fn scheduled(store: &dyn Store) -> Vec<ScheduledEntry> {
    let mut all = Vec::new();
    for (command_type, _) in store.scheduled_types().await.unwrap() {
        all.extend(
            store
                .scheduled_page(&command_type, None, usize::MAX)
                .await
                .unwrap(),
        );
    }
    all
}

/// `build`'s app on a scratch copy of `kept`, its outbox `outbox`: what a preview runs.
async fn on_scratch(
    kept: &dyn Store,
    build: fn(AppBuilder, &Arc<Outbox>) -> AppBuilder,
    outbox: &Arc<Outbox>,
) -> AppBuilder {
    let scratch = copy_of(kept, Instant::parse("2000-01-01T00:00:00Z").unwrap()).await;
    build(App::builder_shared(scratch).only_listed(), outbox)
}

#[tokio::test]
async fn a_copy_holds_every_record_as_its_source_held_it_without_claims() {
    let clinic = live_clinic().await;
    let source = clinic.store.as_ref();
    let now = bounda::clock::Clock::now(&*clinic.clock);
    // A failed reaction with its retry ahead, a dead letter, and an entry a worker holds.
    source
        .claim_inbox("desk.notify", "e-9", "claim-1", now, minutes(1))
        .await
        .unwrap();
    let failed = WriteSet {
        inbox: Some(InboxMark {
            handler: "desk.notify".into(),
            event_id: "e-9".into(),
            claim_id: "claim-1".into(),
            outcome: InboxOutcome::Failed {
                retry_at: now + minutes(5),
                error: "the desk is closed".into(),
                failed_at: now,
            },
        }),
        dead_letters: vec![DeadLetter {
            id: "letter-1".into(),
            kind: LetterKind::Policy,
            handler: "desk.notify".into(),
            event_id: Some("e-8".into()),
            event_type: Some("SlotBooked".into()),
            aggregate_type: Some("Appointment".into()),
            aggregate_id: Some("a-8".into()),
            error_type: "terminal".into(),
            error_message: "no such desk".into(),
            error_stack: Some("no such desk".into()),
            attempts: 3,
            first_failed_at: now - minutes(3),
            last_failed_at: now,
            status: LetterStatus::Failed,
            payload: None,
        }],
        ..WriteSet::default()
    };
    source.commit(&failed).await.unwrap();
    let held = source
        .claim_due("worker-1", now + days(400), minutes(1), 1)
        .await
        .unwrap();
    assert_eq!(held.len(), 1, "one entry is held by a worker");

    let copy = copy_of(source, now).await;

    let head = source.head().await.unwrap();
    assert_eq!(
        copy.read_all(0, 10_000).await.unwrap(),
        source.read_all(0, 10_000).await.unwrap(),
        "every event at its position and version, with its id, time and metadata"
    );
    assert_eq!(copy.head().await.unwrap(), head);
    assert_eq!(
        copy.checkpoints().await.unwrap(),
        source.checkpoints().await.unwrap()
    );
    let source_inbox = inbox(source).await;
    assert!(source_inbox.len() > 1, "the source has an inbox to copy");
    assert_eq!(inbox(copy.as_ref()).await, source_inbox);
    let unclaimed: Vec<ScheduledEntry> = scheduled(source)
        .await
        .into_iter()
        .map(|entry| ScheduledEntry {
            claim_id: None,
            claimed_at: None,
            ..entry
        })
        .collect();
    assert_eq!(unclaimed.len(), 3, "an entry per open appointment");
    assert_eq!(
        scheduled(copy.as_ref()).await,
        unclaimed,
        "every entry with its moment, attempts and revision; the worker's claim left behind"
    );
    assert_eq!(
        copy.dead_letters(&LetterFilter::default()).await.unwrap(),
        source.dead_letters(&LetterFilter::default()).await.unwrap()
    );
    let mark = CopyMark {
        copied_at: now,
        source: "the clinic".into(),
        head,
    };
    assert_eq!(mark_of(copy.as_ref()).await, Some(mark.clone()));
    assert_eq!(mark_of(source).await, None);

    // A copy of the copy is the same moment of the same source.
    let again = copy_of(copy.as_ref(), now + days(3)).await;
    assert_eq!(mark_of(again.as_ref()).await, Some(mark));
    // A transfer moves the same records for good, unmarked.
    let moved = SqliteStore::in_memory().unwrap();
    let transferred = bounda::store::transfer(source, &moved).await.unwrap();
    assert_eq!(mark_of(&moved).await, None);
    assert_eq!(transferred.events, head);
    assert_eq!(
        moved.read_all(0, 10_000).await.unwrap(),
        source.read_all(0, 10_000).await.unwrap()
    );
    assert_eq!(inbox(&moved).await, source_inbox);
    // A target that holds anything is refused, and so is a store that keeps no copies, before
    // anything is written.
    let refused = bounda::store::copy(source, copy.as_ref(), "the clinic", now)
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("not empty"), "{refused}");
    let core_only = bounda::testing::CoreOnly(Arc::new(SqliteStore::in_memory().unwrap()));
    let refused = bounda::store::copy(source, &core_only, "the clinic", now)
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("keeps no copies"), "{refused}");
    assert_eq!(core_only.head().await.unwrap(), 0);
    let refused = bounda::store::copy(
        &core_only,
        &SqliteStore::in_memory().unwrap(),
        "the clinic",
        now,
    )
    .await
    .unwrap_err();
    assert!(refused.to_string().contains("keeps no copies"), "{refused}");
}

#[tokio::test]
async fn a_preview_reports_what_a_build_would_do_on_the_copy_and_writes_nothing_else() {
    let clinic = live_clinic().await;
    let copied_at = bounda::clock::Clock::now(&*clinic.clock);
    let kept = copy_of(clinic.store.as_ref(), copied_at).await;
    let head = clinic.store.head().await.unwrap();
    let outbox = Arc::new(Outbox::default());

    let report = preview::preview(
        on_scratch(kept.as_ref(), v1::build, &outbox).await,
        days(30),
    )
    .await
    .unwrap();

    assert_eq!(
        (report.from, report.until),
        (copied_at, copied_at + days(30))
    );
    let booked = copied_at - hours(7);
    let fired: Vec<(&str, &str, Instant)> = report
        .fired
        .iter()
        .map(|f| (f.instance.as_str(), f.field.as_str(), f.due))
        .collect();
    assert_eq!(
        fired,
        [
            ("a-1", "reminder", booked + hours(24)),
            ("a-2", "no_show", booked + hours(30) + minutes(15)),
            ("a-1", "no_show", booked + hours(48) + minutes(15)),
            ("a-3", "reminder", booked + hours(216)),
            ("a-3", "no_show", booked + hours(240) + minutes(15)),
            ("a-1", "timeout", booked + days(30)),
            ("a-2", "timeout", booked + days(30)),
            ("a-3", "timeout", booked + days(30)),
        ],
        "each deadline once, at its moment, in order"
    );
    assert!(report.fired.iter().all(|f| f.ran == f.due));
    let reminded: Vec<(&str, &str, Vec<String>, &str)> = report
        .commands
        .iter()
        .map(|c| {
            (
                c.aggregate.as_str(),
                c.id.as_str(),
                c.events.clone(),
                c.cause.as_str(),
            )
        })
        .collect();
    assert_eq!(
        reminded,
        [
            (
                "Appointment",
                "a-1",
                vec!["ReminderSent".to_owned()],
                "AppointmentFlow.reminder"
            ),
            (
                "Appointment",
                "a-3",
                vec!["ReminderSent".to_owned()],
                "AppointmentFlow.reminder"
            ),
        ]
    );
    assert_eq!(
        report.events.get("Appointment.ReminderSent"),
        Some(&2),
        "{:?}",
        report.events
    );
    assert!(
        report.ended.iter().all(|e| e.how == Ending::TimedOut) && report.ended.len() == 3,
        "{:?}",
        report.ended
    );
    let flow = &report.processes["AppointmentFlow"];
    assert_eq!(
        (
            flow.fired["reminder"],
            flow.fired["no_show"],
            flow.fired["timeout"]
        ),
        (2, 3, 3)
    );
    assert_eq!((flow.timed_out, flow.commands, flow.started), (3, 2, 0));
    let total = &report.total;
    assert_eq!(
        (
            total.deadlines_fired,
            total.commands,
            total.events,
            total.letters
        ),
        (8, 2, 2, 0)
    );
    assert_eq!(total.instances_ended, 3);
    assert!(report.passes());
    // What the handlers did outside went to the preview's double, and nowhere else was
    // written: not production, not the kept copy.
    assert_eq!(
        outbox.sent(),
        [
            "v1 reminds a-1",
            "v1 no-show a-2",
            "v1 no-show a-1",
            "v1 reminds a-3",
            "v1 no-show a-3"
        ]
    );
    assert_eq!(clinic.outbox.sent(), ["v1 reminds a-2"]);
    assert_eq!(clinic.store.head().await.unwrap(), head);
    assert_eq!(kept.head().await.unwrap(), head);

    // The report as JSON reads back as it was: what `--against` compares with.
    let json = serde_json::to_string(&report).unwrap();
    assert_eq!(serde_json::from_str::<Report>(&json).unwrap(), report);
}

#[tokio::test]
async fn two_builds_previews_on_one_copy_say_what_the_deploy_changes() {
    let clinic = live_clinic().await;
    let copied_at = bounda::clock::Clock::now(&*clinic.clock);
    let kept = copy_of(clinic.store.as_ref(), copied_at).await;
    // Each build's outbox records what it sends in its preview's port calls.
    let run = |build: fn(AppBuilder, &Arc<Outbox>) -> AppBuilder| {
        let kept = kept.clone();
        async move {
            let calls = PortCalls::default();
            let outbox = Arc::new(Outbox::recording(calls.clone()));
            let builder = on_scratch(kept.as_ref(), build, &outbox).await.port(calls);
            preview::preview(builder, days(30)).await.unwrap()
        }
    };
    let old = run(v1::build).await;
    let new = run(v2::build).await;
    let sent: Vec<&serde_json::Value> = old.calls.iter().map(|c| &c.detail).collect();
    assert_eq!(
        sent,
        [
            "v1 reminds a-1",
            "v1 no-show a-2",
            "v1 no-show a-1",
            "v1 reminds a-3",
            "v1 no-show a-3"
        ],
        "what the doubles were asked, in order"
    );
    assert_eq!(old.total.port_calls, 5);

    // The second build migrates each state: its no-show is `missed_at`, and a call two hours
    // before the slot. a-2's call comes before its no-show, the moment its entry holds, so its
    // entry is re-armed from the migrated state before the run; the others' reminders still
    // come first.
    assert_eq!(new.check.drifted_entries, 1, "{:?}", new.check);
    assert!(new.passes(), "{new:?}");
    let calls: Vec<(&str, Instant)> = new
        .fired
        .iter()
        .filter(|f| f.field == "call")
        .map(|f| (f.instance.as_str(), f.due))
        .collect();
    let booked = copied_at - hours(7);
    assert_eq!(
        calls,
        [
            ("a-2", booked + hours(28)),
            ("a-1", booked + hours(46)),
            ("a-3", booked + hours(238)),
        ]
    );
    assert_eq!(
        preview::changes(&old, &new),
        [
            "1 scheduler entries disagree with their state (before: 0)",
            "3 AppointmentFlow.no_show fire as AppointmentFlow.missed_at, renamed, at the same moments",
            "3 AppointmentFlow.call newly fire",
            "port calls Outbox.send: 5 → 8",
        ]
    );
    assert!(
        preview::changes(&old, &old).is_empty(),
        "a build compared with itself changes nothing"
    );
}

#[tokio::test]
async fn a_moment_moved_by_a_build_is_told_by_how_much() {
    let clinic = live_clinic().await;
    let copied_at = bounda::clock::Clock::now(&*clinic.clock);
    let kept = copy_of(clinic.store.as_ref(), copied_at).await;
    let outbox = Arc::new(Outbox::default());
    let old = preview::preview(
        on_scratch(kept.as_ref(), v1::build, &outbox).await,
        days(30),
    )
    .await
    .unwrap();
    let mut earlier = old.clone();
    for firing in earlier.fired.iter_mut().filter(|f| f.field == "reminder") {
        firing.due = firing.due - hours(24);
    }
    earlier.letters.push(preview::Letter {
        id: "l-1".into(),
        handler: "AppointmentFlow".into(),
        aggregate_id: Some("a-1".into()),
        error: "boom".into(),
    });
    assert_eq!(
        preview::changes(&old, &earlier),
        [
            "2 AppointmentFlow.reminder fire 1d earlier",
            "letters of AppointmentFlow: 0 → 1",
        ]
    );
    // A deadline that fires twice in one run pairs each firing with its like in the other.
    let mut twice = old.clone();
    let mut again = twice.fired[0].clone();
    again.due = again.due + days(1);
    twice.fired.push(again);
    assert!(preview::changes(&twice, &twice).is_empty());
    assert_eq!(
        preview::changes(&old, &twice),
        ["1 AppointmentFlow.reminder newly fire"]
    );
    // A report another build wrote without today's fields reads, those fields empty.
    let older: Report = serde_json::from_value(serde_json::json!({
        "from": old.from,
        "until": old.until,
        "total": { "deadlinesFired": 8 },
        "fired": old.fired,
    }))
    .unwrap();
    assert_eq!(older.total.deadlines_fired, 8);
    assert!(older.calls.is_empty() && older.letters.is_empty());
}

#[tokio::test]
async fn a_runner_refuses_a_copy_whose_real_ports_would_repeat_productions_work() {
    let clinic = live_clinic().await;
    let now = bounda::clock::Clock::now(&*clinic.clock);
    let copy = copy_of(clinic.store.as_ref(), now).await;
    let outbox = Arc::new(Outbox::default());
    let app = v1::build(App::builder_shared(copy).only_listed(), &outbox)
        .clock(clinic.clock.clone())
        .build()
        .await
        .unwrap();
    let refused = app.run_until(std::future::pending()).await.unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("this store is a copy of the clinic taken at"),
        "{refused}"
    );
    assert!(outbox.sent().is_empty(), "nothing ran");
}

#[tokio::test]
async fn a_preview_refuses_a_store_that_is_not_a_copy() {
    let clinic = live_clinic().await;
    let head = clinic.store.head().await.unwrap();
    let builder = v1::build(
        App::builder_shared(clinic.store.clone()).only_listed(),
        &clinic.outbox,
    );
    let refused = preview::preview(builder, days(30)).await.unwrap_err();
    assert!(
        refused.to_string().contains("this store is not a copy"),
        "{refused}"
    );
    assert_eq!(clinic.store.head().await.unwrap(), head, "nothing written");
}

#[tokio::test]
async fn a_preview_of_a_build_that_would_refuse_to_start_fails_saying_why() {
    let clinic = live_clinic().await;
    let copied_at = bounda::clock::Clock::now(&*clinic.clock);
    let kept = copy_of(clinic.store.as_ref(), copied_at).await;
    let outbox = Arc::new(Outbox::default());
    let refused = preview::preview(
        on_scratch(kept.as_ref(), v1_renamed::build, &outbox).await,
        days(30),
    )
    .await
    .unwrap_err();
    let message = refused.to_string();
    assert!(message.contains("no_show"), "{message}");
    assert!(outbox.sent().is_empty(), "nothing ran");
}
