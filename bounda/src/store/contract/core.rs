//! The core's contract: what every store keeps for an app to run (streams and their commit,
//! checkpoints, the inbox's and the scheduler's claims, dead letters).

#![allow(clippy::wildcard_imports, reason = "the contract's shared helpers")]

use super::*;

// spec 1, 3
pub async fn appends_get_consecutive_positions_and_versions(store: &dyn Store) {
    assert_eq!(store.head().await.unwrap(), 0, "an empty store's head is 0");
    let first = store
        .commit(&appending(vec![append("Order", "o-1", 0, &["e1", "e2"])]))
        .await
        .unwrap();
    assert_eq!(
        first
            .events
            .iter()
            .map(|e| (e.position, e.version))
            .collect::<Vec<_>>(),
        [(1, 1), (2, 2)]
    );
    let second = store
        .commit(&appending(vec![
            append("Order", "o-2", 0, &["e3"]),
            append("Order", "o-1", 2, &["e4"]),
        ]))
        .await
        .unwrap();
    assert_eq!(
        second
            .events
            .iter()
            .map(|e| (e.id.as_str(), e.position, e.version))
            .collect::<Vec<_>>(),
        [("e3", 3, 1), ("e4", 4, 3)]
    );
    assert_eq!(store.head().await.unwrap(), 4);
    let stream = store.read_stream("Order", "o-1").await.unwrap();
    assert_eq!(
        stream.iter().map(|e| e.version).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    let read = store.read_event("e4").await.unwrap().unwrap();
    assert_eq!(read.position, 4);
    assert_eq!(read.payload, json!({ "n": "e4" }));
    assert_eq!(read.metadata, Metadata::of_command("cmd-1"));
    assert_eq!(read.timestamp, t("2026-01-01T00:00:00Z"));
    assert!(store.read_event("nope").await.unwrap().is_none());
}

// spec 7, 131
pub async fn an_append_at_a_stale_version_writes_nothing(store: &dyn Store) {
    store
        .commit(&appending(vec![append("Order", "o-1", 0, &["e1"])]))
        .await
        .unwrap();
    let stale = WriteSet {
        appends: vec![
            append("Order", "o-2", 0, &["e2"]),
            append("Order", "o-1", 0, &["e3"]),
        ],
        schedule: vec![entry("k-1", "2026-01-02T00:00:00Z")],
        ..WriteSet::default()
    };
    match store.commit(&stale).await {
        Err(CommitError::StreamMoved {
            aggregate_id,
            expected_version,
            actual_version,
            ..
        }) => {
            assert_eq!(
                (aggregate_id.as_str(), expected_version, actual_version),
                ("o-1", 0, 1)
            );
        }
        other => panic!("expected StreamMoved, got {other:?}"),
    }
    assert_eq!(
        store.head().await.unwrap(),
        1,
        "no event of the refused write set was stored"
    );
    assert!(store.read_stream("Order", "o-2").await.unwrap().is_empty());
    assert!(
        store.scheduled("k-1").await.unwrap().is_none(),
        "nor its scheduler rows"
    );
}

// spec 12
pub async fn streams_are_scoped_to_their_aggregate_type(store: &dyn Store) {
    store
        .commit(&appending(vec![
            append("Order", "x-1", 0, &["e1"]),
            append("Subscription", "x-1", 0, &["e2"]),
        ]))
        .await
        .unwrap();
    assert_eq!(store.read_stream("Order", "x-1").await.unwrap().len(), 1);
    assert_eq!(
        store.read_stream("Subscription", "x-1").await.unwrap()[0].id,
        "e2"
    );
}

// issue 20: the instances of a process, found without reading the log
pub async fn stream_ids_are_listed_once_each_in_pages(store: &dyn Store) {
    store
        .commit(&appending(vec![
            append("process:Flow", "b", 0, &["e1", "e2"]),
            append("process:Flow", "a", 0, &["e3"]),
            append("Order", "a0", 0, &["e4"]),
            append("process:Flow", "c", 0, &["e5", "e6", "e7"]),
        ]))
        .await
        .unwrap();
    assert_eq!(
        store.stream_ids("process:Flow", None, 10).await.unwrap(),
        ["a", "b", "c"]
    );
    assert_eq!(
        store.stream_ids("process:Flow", None, 2).await.unwrap(),
        ["a", "b"]
    );
    assert_eq!(
        store
            .stream_ids("process:Flow", Some("b"), 2)
            .await
            .unwrap(),
        ["c"]
    );
    assert_eq!(
        store.stream_ids("process:Gone", None, 2).await.unwrap(),
        Vec::<String>::new()
    );
}

// spec 150
pub async fn read_all_pages_in_position_order(store: &dyn Store) {
    for i in 0..5u64 {
        store
            .commit(&appending(vec![append(
                "Order",
                &format!("o-{i}"),
                0,
                &[&format!("e{i}")],
            )]))
            .await
            .unwrap();
    }
    let page = store.read_all(1, 3).await.unwrap();
    assert_eq!(
        page.iter().map(|e| e.position).collect::<Vec<_>>(),
        [2, 3, 4]
    );
    assert_eq!(store.read_all(5, 10).await.unwrap().len(), 0);
}

// spec 147
pub async fn checkpoints_move_by_compare_and_set(store: &dyn Store) {
    assert_eq!(store.checkpoint("policies").await.unwrap(), None);
    assert!(store.move_checkpoint("policies", None, 0).await.unwrap());
    assert!(
        !store.move_checkpoint("policies", None, 7).await.unwrap(),
        "created once"
    );
    assert!(store.move_checkpoint("policies", Some(0), 5).await.unwrap());
    assert!(
        !store.move_checkpoint("policies", Some(0), 9).await.unwrap(),
        "moved by someone else"
    );
    assert_eq!(store.checkpoint("policies").await.unwrap(), Some(5));
    assert!(store.move_checkpoint("processes", None, 2).await.unwrap());
    assert_eq!(
        store.checkpoints().await.unwrap(),
        [("policies".to_owned(), 5), ("processes".to_owned(), 2)]
    );
}

// spec 123, 124, 127
pub async fn an_inbox_claim_is_held_then_lapses_then_settles(store: &dyn Store) {
    let now = t("2026-01-01T00:00:00Z");
    let lease = seconds(60);
    assert_eq!(
        store
            .claim_inbox("notify", "e-1", "c-1", now, lease)
            .await
            .unwrap(),
        InboxClaim::Claimed { attempt: 1 }
    );
    assert_eq!(
        store
            .claim_inbox("notify", "e-1", "c-2", now + seconds(59), lease)
            .await
            .unwrap(),
        InboxClaim::Held
    );
    assert_eq!(
        store
            .claim_inbox("other", "e-1", "c-3", now, lease)
            .await
            .unwrap(),
        InboxClaim::Claimed { attempt: 1 },
        "the key is (handler, event)"
    );
    assert!(
        store
            .renew_inbox("notify", "e-1", "c-1", now + seconds(30), lease)
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .claim_inbox("notify", "e-1", "c-2", now + seconds(89), lease)
            .await
            .unwrap(),
        InboxClaim::Held,
        "renewed"
    );
    assert_eq!(
        store
            .claim_inbox("notify", "e-1", "c-2", now + seconds(90), lease)
            .await
            .unwrap(),
        InboxClaim::Held,
        "a lease that ends now has not passed yet"
    );
    assert_eq!(
        store
            .claim_inbox("notify", "e-1", "c-2", now + seconds(90) + millis(1), lease)
            .await
            .unwrap(),
        InboxClaim::Claimed { attempt: 1 },
        "an expired claim is taken over; the lapsed run failed nothing, so counts no attempt"
    );
    assert!(
        !store
            .renew_inbox("notify", "e-1", "c-1", now + seconds(91), lease)
            .await
            .unwrap(),
        "c-1 lost it"
    );
    let done = WriteSet {
        inbox: Some(InboxMark {
            handler: "notify".into(),
            event_id: "e-1".into(),
            claim_id: "c-2".into(),
            outcome: InboxOutcome::Succeeded,
        }),
        ..WriteSet::default()
    };
    store.commit(&done).await.unwrap();
    assert_eq!(
        store
            .claim_inbox("notify", "e-1", "c-9", now + seconds(999), lease)
            .await
            .unwrap(),
        InboxClaim::Succeeded
    );
}

/// Claims `notify`/`e-1` at `now` under `c-1` and fails it, to be retried at `retry_at`.
async fn fail_at(store: &dyn Store, now: Instant, lease: crate::Duration, retry_at: Instant) {
    fail_event_at(store, "e-1", now, lease, retry_at).await;
}

/// Claims `notify`/`event_id` at `now` under `c-1` and fails it, to be retried at `retry_at`.
async fn fail_event_at(
    store: &dyn Store,
    event_id: &str,
    now: Instant,
    lease: crate::Duration,
    retry_at: Instant,
) {
    store
        .claim_inbox("notify", event_id, "c-1", now, lease)
        .await
        .unwrap();
    let failed = WriteSet {
        inbox: Some(InboxMark {
            handler: "notify".into(),
            event_id: event_id.into(),
            claim_id: "c-1".into(),
            outcome: InboxOutcome::Failed {
                retry_at,
                error: "boom".into(),
                failed_at: now,
            },
        }),
        ..WriteSet::default()
    };
    store.commit(&failed).await.unwrap();
}

/// A handler's failures are listed the first retry first, as many as asked.
pub async fn inbox_failures_are_listed_first_retry_first(store: &dyn Store) {
    let now = t("2026-01-01T00:00:00Z");
    let lease = seconds(60);
    fail_event_at(store, "e-1", now, lease, now + seconds(1)).await;
    fail_event_at(store, "e-2", now, lease, now + millis(500)).await;
    let failures = store.inbox_failures("notify", 10).await.unwrap();
    assert_eq!(
        failures
            .iter()
            .map(|f| (f.event_id.as_str(), f.retry_at, f.attempts))
            .collect::<Vec<_>>(),
        [("e-2", now + millis(500), 1), ("e-1", now + seconds(1), 1)]
    );
    assert_eq!(store.inbox_failures("notify", 1).await.unwrap().len(), 1);
    assert!(store.inbox_failures("other", 10).await.unwrap().is_empty());
}

/// Pair `(handler, event_id)` of `lane`.
fn pair<'a>(handler: &'a str, event_id: &'a str, lane: &'a str) -> InboxPair<'a> {
    InboxPair {
        handler,
        event_id,
        lane,
    }
}

