//! The store through PgBouncer (Debian's package) in transaction pooling (issue 39): the store
//! contract passes through it; the address says it is a pooler, and one that does not is
//! refused saying how to say it; the limits bound the store's statements through it, alone and
//! in a transaction; a session cut off inside a transaction is ended by the server, its claim
//! taken over; and the processes listen on the server's own address or poll.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use std::time::Duration as Wall;

use bounda::millis;
use bounda::store::{Append, Metadata, NewEvent, Store};
use bounda_postgres::{Options, PostgresStore, testing};

mod support;

/// The pooler's address, saying it is one.
fn pooled() -> String {
    let url = testing::pooled_url()
        .unwrap_or_else(|how| panic!("{how}"))
        .unwrap_or_else(|| panic!("the tests put no pooler in front of a server of one's own"));
    format!("{url} pool_mode=transaction")
}

/// A store behind the pooler, in a schema of its own.
async fn store() -> PostgresStore {
    store_in(testing::schema("pooled").unwrap().1).await
}

/// A store behind the pooler, in `schema`.
async fn store_in(schema: String) -> PostgresStore {
    PostgresStore::connect(
        &pooled(),
        Options {
            schema,
            ..Options::default()
        },
    )
    .await
    .unwrap_or_else(|error| panic!("cannot connect through PgBouncer: {}", error.flattened()))
}

// Behind a pooler in transaction mode, without a listening address, the store keeps every
// capability but wake-ups.
bounda::store_contract_tests!(
    [core, pauses, limits, instances, copies, read_models, ingress]: store
);

#[tokio::test]
async fn a_pooler_the_address_does_not_name_is_refused_saying_how_to_name_it() {
    let (_, schema) = testing::schema("unnamed_pooler").unwrap();
    let unnamed = testing::pooled_url().unwrap().unwrap();
    let error = PostgresStore::connect(
        &unnamed,
        Options {
            schema,
            ..Options::default()
        },
    )
    .await
    .unwrap_err();
    let error = error.flattened().to_string();
    assert!(
        error.contains("unsupported startup parameter") && error.contains("pool_mode=transaction"),
        "{error}"
    );
    assert!(
        !bounda::store::StoreError::new(error.clone()).is_unavailable(),
        "a refusal to mend, not an outage to wait out"
    );
}

/// An event of stream `Ball/b-1` at `version`.
fn append(version: u64) -> Append {
    Append {
        aggregate_type: "Ball".into(),
        aggregate_id: "b-1".into(),
        expected_version: version,
        events: vec![NewEvent {
            id: format!("e-{version}"),
            event_type: "Pinged".into(),
            payload: serde_json::json!({ "ball_id": "b-1" }),
            timestamp: bounda::Instant::from_millis(0).unwrap(),
            metadata: Metadata::of_command("c"),
        }],
    }
}

#[tokio::test]
async fn the_limits_bound_the_stores_statements_alone_and_in_a_transaction() {
    let (url, schema) = testing::schema("pooled_limits").unwrap();
    let store = PostgresStore::connect(
        &pooled(),
        Options {
            schema: schema.clone(),
            lock_timeout: Some(millis(200)),
            ..Options::default()
        },
    )
    .await
    .unwrap();
    let events = format!("\"{schema}\".events");
    let alone = support::behind_a_lock(&url, &events, store.head())
        .await
        .unwrap_err();
    assert!(alone.contains("lock timeout"), "{alone}");
    let in_a_transaction =
        support::behind_a_lock(&url, &events, support::append(&store, &[append(0)]))
            .await
            .unwrap_err();
    assert!(
        in_a_transaction.contains("lock timeout"),
        "{in_a_transaction}"
    );
    // Nothing of it stays on the pooler's server connections: the next statements run.
    support::append(&store, &[append(0)]).await.unwrap();
    assert_eq!(store.head().await.unwrap(), 1);
}

