//! Global order without holes (issue 12): with many writers appending at once, a subscriber
//! reading past its checkpoint sees every event once, in position order, and never moves past
//! a position whose transaction is still in flight.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bounda::store::Append;
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