// spec 124, 155
pub async fn a_failed_inbox_entry_waits_for_its_retry(store: &dyn Store) {
    let now = t("2026-01-01T00:00:00Z");
    let lease = seconds(60);
    fail_at(store, now, lease, now + seconds(1)).await;
    assert_eq!(
        store.next_inbox_retry("notify").await.unwrap(),
        Some(now + seconds(1))
    );
    assert_eq!(store.next_inbox_retry("other").await.unwrap(), None);
    assert_eq!(
        store
            .claim_inbox("notify", "e-1", "c-2", now + millis(999), lease)
            .await
            .unwrap(),
        InboxClaim::Waiting {
            retry_at: now + seconds(1)
        }
    );
    assert_eq!(
        store
            .claim_inbox("notify", "e-1", "c-2", now + seconds(1), lease)
            .await
            .unwrap(),
        InboxClaim::Claimed { attempt: 2 }
    );
    assert_eq!(store.next_inbox_retry("notify").await.unwrap(), None);
    let dead = WriteSet {
        inbox: Some(InboxMark {
            handler: "notify".into(),
            event_id: "e-1".into(),
            claim_id: "c-2".into(),
            outcome: InboxOutcome::DeadLettered {
                error: "boom again".into(),
            },
        }),
        ..WriteSet::default()
    };
    store.commit(&dead).await.unwrap();
    assert_eq!(
        store
            .claim_inbox("notify", "e-1", "c-3", now + seconds(99), lease)
            .await
            .unwrap(),
        InboxClaim::DeadLettered
    );
}

// spec 127, 131
pub async fn a_lost_inbox_claim_rolls_back_the_whole_write_set(store: &dyn Store) {
    let now = t("2026-01-01T00:00:00Z");
    store
        .claim_inbox("notify", "e-1", "c-1", now, seconds(1))
        .await
        .unwrap();
    store
        .claim_inbox("notify", "e-1", "c-2", now + seconds(5), seconds(1))
        .await
        .unwrap();
    let late = WriteSet {
        appends: vec![append("Order", "o-1", 0, &["e9"])],
        inbox: Some(InboxMark {
            handler: "notify".into(),
            event_id: "e-1".into(),
            claim_id: "c-1".into(),
            outcome: InboxOutcome::Succeeded,
        }),
        ..WriteSet::default()
    };
    match store.commit(&late).await {
        Err(CommitError::ClaimLost { key }) => assert_eq!(key, "notify:e-1"),
        other => panic!("expected ClaimLost, got {other:?}"),
    }
    assert_eq!(
        store.head().await.unwrap(),
        0,
        "the attempt's events were rolled back with it"
    );
}

// issue 20: what a check before a deploy reads, in bounded memory
pub async fn scheduled_types_are_counted_and_paged(store: &dyn Store) {
    assert_eq!(store.scheduled_types().await.unwrap(), []);
    let mut reminder = entry("k-3", "2026-01-02T00:00:00Z");
    reminder.command_type = "CancelOrder".into();
    store
        .commit(&WriteSet {
            schedule: vec![
                entry("k-1", "2026-01-02T00:00:00Z"),
                entry("k-2", "2026-01-03T00:00:00Z"),
                reminder,
            ],
            ..WriteSet::default()
        })
        .await
        .unwrap();
    let types = store.scheduled_types().await.unwrap();
    let first = entry("k", "2026-01-02T00:00:00Z").command_type;
    let mut expected = vec![(first.clone(), 2), ("CancelOrder".to_owned(), 1)];
    expected.sort();
    assert_eq!(types, expected);
    let keys = |page: Vec<ScheduledEntry>| -> Vec<String> {
        page.into_iter().map(|entry| entry.dedupe_key).collect()
    };
    assert_eq!(
        keys(store.scheduled_page(&first, None, 1).await.unwrap()),
        ["k-1"]
    );
    assert_eq!(
        keys(store.scheduled_page(&first, Some("k-1"), 5).await.unwrap()),
        ["k-2"]
    );
    assert_eq!(
        keys(store.scheduled_page(&first, Some("k-2"), 5).await.unwrap()),
        Vec::<String>::new()
    );
}

