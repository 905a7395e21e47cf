//! Finding instances among many: the instances index filled with `count` process instances
//! written as the runtime writes them (an append to each instance's stream with its row's
//! change, a thousand write sets to a commit), then each listing of a page of 50 and each count
//! timed, median of five.

use std::time::{Duration, Instant as Clock};

use bounda::Instant;
use bounda::store::{
    Append, InstanceChange, InstanceOrder, InstanceQuery, InstanceStatus, Metadata, NewEvent,
    NextDue, Store, WriteSet,
};

/// The moment the listings are asked at.
fn now() -> Instant {
    Instant::parse("2026-06-01T00:00:00Z").expect("a moment")
}

/// A number drawn from `n`, spread (a fixed mix, so every run writes the same rows).
fn spread(n: u64, salt: u64) -> u64 {
    let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt;
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^ (x >> 29)
}

/// The processes and their shares of the instances, in hundredths.
const PROCESSES: [(&str, u64); 3] = [("Payment", 50), ("Shipping", 30), ("Onboarding", 20)];

/// Instance `n`'s write set: its stream's first events and its row, as a step writes them.
/// A third are running (due from an hour ago to a month ahead: few overdue), most completed,
/// some timed out, 2 in 100 failed; started over the year before `now`.
fn instance(n: u64) -> WriteSet {
    let share = spread(n, 1) % 100;
    let mut bound = 0;
    let process = PROCESSES
        .iter()
        .find(|(_, part)| {
            bound += part;
            share < bound
        })
        .map_or("Payment", |(name, _)| name);
    let status = match spread(n, 2) % 100 {
        0..=29 => InstanceStatus::Running,
        30..=89 => InstanceStatus::Completed,
        90..=97 => InstanceStatus::TimedOut,
        _ => InstanceStatus::Failed,
    };
    let year = 365 * 24 * 3600 * 1000;
    let started =
        Instant::from_millis(now().as_millis() - (spread(n, 3) % year) as i64).expect("a moment");
    let due = Instant::from_millis(
        now().as_millis() - 3_600_000 + (spread(n, 4) % (30 * 24 * 3_600_000)) as i64,
    )
    .expect("a moment");
    let kinds: &[&str] = match status {
        InstanceStatus::Running => &["ProcessStarted"],
        InstanceStatus::Completed => &["ProcessStarted", "ProcessCompleted"],
        InstanceStatus::TimedOut => &["ProcessStarted", "ProcessTimedOut"],
        InstanceStatus::Failed => &["ProcessStarted", "ProcessFailed"],
    };
    let id = format!("i-{n:07}");
    let correlation = format!("c-{}", n / 4);
    WriteSet {
        appends: vec![Append {
            aggregate_type: format!("process:{process}"),
            aggregate_id: id.clone(),
            expected_version: 0,
            events: kinds
                .iter()
                .enumerate()
                .map(|(k, kind)| NewEvent {
                    id: format!("{id}-{k}"),
                    event_type: (*kind).to_owned(),
                    payload: serde_json::json!({}),
                    timestamp: started,
                    metadata: Metadata {
                        system: true,
                        ..Metadata::of_command(&correlation)
                    },
                })
                .collect(),
        }],
        instances: vec![InstanceChange {
            process: process.to_owned(),
            instance_id: id,
            at: Some(started),
            started: Some(correlation),
            status: Some(status).filter(|s| *s != InstanceStatus::Running),
            next_due: match status {
                InstanceStatus::Running => NextDue::At(due),
                _ => NextDue::Clear,
            },
        }],
        ..WriteSet::default()
    }
}

/// Writes instances `from..to` into `store`, a thousand to a commit.
pub async fn fill(store: &dyn Store, from: u64, to: u64) {
    let mut n = from;
    while n < to {
        let batch: Vec<WriteSet> = (n..to.min(n + 1_000)).map(instance).collect();
        for result in store.commit_many(&batch).await {
            result.expect("an instance's first step is written");
        }
        n += batch.len() as u64;
    }
}

/// The median of five runs of `read`, and what it answered the last time.
async fn median<F, T>(mut read: impl FnMut() -> F) -> (Duration, T)
where
    F: std::future::Future<Output = T>,
{
    let mut times = Vec::with_capacity(5);
    let mut last = None;
    for _ in 0..5 {
        let start = Clock::now();
        let answer = read().await;
        times.push(start.elapsed());
        last = Some(answer);
    }
    times.sort();
    (times[2], last.expect("five runs"))
}