#[tokio::test]
async fn without_a_listening_address_the_processes_poll_and_the_store_says_why() {
    let (_, schema) = testing::schema("pooled_poll").unwrap();
    let store = PostgresStore::connect(
        &pooled(),
        Options {
            schema,
            ..Options::default()
        },
    )
    .await
    .unwrap();
    assert!(
        store.capabilities().wake_ups.is_none(),
        "a pooled store without a listening address hears no wake-ups"
    );
    let refused = store.wakeups().await.unwrap_err().to_string();
    assert!(refused.contains("listen_url"), "{refused}");
    // A listening address that is a pooler too is refused at once.
    let (_, schema) = testing::schema("pooled_listen_pooler").unwrap();
    let refused = PostgresStore::connect(
        &pooled(),
        Options {
            schema,
            listen_url: Some(pooled()),
            ..Options::default()
        },
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(refused.contains("listen_url"), "{refused}");
}

#[tokio::test]
async fn the_listening_connection_goes_to_the_server_past_the_pooler() {
    let (url, schema) = testing::schema("pooled_listen").unwrap();
    let options = Options {
        schema,
        ..Options::default()
    };
    // The address names the server's host and port for listening; the option names a whole
    // address.
    let server = testing::address().unwrap();
    let listening = PostgresStore::connect(
        &format!(
            "{} listen_host={} listen_port={}",
            pooled(),
            server.ip(),
            server.port()
        ),
        options.clone(),
    )
    .await
    .unwrap();
    let also_listening = PostgresStore::connect(
        &pooled(),
        Options {
            listen_url: Some(url),
            ..options.clone()
        },
    )
    .await
    .unwrap();
    let writer = PostgresStore::connect(&pooled(), options).await.unwrap();
    for store in [&listening, &also_listening] {
        let wakeups = store.wakeups().await.unwrap();
        // A new listening connection counts as one notification: it may have missed writes.
        tokio::time::timeout(Wall::from_secs(10), wakeups.next())
            .await
            .expect("the listening connection is made");
        let version = writer.head().await.unwrap();
        support::append(&writer, &[append(version)]).await.unwrap();
        tokio::time::timeout(Wall::from_secs(10), wakeups.next())
            .await
            .expect("an append through the pooler was heard on the server's address");
    }
}

// The server ends the session of a machine cut off from the pooler while it settles a claim,
// as the transaction set it to: the pooler lets the server connection go, the settling never
// lands, and once the lease lapses another runner claims the entry and settles it, once.
// Without the limit set in the transaction the server connection would stay in its transaction
// and keep the row locked for as long as the pooler kept it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_machine_is_cut_off_from_the_pooler_is_taken_over_and_settled_once() {
    let (url, schema) = testing::schema("pooled_cut").unwrap();
    let pooler = testing::pooler_address().unwrap().unwrap();
    let proxy = testing::Proxy::start(pooler).await.unwrap();
    let options = Options {
        schema: schema.clone(),
        pool_size: 1,
        idle_in_transaction_timeout: millis(500),
        ..Options::default()
    };
    let cut_off = PostgresStore::connect(
        &format!(
            "{} pool_mode=transaction",
            testing::pooled_url_via(proxy.address())
        ),
        options.clone(),
    )
    .await
    .unwrap();
    let other = PostgresStore::connect(&pooled(), options).await.unwrap();
    support::a_claim_cut_off_mid_settle_is_taken_over(cut_off, &other, &proxy, &url, &schema).await;
}

// An operator's plain SQL through the pooler: its parameters' types are learnt by preparing the
// text under a name of its own, in messages that roll back. A text closing with a comment
// comments out nothing of the learning; a text of two statements runs neither, a `COMMIT`
// between them included (refused before it is learnt, where its second would run); a text
// without parameters learns nothing, so a statement that cannot be prepared by name runs too.
#[tokio::test]
async fn plain_sql_through_the_pooler_learns_its_types_and_runs_nothing_twice() {
    use bounda::read_model::SqlValue;
    use bounda::store::read_models::ReadModelStore;
    let (_, schema) = testing::schema("plain_sql").unwrap();
    let store = store_in(schema.clone()).await;
    let twice = format!("\"{schema}\".twice");
    let commented = number(
        &store,
        "SELECT $1::bigint + 1 AS n -- a comment closing the text",
        &[SqlValue::Integer(41)],
    )
    .await;
    assert_eq!(commented, 42);

    store
        .sql(&format!("CREATE TABLE {twice} (n bigint)"), &[])
        .await
        .unwrap();
    for text in [
        format!("SELECT $1::bigint; INSERT INTO {twice} VALUES (1)"),
        format!("SELECT $1::bigint; COMMIT; INSERT INTO {twice} VALUES (1)"),
    ] {
        let error = store
            .sql(&text, &[SqlValue::Integer(1)])
            .await
            .unwrap_err()
            .flattened()
            .to_string();
        assert!(error.contains("runs as one statement"), "{error}");
    }
    let closed = number(&store, "SELECT $1::bigint AS n; ", &[SqlValue::Integer(7)]).await;
    assert_eq!(closed, 7, "a closing `;` is no second statement");
    let inserted = number(&store, &format!("SELECT count(*) AS n FROM {twice}"), &[]).await;
    assert_eq!(inserted, 0, "the second statement ran nowhere");

    let rows = store
        .sql("SHOW standard_conforming_strings", &[])
        .await
        .unwrap();
    assert_eq!(rows[0].values(), &[SqlValue::Text("on".into())]);
}

/// The number `sql` answers in its first row's column `n`, run by `store` with `params`.
async fn number(store: &PostgresStore, sql: &str, params: &[bounda::read_model::SqlValue]) -> i64 {
    use bounda::store::read_models::ReadModelStore;
    let rows = store.sql(sql, params).await.unwrap();
    rows[0].get::<i64>("n").unwrap()
}
