//! The instances index: written with each step, listed and counted as a model says.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};

use crate::store::{
    Append, InstanceChange, InstanceCounts, InstanceOrder, InstanceQuery, InstanceRow,
    InstanceStatus, Metadata, NewEvent, NextDue, Store, WriteSet,
};
use crate::{Instant, minutes};

/// `count` lifecycle events of type `kind` for instance `id` of `process`, appended after
/// `version`, with `change` for the index.
fn step(
    process: &str,
    id: &str,
    version: u64,
    kinds: &[&str],
    at: Instant,
    correlation: &str,
    change: InstanceChange,
) -> WriteSet {
    WriteSet {
        appends: vec![Append {
            aggregate_type: format!("process:{process}"),
            aggregate_id: id.to_owned(),
            expected_version: version,
            events: kinds
                .iter()
                .enumerate()
                .map(|(n, kind)| NewEvent {
                    id: format!("{process}-{id}-{}", version + n as u64 + 1),
                    event_type: (*kind).to_owned(),
                    payload: serde_json::json!({}),
                    timestamp: at,
                    metadata: Metadata {
                        system: true,
                        ..Metadata::of_command(correlation)
                    },
                })
                .collect(),
        }],
        instances: vec![change],
        ..WriteSet::default()
    }
}

fn change(process: &str, id: &str) -> InstanceChange {
    InstanceChange {
        process: process.to_owned(),
        instance_id: id.to_owned(),
        at: None,
        started: None,
        status: None,
        next_due: NextDue::Keep,
    }
}

fn t0() -> Instant {
    Instant::parse("2026-01-01T00:00:00Z").unwrap()
}

/// Every page of `query`, `page` at a time, following each page's last cursor.
async fn pages(store: &dyn Store, query: &InstanceQuery, page: usize) -> Vec<InstanceRow> {
    let mut query = InstanceQuery {
        limit: page,
        ..query.clone()
    };
    let mut all = Vec::new();
    loop {
        let rows = super::kept(store.capabilities().instances())
            .instances(&query)
            .await
            .unwrap();
        assert!(rows.len() <= page, "a page holds at most its limit");
        let Some(last) = rows.last() else { break };
        query.after = Some(last.cursor(query.order));
        let full = rows.len() == page;
        all.extend(rows);
        if !full {
            break;
        }
    }
    all
}

/// What `query` lists of `rows`, as the model has it.
fn model(rows: &[InstanceRow], query: &InstanceQuery) -> Vec<InstanceRow> {
    let mut listed: Vec<InstanceRow> = rows.iter().filter(|r| query.matches(r)).cloned().collect();
    match query.order {
        InstanceOrder::Newest => listed.sort_by(|a, b| {
            (b.started_at, &b.process, &b.instance_id).cmp(&(
                a.started_at,
                &a.process,
                &a.instance_id,
            ))
        }),
        InstanceOrder::Soonest => listed.sort_by(|a, b| {
            (a.next_due, &a.process, &a.instance_id).cmp(&(b.next_due, &b.process, &b.instance_id))
        }),
    }
    listed
}

/// Every row, or those whose id starts with `prefix`.
/// The rows listed newest first (those whose id starts with `prefix`), once the listing soonest
/// first is seen to hold the same rows with a deadline, by deadline (a store may keep the
/// deadlines apart from the rows: issue 47).
async fn listed(store: &dyn Store, prefix: Option<&str>) -> Vec<InstanceRow> {
    let query = InstanceQuery {
        id_prefix: prefix.map(str::to_owned),
        limit: 10,
        ..InstanceQuery::default()
    };
    let instances = super::kept(store.capabilities().instances());
    let rows = instances.instances(&query).await.unwrap();
    let soonest = InstanceQuery {
        order: InstanceOrder::Soonest,
        ..query
    };
    let mut due: Vec<InstanceRow> = rows
        .iter()
        .filter(|row| row.next_due.is_some())
        .cloned()
        .collect();
    due.sort_by(|a, b| {
        (a.next_due, &a.process, &a.instance_id).cmp(&(b.next_due, &b.process, &b.instance_id))
    });
    assert_eq!(
        instances.instances(&soonest).await.unwrap(),
        due,
        "listed soonest first: the rows with a deadline, by it"
    );
    rows
}

