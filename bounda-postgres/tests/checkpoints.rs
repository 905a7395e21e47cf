//! Checkpoints move by compare-and-set (issue 12): of two dispatchers moving one subscriber
//! from the same place, one wins.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use std::sync::Arc;

mod support;

use bounda::store::Store;
use bounda_postgres::{Options, testing};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn of_dispatchers_moving_a_checkpoint_at_once_one_wins_each_step() {
    let store = Arc::new(testing::store("checkpoints", Options::default()).await);
    assert_eq!(store.checkpoint("policies").await.unwrap(), None);
    assert!(store.move_checkpoint("policies", None, 0).await.unwrap());
    assert!(
        !store.move_checkpoint("policies", None, 5).await.unwrap(),
        "started once"
    );
    for step in 0..20u64 {
        let racers: Vec<_> = (0..4)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move {
                    store
                        .move_checkpoint("policies", Some(step), step + 1)
                        .await
                        .unwrap()
                })
            })
            .collect();
        let mut won = 0;
        for racer in racers {
            won += usize::from(racer.await.unwrap());
        }
        assert_eq!(won, 1, "step {step}: one dispatcher moved it");
    }
    assert_eq!(store.checkpoint("policies").await.unwrap(), Some(20));
}
