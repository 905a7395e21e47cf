//! What the PostgreSQL tests share: a few writes through the `Store` trait, and their events and
//! entries.

#![allow(
    dead_code,
    clippy::unwrap_used,
    reason = "each test binary uses some of it; a failed expectation is a panic"
)]

use bounda::Instant;
use bounda::store::{
    Append, CommitError, Committed, Metadata, NewEvent, ScheduledEntry, ScheduledOutcome,
    ScheduledRelease, Store, WriteSet,
};
use bounda_postgres::{Options, PostgresStore, testing};

/// A store on a fresh schema with a pool of `pool_size`.
pub async fn store(test: &str, pool_size: usize) -> PostgresStore {
    testing::store(
        test,
        Options {
            pool_size,
            ..Options::default()
        },
    )
    .await
}

/// A connection of its own to the server at `url`, for statements a test runs by hand.
pub async fn session(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

/// What `operation` answers while another session on the server at `url` holds `table` locked
/// (`"schema".events`): its error with its causes joined, once the lock is let go, or that it
/// was still waiting after 10 s.
pub async fn behind_a_lock<T, E: std::error::Error>(
    url: &str,
    table: &str,
    operation: impl Future<Output = Result<T, E>>,
) -> Result<T, String> {
    let holder = session(url).await;
    holder
        .batch_execute(&format!(
            "BEGIN; LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"
        ))
        .await
        .unwrap();
    // A limit that did not reach the server leaves it waiting: a failure, not a hang.
    let answer = tokio::time::timeout(std::time::Duration::from_secs(10), operation).await;
    holder.batch_execute("ROLLBACK").await.unwrap();
    let Ok(answer) = answer else {
        return Err("still waiting for the lock after 10 s".to_owned());
    };
    answer.map_err(|error| {
        let mut text = error.to_string();
        let mut cause = error.source();
        while let Some(inner) = cause {
            text.push_str(&format!(": {inner}"));
            cause = inner.source();
        }
        text
    })
}

/// Appends `appends` in one commit.
pub async fn append(store: &PostgresStore, appends: &[Append]) -> Result<Committed, CommitError> {
    store
        .commit(&WriteSet {
            appends: appends.to_vec(),
            ..WriteSet::default()
        })
        .await
}

/// Schedules `entry`.
pub async fn schedule(store: &PostgresStore, entry: &ScheduledEntry) {
    store
        .commit(&WriteSet {
            schedule: vec![entry.clone()],
            ..WriteSet::default()
        })
        .await
        .unwrap();
}

/// Completes entry `key` under `claim`: whether the claim still held it.
pub async fn complete(store: &PostgresStore, key: &str, claim: &str) -> bool {
    let release = ScheduledRelease {
        dedupe_key: key.to_owned(),
        claim_id: claim.to_owned(),
        outcome: ScheduledOutcome::Complete,
    };
    let writes = WriteSet {
        scheduled: Some(release),
        ..WriteSet::default()
    };
    match store.commit(&writes).await {
        Ok(_) => true,
        Err(CommitError::ScheduledClaimLost { .. }) => false,
        Err(error) => panic!("completing `{key}` failed: {error}"),
    }
}

/// Event `n` of writer `writer`.
pub fn event(writer: usize, n: usize) -> NewEvent {
    NewEvent {
        id: format!("w{writer}-{n}"),
        event_type: "Tick".into(),
        payload: serde_json::json!({ "writer": writer, "n": n }),
        timestamp: Instant::from_millis(0).unwrap(),
        metadata: Metadata::of_command("c"),
    }
}

/// Entry `n`, due at `at`.
pub fn entry(n: usize, at: Instant) -> ScheduledEntry {
    ScheduledEntry::new(
        format!("entry-{n:03}"),
        "Ping",
        format!("a-{n}"),
        serde_json::json!({ "n": n }),
        at,
    )
}
