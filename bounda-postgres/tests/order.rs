//! Global order without holes (issues 12 and 21): with many writers appending at once, a
//! subscriber reading past its checkpoint sees every event once, in position order, and never
//! moves past a position that a later commit fills in; a transaction held open, a session idle
//! in one, and a placer that dies hold up no one else's events.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bounda::store::{Append, WriteSet};
mod support;

use bounda::store::Store;
use bounda_postgres::{Options, PostgresStore, testing};
use support::event;

const WRITERS: usize = 8;
const EACH: usize = 60;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_subscriber_sees_every_event_of_concurrent_writers_once_in_order() {
    let options = Options {
        pool_size: WRITERS + 2,
        ..Options::default()
    };
    let store = Arc::new(testing::store("order", options).await);
    let done = Arc::new(AtomicBool::new(false));

    // The subscriber: reads after its checkpoint as fast as it can while the writers write.
    let reader = {
        let (store, done) = (store.clone(), done.clone());
        tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut checkpoint = 0;
            loop {
                let finished = done.load(Ordering::SeqCst);
                let events = store.read_all(checkpoint, 25).await.unwrap();
                for event in &events {
                    seen.push((event.position, event.id.clone()));
                    checkpoint = event.position;
                }
                if finished && events.is_empty() {
                    return seen;
                }
            }
        })
    };
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let store = store.clone();
            tokio::spawn(async move {
                for n in 0..EACH {
                    let append = Append {
                        aggregate_type: "Clock".into(),
                        aggregate_id: format!("c{writer}"),
                        expected_version: n as u64,
                        events: vec![event(writer, n)],
                    };
                    support::append(&store, &[append]).await.unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    done.store(true, Ordering::SeqCst);
    let seen = reader.await.unwrap();

    assert_eq!(seen.len(), WRITERS * EACH, "every event, once");
    for (index, (position, _)) in seen.iter().enumerate() {
        assert_eq!(*position, index as u64 + 1, "in order, no position skipped");
    }
    let ids: std::collections::HashSet<_> = seen.iter().map(|(_, id)| id).collect();
    assert_eq!(ids.len(), WRITERS * EACH, "no event twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_at_a_stale_version_is_refused_and_writes_nothing() {
    let store = testing::store("stale", Options::default()).await;
    let append = |version: u64, n: usize| Append {
        aggregate_type: "Clock".into(),
        aggregate_id: "c".into(),
        expected_version: version,
        events: vec![event(0, n)],
    };
    support::append(&store, &[append(0, 0)]).await.unwrap();
    let error = support::append(&store, &[append(1, 1), append(0, 2)])
        .await
        .unwrap_err();
    assert_eq!(error.code(), "CONCURRENCY_CONFLICT", "{error}");
    let events = store.read_all(0, 10).await.unwrap();
    assert_eq!(events.len(), 1, "the whole commit was refused");
}

// A process on another machine learns of an append at its commit, not at its next poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_wakes_a_listener_on_another_connection() {
    let (url, schema) = testing::schema("wake").unwrap_or_else(|how| panic!("{how}"));
    let options = Options {
        schema,
        ..Options::default()
    };
    let writer = PostgresStore::connect(&url, options.clone()).await.unwrap();
    let other = PostgresStore::connect(&url, options).await.unwrap();
    let wakeups = other.wakeups().await.unwrap();
    // Once listening, it wakes once: what was written before was not heard.
    tokio::time::timeout(std::time::Duration::from_secs(5), wakeups.next())
        .await
        .expect("one wake-up once listening");
    let woken = tokio::time::timeout(std::time::Duration::from_millis(300), wakeups.next()).await;
    assert!(woken.is_err(), "no wake-up before an append");
    support::append(
        &writer,
        &[Append {
            aggregate_type: "Clock".into(),
            aggregate_id: "c".into(),
            expected_version: 0,
            events: vec![event(0, 0)],
        }],
    )
    .await
    .unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(5), wakeups.next())
        .await
        .expect("woken by the append");
}

// Two machines appending to one stream at once: one wins, the other finds the stream moved and
// can decide again; neither is a store failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn appends_racing_on_one_stream_meet_as_a_stale_version() {
    let store = Arc::new(
        testing::store(
            "one_stream",
            Options {
                pool_size: 8,
                ..Options::default()
            },
        )
        .await,
    );
    for version in 0..10u64 {
        let racers: Vec<_> = (0..4)
            .map(|racer| {
                let store = store.clone();
                tokio::spawn(async move {
                    support::append(
                        &store,
                        &[Append {
                            aggregate_type: "Clock".into(),
                            aggregate_id: "shared".into(),
                            expected_version: version,
                            events: vec![event(racer, version as usize)],
                        }],
                    )
                    .await
                })
            })
            .collect();
        let mut won = 0;
        for racer in racers {
            match racer.await.unwrap() {
                Ok(_) => won += 1,
                Err(error) => assert_eq!(error.code(), "CONCURRENCY_CONFLICT", "{error}"),
            }
        }
        assert_eq!(won, 1, "version {version}: one append");
    }
}

