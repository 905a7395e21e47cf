//! An event whose stored metadata is JSON of another shape (a hand edit): the store reads it
//! anyway, marked with the column that does not read, so the runtime fails that event alone
//! and every read around it goes on (issue 43; SQLite's own cases are in the runtime's suite).

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

mod support;

use bounda::store::{Append, Store};
use bounda_postgres::testing;

#[tokio::test]
async fn an_event_whose_metadata_does_not_read_is_read_marked() {
    let (url, schema) = testing::schema("unreadable").unwrap_or_else(|how| panic!("{how}"));
    let store = bounda_postgres::PostgresStore::connect(
        &url,
        bounda_postgres::Options {
            schema: schema.clone(),
            ..bounda_postgres::Options::default()
        },
    )
    .await
    .unwrap();
    let append = Append {
        aggregate_type: "Clock".into(),
        aggregate_id: "c-1".into(),
        expected_version: 0,
        events: vec![support::event(0, 1), support::event(0, 2)],
    };
    support::append(&store, &[append]).await.unwrap();
    support::session(&url)
        .await
        .batch_execute(&format!(
            "UPDATE \"{schema}\".events SET metadata = '{{\"correlationId\": 5}}' WHERE id = 'w0-1'"
        ))
        .await
        .unwrap();

    let events = store.read_all(0, 10).await.unwrap();
    assert_eq!(events.len(), 2, "the event after it reads too");
    let unreadable = events[0].unreadable.as_ref().expect("marked");
    assert_eq!(unreadable.column, "metadata");
    assert_eq!(
        unreadable.stored, "{\"correlationId\": 5}",
        "the text as stored"
    );
    assert!(events[1].unreadable.is_none());
    let error = events[0].readable().unwrap_err().to_string();
    assert!(
        error.contains("event `w0-1` at position 1 (stream `Clock:c-1`, version 1)")
            && error.contains("column `metadata`"),
        "{error}"
    );
    let stream = store.read_stream("Clock", "c-1").await.unwrap();
    assert_eq!(stream.len(), 2);
}
