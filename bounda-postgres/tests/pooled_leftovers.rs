//! Nothing of the store stays on the server connections PgBouncer lends (issue 39): a named
//! statement left prepared on one would collide with another process's statement of the same
//! name (`prepared statement "s1" already exists`), a setting left on one would reach whoever
//! is lent it next, and a transaction left open on one would hold every later statement there
//! uncommitted. Reads given up half-way included. A test binary of its own, so its pooler
//! serves only this test.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use bounda::store::Store;
use bounda_postgres::{Options, PostgresStore, testing};

mod support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_leaves_nothing_on_the_server_connections_the_pooler_lends() {
    let pooled = testing::pooled_url().unwrap().unwrap();
    let (url, schema) = testing::schema("leftovers").unwrap();
    let store = PostgresStore::connect(
        &format!("{pooled} pool_mode=transaction"),
        Options {
            schema: schema.clone(),
            lock_timeout: Some(bounda::seconds(5)),
            ..Options::default()
        },
    )
    .await
    .unwrap();
    // Appends, a claim and its settling, and reads, each kind several times, at once.
    let now = bounda::Instant::from_millis(1_000_000).unwrap();
    let mut work = Vec::new();
    for n in 0..8 {
        let store = store.clone();
        work.push(tokio::spawn(async move {
            let entry = support::entry(n, now);
            support::schedule(&store, &entry).await;
            let events = [support::event(n, 0)];
            let append = bounda::store::Append {
                aggregate_type: "Ball".into(),
                aggregate_id: format!("b-{n}"),
                expected_version: 0,
                events: events.to_vec(),
            };
            support::append(&store, &[append]).await.unwrap();
            store
                .claim_due("worker", now, bounda::seconds(30), 1)
                .await
                .unwrap();
            support::complete(&store, &entry.dedupe_key, "worker").await;
            store.read_all(0, 100).await.unwrap();
            store.head().await.unwrap();
        }));
    }
    for work in work {
        work.await.unwrap();
    }

    // Reads given up half-way (a runner's idle check losing its race with a timer) at their
    // first and second turns, each by a store that has learnt nothing yet: while their
    // statement's types are learnt, and after. They leave no transaction open on the connection
    // they were lent, nor (below) a statement prepared. A learning by statements sent in turn
    // left `BEGIN` open at the first and a named statement (`s10`) at the second.
    let server = support::session(&url).await;
    for turns in 1..=2 {
        let name = format!("given up {turns} {schema}");
        let given_up = PostgresStore::connect(
            &format!("{pooled} pool_mode=transaction"),
            Options {
                schema: schema.clone(),
                pool_size: 1,
                application_name: Some(name.clone()),
                ..Options::default()
            },
        )
        .await
        .unwrap();
        let mut read = Box::pin(given_up.next_due_at(now, bounda::seconds(30)));
        let mut context = std::task::Context::from_waker(futures_util::task::noop_waker_ref());
        for turn in 1..=turns {
            assert!(
                read.as_mut().poll(&mut context).is_pending(),
                "the read still under way at its turn {turn}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        }
        drop(read);
        let mut open = Vec::new();
        for _ in 0..40 {
            open = server
                .query(
                    "SELECT left(query, 60) FROM pg_stat_activity
                     WHERE application_name = $1 AND state LIKE 'idle in transaction%'",
                    &[&name],
                )
                .await
                .unwrap()
                .iter()
                .map(|row| row.get::<_, String>(0))
                .collect::<Vec<_>>();
            if open.is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert_eq!(
            open,
            Vec::<String>::new(),
            "given up at turn {turns}: a transaction left open"
        );
        drop(given_up);
    }

    // As many transactions held at once as the pooler has server connections: each is lent
    // one of its own, so together they look at every one the store was lent.
    let mut sessions = Vec::new();
    for _ in 0..testing::POOLER_SERVER_CONNECTIONS {
        let session = support::session(&pooled).await;
        session.batch_execute("BEGIN").await.unwrap();
        sessions.push(session);
    }
    let mut servers = std::collections::HashSet::new();
    for session in &sessions {
        // By the simple protocol: a statement of the extended one is itself prepared.
        let rows = session
            .simple_query(
                "SELECT pg_backend_pid(), \
                 (SELECT count(*) FROM pg_prepared_statements), \
                 current_setting('lock_timeout')",
            )
            .await
            .unwrap();
        let Some(row) = rows.iter().find_map(|message| match message {
            tokio_postgres::SimpleQueryMessage::Row(row) => Some(row),
            _ => None,
        }) else {
            panic!("no row: {rows:?}");
        };
        let (pid, prepared, lock_timeout) = (
            row.get(0).unwrap().to_owned(),
            row.get(1).unwrap().to_owned(),
            row.get(2).unwrap().to_owned(),
        );
        servers.insert(pid.clone());
        assert_eq!(
            prepared, "0",
            "statements left prepared on server connection {pid}"
        );
        assert_eq!(
            lock_timeout, "0",
            "a limit left set on server connection {pid}"
        );
    }
    assert_eq!(
        servers.len(),
        testing::POOLER_SERVER_CONNECTIONS,
        "each held transaction was lent its own"
    );
    for session in &sessions {
        session.batch_execute("ROLLBACK").await.unwrap();
    }
}