// issue 47: a wave of steps of several instances (one starting, steps of every shape: a step
// that moves the deadline, one that completes, one that arms a deadline on a failed row, one
// that only re-arms) lands each row as a commit of its own would.
pub async fn a_wave_of_steps_writes_each_row_as_alone(store: &dyn Store) {
    let at = t0();
    let later = at + minutes(5);
    let start = |id: &str| InstanceChange {
        at: Some(at),
        started: Some(format!("c-{id}")),
        next_due: NextDue::At(at + minutes(60)),
        ..change("Payment", id)
    };
    for id in ["o-1", "o-2", "o-3", "o-4"] {
        let started = step("Payment", id, 0, &["ProcessStarted"], at, "c-0", start(id));
        store.commit(&started).await.unwrap();
    }
    let failed = InstanceChange {
        at: Some(at),
        status: Some(InstanceStatus::Failed),
        next_due: NextDue::Clear,
        ..change("Payment", "o-3")
    };
    store
        .commit(&step(
            "Payment",
            "o-3",
            1,
            &["ProcessFailed"],
            at,
            "c-0",
            failed,
        ))
        .await
        .unwrap();
    let wave = vec![
        step(
            "Payment",
            "o-1",
            1,
            &["ProcessHandled"],
            later,
            "c-1",
            InstanceChange {
                at: Some(later),
                next_due: NextDue::At(at + minutes(90)),
                ..change("Payment", "o-1")
            },
        ),
        step(
            "Payment",
            "o-2",
            1,
            &["ProcessCompleted"],
            later,
            "c-2",
            InstanceChange {
                at: Some(later),
                status: Some(InstanceStatus::Completed),
                next_due: NextDue::Clear,
                ..change("Payment", "o-2")
            },
        ),
        // Arming a deadline on a failed row leaves it without one.
        WriteSet {
            instances: vec![InstanceChange {
                next_due: NextDue::At(at + minutes(30)),
                ..change("Payment", "o-3")
            }],
            ..WriteSet::default()
        },
        WriteSet {
            instances: vec![InstanceChange {
                next_due: NextDue::At(at + minutes(45)),
                ..change("Payment", "o-4")
            }],
            ..WriteSet::default()
        },
        step(
            "Payment",
            "o-5",
            0,
            &["ProcessStarted"],
            later,
            "c-5",
            InstanceChange {
                at: Some(later),
                started: Some("c-5".into()),
                next_due: NextDue::At(later + minutes(60)),
                ..change("Payment", "o-5")
            },
        ),
    ];
    for result in store.commit_many(&wave).await {
        result.unwrap();
    }
    let rows: BTreeMap<String, (InstanceStatus, Instant, Option<Instant>)> = listed(store, None)
        .await
        .into_iter()
        .map(|row| (row.instance_id, (row.status, row.updated_at, row.next_due)))
        .collect();
    let running = InstanceStatus::Running;
    assert_eq!(
        rows.into_iter().collect::<Vec<_>>(),
        [
            ("o-1".into(), (running, later, Some(at + minutes(90)))),
            ("o-2".into(), (InstanceStatus::Completed, later, None)),
            ("o-3".into(), (InstanceStatus::Failed, at, None)),
            ("o-4".into(), (running, at, Some(at + minutes(45)))),
            ("o-5".into(), (running, later, Some(later + minutes(60)))),
        ]
    );
}

