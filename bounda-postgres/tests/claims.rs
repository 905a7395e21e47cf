//! Claims that scale past one box (issue 12): workers claiming due entries at once each take
//! different ones (`FOR UPDATE SKIP LOCKED`), and a claim is fenced by its id once its lease
//! lapses and another worker takes it over.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use std::collections::HashMap;
use std::sync::Arc;

use bounda::store::ScheduledEntry;
use bounda::{Instant, seconds};
use bounda_postgres::{Options, PostgresStore, testing};

const ENTRIES: usize = 400;
const WORKERS: usize = 4;

fn entry(n: usize, at: Instant) -> ScheduledEntry {
    ScheduledEntry {
        dedupe_key: format!("entry-{n:03}"),
        command_type: "Ping".into(),
        aggregate_id: format!("a-{n}"),
        payload: serde_json::json!({ "n": n }),
        execute_at: at,
        context: serde_json::json!({}),
        attempts: 0,
        last_error: None,
        revision: 0,
        claim_id: None,
        claimed_at: None,
    }
}

async fn store(test: &str, pool_size: usize) -> PostgresStore {
    let (url, schema) = testing::schema(test).unwrap_or_else(|how| panic!("{how}"));
    PostgresStore::connect(
        &url,
        Options {
            schema,
            pool_size,
            ..Options::default()
        },
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workers_claiming_at_once_take_each_entry_once() {
    let store = Arc::new(store("claims", WORKERS * 2).await);
    let now = Instant::from_millis(1_767_225_600_000).unwrap();
    for n in 0..ENTRIES {
        store.schedule(&entry(n, now)).await.unwrap();
    }
    let workers: Vec<_> = (0..WORKERS)
        .map(|worker| {
            let store = store.clone();
            tokio::spawn(async move {
                let claim = format!("worker-{worker}");
                let mut ran = Vec::new();
                loop {
                    let batch = store.claim_due(&claim, now, seconds(60), 10).await.unwrap();
                    if batch.is_empty() {
                        return ran;
                    }
                    for entry in batch {
                        assert!(store.complete(&entry.dedupe_key, &claim).await.unwrap());
                        ran.push(entry.dedupe_key);
                    }
                }
            })
        })
        .collect();
    let mut runs: HashMap<String, usize> = HashMap::new();
    let mut busy = 0;
    for worker in workers {
        let ran = worker.await.unwrap();
        busy += usize::from(!ran.is_empty());
        for key in ran {
            *runs.entry(key).or_default() += 1;
        }
    }
    assert_eq!(runs.len(), ENTRIES, "every entry ran");
    assert!(runs.values().all(|n| *n == 1), "none twice");
    assert!(
        busy > 1,
        "the work was shared, not queued behind one worker"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_lease_lapsed_is_taken_over_and_its_holder_fenced() {
    let store = store("fenced", 2).await;
    let now = Instant::from_millis(1_767_225_600_000).unwrap();
    store.schedule(&entry(1, now)).await.unwrap();
    let first = store
        .claim_due("first", now, seconds(60), 10)
        .await
        .unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].claim_id.as_deref(), Some("first"));
    assert!(
        store
            .claim_due("second", now + seconds(60), seconds(60), 10)
            .await
            .unwrap()
            .is_empty(),
        "held while its lease lasts"
    );
    let second = store
        .claim_due("second", now + seconds(61), seconds(60), 10)
        .await
        .unwrap();
    assert_eq!(second.len(), 1, "taken over once it lapsed");
    assert!(
        !store.complete("entry-001", "first").await.unwrap(),
        "the late holder is fenced"
    );
    assert!(store.complete("entry-001", "second").await.unwrap());
}
