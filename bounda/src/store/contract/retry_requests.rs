//! Requested retries: kept with who asked and when, the entry a worker takes written with
//! them, and the first outcome recorded standing.

use super::t;
use crate::store::{RetryOutcome, RetryRequest, Store, WriteSet};

fn request(id: &str, letter: &str, at: &str) -> RetryRequest {
    RetryRequest {
        id: id.to_owned(),
        letter: letter.to_owned(),
        by: "erin".to_owned(),
        requested_at: t(at),
        finished_at: None,
        outcome: None,
    }
}

/// A request is kept with its entry in one write; read back by its letter, oldest first, each
/// waiting until finished; the first outcome recorded stands, and an outcome recorded for a
/// request the store never kept (its entry copied from elsewhere) keeps the request whole.
pub async fn a_retry_request_is_kept_then_finished_once(store: &dyn Store) {
    let first = request("r-1", "l-1", "2026-01-01T00:00:00Z");
    let second = request("r-2", "l-1", "2026-01-01T00:01:00Z");
    let other = request("r-3", "l-2", "2026-01-01T00:00:30Z");
    store
        .commit(&WriteSet {
            schedule: vec![second.entry(), first.entry()],
            retry_requests: vec![second.clone(), first.clone(), other.clone()],
            ..WriteSet::default()
        })
        .await
        .unwrap();
    assert_eq!(
        store.retry_requests("l-1").await.unwrap(),
        vec![first.clone(), second.clone()],
        "each request of the letter, oldest first, waiting"
    );
    let entry = store.scheduled(&first.entry().dedupe_key).await.unwrap();
    assert_eq!(
        entry.map(|entry| (entry.command_type, entry.payload["letter"].clone())),
        Some(("bounda.LetterRetry".to_owned(), "l-1".into())),
        "its entry, for a worker to take, is kept with it"
    );

    let finished = |request: &RetryRequest, outcome: RetryOutcome| RetryRequest {
        finished_at: Some(t("2026-01-01T00:02:00Z")),
        outcome: Some(outcome),
        ..request.clone()
    };
    let retried = finished(&first, RetryOutcome::Retried);
    let settled = finished(
        &first,
        RetryOutcome::Failed {
            code: "DEAD_LETTER_SETTLED".to_owned(),
            error: "dead letter `l-1` is already settled".to_owned(),
        },
    );
    for request in [&retried, &settled] {
        store
            .commit(&WriteSet {
                retry_requests: vec![request.clone()],
                ..WriteSet::default()
            })
            .await
            .unwrap();
    }
    assert_eq!(
        store.retry_requests("l-1").await.unwrap(),
        vec![retried, second],
        "the first outcome stands"
    );

    let copied = finished(
        &request("r-4", "l-3", "2026-01-01T00:00:10Z"),
        RetryOutcome::FailedAgain {
            letter: "l-4".to_owned(),
            drained: 2,
            parked: 1,
        },
    );
    store
        .commit(&WriteSet {
            retry_requests: vec![copied.clone()],
            ..WriteSet::default()
        })
        .await
        .unwrap();
    assert_eq!(store.retry_requests("l-3").await.unwrap(), vec![copied]);
    assert_eq!(store.retry_requests("l-9").await.unwrap(), Vec::new());
}