/// A step writes its instance's row in its transaction: started with the stream's first event
/// (its moment and correlation), then only what a later step changes; a refused step writes
/// none of it; a step of an instance whose row is missing makes it from the stream.
pub async fn an_instance_row_is_written_with_its_steps(store: &dyn Store) {
    let at = t0();
    let started = InstanceChange {
        at: Some(at),
        started: Some("c-1".into()),
        next_due: NextDue::At(at + minutes(60)),
        ..change("Payment", "o-1")
    };
    store
        .commit(&step(
            "Payment",
            "o-1",
            0,
            &["ProcessStarted"],
            at,
            "c-1",
            started,
        ))
        .await
        .unwrap();
    let row = InstanceRow {
        process: "Payment".into(),
        instance_id: "o-1".into(),
        status: InstanceStatus::Running,
        correlation_id: "c-1".into(),
        started_at: at,
        updated_at: at,
        next_due: Some(at + minutes(60)),
    };
    assert_eq!(listed(store, None).await, vec![row.clone()]);

    // A later step: only its moment and next deadline change.
    let later = at + minutes(5);
    let handled = InstanceChange {
        at: Some(later),
        next_due: NextDue::At(at + minutes(90)),
        ..change("Payment", "o-1")
    };
    store
        .commit(&step(
            "Payment",
            "o-1",
            1,
            &["ProcessHandled"],
            later,
            "c-2",
            handled,
        ))
        .await
        .unwrap();
    let row = InstanceRow {
        updated_at: later,
        next_due: Some(at + minutes(90)),
        ..row
    };
    assert_eq!(listed(store, None).await, vec![row.clone()]);

    // A step at a stale version writes nothing, its row change included.
    let stale = InstanceChange {
        at: Some(later),
        status: Some(InstanceStatus::Completed),
        next_due: NextDue::Clear,
        ..change("Payment", "o-1")
    };
    assert!(
        store
            .commit(&step(
                "Payment",
                "o-1",
                1,
                &["ProcessCompleted"],
                later,
                "c-2",
                stale
            ))
            .await
            .is_err()
    );
    assert_eq!(
        listed(store, None).await,
        vec![row.clone()],
        "a refused step changes no row"
    );

    // A deadline armed again with no event (fenced on the version) moves only the deadline.
    let rearmed = InstanceChange {
        next_due: NextDue::At(at + minutes(30)),
        ..change("Payment", "o-1")
    };
    store
        .commit(&step("Payment", "o-1", 2, &[], later, "c-2", rearmed))
        .await
        .unwrap();
    let row = InstanceRow {
        next_due: Some(at + minutes(30)),
        ..row
    };
    assert_eq!(listed(store, None).await, vec![row.clone()]);

    // It ends: its status changes, its deadline is cleared.
    let end = at + minutes(10);
    let ended = InstanceChange {
        at: Some(end),
        status: Some(InstanceStatus::Completed),
        next_due: NextDue::Clear,
        ..change("Payment", "o-1")
    };
    store
        .commit(&step(
            "Payment",
            "o-1",
            2,
            &["ProcessCompleted"],
            end,
            "c-3",
            ended,
        ))
        .await
        .unwrap();
    let row = InstanceRow {
        status: InstanceStatus::Completed,
        updated_at: end,
        next_due: None,
        ..row
    };
    assert_eq!(listed(store, Some("o-1")).await, vec![row]);

    // An instance whose stream holds events but no row (written without the index) is made
    // from its first event by its next step.
    store
        .commit(&WriteSet {
            instances: Vec::new(),
            ..step(
                "Payment",
                "o-2",
                0,
                &["ProcessStarted"],
                at,
                "c-9",
                change("Payment", "o-2"),
            )
        })
        .await
        .unwrap();
    let failed = InstanceChange {
        at: Some(end),
        status: Some(InstanceStatus::Failed),
        next_due: NextDue::Clear,
        ..change("Payment", "o-2")
    };
    store
        .commit(&step(
            "Payment",
            "o-2",
            1,
            &["ProcessFailed"],
            end,
            "c-10",
            failed,
        ))
        .await
        .unwrap();
    // A failed instance armed again without leaving its failure (its start retried) keeps no
    // deadline: only a running instance has one.
    let armed = InstanceChange {
        at: Some(end),
        next_due: NextDue::At(end + minutes(60)),
        ..change("Payment", "o-2")
    };
    store
        .commit(&step(
            "Payment",
            "o-2",
            2,
            &["ProcessStarted"],
            end,
            "c-11",
            armed,
        ))
        .await
        .unwrap();
    assert_eq!(
        listed(store, Some("o-2")).await,
        vec![InstanceRow {
            process: "Payment".into(),
            instance_id: "o-2".into(),
            status: InstanceStatus::Failed,
            correlation_id: "c-9".into(),
            started_at: at,
            updated_at: end,
            next_due: None,
        }]
    );
}