// A listening connection that drops (a server restart, a network blip) is made again: later
// appends still wake the listener, and it wakes once on reconnecting, for what it missed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_whose_connection_drops_listens_again() {
    let (url, schema) = testing::schema("relisten").unwrap_or_else(|how| panic!("{how}"));
    let options = Options {
        schema,
        ..Options::default()
    };
    let writer = PostgresStore::connect(&url, options.clone()).await.unwrap();
    let other = PostgresStore::connect(&url, options).await.unwrap();
    let wakeups = other.wakeups().await.unwrap();
    let wait = std::time::Duration::from_secs(5);
    tokio::time::timeout(wait, wakeups.next())
        .await
        .expect("listening");
    let (admin, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let ended = admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE query LIKE 'LISTEN bounda_%' AND pid <> pg_backend_pid()",
            &[],
        )
        .await
        .unwrap();
    assert!(
        !ended.is_empty(),
        "the listening session was found and ended"
    );
    tokio::time::timeout(wait, wakeups.next())
        .await
        .expect("a wake-up on listening again");
    support::append(
        &writer,
        &[Append {
            aggregate_type: "Clock".into(),
            aggregate_id: "c".into(),
            expected_version: 0,
            events: vec![event(0, 0)],
        }],
    )
    .await
    .unwrap();
    tokio::time::timeout(wait, wakeups.next())
        .await
        .expect("woken by an append after the connection was made again");
}

/// The metadata of an event a command decided.
const METADATA: &str =
    r#"{"causationId":"c","correlationId":"c","depth":0,"schemaVersion":1,"system":false}"#;

/// The statement an append runs for one event, by hand: `id` at `version` of stream `stream`,
/// at its placeholder position.
fn insert(schema: &str, id: &str, stream: &str, version: u64) -> String {
    format!(
        "INSERT INTO \"{schema}\".events
             (id, aggregate_type, aggregate_id, version, type, payload, timestamp, metadata)
         VALUES ('{id}', 'Clock', '{stream}', {version}, 'Tick', '{{}}', now(), '{METADATA}')"
    )
}

/// `count` events to streams of their own, through the store.
async fn append_each(store: &PostgresStore, from: usize, count: usize) {
    for n in from..from + count {
        let append = Append {
            aggregate_type: "Clock".into(),
            aggregate_id: format!("s{n}"),
            expected_version: 0,
            events: vec![event(n, 0)],
        };
        support::append(store, &[append]).await.unwrap();
    }
}

/// A worker's group commit of two write sets, each appending the first event of stream
/// `s{from}` and the next.
fn wave(from: usize) -> Vec<WriteSet> {
    (from..from + 2)
        .map(|n| WriteSet {
            appends: vec![Append {
                aggregate_type: "Clock".into(),
                aggregate_id: format!("s{n}"),
                expected_version: 0,
                events: vec![event(n, 0)],
            }],
            ..WriteSet::default()
        })
        .collect()
}

/// What a reader from the start sees: each event's position and id.
async fn seen(store: &PostgresStore) -> Vec<(u64, String)> {
    let events = store.read_all(0, 1000).await.unwrap();
    events.into_iter().map(|e| (e.position, e.id)).collect()
}

/// Whether `seen` holds positions 1, 2, 3… without a hole.
fn without_holes(seen: &[(u64, String)]) -> bool {
    seen.iter()
        .enumerate()
        .all(|(index, (position, _))| *position == index as u64 + 1)
}

