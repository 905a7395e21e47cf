//! Claims that scale past one box (issue 12): workers claiming due entries at once each take
//! different ones (`FOR UPDATE SKIP LOCKED`), and a claim is fenced by its id once its lease
//! lapses and another worker takes it over.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use std::collections::HashMap;
use std::sync::Arc;

use bounda::{Instant, seconds};
mod support;

use bounda::store::Store;
use bounda_postgres::{Options, PostgresStore, testing};
use support::entry;

const ENTRIES: usize = 400;
const WORKERS: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workers_claiming_at_once_take_each_entry_once() {
    let store = Arc::new(support::store("claims", WORKERS * 2).await);
    let now = Instant::from_millis(1_767_225_600_000).unwrap();
    for n in 0..ENTRIES {
        support::schedule(&store, &entry(n, now)).await;
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
                        assert!(support::complete(&store, &entry.dedupe_key, &claim).await);
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
    let store = support::store("fenced", 2).await;
    let now = Instant::from_millis(1_767_225_600_000).unwrap();
    support::schedule(&store, &entry(1, now)).await;
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
        !support::complete(&store, "entry-001", "first").await,
        "the late holder is fenced"
    );
    assert!(support::complete(&store, "entry-001", "second").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_skips_a_row_another_worker_is_claiming_instead_of_waiting() {
    let (url, schema) = testing::schema("skip").unwrap_or_else(|how| panic!("{how}"));
    let store = PostgresStore::connect(
        &url,
        Options {
            schema: schema.clone(),
            ..Options::default()
        },
    )
    .await
    .unwrap();
    let now = Instant::from_millis(1_767_225_600_000).unwrap();
    for n in 0..3 {
        support::schedule(&store, &entry(n, now)).await;
    }
    // Another worker is in the middle of claiming entry 0: its row is locked.
    let (mut other, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let tx = other.transaction().await.unwrap();
    tx.query(
        &format!(
            "SELECT 1 FROM \"{schema}\".scheduled_commands WHERE dedupe_key = 'entry-000' FOR UPDATE"
        ),
        &[],
    )
    .await
    .unwrap();
    let claimed = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        store.claim_due("mine", now, seconds(60), 10),
    )
    .await
    .expect("the claim does not wait for the locked row")
    .unwrap();
    let keys: Vec<&str> = claimed.iter().map(|e| e.dedupe_key.as_str()).collect();
    assert_eq!(keys, ["entry-001", "entry-002"]);
    tx.rollback().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_rescheduled_while_held_keeps_its_new_schedule_when_the_holder_completes() {
    let store = support::store("rescheduled", 2).await;
    let now = Instant::from_millis(1_767_225_600_000).unwrap();
    support::schedule(&store, &entry(7, now)).await;
    assert_eq!(
        store
            .claim_due("worker", now, seconds(60), 10)
            .await
            .unwrap()
            .len(),
        1
    );
    let later = now + seconds(3_600);
    support::schedule(&store, &entry(7, later)).await;
    assert!(
        support::complete(&store, "entry-007", "worker").await,
        "the claim was held"
    );
    assert!(
        store
            .claim_due("next", now + seconds(1), seconds(60), 10)
            .await
            .unwrap()
            .is_empty(),
        "kept, at its new moment"
    );
    let due = store
        .claim_due("next", later, seconds(60), 10)
        .await
        .unwrap();
    assert_eq!(due.len(), 1, "runs at the new moment");
    assert_eq!(due[0].execute_at, later);
}