/// Listings and counts answer what the model says for every filter and both orders, a page at
/// a time through the cursor, over instances of three processes in every status.
pub async fn instances_are_listed_and_counted_as_the_model_says(store: &dyn Store) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let processes = ["Payment", "Shipping", "Onboarding"];
    let mut rows = Vec::new();
    for n in 0..90 {
        let process = processes[rng.random_range(0..processes.len())];
        // Ids that share prefixes, and starts that tie, so the orders' tie-breaks count.
        let id = format!("{}-{}", ["a", "ab", "b"][n % 3], n);
        let started_at = t0() + minutes(rng.random_range(0..20) * 30);
        let correlation = format!("c-{}", n % 7);
        let status = InstanceStatus::ALL[rng.random_range(0..4)];
        let next_due = (status == InstanceStatus::Running && rng.random_bool(0.8))
            .then(|| t0() + minutes(rng.random_range(0..40) * 15));
        let kinds: &[&str] = match status {
            InstanceStatus::Running => &["ProcessStarted"],
            InstanceStatus::Failed => &["ProcessStarted", "ProcessFailed"],
            InstanceStatus::TimedOut => &["ProcessStarted", "ProcessTimedOut"],
            InstanceStatus::Completed => &["ProcessStarted", "ProcessCompleted"],
        };
        let started = InstanceChange {
            at: Some(started_at),
            started: Some(correlation.clone()),
            status: Some(status).filter(|s| *s != InstanceStatus::Running),
            next_due: next_due.map_or(NextDue::Clear, NextDue::At),
            ..change(process, &id)
        };
        store
            .commit(&step(
                process,
                &id,
                0,
                kinds,
                started_at,
                &correlation,
                started,
            ))
            .await
            .unwrap();
        rows.push(InstanceRow {
            process: process.to_owned(),
            instance_id: id,
            status,
            correlation_id: correlation,
            started_at,
            updated_at: started_at,
            next_due,
        });
    }
    let now = t0() + minutes(300);
    let mut queries = Vec::new();
    for order in [InstanceOrder::Newest, InstanceOrder::Soonest] {
        for process in [None, Some("Shipping")] {
            for status in [
                None,
                Some(InstanceStatus::Running),
                Some(InstanceStatus::Failed),
            ] {
                let base = InstanceQuery {
                    process: process.map(str::to_owned),
                    status,
                    order,
                    ..InstanceQuery::default()
                };
                queries.push(base.clone());
                queries.push(InstanceQuery {
                    due_until: Some(now),
                    ..base.clone()
                });
                queries.push(InstanceQuery {
                    due_from: Some(now),
                    due_until: Some(now + minutes(120)),
                    ..base.clone()
                });
                queries.push(InstanceQuery {
                    correlation_id: Some("c-3".into()),
                    ..base.clone()
                });
                queries.push(InstanceQuery {
                    id_prefix: Some("ab".into()),
                    ..base.clone()
                });
                queries.push(InstanceQuery {
                    id_prefix: Some("a".into()),
                    due_until: Some(now),
                    ..base
                });
            }
        }
    }
    for query in &queries {
        let expected = model(&rows, query);
        for page in [1, 7, 200] {
            assert_eq!(
                pages(store, query, page).await,
                expected,
                "{query:?} listed {page} at a time"
            );
        }
        assert_eq!(
            super::kept(store.capabilities().instances())
                .count_instances(query)
                .await
                .unwrap(),
            expected.len() as u64,
            "{query:?} counted"
        );
    }
    let listing = queries
        .iter()
        .filter(|q| !model(&rows, q).is_empty())
        .count();
    assert!(
        listing * 3 > queries.len() * 2,
        "the fixture gives most queries something to list ({listing} of {})",
        queries.len()
    );

    let mut counts: BTreeMap<String, InstanceCounts> = BTreeMap::new();
    for row in &rows {
        let counted = counts
            .entry(row.process.clone())
            .or_insert_with(|| InstanceCounts {
                process: row.process.clone(),
                ..InstanceCounts::default()
            });
        counted.add(row.status, 1);
        if let Some(due) = row.next_due {
            counted.pending += 1;
            if due <= now {
                counted.overdue += 1;
                counted.oldest_overdue = Some(counted.oldest_overdue.map_or(due, |o| o.min(due)));
            }
        }
    }
    assert_eq!(
        super::kept(store.capabilities().instances())
            .instance_counts(now)
            .await
            .unwrap(),
        counts.into_values().collect::<Vec<_>>()
    );
}