/// Each listing and count, by label: its median time and how many rows it answered (or the
/// count).
pub async fn time(store: &dyn Store) -> Vec<(&'static str, Duration, u64)> {
    let now = now();
    let page = |query: InstanceQuery| InstanceQuery { limit: 50, ..query };
    let payment = || Some("Payment".to_owned());
    let listings: Vec<(&'static str, InstanceQuery)> = vec![
        ("newest of all", page(InstanceQuery::default())),
        (
            "newest of one process",
            page(InstanceQuery {
                process: payment(),
                ..InstanceQuery::default()
            }),
        ),
        (
            "failed, newest",
            page(InstanceQuery {
                status: Some(InstanceStatus::Failed),
                ..InstanceQuery::default()
            }),
        ),
        (
            "failed of one process, newest",
            page(InstanceQuery {
                process: payment(),
                status: Some(InstanceStatus::Failed),
                ..InstanceQuery::default()
            }),
        ),
        (
            "overdue of one process, soonest",
            page(InstanceQuery {
                process: payment(),
                due_until: Some(now),
                order: InstanceOrder::Soonest,
                ..InstanceQuery::default()
            }),
        ),
        (
            "due within a day, soonest",
            page(InstanceQuery {
                due_from: Some(now),
                due_until: Some(now + bounda::hours(24)),
                order: InstanceOrder::Soonest,
                ..InstanceQuery::default()
            }),
        ),
        (
            "by correlation",
            page(InstanceQuery {
                correlation_id: Some("c-100".into()),
                ..InstanceQuery::default()
            }),
        ),
        (
            "by id prefix",
            page(InstanceQuery {
                id_prefix: Some("i-00004".into()),
                ..InstanceQuery::default()
            }),
        ),
    ];
    let index = store
        .capabilities()
        .instances()
        .expect("both stores keep the instances index");
    let mut timed = Vec::new();
    for (label, query) in &listings {
        let (took, rows) =
            median(|| async { index.instances(query).await.expect("a listing reads") }).await;
        assert!(
            !rows.is_empty() || label.contains("overdue"),
            "{label} listed nothing"
        );
        timed.push((*label, took, rows.len() as u64));
    }
    // The page after the first of the newest of one process: the cursor's range.
    let first = index
        .instances(&listings[1].1)
        .await
        .expect("a listing reads");
    if let Some(last) = first.last() {
        let next = InstanceQuery {
            after: Some(last.cursor(InstanceOrder::Newest)),
            ..listings[1].1.clone()
        };
        let (took, rows) = median(|| async { index.instances(&next).await.expect("reads") }).await;
        timed.push(("the next page of one process", took, rows.len() as u64));
    }
    let overdue = InstanceQuery {
        process: payment(),
        due_until: Some(now),
        ..InstanceQuery::default()
    };
    let (took, count) =
        median(|| async { index.count_instances(&overdue).await.expect("counts") }).await;
    timed.push(("count: overdue of one process", took, count));
    let failed = InstanceQuery {
        status: Some(InstanceStatus::Failed),
        ..InstanceQuery::default()
    };
    let (took, count) =
        median(|| async { index.count_instances(&failed).await.expect("counts") }).await;
    timed.push(("count: failed", took, count));
    let (took, counts) =
        median(|| async { index.instance_counts(now).await.expect("counts") }).await;
    timed.push((
        "every process by status, pending and overdue",
        took,
        counts.iter().map(|c| c.total()).sum(),
    ));
    timed
}

/// How long opening the file at `path` takes once its instances index (and what came after it)
/// is dropped and its schema version set back to before it: the migration's fill from the log,
/// as an upgrade makes it.
pub fn migrate_again(path: &std::path::Path) -> Duration {
    // Back to schema 10: the migrations after it (the index, and what came after) run again.
    bounda_sqlite::downgrade(path, 10).expect("cannot take the file back to schema 10");
    let start = Clock::now();
    let store = bounda_sqlite::SqliteStore::open(path).expect("the file migrates");
    let took = start.elapsed();
    drop(store);
    took
}