// spec 44, 201
pub async fn scheduling_is_idempotent_on_its_key(store: &dyn Store) {
    let once = WriteSet {
        schedule: vec![entry("k-1", "2026-01-02T00:00:00Z")],
        ..WriteSet::default()
    };
    store.commit(&once).await.unwrap();
    let claimed = store
        .claim_due("w-1", t("2026-01-02T00:00:00Z"), seconds(60), 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    store.commit(&once).await.unwrap();
    let same = store.scheduled("k-1").await.unwrap().unwrap();
    assert_eq!(same.revision, 0, "an identical entry is left untouched");
    assert_eq!(same.claim_id.as_deref(), Some("w-1"), "its claim included");
    let moved = WriteSet {
        schedule: vec![entry("k-1", "2026-01-02T00:00:10Z")],
        ..WriteSet::default()
    };
    store.commit(&moved).await.unwrap();
    let moved = store.scheduled("k-1").await.unwrap().unwrap();
    assert_eq!(
        (moved.revision, moved.execute_at),
        (1, t("2026-01-02T00:00:10Z"))
    );
    assert_eq!(
        moved.claim_id.as_deref(),
        Some("w-1"),
        "moving a held entry keeps its claim: no second worker takes it meanwhile"
    );
    assert!(
        store
            .claim_due("w-2", t("2026-01-02T00:00:30Z"), seconds(60), 10)
            .await
            .unwrap()
            .is_empty()
    );
    // The holder completes what it claimed: the new schedule stays, released.
    store
        .commit(&WriteSet {
            scheduled: Some(ScheduledRelease {
                dedupe_key: "k-1".into(),
                claim_id: "w-1".into(),
                outcome: ScheduledOutcome::Complete,
            }),
            ..WriteSet::default()
        })
        .await
        .unwrap();
    let kept = store.scheduled("k-1").await.unwrap().unwrap();
    assert_eq!(
        (kept.execute_at, kept.claim_id),
        (t("2026-01-02T00:00:10Z"), None),
        "the latest schedule honoured, its claim given back"
    );
    let again = store
        .claim_due("w-2", t("2026-01-02T00:00:30Z"), seconds(60), 10)
        .await
        .unwrap();
    assert_eq!(again.len(), 1, "due at its new moment");
    store
        .commit(&WriteSet {
            scheduled: Some(ScheduledRelease {
                dedupe_key: "k-1".into(),
                claim_id: "w-2".into(),
                outcome: ScheduledOutcome::Complete,
            }),
            ..WriteSet::default()
        })
        .await
        .unwrap();
    assert!(
        store.scheduled("k-1").await.unwrap().is_none(),
        "not rescheduled since its claim: completed"
    );
    store.commit(&once).await.unwrap();
    let gone = WriteSet {
        unschedule: vec!["k-1".into()],
        ..WriteSet::default()
    };
    store.commit(&gone).await.unwrap();
    assert!(store.scheduled("k-1").await.unwrap().is_none());
}

// spec 45, 200
pub async fn due_entries_are_claimed_in_order_once(store: &dyn Store) {
    let writes = WriteSet {
        schedule: vec![
            entry("b", "2026-01-02T00:00:00Z"),
            entry("a", "2026-01-02T00:00:00Z"),
            entry("c", "2026-01-01T12:00:00Z"),
            entry("later", "2026-01-05T00:00:00Z"),
        ],
        ..WriteSet::default()
    };
    store.commit(&writes).await.unwrap();
    let now = t("2026-01-02T00:00:00Z");
    let lease = seconds(60);
    assert_eq!(
        store
            .scheduled_of_type("SendReminder")
            .await
            .unwrap()
            .iter()
            .map(|e| e.dedupe_key.as_str())
            .collect::<Vec<_>>(),
        ["c", "a", "b", "later"],
        "by due moment"
    );
    assert!(store.scheduled_of_type("Other").await.unwrap().is_empty());
    let first = store.claim_due("w-1", now, lease, 2).await.unwrap();
    assert_eq!(
        first
            .iter()
            .map(|e| e.dedupe_key.as_str())
            .collect::<Vec<_>>(),
        ["c", "a"]
    );
    assert!(
        first
            .iter()
            .all(|e| e.claim_id.as_deref() == Some("w-1") && e.claimed_at == Some(now))
    );
    let second = store.claim_due("w-2", now, lease, 10).await.unwrap();
    assert_eq!(
        second
            .iter()
            .map(|e| e.dedupe_key.as_str())
            .collect::<Vec<_>>(),
        ["b"],
        "claimed ones are skipped"
    );
    assert!(
        store
            .claim_due("w-3", now + seconds(60), lease, 10)
            .await
            .unwrap()
            .is_empty(),
        "a lease that ends now has not passed yet"
    );
    let reclaimed = store
        .claim_due("w-3", now + seconds(60) + millis(1), lease, 10)
        .await
        .unwrap();
    assert_eq!(
        reclaimed
            .iter()
            .map(|e| e.dedupe_key.as_str())
            .collect::<Vec<_>>(),
        ["c", "a", "b"]
    );
    assert!(
        reclaimed.iter().all(|e| e.attempts == 0),
        "reclaiming an expired claim counts no attempt: only failed runs do"
    );
    assert!(
        store
            .renew_scheduled("a", "w-3", now + seconds(61), lease)
            .await
            .unwrap()
    );
    assert!(
        !store
            .renew_scheduled("a", "w-1", now + seconds(61), lease)
            .await
            .unwrap()
    );
}

// spec 47, 201
pub async fn a_lost_scheduler_claim_writes_nothing(store: &dyn Store) {
    store
        .commit(&WriteSet {
            schedule: vec![entry("k", "2026-01-01T00:00:00Z")],
            ..WriteSet::default()
        })
        .await
        .unwrap();
    let now = t("2026-01-01T00:00:00Z");
    store.claim_due("w-1", now, seconds(1), 10).await.unwrap();
    store
        .claim_due("w-2", now + seconds(2), seconds(1), 10)
        .await
        .unwrap();
    let late = WriteSet {
        appends: vec![append("Order", "o-1", 0, &["e1"])],
        scheduled: Some(ScheduledRelease {
            dedupe_key: "k".into(),
            claim_id: "w-1".into(),
            outcome: ScheduledOutcome::Complete,
        }),
        ..WriteSet::default()
    };
    let lost = store.commit(&late).await;
    assert!(matches!(&lost, Err(CommitError::ScheduledClaimLost { key }) if key == "k"));
    assert_eq!(
        lost.err().map(|error| error.code()),
        Some("SCHEDULED_CLAIM_LOST"),
        "the original's code for a scheduled entry"
    );
    assert_eq!(store.head().await.unwrap(), 0);
    assert!(store.scheduled("k").await.unwrap().is_some());
}

// spec 45, 46, 48
pub async fn scheduler_releases_complete_retry_and_defer(store: &dyn Store) {
    let now = t("2026-01-01T00:00:00Z");
    let writes = WriteSet {
        schedule: vec![
            entry("done", "2026-01-01T00:00:00Z"),
            entry("retry", "2026-01-01T00:00:00Z"),
            entry("defer", "2026-01-01T00:00:00Z"),
        ],
        ..WriteSet::default()
    };
    store.commit(&writes).await.unwrap();
    store.claim_due("w", now, seconds(60), 10).await.unwrap();
    let release = |key: &str, outcome| WriteSet {
        scheduled: Some(ScheduledRelease {
            dedupe_key: key.into(),
            claim_id: "w".into(),
            outcome,
        }),
        ..WriteSet::default()
    };
    store
        .commit(&release("done", ScheduledOutcome::Complete))
        .await
        .unwrap();
    store
        .commit(&release(
            "retry",
            ScheduledOutcome::Retry {
                execute_at: now + seconds(1),
                error: "boom".into(),
                failed_at: now,
            },
        ))
        .await
        .unwrap();
    store
        .commit(&release("defer", ScheduledOutcome::Defer))
        .await
        .unwrap();
    assert!(store.scheduled("done").await.unwrap().is_none());
    let retry = store.scheduled("retry").await.unwrap().unwrap();
    assert_eq!(
        (
            retry.attempts,
            retry.execute_at,
            retry.claim_id,
            retry.last_error.as_deref()
        ),
        (1, now + seconds(1), None, Some("boom"))
    );
    let defer = store.scheduled("defer").await.unwrap().unwrap();
    assert_eq!(
        (defer.attempts, defer.execute_at, defer.claim_id),
        (0, now, None),
        "a deferred entry counts no attempt"
    );
}

// spec 176
pub async fn next_due_at_counts_claimed_entries_after_their_lease(store: &dyn Store) {
    let lease = seconds(60);
    assert_eq!(
        store
            .next_due_at(t("2026-01-01T00:00:00Z"), lease)
            .await
            .unwrap(),
        None
    );
    store
        .commit(&WriteSet {
            schedule: vec![
                entry("a", "2026-01-01T00:00:00Z"),
                entry("b", "2026-01-03T00:00:00Z"),
            ],
            ..WriteSet::default()
        })
        .await
        .unwrap();
    assert_eq!(
        store
            .next_due_at(t("2026-01-01T00:00:00Z"), lease)
            .await
            .unwrap(),
        Some(t("2026-01-01T00:00:00Z"))
    );
    store
        .claim_due("w", t("2026-01-02T00:00:00Z"), lease, 10)
        .await
        .unwrap();
    assert_eq!(
        store
            .next_due_at(t("2026-01-01T00:00:00Z"), lease)
            .await
            .unwrap(),
        Some(t("2026-01-02T00:01:00.001Z"))
    );
}

// spec 141, 163, 170, 172
pub async fn dead_letters_are_filed_once_and_settled_once(store: &dyn Store) {
    let mut first = letter("l-1", LetterKind::Policy, "order.notify");
    first.payload = Some(json!({ "order_id": "o-1" }));
    store
        .commit(&WriteSet {
            dead_letters: vec![first.clone()],
            ..WriteSet::default()
        })
        .await
        .unwrap();
    let mut again = first.clone();
    again.error_message = "filed twice".into();
    store
        .commit(&WriteSet {
            dead_letters: vec![again],
            ..WriteSet::default()
        })
        .await
        .unwrap();
    assert_eq!(
        store.dead_letter("l-1").await.unwrap().unwrap(),
        first,
        "the first filing stands, every field kept"
    );
    let settle = |status| WriteSet {
        settle_letter: Some(LetterSettle {
            id: "l-1".into(),
            status,
        }),
        ..WriteSet::default()
    };
    store.commit(&settle(LetterStatus::Retried)).await.unwrap();
    assert!(
        matches!(store.commit(&settle(LetterStatus::Discarded)).await, Err(CommitError::LetterSettled { id }) if id == "l-1")
    );
    assert_eq!(
        store.dead_letter("l-1").await.unwrap().unwrap().status,
        LetterStatus::Retried
    );
    // A write set fenced on a settled letter writes nothing.
    let fenced = WriteSet {
        appends: vec![append("Order", "o-9", 0, &["e9"])],
        require_letter: Some(LetterHold {
            id: "l-1".into(),
            claim_id: "r-1".into(),
        }),
        ..WriteSet::default()
    };
    assert!(matches!(
        store.commit(&fenced).await,
        Err(CommitError::LetterSettled { .. })
    ));
    assert!(store.read_stream("Order", "o-9").await.unwrap().is_empty());
    let missing = WriteSet {
        settle_letter: Some(LetterSettle {
            id: "nope".into(),
            status: LetterStatus::Retried,
        }),
        ..WriteSet::default()
    };
    assert!(matches!(
        store.commit(&missing).await,
        Err(CommitError::Store(_))
    ));
    assert!(store.dead_letter("nope").await.unwrap().is_none());
}

// spec 164, 165
pub async fn dead_letters_are_listed_and_counted_by_filter(store: &dyn Store) {
    let failed = |id: &str, kind, handler: &str, error: &str, at: &str| DeadLetter {
        error_message: error.to_owned(),
        last_failed_at: t(at),
        ..letter(id, kind, handler)
    };
    let letters = vec![
        letter("l-1", LetterKind::Policy, "order.notify"),
        failed(
            "l-2",
            LetterKind::Process,
            "order.payment",
            "gateway timed out",
            "2026-01-02T00:00:00Z",
        ),
        failed(
            "l-3",
            LetterKind::Policy,
            "order.refund",
            "quota 100% used",
            "2026-01-01T12:00:00Z",
        ),
        failed(
            "l-4",
            LetterKind::Scheduled,
            "SendReminder",
            "gateway refused",
            "2026-01-03T00:00:00Z",
        ),
    ];
    store
        .commit(&WriteSet {
            dead_letters: letters,
            ..WriteSet::default()
        })
        .await
        .unwrap();
    store
        .commit(&WriteSet {
            settle_letter: Some(LetterSettle {
                id: "l-3".into(),
                status: LetterStatus::Discarded,
            }),
            ..WriteSet::default()
        })
        .await
        .unwrap();
    let ids = async |filter: &LetterFilter| {
        store
            .dead_letters(filter)
            .await
            .unwrap()
            .into_iter()
            .map(|l| l.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(&LetterFilter::default()).await,
        ["l-1", "l-2", "l-3", "l-4"],
        "oldest first"
    );
    let policies = LetterFilter {
        kind: Some(LetterKind::Policy),
        ..LetterFilter::default()
    };
    assert_eq!(ids(&policies).await, ["l-1", "l-3"]);
    let failed_policies = LetterFilter {
        status: Some(LetterStatus::Failed),
        ..policies.clone()
    };
    assert_eq!(ids(&failed_policies).await, ["l-1"]);
    let by_handler = LetterFilter {
        handler: Some("SendReminder".into()),
        ..LetterFilter::default()
    };
    assert_eq!(ids(&by_handler).await, ["l-4"]);
    let limited = LetterFilter {
        limit: Some(2),
        ..LetterFilter::default()
    };
    assert_eq!(ids(&limited).await, ["l-1", "l-2"]);
    assert_eq!(
        store.count_dead_letters(&limited).await.unwrap(),
        4,
        "count ignores the limit"
    );
    assert_eq!(store.count_dead_letters(&failed_policies).await.unwrap(), 1);
    // issue 24: by error text, taken literally, and by when the letter last failed.
    let erring = |text: &str| LetterFilter {
        error_contains: Some(text.to_owned()),
        ..LetterFilter::default()
    };
    assert_eq!(ids(&erring("gateway")).await, ["l-2", "l-4"]);
    assert_eq!(ids(&erring("timed")).await, ["l-2"]);
    assert_eq!(ids(&erring("%")).await, ["l-3"], "no wildcard");
    assert_eq!(ids(&erring("_")).await, Vec::<String>::new(), "no wildcard");
    assert_eq!(
        store.count_dead_letters(&erring("gateway")).await.unwrap(),
        2
    );
    let between = |from: Option<&str>, until: Option<&str>| LetterFilter {
        failed_from: from.map(t),
        failed_until: until.map(t),
        ..LetterFilter::default()
    };
    assert_eq!(
        ids(&between(Some("2026-01-02T00:00:00Z"), None)).await,
        ["l-2", "l-4"],
        "from, inclusive"
    );
    assert_eq!(
        ids(&between(None, Some("2026-01-02T00:00:00Z"))).await,
        ["l-1", "l-3"],
        "until, exclusive"
    );
    assert_eq!(
        ids(&between(
            Some("2026-01-01T06:00:00Z"),
            Some("2026-01-03T00:00:00Z")
        ))
        .await,
        ["l-2", "l-3"]
    );
    let gateway_since = LetterFilter {
        status: Some(LetterStatus::Failed),
        ..LetterFilter {
            kind: Some(LetterKind::Scheduled),
            ..between(Some("2026-01-02T00:00:00Z"), None)
        }
    };
    assert_eq!(ids(&gateway_since).await, ["l-4"]);
}

// Group commit: several attempts in one transaction, each all-or-nothing.
pub async fn group_commit_leaves_out_only_the_failing_write_set(store: &dyn Store) {
    store
        .commit(&appending(vec![append("Order", "o-1", 0, &["e1"])]))
        .await
        .unwrap();
    let batch = vec![
        appending(vec![append("Order", "o-2", 0, &["e2"])]),
        WriteSet {
            appends: vec![
                append("Order", "o-3", 0, &["e3"]),
                append("Order", "o-1", 0, &["e4"]),
            ],
            schedule: vec![entry("k-3", "2026-01-01T00:00:00Z")],
            ..WriteSet::default()
        },
        appending(vec![append("Order", "o-1", 1, &["e5"])]),
    ];
    let results = store.commit_many(&batch).await;
    assert_eq!(results.len(), 3);
    assert_eq!(results[0].as_ref().unwrap().events[0].position, 2);
    assert!(matches!(results[1], Err(CommitError::StreamMoved { .. })));
    assert_eq!(results[2].as_ref().unwrap().events[0].version, 2);
    assert!(
        store.read_stream("Order", "o-3").await.unwrap().is_empty(),
        "the failing set wrote nothing"
    );
    assert!(store.scheduled("k-3").await.unwrap().is_none());
    assert_eq!(
        store
            .read_all(0, 10)
            .await
            .unwrap()
            .iter()
            .map(|e| e.id.as_str())
            .collect::<Vec<_>>(),
        ["e1", "e2", "e5"]
    );
}

// spec 124, 148; issue 21: a held pair holds its lane, not its handler's other lanes
pub async fn a_batch_claim_skips_a_lane_after_its_held_pair(store: &dyn Store) {
    let now = t("2026-01-01T00:00:00Z");
    let lease = seconds(60);
    store
        .claim_inbox("notify", "e-2", "other", now, lease)
        .await
        .unwrap();
    let mut order = InOrder::new(100);
    let claims = store
        .claim_inbox_batch(
            &[
                pair("notify", "e-1", "a"),
                pair("notify", "e-2", "b"),
                pair("audit", "e-2", "b"),
                pair("notify", "e-3", "b"),
                pair("notify", "e-4", "a"),
            ],
            "batch",
            now,
            lease,
            &mut order,
        )
        .await
        .unwrap();
    assert_eq!(
        claims,
        [
            InboxClaim::Claimed { attempt: 1 },
            InboxClaim::Held,
            InboxClaim::Claimed { attempt: 1 },
            InboxClaim::Skipped,
            InboxClaim::Claimed { attempt: 1 },
        ],
        "a held pair stops its handler's later pairs of its lane, not another lane's or handler's"
    );
    let later = store
        .claim_inbox_batch(
            &[pair("notify", "e-5", "b"), pair("notify", "e-6", "c")],
            "batch",
            now,
            lease,
            &mut order,
        )
        .await
        .unwrap();
    assert_eq!(
        later,
        [InboxClaim::Skipped, InboxClaim::Claimed { attempt: 1 }],
        "the order carries over to the pass's next batch"
    );
    for event_id in ["e-3", "e-5"] {
        assert_eq!(
            store
                .claim_inbox("notify", event_id, "later", now, lease)
                .await
                .unwrap(),
            InboxClaim::Claimed { attempt: 1 },
            "a skipped pair was left unclaimed"
        );
    }
}

// spec 148: a retry pending holds its handler's later events, every lane
pub async fn a_batch_claim_skips_a_handler_after_its_waiting_pair(store: &dyn Store) {
    let now = t("2026-01-01T00:00:00Z");
    let lease = seconds(60);
    fail_at(store, now, lease, now + seconds(10)).await;
    let claims = store
        .claim_inbox_batch(
            &[
                pair("notify", "e-1", "a"),
                pair("notify", "e-2", "b"),
                pair("audit", "e-2", "b"),
            ],
            "batch",
            now + seconds(1),
            lease,
            &mut InOrder::new(100),
        )
        .await
        .unwrap();
    assert_eq!(
        claims,
        [
            InboxClaim::Waiting {
                retry_at: now + seconds(10)
            },
            InboxClaim::Skipped,
            InboxClaim::Claimed { attempt: 1 },
        ],
        "a waiting pair stops all its handler's later pairs, not another handler's"
    );
}

// issue 21: a pass claims at most its batch, leaving the rest to other runners
pub async fn a_batch_claim_takes_no_more_than_its_limit(store: &dyn Store) {
    let now = t("2026-01-01T00:00:00Z");
    let lease = seconds(60);
    let pair = |event_id, lane| pair("notify", event_id, lane);
    let mut order = InOrder::new(2);
    let claims = store
        .claim_inbox_batch(
            &[pair("e-1", "a"), pair("e-2", "b"), pair("e-3", "c")],
            "batch",
            now,
            lease,
            &mut order,
        )
        .await
        .unwrap();
    assert_eq!(
        claims,
        [
            InboxClaim::Claimed { attempt: 1 },
            InboxClaim::Claimed { attempt: 1 },
            InboxClaim::Skipped,
        ]
    );
    assert!(order.full());
    assert_eq!(
        store
            .claim_inbox_batch(&[pair("e-4", "d")], "batch", now, lease, &mut order)
            .await
            .unwrap(),
        [InboxClaim::Skipped],
        "a full order claims nothing more"
    );
    assert_eq!(
        store
            .claim_inbox("notify", "e-3", "other", now, lease)
            .await
            .unwrap(),
        InboxClaim::Claimed { attempt: 1 },
        "what the limit left is free for another runner"
    );
}

// spec 46, 148
pub async fn a_released_inbox_claim_is_free_at_once_without_an_attempt(store: &dyn Store) {
    let now = t("2026-01-01T00:00:00Z");
    let lease = seconds(60);
    store
        .claim_inbox("notify", "e-1", "c-1", now, lease)
        .await
        .unwrap();
    let release = |claim_id: &str| WriteSet {
        inbox: Some(InboxMark {
            handler: "notify".into(),
            event_id: "e-1".into(),
            claim_id: claim_id.into(),
            outcome: InboxOutcome::Released,
        }),
        ..WriteSet::default()
    };
    assert!(matches!(
        store.commit(&release("not-mine")).await,
        Err(CommitError::ClaimLost { .. })
    ));
    store.commit(&release("c-1")).await.unwrap();
    assert_eq!(
        store
            .claim_inbox("notify", "e-1", "c-2", now, lease)
            .await
            .unwrap(),
        InboxClaim::Claimed { attempt: 1 },
        "free before its lease ends, the released attempt not counted"
    );
}

pub async fn a_skipping_write_set_moves_only_a_checkpoint_at_the_head(store: &dyn Store) {
    store
        .commit(&appending(vec![append(
            "Order",
            "o-1",
            0,
            &["OrderPlaced"],
        )]))
        .await
        .unwrap();
    store.move_checkpoint("at-head", None, 1).await.unwrap();
    store.move_checkpoint("behind", None, 0).await.unwrap();
    let mut writes = appending(vec![append(
        "process:Payment",
        "o-1",
        0,
        &["ProcessStarted", "ProcessHandled"],
    )]);
    writes.skip = vec!["at-head".into(), "behind".into(), "absent".into()];
    store.commit(&writes).await.unwrap();
    assert_eq!(
        store.checkpoint("at-head").await.unwrap(),
        Some(3),
        "moved past"
    );
    assert_eq!(
        store.checkpoint("behind").await.unwrap(),
        Some(0),
        "a subscriber behind reads them itself"
    );
    assert_eq!(
        store.checkpoint("absent").await.unwrap(),
        None,
        "none created"
    );
}

pub async fn a_snapshot_is_kept_unless_a_newer_one_is(store: &dyn Store) {
    assert_eq!(
        store.snapshot("process:Payment", "o-1").await.unwrap(),
        None
    );
    let snapshot = |version: u64| Snapshot {
        aggregate_type: "process:Payment".into(),
        aggregate_id: "o-1".into(),
        version,
        state: json!({ "version": version }),
    };
    let keep = |version| WriteSet {
        snapshots: vec![snapshot(version)],
        ..WriteSet::default()
    };
    store.commit(&keep(2)).await.unwrap();
    store.commit(&keep(1)).await.unwrap();
    assert_eq!(
        store.snapshot("process:Payment", "o-1").await.unwrap(),
        Some(snapshot(2)),
        "an older one is ignored"
    );
    store.commit(&keep(3)).await.unwrap();
    assert_eq!(
        store.snapshot("process:Payment", "o-1").await.unwrap(),
        Some(snapshot(3))
    );
    assert_eq!(
        store.snapshot("process:Payment", "o-2").await.unwrap(),
        None
    );
}

pub async fn a_stream_reads_after_a_version(store: &dyn Store) {
    store
        .commit(&appending(vec![append(
            "Order",
            "o-1",
            0,
            &["e-1", "e-2", "e-3"],
        )]))
        .await
        .unwrap();
    let ids = async |after: u64| -> Vec<String> {
        store
            .read_stream_after("Order", "o-1", after)
            .await
            .unwrap()
            .into_iter()
            .map(|event| event.id)
            .collect()
    };
    assert_eq!(ids(1).await, ["e-2", "e-3"]);
    assert_eq!(ids(3).await, Vec::<String>::new());
    assert_eq!(ids(0).await.len(), 3);
}

// The start's survey reads a page of instances at once: each stream of a page with
// its snapshot and the events after it, in the order asked; one with neither is empty.
pub async fn a_page_of_streams_reads_each_after_its_snapshot_in_order(store: &dyn Store) {
    store
        .commit(&WriteSet {
            appends: vec![
                append("process:P", "a", 0, &["a-1", "a-2", "a-3"]),
                append("process:P", "b", 0, &["b-1"]),
                append("process:Q", "c", 0, &["c-1"]),
            ],
            snapshots: vec![
                Snapshot {
                    aggregate_type: "process:P".into(),
                    aggregate_id: "a".into(),
                    version: 2,
                    state: json!({ "at": 2 }),
                },
                Snapshot {
                    aggregate_type: "process:P".into(),
                    aggregate_id: "b".into(),
                    version: 1,
                    state: json!({ "at": 1 }),
                },
            ],
            ..WriteSet::default()
        })
        .await
        .unwrap();
    let ids: Vec<String> = ["b", "none", "c", "a"].map(String::from).to_vec();
    let tails = store.read_tails("process:P", &ids).await.unwrap();
    let read: Vec<(String, Option<u64>, Vec<String>)> = tails
        .iter()
        .map(|tail| {
            (
                tail.aggregate_id.clone(),
                tail.snapshot.as_ref().map(|snapshot| snapshot.version),
                tail.events.iter().map(|event| event.id.clone()).collect(),
            )
        })
        .collect();
    let expected = |id: &str, version: Option<u64>, events: &[&str]| {
        (
            id.to_owned(),
            version,
            events.iter().map(|&e| e.to_owned()).collect::<Vec<_>>(),
        )
    };
    assert_eq!(
        read,
        [
            expected("b", Some(1), &[]),
            expected("none", None, &[]),
            expected("c", None, &[]),
            expected("a", Some(2), &["a-3"]),
        ],
        "each stream in the order asked, after its own snapshot, of the type asked only"
    );
    let a = &tails[3];
    assert_eq!(
        a.snapshot.as_ref().map(|s| (&s.aggregate_type, &s.state)),
        Some((&"process:P".to_owned(), &json!({ "at": 2 })))
    );
    assert!(
        a.events[0].position > 0 && a.events[0].version == 3,
        "an event read with its position and version"
    );
    assert!(store.read_tails("process:P", &[]).await.unwrap().is_empty());
}

// The entries of a page of instances, read by their keys at once.
pub async fn scheduler_entries_are_read_by_their_keys_at_once(store: &dyn Store) {
    store
        .commit(&WriteSet {
            schedule: vec![
                entry("a", "2026-01-01T00:00:00Z"),
                entry("b", "2026-01-02T00:00:00Z"),
                entry("c", "2026-01-03T00:00:00Z"),
            ],
            ..WriteSet::default()
        })
        .await
        .unwrap();
    let keys: Vec<String> = ["c", "missing", "a"].map(String::from).to_vec();
    let mut read = store.scheduled_many(&keys).await.unwrap();
    read.sort_by(|x, y| x.dedupe_key.cmp(&y.dedupe_key));
    assert_eq!(
        read,
        [
            entry("a", "2026-01-01T00:00:00Z"),
            entry("c", "2026-01-03T00:00:00Z")
        ],
        "the entries with those keys, whole; a key with none left out"
    );
    assert!(store.scheduled_many(&[]).await.unwrap().is_empty());
}

// spec 45, 200: a worker commits one batch and claims the next in one transaction.
pub async fn a_write_set_claims_the_next_due_entries_in_its_transaction(store: &dyn Store) {
    let now = t("2026-01-02T00:00:00Z");
    let lease = seconds(60);
    store
        .commit(&WriteSet {
            schedule: vec![
                entry("a", "2026-01-01T00:00:00Z"),
                entry("b", "2026-01-01T12:00:00Z"),
                entry("c", "2026-01-01T18:00:00Z"),
                entry("later", "2026-01-05T00:00:00Z"),
            ],
            ..WriteSet::default()
        })
        .await
        .unwrap();
    let first = store.claim_due("w-1", now, lease, 1).await.unwrap();
    assert_eq!(first[0].dedupe_key, "a");
    let claim = |claim_id: &str| ClaimDue {
        claim_id: claim_id.into(),
        now,
        lease,
        limit: 2,
    };
    let done = WriteSet {
        scheduled: Some(ScheduledRelease {
            dedupe_key: "a".into(),
            claim_id: "w-1".into(),
            outcome: ScheduledOutcome::Complete,
        }),
        claim_due: Some(claim("w-1")),
        ..WriteSet::default()
    };
    let committed = store.commit(&done).await.unwrap();
    assert_eq!(
        committed
            .claimed
            .iter()
            .map(|e| (e.dedupe_key.as_str(), e.claim_id.as_deref()))
            .collect::<Vec<_>>(),
        [("b", Some("w-1")), ("c", Some("w-1"))],
        "the next batch, in due order, under the claim"
    );
    assert!(
        store.scheduled("a").await.unwrap().is_none(),
        "and the run committed"
    );
    assert!(
        store
            .claim_due("w-2", now, lease, 10)
            .await
            .unwrap()
            .is_empty(),
        "what it claimed is held"
    );
    // A refused write set claims nothing.
    let refused = WriteSet {
        scheduled: Some(ScheduledRelease {
            dedupe_key: "b".into(),
            claim_id: "not-mine".into(),
            outcome: ScheduledOutcome::Complete,
        }),
        claim_due: Some(ClaimDue {
            now: t("2026-01-06T00:00:00Z"),
            ..claim("w-3")
        }),
        ..WriteSet::default()
    };
    assert!(matches!(
        store.commit(&refused).await,
        Err(CommitError::ScheduledClaimLost { .. })
    ));
    assert_eq!(
        store.scheduled("later").await.unwrap().unwrap().claim_id,
        None,
        "rolled back with the rest"
    );
}

// spec 78, 201: a deadline's run completes the instance's entry and re-arms the same key.
pub async fn completing_an_entry_and_scheduling_its_key_moves_it(store: &dyn Store) {
    let now = t("2026-01-02T00:00:00Z");
    let lease = seconds(60);
    store
        .commit(&WriteSet {
            schedule: vec![entry("k", "2026-01-01T00:00:00Z")],
            ..WriteSet::default()
        })
        .await
        .unwrap();
    let claimed = store.claim_due("w-1", now, lease, 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let rearm = |claim_id: &str| WriteSet {
        scheduled: Some(ScheduledRelease {
            dedupe_key: "k".into(),
            claim_id: claim_id.into(),
            outcome: ScheduledOutcome::Complete,
        }),
        schedule: vec![entry("k", "2026-01-03T00:00:00Z")],
        ..WriteSet::default()
    };
    assert!(
        matches!(
            store.commit(&rearm("not-mine")).await,
            Err(CommitError::ScheduledClaimLost { .. })
        ),
        "fenced on the claim"
    );
    store.commit(&rearm("w-1")).await.unwrap();
    let moved = store.scheduled("k").await.unwrap().unwrap();
    assert_eq!(moved.execute_at, t("2026-01-03T00:00:00Z"));
    assert_eq!((moved.claim_id, moved.claimed_at), (None, None), "released");
    assert_eq!((moved.attempts, moved.last_error), (0, None));
    assert_eq!(moved.revision, claimed[0].revision + 1, "rescheduled");
    assert!(
        store
            .claim_due("w-2", now, lease, 10)
            .await
            .unwrap()
            .is_empty(),
        "not due before its new moment"
    );
    assert_eq!(
        store
            .claim_due("w-2", t("2026-01-03T00:00:00Z"), lease, 10)
            .await
            .unwrap()
            .len(),
        1
    );
}

// spec 163: a letter's first failure is its run's first, not the one that gave up.
pub async fn a_letter_filed_with_its_claim_keeps_the_runs_first_failure(store: &dyn Store) {
    let t0 = t("2026-01-01T00:00:00Z");
    let lease = seconds(60);
    let at = |n: u64| t0 + seconds(n);
    let failing = |letter_at: u64| DeadLetter {
        first_failed_at: at(letter_at),
        last_failed_at: at(letter_at),
        ..letter("l-inbox", LetterKind::Policy, "notify")
    };
    // Inbox: failed at 0 and at 1, given up at 2.
    for (n, claim_id) in [(0, "c-0"), (1, "c-1")] {
        store
            .claim_inbox("notify", "e-1", claim_id, at(n), lease)
            .await
            .unwrap();
        store
            .commit(&WriteSet {
                inbox: Some(InboxMark {
                    handler: "notify".into(),
                    event_id: "e-1".into(),
                    claim_id: claim_id.into(),
                    outcome: InboxOutcome::Failed {
                        retry_at: at(n + 1),
                        error: "boom".into(),
                        failed_at: at(n),
                    },
                }),
                ..WriteSet::default()
            })
            .await
            .unwrap();
    }
    store
        .claim_inbox("notify", "e-1", "c-2", at(2), lease)
        .await
        .unwrap();
    store
        .commit(&WriteSet {
            inbox: Some(InboxMark {
                handler: "notify".into(),
                event_id: "e-1".into(),
                claim_id: "c-2".into(),
                outcome: InboxOutcome::DeadLettered {
                    error: "boom".into(),
                },
            }),
            dead_letters: vec![failing(2)],
            ..WriteSet::default()
        })
        .await
        .unwrap();
    let filed = store.dead_letter("l-inbox").await.unwrap().unwrap();
    assert_eq!(
        (filed.first_failed_at, filed.last_failed_at),
        (at(0), at(2)),
        "the first failure kept, the last the give-up"
    );

    // Scheduler: failed at 10, given up at 11; rescheduled, it starts afresh.
    store
        .commit(&WriteSet {
            schedule: vec![entry("k", "2026-01-01T00:00:10Z")],
            ..WriteSet::default()
        })
        .await
        .unwrap();
    let release = |claim_id: &str, outcome| WriteSet {
        scheduled: Some(ScheduledRelease {
            dedupe_key: "k".into(),
            claim_id: claim_id.into(),
            outcome,
        }),
        ..WriteSet::default()
    };
    store.claim_due("w-1", at(10), lease, 1).await.unwrap();
    store
        .commit(&release(
            "w-1",
            ScheduledOutcome::Retry {
                execute_at: at(11),
                error: "boom".into(),
                failed_at: at(10),
            },
        ))
        .await
        .unwrap();
    store.claim_due("w-2", at(11), lease, 1).await.unwrap();
    let given_up = |claim_id: &str, id: &str, n: u64| WriteSet {
        dead_letters: vec![DeadLetter {
            id: id.into(),
            kind: LetterKind::Scheduled,
            ..failing(n)
        }],
        ..release(claim_id, ScheduledOutcome::Complete)
    };
    store
        .commit(&given_up("w-2", "l-scheduled", 11))
        .await
        .unwrap();
    let filed = store.dead_letter("l-scheduled").await.unwrap().unwrap();
    assert_eq!(
        (filed.first_failed_at, filed.last_failed_at),
        (at(10), at(11))
    );
    store
        .commit(&WriteSet {
            schedule: vec![entry("k", "2026-01-01T00:00:20Z")],
            ..WriteSet::default()
        })
        .await
        .unwrap();
    store.claim_due("w-3", at(20), lease, 1).await.unwrap();
    store.commit(&given_up("w-3", "l-again", 20)).await.unwrap();
    let filed = store.dead_letter("l-again").await.unwrap().unwrap();
    assert_eq!(
        filed.first_failed_at,
        at(20),
        "a new schedule starts with no failure"
    );
}

// Issue 9: lease arithmetic saturates: a lease that runs past the calendar expires nothing.
pub async fn a_lease_longer_than_the_calendar_never_lapses(store: &dyn Store) {
    let now = t("2026-01-01T00:00:00Z");
    let forever = crate::Duration::MAX;
    store
        .claim_inbox("notify", "e-1", "c-1", now, forever)
        .await
        .unwrap();
    assert_eq!(
        store
            .claim_inbox("notify", "e-1", "c-2", now + days(3650), forever)
            .await
            .unwrap(),
        InboxClaim::Held,
        "a decade on, still held"
    );
    store
        .commit(&WriteSet {
            schedule: vec![entry("k", "2026-01-01T00:00:00Z")],
            ..WriteSet::default()
        })
        .await
        .unwrap();
    assert_eq!(
        store.claim_due("w-1", now, forever, 1).await.unwrap().len(),
        1
    );
    assert!(
        store
            .claim_due("w-2", now + days(3650), forever, 1)
            .await
            .unwrap()
            .is_empty(),
        "a live claim is not taken over"
    );
}

// spec 170, issue 9: one operator's retry at a time holds a letter.
pub async fn a_letter_is_claimed_by_one_retry_at_a_time(store: &dyn Store) {
    let now = t("2026-01-01T00:00:00Z");
    let lease = seconds(60);
    store
        .commit(&WriteSet {
            dead_letters: vec![letter("l-1", LetterKind::Policy, "notify")],
            ..WriteSet::default()
        })
        .await
        .unwrap();
    assert!(store.claim_letter("l-1", "r-1", now, lease).await.unwrap());
    assert!(
        !store
            .claim_letter("l-1", "r-2", now + seconds(60), lease)
            .await
            .unwrap(),
        "held until its lease has passed"
    );
    store.release_letter("l-1", "r-2").await.unwrap();
    assert!(
        !store.claim_letter("l-1", "r-2", now, lease).await.unwrap(),
        "only its holder releases it"
    );
    store.release_letter("l-1", "r-1").await.unwrap();
    assert!(store.claim_letter("l-1", "r-2", now, lease).await.unwrap());
    assert!(
        store
            .claim_letter("l-1", "r-3", now + seconds(61), lease)
            .await
            .unwrap(),
        "a lapsed retry's claim is taken over"
    );
    store
        .commit(&WriteSet {
            settle_letter: Some(LetterSettle {
                id: "l-1".into(),
                status: LetterStatus::Discarded,
            }),
            ..WriteSet::default()
        })
        .await
        .unwrap();
    store.release_letter("l-1", "r-3").await.unwrap();
    assert!(
        !store
            .claim_letter("l-1", "r-4", now + seconds(999), lease)
            .await
            .unwrap(),
        "a settled letter is never claimed"
    );
    assert!(!store.claim_letter("nope", "r-5", now, lease).await.unwrap());
}

// A payload is the user's: whatever JSON it is (a NUL in a string, any Unicode, large and
// fractional numbers, deep nesting, a key order) comes back equal, in events, scheduler entries,
// letters and snapshots.
pub async fn any_json_is_kept_as_written(store: &dyn Store) {
    let odd = json!({
        "nul": "a\u{0}b",
        "unicode": "\u{1F600} \u{10FFFF} \u{202E}",
        "numbers": [u64::MAX, i64::MIN, 0.1, 1e300, -0.0],
        "nested": { "z": [[[[{ "a": null }]]]], "a": true },
        "": "an empty key",
    });
    let mut appended = append("Order", "o-1", 0, &["e-1"]);
    appended.events[0].payload = odd.clone();
    let mut scheduled = entry("k-1", "2026-01-02T00:00:00Z");
    scheduled.payload = odd.clone();
    scheduled.context = odd.clone();
    let mut filed = letter("l-1", LetterKind::Scheduled, "Ping");
    filed.payload = Some(odd.clone());
    store
        .commit(&WriteSet {
            appends: vec![appended],
            schedule: vec![scheduled],
            dead_letters: vec![filed],
            snapshots: vec![Snapshot {
                aggregate_type: "Order".into(),
                aggregate_id: "o-1".into(),
                version: 1,
                state: odd.clone(),
            }],
            ..WriteSet::default()
        })
        .await
        .unwrap();
    let events = store.read_stream("Order", "o-1").await.unwrap();
    assert_eq!(events[0].payload, odd, "an event's payload");
    let entry = store.scheduled("k-1").await.unwrap().unwrap();
    assert_eq!((entry.payload, entry.context), (odd.clone(), odd.clone()));
    let letter = store.dead_letter("l-1").await.unwrap().unwrap();
    assert_eq!(letter.payload, Some(odd.clone()), "a letter's payload");
    let snapshot = store.snapshot("Order", "o-1").await.unwrap().unwrap();
    assert_eq!(snapshot.state, odd, "a snapshot's state");
}

// issue 21: a batch of firings as a worker commits it (each appends, re-arms its entry in place,
// keeps a snapshot), one of whose claims another worker took over meanwhile. However the store
// writes them (PostgreSQL sends them all before reading an answer), the others land whole, in
// order, and that one writes nothing.
pub async fn a_group_commit_of_firings_fails_only_the_one_whose_claim_was_taken_over(
    store: &dyn Store,
) {
    const FIRINGS: usize = 12;
    const TAKEN: usize = 5;
    let now = t("2026-01-02T00:00:00Z");
    let key = |n: usize| format!("k-{n:02}");
    store
        .commit(&WriteSet {
            schedule: (0..FIRINGS)
                .map(|n| entry(&key(n), "2026-01-01T00:00:00Z"))
                .collect(),
            ..WriteSet::default()
        })
        .await
        .unwrap();
    let claimed = store.claim_due("w-1", now, seconds(60), 100).await.unwrap();
    assert_eq!(claimed.len(), FIRINGS);
    let firing = |n: usize, claim_id: &str| WriteSet {
        appends: vec![append(
            "Order",
            &format!("o-{n}"),
            0,
            &[&format!("fired-{n}")],
        )],
        scheduled: Some(ScheduledRelease {
            dedupe_key: key(n),
            claim_id: claim_id.into(),
            outcome: ScheduledOutcome::Complete,
        }),
        schedule: vec![entry(&key(n), "2026-02-01T00:00:00Z")],
        snapshots: vec![Snapshot {
            aggregate_type: "Order".into(),
            aggregate_id: format!("o-{n}"),
            version: 1,
            state: json!({ "fired": n }),
        }],
        ..WriteSet::default()
    };
    let batch: Vec<WriteSet> = (0..FIRINGS)
        .map(|n| match n {
            // Its lease lapsed and another worker holds it now.
            TAKEN => firing(n, "w-2"),
            n => firing(n, "w-1"),
        })
        .collect();
    let results = store.commit_many(&batch).await;
    assert_eq!(results.len(), FIRINGS);
    let mut position = 0;
    for (n, result) in results.iter().enumerate() {
        let stream = store.read_stream("Order", &format!("o-{n}")).await.unwrap();
        let entry = store.scheduled(&key(n)).await.unwrap().unwrap();
        let snapshot = store.snapshot("Order", &format!("o-{n}")).await.unwrap();
        if n == TAKEN {
            assert!(
                matches!(result, Err(CommitError::ScheduledClaimLost { .. })),
                "firing {n}: {result:?}"
            );
            assert!(stream.is_empty(), "the refused firing appended nothing");
            assert_eq!(
                entry.execute_at,
                t("2026-01-01T00:00:00Z"),
                "nor moved its entry"
            );
            assert_eq!(
                entry.claim_id.as_deref(),
                Some("w-1"),
                "still held as it was"
            );
            assert!(snapshot.is_none(), "nor kept a snapshot");
            continue;
        }
        position += 1;
        let committed = result.as_ref().unwrap();
        assert_eq!(
            committed.events[0].position, position,
            "firing {n} in order"
        );
        assert_eq!(stream.len(), 1, "firing {n} appended once");
        assert_eq!(
            entry.execute_at,
            t("2026-02-01T00:00:00Z"),
            "firing {n} re-armed"
        );
        assert_eq!(entry.claim_id, None, "firing {n} released its claim");
        assert_eq!(snapshot.unwrap().state, json!({ "fired": n }));
    }
    assert_eq!(store.head().await.unwrap(), position);
}

// issue 47: a wave of write sets of every kind a worker's batch writes (streams appended, one
// with two events, entries moved in place, completed, scheduled and unscheduled, snapshots
// kept or left for a newer one, inbox claims settled, subscribers moved past, the next batch
// claimed last), none refused: a store that writes a wave in a statement per kind of write
// lands each write set as it would alone, and answers each in order.
pub async fn a_wave_of_every_kind_lands_as_each_write_set_alone_would(store: &dyn Store) {
    let now = t("2026-01-02T00:00:00Z");
    let lease = seconds(60);
    store
        .commit(&appending(vec![
            append("Ticket", "t-1", 0, &["e-1"]),
            append("Ticket", "t-2", 0, &["e-2"]),
            append("Ticket", "t-3", 0, &["e-3"]),
        ]))
        .await
        .unwrap();
    store.move_checkpoint("reader", None, 3).await.unwrap();
    store.move_checkpoint("behind", None, 1).await.unwrap();
    let snapshot = |id: &str, version: u64| Snapshot {
        aggregate_type: "Order".into(),
        aggregate_id: id.into(),
        version,
        state: json!({ "version": version }),
    };
    store
        .commit(&WriteSet {
            schedule: vec![
                entry("k-0", "2026-01-01T00:00:00Z"),
                entry("k-1", "2026-01-01T00:00:00Z"),
                entry("k-2", "2026-01-01T00:00:00Z"),
                entry("k-3", "2026-01-01T00:00:00Z"),
                entry("gone", "2026-03-01T00:00:00Z"),
                entry("same", "2026-03-01T00:00:00Z"),
            ],
            snapshots: vec![snapshot("o-9", 5)],
            ..WriteSet::default()
        })
        .await
        .unwrap();
    let claimed = store.claim_due("w-1", now, lease, 4).await.unwrap();
    assert_eq!(claimed.len(), 4);
    for event_id in ["e-1", "e-2", "e-3"] {
        store
            .claim_inbox("notify", event_id, "c-1", now, lease)
            .await
            .unwrap();
    }
    let release = |key: &str| ScheduledRelease {
        dedupe_key: key.into(),
        claim_id: "w-1".into(),
        outcome: ScheduledOutcome::Complete,
    };
    let mark = |event_id: &str, outcome: InboxOutcome| InboxMark {
        handler: "notify".into(),
        event_id: event_id.into(),
        claim_id: "c-1".into(),
        outcome,
    };
    let skipping = |mut writes: WriteSet| {
        writes.skip = vec!["reader".into(), "behind".into()];
        writes
    };
    let wave = vec![
        // A firing that re-arms its entry in place and keeps a snapshot.
        skipping(WriteSet {
            appends: vec![append("Order", "o-0", 0, &["fired-0", "fired-0b"])],
            scheduled: Some(release("k-0")),
            schedule: vec![entry("k-0", "2026-02-01T00:00:00Z")],
            snapshots: vec![snapshot("o-0", 2)],
            ..WriteSet::default()
        }),
        // A firing that ends its instance: its entry completed, another one unscheduled.
        skipping(WriteSet {
            appends: vec![append("Order", "o-1", 0, &["fired-1"])],
            scheduled: Some(release("k-1")),
            unschedule: vec!["gone".into()],
            ..WriteSet::default()
        }),
        // A reaction that succeeded, scheduling an entry due at once and one as it is already.
        skipping(WriteSet {
            appends: vec![append("Ticket", "t-1", 1, &["reacted-1"])],
            inbox: Some(mark("e-1", InboxOutcome::Succeeded)),
            schedule: vec![
                entry("new", "2026-01-01T06:00:00Z"),
                entry("same", "2026-03-01T00:00:00Z"),
            ],
            snapshots: vec![snapshot("o-9", 4)],
            ..WriteSet::default()
        }),
        // A reaction that failed, to be retried.
        WriteSet {
            inbox: Some(mark(
                "e-2",
                InboxOutcome::Failed {
                    retry_at: t("2026-01-02T00:05:00Z"),
                    error: "boom".into(),
                    failed_at: now,
                },
            )),
            ..WriteSet::default()
        },
        // A reaction given back unrun (its limit's permits ran out).
        WriteSet {
            inbox: Some(mark("e-3", InboxOutcome::Released)),
            ..WriteSet::default()
        },
        // A firing deferred unrun: its entry given back as it stands.
        WriteSet {
            scheduled: Some(ScheduledRelease {
                outcome: ScheduledOutcome::Defer,
                ..release("k-3")
            }),
            ..WriteSet::default()
        },
        // A firing that moves its entry and appends nothing.
        WriteSet {
            scheduled: Some(release("k-2")),
            schedule: vec![entry("k-2", "2026-04-01T00:00:00Z")],
            ..WriteSet::default()
        },
        // The next batch, claimed last: the entry scheduled above is due.
        WriteSet {
            claim_due: Some(ClaimDue {
                claim_id: "w-2".into(),
                now,
                lease,
                limit: 10,
            }),
            ..WriteSet::default()
        },
    ];
    let results = store.commit_many(&wave).await;
    let committed: Vec<crate::store::Committed> = results
        .into_iter()
        .map(|result| result.expect("every write set of the wave lands"))
        .collect();
    let versions = |n: usize| -> Vec<u64> {
        committed[n]
            .events
            .iter()
            .map(|event| event.version)
            .collect()
    };
    assert_eq!(
        (versions(0), versions(1), versions(2)),
        (vec![1, 2], vec![1], vec![2])
    );
    let stored: Vec<String> = store
        .read_all(3, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|event| event.id)
        .collect();
    assert_eq!(
        stored,
        ["fired-0", "fired-0b", "fired-1", "reacted-1"],
        "in order"
    );
    let positions: Vec<u64> = committed
        .iter()
        .flat_map(|c| &c.events)
        .map(|e| e.position)
        .collect();
    assert!(
        positions == [4, 5, 6, 7] || positions == [0, 0, 0, 0],
        "in order, or placed once committed: {positions:?}"
    );
    let checkpoint = store.checkpoint("reader").await.unwrap();
    assert!(
        checkpoint == Some(7) || checkpoint == Some(3),
        "moved past the wave's events, or left for the store's own placing: {checkpoint:?}"
    );
    assert_eq!(store.checkpoint("behind").await.unwrap(), Some(1));
    let entry_at = |key: &'static str| async move {
        store
            .scheduled(key)
            .await
            .unwrap()
            .map(|entry| (entry.execute_at, entry.claim_id))
    };
    assert_eq!(
        entry_at("k-0").await,
        Some((t("2026-02-01T00:00:00Z"), None)),
        "re-armed"
    );
    assert_eq!(entry_at("k-1").await, None, "completed");
    assert_eq!(
        entry_at("k-3").await,
        Some((t("2026-01-01T00:00:00Z"), Some("w-2".into()))),
        "given back as it stood, then claimed by the wave's claim"
    );
    assert_eq!(entry_at("gone").await, None, "unscheduled");
    assert_eq!(
        entry_at("k-2").await,
        Some((t("2026-04-01T00:00:00Z"), None)),
        "moved"
    );
    assert_eq!(
        entry_at("same").await,
        Some((t("2026-03-01T00:00:00Z"), None)),
        "left as it was"
    );
    assert_eq!(
        entry_at("new").await,
        Some((t("2026-01-01T06:00:00Z"), Some("w-2".into()))),
        "scheduled, then claimed by the wave's claim"
    );
    let claimed: Vec<&str> = committed[7]
        .claimed
        .iter()
        .map(|entry| entry.dedupe_key.as_str())
        .collect();
    assert_eq!(claimed, ["k-3", "new"]);
    let state = |id: &'static str| async move {
        store
            .snapshot("Order", id)
            .await
            .unwrap()
            .map(|s| s.version)
    };
    assert_eq!((state("o-0").await, state("o-9").await), (Some(2), Some(5)));
    for (event_id, attempt) in [("e-1", None), ("e-2", Some(2)), ("e-3", Some(1))] {
        let answer = store
            .claim_inbox("notify", event_id, "c-2", t("2026-01-02T00:10:00Z"), lease)
            .await
            .unwrap();
        match attempt {
            None => assert_eq!(answer, InboxClaim::Succeeded, "{event_id} succeeded"),
            Some(attempt) => assert_eq!(
                answer,
                InboxClaim::Claimed { attempt },
                "{event_id} due again, a failure counted, a claim given back not"
            ),
        }
    }
}

// A group commit of many write sets, some refused, however the store splits it: each answered
// in order, the refused ones writing nothing, the others' events at consecutive positions.
pub async fn a_large_group_commit_answers_each_write_set_in_order(store: &dyn Store) {
    const SETS: usize = 240;
    let ids: Vec<String> = (0..SETS).map(|n| format!("e-{n}")).collect();
    let batch: Vec<WriteSet> = (0..SETS)
        .map(|n| {
            // Every seventh expects a version its new stream does not have.
            let expected = u64::from(n % 7 == 3);
            appending(vec![append(
                "Order",
                &format!("o-{n}"),
                expected,
                &[&ids[n]],
            )])
        })
        .collect();
    let results = store.commit_many(&batch).await;
    assert_eq!(results.len(), SETS);
    let mut position = 0;
    for (n, result) in results.iter().enumerate() {
        match (n % 7 == 3, result) {
            (true, Err(CommitError::StreamMoved { .. })) => {
                assert!(
                    store
                        .read_stream("Order", &format!("o-{n}"))
                        .await
                        .unwrap()
                        .is_empty(),
                    "refused set {n} wrote nothing"
                );
            }
            (false, Ok(committed)) => {
                position += 1;
                assert_eq!(committed.events[0].position, position, "set {n}");
            }
            (_, other) => panic!("set {n}: {other:?}"),
        }
    }
    assert_eq!(store.head().await.unwrap(), position);
}

// What a page shows of the hours ahead: entries of one type due by a moment, soonest first, at
// most a limit, and whether any of that type comes after it.
pub async fn the_hours_ahead_are_read_bounded_and_the_rest_counted(store: &dyn Store) {
    let mut other = entry("other", "2026-01-01T00:30:00Z");
    other.command_type = "Other".into();
    store
        .commit(&WriteSet {
            schedule: vec![
                entry("k-3", "2026-01-01T03:00:00Z"),
                entry("k-1", "2026-01-01T01:00:00Z"),
                entry("k-9", "2026-01-09T00:00:00Z"),
                entry("k-2", "2026-01-01T02:00:00Z"),
                other,
            ],
            ..WriteSet::default()
        })
        .await
        .unwrap();
    let until = t("2026-01-02T00:00:00Z");
    let (due, later) = store
        .scheduled_until("SendReminder", until, 2)
        .await
        .unwrap();
    let keys: Vec<&str> = due.iter().map(|e| e.dedupe_key.as_str()).collect();
    assert_eq!(keys, ["k-1", "k-2"], "soonest first, at most the limit");
    assert!(later, "k-9 comes after the moment");
    let (all, _) = store
        .scheduled_until("SendReminder", until, 100)
        .await
        .unwrap();
    assert_eq!(
        all.len(),
        3,
        "not the one due after the moment, nor another type"
    );
    let (_, later) = store
        .scheduled_until("SendReminder", t("2026-02-01T00:00:00Z"), 100)
        .await
        .unwrap();
    assert!(!later, "nothing of the type after the last");
}

/// A letter `l-1`, filed, and an entry `k`, due at 2026-01-01T00:00:00Z.
async fn a_letter_and_a_due_entry(store: &dyn Store) {
    store
        .commit(&WriteSet {
            schedule: vec![entry("k", "2026-01-01T00:00:00Z")],
            dead_letters: vec![letter("l-1", LetterKind::Policy, "notify")],
            ..WriteSet::default()
        })
        .await
        .unwrap();
}

// Issue 19: a claim lapses on the lease its holder took it with, not on the lease of the runner
// that finds it: a claim taken with 4 s is taken over by a runner with 30 s just after 4 s, and
// one taken with 30 s is not taken over by a runner with 4 s.
pub async fn a_claim_lapses_on_the_lease_it_was_taken_with(store: &dyn Store) {
    let now = t("2026-01-01T00:00:00Z");
    let (short, long) = (seconds(4), seconds(30));
    a_letter_and_a_due_entry(store).await;
    store
        .claim_inbox("notify", "e-1", "c-1", now, short)
        .await
        .unwrap();
    assert_eq!(
        store.claim_due("w-1", now, short, 10).await.unwrap().len(),
        1
    );
    assert!(store.claim_letter("l-1", "r-1", now, short).await.unwrap());
    let ends = now + short;
    assert_eq!(
        store
            .claim_inbox("notify", "e-1", "c-2", ends, long)
            .await
            .unwrap(),
        InboxClaim::Held,
        "an inbox claim that ends now has not passed yet"
    );
    assert!(
        store
            .claim_due("w-2", ends, long, 10)
            .await
            .unwrap()
            .is_empty(),
        "nor a scheduler claim"
    );
    assert!(
        !store.claim_letter("l-1", "r-2", ends, long).await.unwrap(),
        "nor a letter's"
    );
    let after = ends + millis(1);
    assert_eq!(
        store
            .claim_inbox("notify", "e-1", "c-2", after, long)
            .await
            .unwrap(),
        InboxClaim::Claimed { attempt: 1 },
        "taken over just after its own 4 s, whatever the reader's lease"
    );
    assert_eq!(
        store
            .claim_due("w-2", after, long, 10)
            .await
            .unwrap()
            .iter()
            .map(|e| e.dedupe_key.as_str())
            .collect::<Vec<_>>(),
        ["k"]
    );
    assert!(store.claim_letter("l-1", "r-2", after, long).await.unwrap());
    // Taken with 30 s now: a runner with 4 s leaves them alone until those 30 s have passed.
    let later = after + seconds(5);
    assert_eq!(
        store
            .claim_inbox("notify", "e-1", "c-3", later, short)
            .await
            .unwrap(),
        InboxClaim::Held,
        "a long claim is not taken over on a short reader's lease"
    );
    assert!(
        store
            .claim_due("w-3", later, short, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        !store
            .claim_letter("l-1", "r-3", later, short)
            .await
            .unwrap()
    );
    let lapsed = after + long + millis(1);
    assert_eq!(
        store
            .claim_inbox("notify", "e-1", "c-3", lapsed, short)
            .await
            .unwrap(),
        InboxClaim::Claimed { attempt: 1 }
    );
    assert_eq!(
        store
            .claim_due("w-3", lapsed, short, 10)
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        store
            .claim_letter("l-1", "r-3", lapsed, short)
            .await
            .unwrap()
    );
}

// Issue 19: an idle runner with a long lease wakes when a short claim ends, not when its own
// lease would.
pub async fn next_due_at_counts_a_claim_to_the_end_of_its_own_lease(store: &dyn Store) {
    let now = t("2026-01-01T00:00:00Z");
    a_letter_and_a_due_entry(store).await;
    store.claim_due("w-1", now, seconds(4), 10).await.unwrap();
    assert_eq!(
        store
            .next_due_at(t("2026-01-01T00:00:00Z"), seconds(30))
            .await
            .unwrap(),
        Some(t("2026-01-01T00:00:04.001Z"))
    );
    assert!(
        store
            .renew_scheduled("k", "w-1", now + seconds(3), seconds(30))
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .next_due_at(t("2026-01-01T00:00:00Z"), seconds(4))
            .await
            .unwrap(),
        Some(t("2026-01-01T00:00:33.001Z")),
        "renewed with 30 s"
    );
}

// Issue 19: a renewal holds a claim for the renewing runner's lease from the moment it renews.
pub async fn a_renewal_extends_a_claim_by_the_renewing_lease(store: &dyn Store) {
    let now = t("2026-01-01T00:00:00Z");
    let (short, reader) = (seconds(4), seconds(1));
    a_letter_and_a_due_entry(store).await;
    store
        .claim_inbox("notify", "e-1", "c-1", now, short)
        .await
        .unwrap();
    store.claim_due("w-1", now, short, 10).await.unwrap();
    let renewed = now + seconds(2);
    assert!(
        store
            .renew_inbox("notify", "e-1", "c-1", renewed, seconds(10))
            .await
            .unwrap()
    );
    assert!(
        store
            .renew_scheduled("k", "w-1", renewed, seconds(10))
            .await
            .unwrap()
    );
    let ends = renewed + seconds(10);
    assert_eq!(
        store
            .claim_inbox("notify", "e-1", "c-2", ends, reader)
            .await
            .unwrap(),
        InboxClaim::Held,
        "held until 10 s after the renewal"
    );
    assert!(
        store
            .claim_due("w-2", ends, reader, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .claim_inbox("notify", "e-1", "c-2", ends + millis(1), reader)
            .await
            .unwrap(),
        InboxClaim::Claimed { attempt: 1 }
    );
    assert_eq!(
        store
            .claim_due("w-2", ends + millis(1), reader, 10)
            .await
            .unwrap()
            .len(),
        1
    );
}

// Issue 19: an operator's retry renews its letter's claim, as runners renew theirs; a renewal
// of a claim that is not its holder's, or of a settled letter, is refused.
pub async fn a_renewed_letter_claim_outlasts_its_first_lease(store: &dyn Store) {
    let now = t("2026-01-01T00:00:00Z");
    let lease = seconds(4);
    a_letter_and_a_due_entry(store).await;
    assert!(store.claim_letter("l-1", "r-1", now, lease).await.unwrap());
    assert!(
        store
            .renew_letter("l-1", "r-1", now + seconds(3), lease)
            .await
            .unwrap()
    );
    assert!(
        !store
            .claim_letter("l-1", "r-2", now + seconds(5), lease)
            .await
            .unwrap(),
        "held past its first lease"
    );
    assert!(
        !store
            .claim_letter("l-1", "r-2", now + seconds(7), lease)
            .await
            .unwrap(),
        "a renewed lease that ends now has not passed yet"
    );
    assert!(
        !store
            .renew_letter("l-1", "r-2", now + seconds(7), lease)
            .await
            .unwrap(),
        "only the holder renews"
    );
    assert!(
        store
            .claim_letter("l-1", "r-2", now + seconds(7) + millis(1), lease)
            .await
            .unwrap(),
        "a renewed claim lapses too"
    );
    assert!(
        !store
            .renew_letter("l-1", "r-1", now + seconds(8), lease)
            .await
            .unwrap(),
        "r-1 lost it"
    );
    store
        .commit(&WriteSet {
            settle_letter: Some(LetterSettle {
                id: "l-1".into(),
                status: LetterStatus::Discarded,
            }),
            ..WriteSet::default()
        })
        .await
        .unwrap();
    assert!(
        !store
            .renew_letter("l-1", "r-2", now + seconds(8), lease)
            .await
            .unwrap(),
        "a settled letter's claim is not renewed"
    );
    assert!(!store.renew_letter("nope", "r-2", now, lease).await.unwrap());
}

// Issue 19: each step of an operator's retry is written only while the retry holds its letter,
// so a retry whose claim another took over commits nothing more.
pub async fn a_write_set_fenced_on_a_letter_writes_only_while_its_retry_holds_it(
    store: &dyn Store,
) {
    let now = t("2026-01-01T00:00:00Z");
    let lease = seconds(4);
    a_letter_and_a_due_entry(store).await;
    let step = |claim_id: &str, stream: &str| WriteSet {
        appends: vec![append("Order", stream, 0, &[stream])],
        require_letter: Some(LetterHold {
            id: "l-1".into(),
            claim_id: claim_id.into(),
        }),
        ..WriteSet::default()
    };
    assert!(
        matches!(
            store.commit(&step("r-1", "o-1")).await,
            Err(CommitError::LetterSettled { id }) if id == "l-1"
        ),
        "a letter nobody holds"
    );
    assert!(store.claim_letter("l-1", "r-1", now, lease).await.unwrap());
    store.commit(&step("r-1", "o-1")).await.unwrap();
    assert!(
        store
            .claim_letter("l-1", "r-2", now + lease + millis(1), lease)
            .await
            .unwrap()
    );
    assert!(
        matches!(
            store.commit(&step("r-1", "o-2")).await,
            Err(CommitError::LetterSettled { id }) if id == "l-1"
        ),
        "a retry whose claim was taken over"
    );
    assert!(
        store.read_stream("Order", "o-2").await.unwrap().is_empty(),
        "writes nothing"
    );
    let mut last = step("r-2", "o-2");
    last.settle_letter = Some(LetterSettle {
        id: "l-1".into(),
        status: LetterStatus::Retried,
    });
    store.commit(&last).await.unwrap();
    assert_eq!(
        store.dead_letter("l-1").await.unwrap().unwrap().status,
        LetterStatus::Retried
    );
    assert_eq!(store.read_stream("Order", "o-2").await.unwrap().len(), 1);
}

/// What a store opened on the claims an older build wrote holds, and how they lapse: the
/// fixture each store keeps of the build before claims kept their end (one claimed inbox pair
/// `notify`/`e-1`, one claimed scheduler entry `k-1` and one claimed letter `l-1`, each taken at
/// 2026-01-01T00:00:00Z with a 4 s lease, which the file does not hold). Not part of
/// [`store_contract_tests!`](crate::store_contract_tests): a store's test opens its fixture,
/// which migrates, and runs this on it.
///
/// Those claims lapse on the reader's lease, as that build read them; a claim taken afterwards
/// keeps its own end and lapses on it.
pub async fn claims_of_an_older_build_lapse_on_the_readers_lease(store: &dyn Store) {
    let taken = t("2026-01-01T00:00:00Z");
    let (reader, short) = (seconds(30), seconds(4));
    assert_eq!(
        store
            .next_due_at(t("2026-01-01T00:00:00Z"), reader)
            .await
            .unwrap(),
        Some(taken + reader + millis(1)),
        "an old claim is due again on the reader's lease"
    );
    let ends = taken + reader;
    assert_eq!(
        store
            .claim_inbox("notify", "e-1", "new-runner", ends, reader)
            .await
            .unwrap(),
        InboxClaim::Held,
        "an old inbox claim holds for the reader's lease, not the 4 s it was taken with"
    );
    assert!(
        store
            .claim_due("new-runner", ends, reader, 10)
            .await
            .unwrap()
            .is_empty(),
        "so does an old scheduler claim"
    );
    assert!(
        !store
            .claim_letter("l-1", "new-operator", ends, reader)
            .await
            .unwrap(),
        "and an old letter claim"
    );
    let after = ends + millis(1);
    assert_eq!(
        store
            .claim_inbox("notify", "e-1", "new-runner", after, short)
            .await
            .unwrap(),
        InboxClaim::Claimed { attempt: 1 },
        "taken over once the reader's lease has passed, no attempt counted"
    );
    assert_eq!(
        store
            .claim_due("new-runner", after, short, 10)
            .await
            .unwrap()
            .iter()
            .map(|e| e.dedupe_key.as_str())
            .collect::<Vec<_>>(),
        ["k-1"]
    );
    assert!(
        store
            .claim_letter("l-1", "new-operator", after, short)
            .await
            .unwrap()
    );
    // Taken again with 4 s, by this build: a reader with 30 s takes them over just after 4 s.
    let ends = after + short;
    assert_eq!(
        store
            .next_due_at(t("2026-01-01T00:00:00Z"), reader)
            .await
            .unwrap(),
        Some(ends + millis(1)),
        "a new claim is due again at its own end"
    );
    assert_eq!(
        store
            .claim_inbox("notify", "e-1", "next-runner", ends, reader)
            .await
            .unwrap(),
        InboxClaim::Held
    );
    assert!(
        store
            .claim_due("next-runner", ends, reader, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        !store
            .claim_letter("l-1", "next-operator", ends, reader)
            .await
            .unwrap()
    );
    let after = ends + millis(1);
    assert_eq!(
        store
            .claim_inbox("notify", "e-1", "next-runner", after, reader)
            .await
            .unwrap(),
        InboxClaim::Claimed { attempt: 1 }
    );
    assert_eq!(
        store
            .claim_due("next-runner", after, reader, 10)
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        store
            .claim_letter("l-1", "next-operator", after, reader)
            .await
            .unwrap()
    );
    assert_eq!(
        store.read_event("e-1").await.unwrap().map(|e| e.position),
        Some(1),
        "the old build's event reads"
    );
}