/// The instances of the fixtures `instances-v10.sql` (bounda-sqlite) and `instances-v5.sql`
/// (bounda-postgres), written before the index, as the migration that makes it fills it from
/// their streams and deadline entries: each status, the correlation of the first step, the
/// moment of the entry of a running instance only.
pub async fn the_instances_an_older_build_wrote_are_indexed(store: &dyn Store) {
    let at = |text: &str| Instant::parse(text).unwrap();
    let row = |process: &str,
               id: &str,
               status,
               correlation: &str,
               started,
               updated,
               due: Option<&str>| InstanceRow {
        process: process.to_owned(),
        instance_id: id.to_owned(),
        status,
        correlation_id: correlation.to_owned(),
        started_at: at(started),
        updated_at: at(updated),
        next_due: due.map(at),
    };
    use InstanceStatus::{Completed, Failed, Running, TimedOut};
    let expected = vec![
        row(
            "OrderPayment",
            "o-new",
            Running,
            "id-110",
            "2026-02-01T20:01:00Z",
            "2026-02-01T20:01:00Z",
            Some("2026-02-02T20:01:00Z"),
        ),
        row(
            "Fussy",
            "o-new",
            Running,
            "id-110",
            "2026-02-01T20:01:00Z",
            "2026-02-01T20:01:00Z",
            Some("2026-02-08T20:01:00Z"),
        ),
        row(
            "Fussy",
            "o-failed",
            Failed,
            "id-53",
            "2026-02-01T00:01:03Z",
            "2026-02-01T00:01:03Z",
            None,
        ),
        row(
            "OrderPayment",
            "o-failed",
            Running,
            "id-53",
            "2026-02-01T00:01:00Z",
            "2026-02-01T00:01:00Z",
            Some("2026-02-02T00:01:00Z"),
        ),
        row(
            "OrderPayment",
            "o-done",
            Completed,
            "id-36",
            "2026-02-01T00:00:00Z",
            "2026-02-01T00:00:00Z",
            None,
        ),
        row(
            "Fussy",
            "o-done",
            Running,
            "id-36",
            "2026-02-01T00:00:00Z",
            "2026-02-01T00:00:00Z",
            Some("2026-02-08T00:00:00Z"),
        ),
        row(
            "OrderPayment",
            "o-old",
            TimedOut,
            "id-1",
            "2026-01-01T00:00:00Z",
            "2026-01-31T00:00:00Z",
            None,
        ),
        row(
            "Fussy",
            "o-old",
            TimedOut,
            "id-1",
            "2026-01-01T00:00:00Z",
            "2026-01-08T00:00:00Z",
            None,
        ),
    ];
    assert_eq!(pages(store, &InstanceQuery::default(), 3).await, expected);
    let overdue = InstanceQuery {
        due_until: Some(at("2026-02-05T00:00:00Z")),
        order: InstanceOrder::Soonest,
        ..InstanceQuery::default()
    };
    let ids: Vec<(String, String)> = pages(store, &overdue, 10)
        .await
        .into_iter()
        .map(|row| (row.process, row.instance_id))
        .collect();
    assert_eq!(
        ids,
        [("OrderPayment", "o-failed"), ("OrderPayment", "o-new")]
            .map(|(p, i)| (p.to_owned(), i.to_owned()))
    );
}

/// How many instances [`streams_written_without_the_index`] writes: more than a store's fill
/// writes at once, so the fill pages.
pub const UNINDEXED: u64 = 2_500;

/// Writes [`UNINDEXED`] process instances' first events, and a deadline entry for every third,
/// without their rows, as a build before the index did: what a store's test then drops the
/// index of and migrates again, to see it filled.
pub async fn streams_written_without_the_index(store: &dyn Store) {
    let at = t0();
    let sets: Vec<WriteSet> = (0..UNINDEXED)
        .map(|n| {
            let id = format!("u-{n:05}");
            let mut set = step(
                "Payment",
                &id,
                0,
                &["ProcessStarted"],
                at,
                "c-u",
                change("Payment", &id),
            );
            set.instances.clear();
            if n % 3 == 0 {
                set.schedule.push(crate::store::ScheduledEntry::new(
                    crate::store::instances::deadline_key("Payment", &id),
                    "bounda.ProcessDeadline",
                    id.clone(),
                    serde_json::json!({
                        "process": "Payment", "instance": id, "at": at.as_millis() + 60_000
                    }),
                    at + minutes(1),
                ));
            }
            set
        })
        .collect();
    for chunk in sets.chunks(500) {
        for result in store.commit_many(chunk).await {
            result.unwrap();
        }
    }
}

/// The index a migration filled from [`streams_written_without_the_index`]: every instance,
/// running, a third of them due a minute after their start.
pub async fn the_unindexed_streams_are_filled(store: &dyn Store) {
    let all = InstanceQuery::default();
    assert_eq!(
        super::kept(store.capabilities().instances())
            .count_instances(&all)
            .await
            .unwrap(),
        UNINDEXED
    );
    let due = InstanceQuery {
        due_until: Some(t0() + minutes(1)),
        ..InstanceQuery::default()
    };
    assert_eq!(
        super::kept(store.capabilities().instances())
            .count_instances(&due)
            .await
            .unwrap(),
        UNINDEXED.div_ceil(3)
    );
    let last = InstanceQuery {
        id_prefix: Some(format!("u-{:05}", UNINDEXED - 1)),
        limit: 10,
        ..InstanceQuery::default()
    };
    let rows = super::kept(store.capabilities().instances())
        .instances(&last)
        .await
        .unwrap();
    assert_eq!(rows.len(), 1, "the last stream read whole: {rows:?}");
    assert_eq!(rows[0].correlation_id, "c-u");
}