// Issue 21: a transaction that appends and stays open for seconds holds up no one: others
// commit and are read meanwhile, in order; its event is placed after theirs once it commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_that_keeps_its_transaction_open_delays_only_its_own_events() {
    let (url, schema, store) = support::store_by_hand("long_tx").await;
    append_each(&store, 0, 1).await;
    let slow = support::session(&url).await;
    slow.batch_execute(&format!("BEGIN; {}", insert(&schema, "slow", "slow", 1)))
        .await
        .unwrap();
    let started = std::time::Instant::now();
    append_each(&store, 1, 20).await;
    let meanwhile = seen(&store).await;
    assert_eq!(meanwhile.len(), 21, "every other commit is read meanwhile");
    assert!(without_holes(&meanwhile), "{meanwhile:?}");
    assert!(meanwhile.iter().all(|(_, id)| id != "slow"));
    assert_eq!(store.head().await.unwrap(), 21);
    // Held open for seconds, then committed.
    tokio::time::sleep(std::time::Duration::from_secs(2).saturating_sub(started.elapsed())).await;
    slow.batch_execute("COMMIT").await.unwrap();
    let afterwards = seen(&store).await;
    assert_eq!(
        afterwards[..21],
        meanwhile[..],
        "what was read stays as it was"
    );
    assert_eq!(
        afterwards[21..],
        [(22, "slow".to_owned())],
        "placed after them"
    );
    append_each(&store, 21, 1).await;
    assert_eq!(seen(&store).await[22], (23, "w21-0".to_owned()));
}

// Issue 21: a session that sits idle inside an appending transaction is ended by the server;
// its event never appears, and no position is left for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_idle_in_an_appending_transaction_is_ended_and_leaves_no_hole() {
    let (url, schema, store) = support::store_by_hand("idle_tx").await;
    let idle = support::session(&url).await;
    idle.batch_execute(&format!(
        "SET idle_in_transaction_session_timeout = '300ms'; BEGIN; {}",
        insert(&schema, "idle", "s0", 1)
    ))
    .await
    .unwrap();
    // Another append to the same stream waits for the idle one's version, until the server
    // ends its session; appends elsewhere do not wait at all.
    append_each(&store, 1, 5).await;
    append_each(&store, 0, 1).await;
    let ended = idle.batch_execute("COMMIT").await;
    assert!(ended.is_err(), "the idle session was ended: {ended:?}");
    let placed = seen(&store).await;
    assert_eq!(placed.len(), 6);
    assert!(without_holes(&placed), "{placed:?}");
    assert!(placed.iter().all(|(_, id)| id != "idle"));
    assert_eq!(
        placed[5].1, "w0-0",
        "its stream's version went to the next append"
    );
}

// Issue 21: a placer that dies while placing (its session ended mid-transaction) places nothing;
// the next placer takes over and places what it held, and events whose writers died between
// their commit and their placing are placed by the next reader.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_placer_that_dies_is_taken_over_and_unplaced_events_are_placed_by_the_next_reader() {
    let (url, schema, store) = support::store_by_hand("placer").await;
    let store = Arc::new(store);
    // Two writers committed and died before placing their events.
    let admin = support::session(&url).await;
    admin
        .batch_execute(&format!(
            "{}; {}",
            insert(&schema, "orphan-1", "o1", 1),
            insert(&schema, "orphan-2", "o2", 1)
        ))
        .await
        .unwrap();
    // A placer has placed them, and dies before it commits.
    let placer = support::session(&url).await;
    let pid: i32 = placer
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    placer
        .batch_execute(&format!(
            "BEGIN; SELECT * FROM \"{schema}\".place('{{}}', '{{}}')"
        ))
        .await
        .unwrap();
    // Meanwhile an append commits; its answer waits for its placing.
    let appending = {
        let store = store.clone();
        tokio::spawn(async move { append_each(&store, 0, 1).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!appending.is_finished(), "placing waits for the placer");
    let ended = admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE state = 'idle in transaction' AND pid = $1",
            &[&pid],
        )
        .await
        .unwrap();
    assert_eq!(ended.len(), 1, "the placer's session was found and ended");
    tokio::time::timeout(std::time::Duration::from_secs(5), appending)
        .await
        .expect("the append's placing goes on once the placer is gone")
        .unwrap();
    let placed = seen(&store).await;
    let ids: Vec<&str> = placed.iter().map(|(_, id)| id.as_str()).collect();
    assert_eq!(
        ids,
        ["orphan-1", "orphan-2", "w0-0"],
        "in commit order, once"
    );
    assert!(without_holes(&placed), "{placed:?}");

    // Another orphan, with no append after it: the next reader places it.
    admin
        .batch_execute(&insert(&schema, "orphan-3", "o3", 1))
        .await
        .unwrap();
    assert_eq!(seen(&store).await[3], (4, "orphan-3".to_owned()));
    assert_eq!(store.head().await.unwrap(), 4);
}

