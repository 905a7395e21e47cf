//! A machine cut off from the server mid-commit (issue 12): the server ends its session once it
//! has sat idle inside a transaction longer than the store's timeout, so the position counter it
//! held is free for every other machine's appends, and its own commit fails when the network
//! comes back instead of landing late.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

mod support;

use std::time::Duration as Wall;

use bounda::millis;
use bounda::store::{Append, Store};
use bounda_postgres::testing::{self, Proxy};
use bounda_postgres::{Options, PostgresStore};
use support::event;

async fn client(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_cut_off_holding_the_position_counter_loses_its_session_not_the_others() {
    let (url, schema) = testing::schema("partition").unwrap_or_else(|how| panic!("{how}"));
    let proxy = Proxy::start(testing::address().unwrap()).await.unwrap();
    let options = Options {
        schema: schema.clone(),
        pool_size: 1,
        idle_in_transaction_timeout: millis(500),
        ..Options::default()
    };
    let cut_off = PostgresStore::connect(&testing::url_via(proxy.address()).unwrap(), options)
        .await
        .unwrap();
    let head = format!("SELECT position FROM \"{schema}\".head WHERE id = 1 FOR UPDATE");

    // Another session holds the counter, so the machine's commit waits for it on the server.
    let holder = client(&url).await;
    holder.batch_execute("BEGIN").await.unwrap();
    holder.execute(&head, &[]).await.unwrap();
    let commit = tokio::spawn(async move {
        let append = Append {
            aggregate_type: "Clock".into(),
            aggregate_id: "c".into(),
            expected_version: 0,
            events: vec![event(0, 0)],
        };
        support::append(&cut_off, &[append]).await
    });
    tokio::time::sleep(Wall::from_millis(300)).await;
    // The network goes; then the counter is the machine's, on a session that cannot answer.
    proxy.cut();
    holder.batch_execute("COMMIT").await.unwrap();

    // Everyone else can still append: the server ends the silent session after 500 ms.
    let other = client(&url).await;
    other
        .batch_execute("SET statement_timeout = '5s'; BEGIN")
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let taken = other.execute(&head, &[]).await;
    assert!(
        taken.is_ok(),
        "the counter stayed with the cut-off machine: {taken:?}"
    );
    assert!(
        started.elapsed() < Wall::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    other.batch_execute("COMMIT").await.unwrap();

    // Back on the network, the machine's commit fails rather than landing late.
    proxy.heal();
    let landed = tokio::time::timeout(Wall::from_secs(10), commit)
        .await
        .expect("the commit answers once the network is back")
        .unwrap();
    assert!(landed.is_err(), "a commit from a session the server ended");
    let (url_direct, options) = (
        url,
        Options {
            schema,
            ..Options::default()
        },
    );
    let store = PostgresStore::connect(&url_direct, options).await.unwrap();
    assert_eq!(store.head().await.unwrap(), 0, "nothing of it was written");
}
