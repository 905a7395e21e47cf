//! What the PostgreSQL tests share: a few writes through the `Store` trait, and their events and
//! entries.

#![allow(
    dead_code,
    clippy::unwrap_used,
    reason = "each test binary uses some of it; a failed expectation is a panic"
)]

use bounda::Instant;
use bounda::store::{
    Append, CommitError, Committed, InOrder, InboxMark, InboxOutcome, InboxPair, Metadata,
    NewEvent, ScheduledEntry, ScheduledOutcome, ScheduledRelease, Store, WriteSet,
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

/// A store on a fresh schema, with the server's address and the schema's name, for a test that
/// also runs statements by hand.
pub async fn store_by_hand(test: &str) -> (String, String, PostgresStore) {
    let (url, schema) = testing::schema(test).unwrap_or_else(|how| panic!("{how}"));
    let options = Options {
        schema: schema.clone(),
        ..Options::default()
    };
    let store = PostgresStore::connect(&url, options).await.unwrap();
    (url, schema, store)
}

/// A connection of its own to the server at `url`, for statements a test runs by hand.
pub async fn session(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

/// What `read` answers once the server's statistics hold what `arrived` waits for: a
/// connection's counts reach them when it closes, a moment later. Read again for up to 10 s,
/// each read in a snapshot of its own.
pub async fn once_counted<T, F, Fut>(
    session: &tokio_postgres::Client,
    read: F,
    arrived: impl Fn(&T) -> bool,
) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    for _ in 0..100 {
        session
            .batch_execute("SELECT pg_stat_clear_snapshot()")
            .await
            .unwrap();
        let counts = read().await;
        if arrived(&counts) {
            return counts;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    read().await
}

/// Waits, for up to 10 s, until no connection named `application_name` is open on the server:
/// a connection's statistics reach the server's counts as it closes, before it leaves
/// `pg_stat_activity`, so counts read afterwards hold all of its work.
pub async fn until_closed(session: &tokio_postgres::Client, application_name: &str) {
    for _ in 0..100 {
        let open: i64 = session
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                &[&application_name],
            )
            .await
            .unwrap()
            .get(0);
        if open == 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the connections named `{application_name}` were still open after 10 s");
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

/// Claims the pairs of handler `notify` and `ids` (each its own lane) under claim `mine`, at
/// `now` for a minute, in one batch.
pub async fn claim_pairs(store: &PostgresStore, ids: &[String], now: Instant) {
    let pairs: Vec<InboxPair<'_>> = ids
        .iter()
        .map(|id| InboxPair {
            handler: "notify",
            event_id: id,
            lane: id,
        })
        .collect();
    store
        .claim_inbox_batch(
            &pairs,
            "mine",
            now,
            bounda::seconds(60),
            &mut InOrder::new(ids.len()),
        )
        .await
        .unwrap();
}

/// Settles the pairs [`claim_pairs`] claimed as handled, as a wave commits them.
pub async fn handle_pairs(store: &PostgresStore, ids: &[String]) {
    let handled: Vec<WriteSet> = ids
        .iter()
        .map(|id| WriteSet {
            inbox: Some(InboxMark {
                handler: "notify".into(),
                event_id: id.clone(),
                claim_id: "mine".into(),
                outcome: InboxOutcome::Succeeded,
            }),
            ..WriteSet::default()
        })
        .collect();
    for result in store.commit_many(&handled).await {
        result.unwrap();
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

/// A machine cut off while it settles a claim (issue 39): `cut_off` claims an entry and settles
/// it while another session on `url` holds the entry's row in `schema`, then `proxy` (its only
/// way to the server) is cut. The server ends its silent session by its idle-in-transaction
/// limit; its settling never lands; once the lease lapses, `other` takes the entry over and
/// settles it, once.
pub async fn a_claim_cut_off_mid_settle_is_taken_over(
    cut_off: PostgresStore,
    other: &PostgresStore,
    proxy: &testing::Proxy,
    url: &str,
    schema: &str,
) {
    use std::time::Duration as Wall;
    let now = Instant::from_millis(1_000_000).unwrap();
    let entry = entry(1, now);
    schedule(other, &entry).await;
    let lease = bounda::seconds(5);
    let claimed = cut_off.claim_due("cut-off", now, lease, 10).await.unwrap();
    assert_eq!(claimed.len(), 1);

    // Another session holds the entry's row, so the machine's settling waits on the server,
    // inside its transaction; then the network goes.
    let holder = session(url).await;
    holder
        .batch_execute(&format!(
            "BEGIN; SELECT 1 FROM \"{schema}\".scheduled_commands WHERE dedupe_key = '{}' FOR UPDATE",
            entry.dedupe_key
        ))
        .await
        .unwrap();
    let key = entry.dedupe_key.clone();
    let settling = tokio::spawn(async move { complete(&cut_off, &key, "cut-off").await });
    tokio::time::sleep(Wall::from_millis(300)).await;
    proxy.cut();
    holder.batch_execute("ROLLBACK").await.unwrap();

    // The claim is still the machine's until its lease lapses; then another runner takes the
    // entry over and settles it.
    assert!(
        other
            .claim_due("other", now, lease, 10)
            .await
            .unwrap()
            .is_empty()
    );
    // Its row stays locked by the silent session (claims skip locked rows) until the server
    // ends that session, 500 ms after it fell silent; then the lapsed claim is taken over.
    let mut taken = Vec::new();
    for _ in 0..100 {
        taken = other
            .claim_due("other", now + lease + bounda::millis(1), lease, 10)
            .await
            .unwrap();
        if !taken.is_empty() {
            break;
        }
        tokio::time::sleep(Wall::from_millis(100)).await;
    }
    assert_eq!(taken.len(), 1, "the claim was not lost with the session");
    assert!(complete(other, &entry.dedupe_key, "other").await);
    assert_eq!(other.scheduled(&entry.dedupe_key).await.unwrap(), None);

    // Back on the network, the machine's settling fails rather than landing late.
    proxy.heal();
    let landed = tokio::time::timeout(Wall::from_secs(10), settling).await;
    assert!(
        !matches!(landed, Ok(Ok(true))),
        "the cut-off settling did not land: {landed:?}"
    );
}
