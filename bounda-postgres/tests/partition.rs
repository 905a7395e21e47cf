//! A machine cut off from the server mid-commit (issues 12 and 21): appends take no lock that
//! every appender needs, so the machine holds up only appends to the stream it was writing, and
//! only until the server ends its session, once it has sat idle inside a transaction longer than
//! the store's timeout; its own commit then fails when the network comes back instead of
//! landing late.

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

fn append(stream: &str, writer: usize) -> Append {
    Append {
        aggregate_type: "Clock".into(),
        aggregate_id: stream.into(),
        expected_version: 0,
        events: vec![event(writer, 0)],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_cut_off_mid_commit_holds_up_only_its_stream_and_only_until_its_session_ends() {
    let (url, schema) = testing::schema("partition").unwrap_or_else(|how| panic!("{how}"));
    let proxy = Proxy::start(testing::address().unwrap()).await.unwrap();
    let options = |pool_size| Options {
        schema: schema.clone(),
        pool_size,
        idle_in_transaction_timeout: millis(500),
        ..Options::default()
    };
    let cut_off = PostgresStore::connect(&testing::url_via(proxy.address()).unwrap(), options(1))
        .await
        .unwrap();
    let others = PostgresStore::connect(&url, options(2)).await.unwrap();

    // Another session is writing version 1 of stream `c`, so the machine's append to it waits
    // on the server, inside its transaction.
    let holder = support::session(&url).await;
    holder
        .batch_execute(&format!(
            "BEGIN; INSERT INTO \"{schema}\".events
                 (id, aggregate_type, aggregate_id, version, type, payload, timestamp, metadata)
             VALUES ('held', 'Clock', 'c', 1, 'Tick', '{{}}', now(), '{{}}')"
        ))
        .await
        .unwrap();
    let commit = tokio::spawn(async move { support::append(&cut_off, &[append("c", 0)]).await });
    tokio::time::sleep(Wall::from_millis(300)).await;
    // The network goes; then the version is the machine's, on a session that cannot answer.
    proxy.cut();
    holder.batch_execute("ROLLBACK").await.unwrap();

    // Appends to other streams do not wait at all.
    let started = std::time::Instant::now();
    support::append(&others, &[append("d", 1)]).await.unwrap();
    assert!(
        started.elapsed() < Wall::from_millis(400),
        "another stream waited for the cut-off machine: {:?}",
        started.elapsed()
    );
    // One to the machine's stream waits until the server ends the silent session (500 ms).
    let started = std::time::Instant::now();
    let taken = support::append(&others, &[append("c", 2)]).await;
    assert!(
        taken.is_ok(),
        "stream `c` stayed with the cut-off machine: {taken:?}"
    );
    assert!(
        started.elapsed() < Wall::from_secs(4),
        "{:?}",
        started.elapsed()
    );

    // Back on the network, the machine's commit fails rather than landing late.
    proxy.heal();
    let landed = tokio::time::timeout(Wall::from_secs(10), commit)
        .await
        .expect("the commit answers once the network is back")
        .unwrap();
    assert!(landed.is_err(), "a commit from a session the server ended");
    let ids: Vec<String> = others
        .read_all(0, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(ids, ["w1-0", "w2-0"], "nothing of it was written");
}

// Issue 39: the server ends the session of a machine cut off while it settles a claim; the
// settling never lands, the claim is not lost: once its lease lapses another runner claims the
// entry and settles it, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_settling_session_the_server_ends_is_taken_over_and_settled_once() {
    let (url, schema) = testing::schema("claim_cut").unwrap_or_else(|how| panic!("{how}"));
    let proxy = Proxy::start(testing::address().unwrap()).await.unwrap();
    let options = Options {
        schema: schema.clone(),
        pool_size: 1,
        idle_in_transaction_timeout: millis(500),
        ..Options::default()
    };
    let cut_off =
        PostgresStore::connect(&testing::url_via(proxy.address()).unwrap(), options.clone())
            .await
            .unwrap();
    let other = PostgresStore::connect(&url, options).await.unwrap();
    support::a_claim_cut_off_mid_settle_is_taken_over(cut_off, &other, &proxy, &url, &schema).await;
}