// Issue 21: a worker's group commit does not queue behind a placer at work: it answers at once,
// with no positions, and its events are placed by the next reader, in order, once. A single
// commit (a command's, which answers where its events landed) waits for the placer.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_group_commit_leaves_its_placing_to_a_placer_at_work_and_the_next_reader() {
    let (url, schema, store) = support::store_by_hand("busy_placer").await;
    let store = Arc::new(store);
    append_each(&store, 0, 1).await;
    // A placer at work: it holds the head row.
    let placer = support::session(&url).await;
    placer
        .batch_execute(&format!(
            "BEGIN; SELECT * FROM \"{schema}\".head WHERE id = 1 FOR UPDATE"
        ))
        .await
        .unwrap();
    let group = wave(1);
    let answers =
        tokio::time::timeout(std::time::Duration::from_secs(5), store.commit_many(&group))
            .await
            .expect("a group commit does not wait for the placer");
    let positions: Vec<u64> = answers
        .iter()
        .map(|answer| answer.as_ref().unwrap().events[0].position)
        .collect();
    assert_eq!(positions, [0, 0], "committed, positions not told");
    let single = {
        let store = store.clone();
        tokio::spawn(async move { append_each(&store, 3, 1).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !single.is_finished(),
        "a single commit waits to tell its positions"
    );
    placer.batch_execute("COMMIT").await.unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(5), single)
        .await
        .expect("the single commit goes on once the placer is done")
        .unwrap();
    let placed = seen(&store).await;
    let ids: Vec<&str> = placed.iter().map(|(_, id)| id.as_str()).collect();
    assert_eq!(
        ids,
        ["w0-0", "w1-0", "w2-0", "w3-0"],
        "in commit order, once"
    );
    assert!(without_holes(&placed), "{placed:?}");
}

// Issue 47: a worker's wave that finds the head free and nothing waiting writes its events at
// their final positions (no placeholder taken, nothing left to place) and answers them; one that
// finds a committed event still waiting goes in at placeholders and is placed after it, in the
// order of the commits, and so do the next waves for a while (another writer is at work).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wave_on_a_free_head_writes_final_positions_and_one_behind_a_waiting_event_follows_it() {
    let (url, schema, store) = support::store_by_hand("final_positions").await;
    let admin = support::session(&url).await;
    let placeholders_taken = || async {
        let row = admin
            .query_one(
                &format!("SELECT last_value, is_called FROM \"{schema}\".placeholder"),
                &[],
            )
            .await
            .unwrap();
        let (last, called): (i64, bool) = (row.get(0), row.get(1));
        if called { last } else { 0 }
    };
    append_each(&store, 0, 1).await;
    let taken = placeholders_taken().await;

    let answers = store.commit_many(&wave(1)).await;
    let positions: Vec<u64> = answers
        .iter()
        .map(|answer| answer.as_ref().unwrap().events[0].position)
        .collect();
    assert_eq!(positions, [2, 3], "answered at their final positions");
    assert_eq!(placeholders_taken().await, taken, "no placeholder taken");
    let waiting: i64 = admin
        .query_one(
            &format!("SELECT count(*) FROM \"{schema}\".events WHERE position < 0"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(waiting, 0, "nothing left to place");
    assert_eq!(store.head().await.unwrap(), 3, "the head moved with them");

    // A writer committed and died before placing its event: the next wave waits its turn.
    admin
        .batch_execute(&insert(&schema, "orphan", "o", 1))
        .await
        .unwrap();
    let taken = placeholders_taken().await;
    for answer in store.commit_many(&wave(3)).await {
        answer.unwrap();
    }
    assert_eq!(
        placeholders_taken().await,
        taken + 2,
        "behind a waiting event, at placeholders"
    );
    // Another writer was seen at work: for a while, waves leave the head alone even when it is
    // free and nothing waits.
    let taken = placeholders_taken().await;
    for answer in store.commit_many(&wave(5)).await {
        answer.unwrap();
    }
    assert_eq!(
        placeholders_taken().await,
        taken + 2,
        "beside another writer, at placeholders"
    );
    let placed = seen(&store).await;
    let ids: Vec<&str> = placed.iter().map(|(_, id)| id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "w0-0", "w1-0", "w2-0", "orphan", "w3-0", "w4-0", "w5-0", "w6-0"
        ],
        "in commit order, once"
    );
    assert!(without_holes(&placed), "{placed:?}");
}
