//! Tables an older bounda wrote, opened by this one: migrated, and read as that build meant
//! them. `fixtures/README.md` says which build wrote each and how.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use bounda::store::{Append, CommitError, CopyStore, Store};
use bounda_postgres::{Options, PostgresStore, SCHEMA_VERSION, testing};

mod support;

/// The dump `dump` (`pg_dump` of a schema an older build wrote, its name written `{schema}`)
/// restored into a fresh schema, opened by this build; with the server's address and the schema.
async fn restored(dump: &str) -> (PostgresStore, tokio_postgres::Client, String) {
    let (url, schema) = testing::schema("older").unwrap_or_else(|how| panic!("{how}"));
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(&dump.replace("{schema}", &schema))
        .await
        .unwrap();
    let options = Options {
        schema: schema.clone(),
        ..Options::default()
    };
    let store = PostgresStore::connect(&url, options).await.unwrap();
    (store, client, schema)
}

// Issue 24: the instances of tables written before the instances index are indexed when they
// migrate, from their streams and deadline entries; their deadline entries obey pauses and
// limits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_instances_of_schema_5_are_indexed_when_it_migrates() {
    let (store, _client, _schema) = restored(include_str!("fixtures/instances-v5.sql")).await;
    assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
    bounda::store::contract::the_instances_an_older_build_wrote_are_indexed(&store).await;
    bounda::store::contract::the_deadlines_an_older_build_wrote_obey_pauses(&store).await;
    bounda::store::contract::the_deadlines_an_older_build_wrote_obey_limits(&store).await;
    bounda::store::contract::the_checkpoints_an_older_build_wrote_take_bookmarks(&store).await;
}

// Issue 24: tables with more process instances than the fill writes at once, written without
// the index, are filled whole when they migrate (the fill reads the log a page at a time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_instances_written_before_the_index_are_filled_when_they_migrate() {
    use bounda::store::contract;
    let (url, schema) = testing::schema("unindexed").unwrap_or_else(|how| panic!("{how}"));
    let options = || Options {
        schema: schema.clone(),
        ..Options::default()
    };
    let store = PostgresStore::connect(&url, options()).await.unwrap();
    contract::streams_written_without_the_index(&store).await;
    drop(store);
    testing::downgrade(&url, &options(), 5)
        .await
        .expect("back to schema 5");
    let store = PostgresStore::connect(&url, options()).await.unwrap();
    assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
    contract::the_unindexed_streams_are_filled(&store).await;
}

// Issue 19: claims written before they kept their end lapse on the reader's lease; claims taken
// afterwards keep theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_of_schema_1_lapse_on_the_readers_lease_and_new_ones_on_their_own() {
    let (store, client, schema) = restored(include_str!("fixtures/claims-v1.sql")).await;
    assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
    assert_eq!(SCHEMA_VERSION, 14, "migrated from 1 to this build's schema");
    bounda::store::contract::claims_of_an_older_build_lapse_on_the_readers_lease(&store).await;
    let ends: Vec<String> = client
        .query(
            &format!(
                "SELECT to_char(lease_until AT TIME ZONE 'UTC', 'HH24:MI:SS.MS') FROM (
                     SELECT lease_until FROM {schema}.inbox UNION ALL
                     SELECT lease_until FROM {schema}.scheduled_commands UNION ALL
                     SELECT lease_until FROM {schema}.dead_letters) AS claims"
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(
        ends, ["00:01:04.002"; 3],
        "each claim taken last holds its end: taken at 34.002 s with 30 s"
    );
}

// Issue 20: tables an older build wrote are no copy, and copy out whole into a fresh schema,
// which is one: positions, the counter past them, the inbox and the letters as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_of_schema_1_are_no_copy_and_copy_whole_into_a_schema_that_is() {
    use bounda::store::{LetterFilter, Store};
    let (store, _client, _schema) = restored(include_str!("fixtures/claims-v1.sql")).await;
    assert_eq!(store.copied().await.unwrap(), None);
    let copy = testing::store("copy", Options::default()).await;
    let now = bounda::Instant::parse("2026-02-01T00:00:00Z").unwrap();
    let copied = bounda::store::copy(&store, &copy, "older", now)
        .await
        .unwrap();
    assert_eq!(
        (copied.events, copied.inbox, copied.dead_letters),
        (1, 1, 1)
    );
    assert_eq!(
        copy.read_all(0, 10).await.unwrap(),
        store.read_all(0, 10).await.unwrap()
    );
    assert_eq!(
        copy.inbox_page(None, 10).await.unwrap(),
        store.inbox_page(None, 10).await.unwrap()
    );
    assert_eq!(
        copy.dead_letters(&LetterFilter::default()).await.unwrap(),
        store.dead_letters(&LetterFilter::default()).await.unwrap()
    );
    let mark = copy.copied().await.unwrap().expect("a copy");
    assert_eq!((mark.copied_at, mark.head), (now, 1));
    // The next append takes the position after the copied ones.
    let append = bounda::store::WriteSet {
        appends: vec![bounda::store::Append {
            aggregate_type: "Order".into(),
            aggregate_id: "o-new".into(),
            expected_version: 0,
            events: vec![bounda::store::NewEvent {
                id: "e-new".into(),
                event_type: "Placed".into(),
                payload: serde_json::json!({}),
                timestamp: now,
                metadata: bounda::store::Metadata::of_command("c"),
            }],
        }],
        ..Default::default()
    };
    let committed = copy.commit(&append).await.unwrap();
    assert_eq!(committed.events[0].position, 2);
}

// Issue 20: a command that only reads production (a copy, a preview) connects to it as it is:
// tables of an older schema are refused, not migrated, so the build that wrote them can still
// read them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_of_an_older_schema_are_refused_as_they_are_and_left_unchanged() {
    let (url, schema) = testing::schema("as-is").unwrap_or_else(|how| panic!("{how}"));
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(&include_str!("fixtures/claims-v1.sql").replace("{schema}", &schema))
        .await
        .unwrap();
    let options = || Options {
        schema: schema.clone(),
        ..Options::default()
    };
    let Err(refused) = PostgresStore::connect_as_is(&url, options()).await else {
        panic!("tables of schema 1 connected as they are");
    };
    assert!(
        refused.to_string().contains("have schema version 1"),
        "{refused}"
    );
    let version: i32 = client
        .query_one(&format!("SELECT version FROM {schema}.schema"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, 1, "not migrated");
    PostgresStore::connect(&url, options()).await.unwrap();
    PostgresStore::connect_as_is(&url, options())
        .await
        .expect("connected as they are at this build's schema");
}

// Issue 21: events an older build numbered as it appended keep their positions once appends are
// placed after their commit; new ones are placed after them, and the old versions still meet a
// stale append.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_of_schema_3_keep_their_positions_and_new_ones_are_placed_after_them() {
    let (store, _client, _schema) = restored(include_str!("fixtures/events-v3.sql")).await;
    assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
    let placed = |events: Vec<bounda::RecordedEvent>| -> Vec<(u64, String)> {
        events.into_iter().map(|e| (e.position, e.id)).collect()
    };
    let old = [(1, "w0-0"), (2, "w0-1"), (3, "w1-0")].map(|(p, id)| (p, id.to_owned()));
    assert_eq!(placed(store.read_all(0, 10).await.unwrap()), old);
    assert_eq!(store.head().await.unwrap(), 3);
    assert_eq!(store.checkpoint("reader").await.unwrap(), Some(2));

    let append = |expected_version, n| Append {
        aggregate_type: "Order".into(),
        aggregate_id: "o-1".into(),
        expected_version,
        events: vec![support::event(2, n)],
    };
    match support::append(&store, &[append(1, 0)]).await {
        Err(CommitError::StreamMoved { actual_version, .. }) => assert_eq!(actual_version, 2),
        other => panic!("a stale append was not refused: {other:?}"),
    }
    let committed = support::append(&store, &[append(2, 1)]).await.unwrap();
    assert_eq!(
        (committed.events[0].position, committed.events[0].version),
        (4, 3),
        "placed after the old events, at the stream's next version"
    );
    assert_eq!(
        placed(store.read_all(2, 10).await.unwrap()),
        [(3, "w1-0".to_owned()), (4, "w2-1".to_owned())]
    );
    assert_eq!(store.head().await.unwrap(), 4);
    let stream = store.read_stream("Order", "o-1").await.unwrap();
    assert_eq!(
        stream
            .iter()
            .map(|e| (e.version, e.position))
            .collect::<Vec<_>>(),
        [(1, 1), (2, 2), (3, 4)]
    );
}

// Issue 22: tables an older build wrote take read models once migrated: their tables are made
// beside the log's, batches written with their checkpoints, holds kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_of_schema_1_take_read_models() {
    let (store, _client, _schema) = restored(include_str!("fixtures/claims-v1.sql")).await;
    bounda::store::contract::read_model_tables_are_made_and_brought_up_at_start(&store).await;
    bounda::store::contract::a_read_model_hold_counts_its_attempts_at_one_event(&store).await;
}

// Issue 44: tables an older build wrote keep the retries operators request of the workers once
// migrated: each kept with its entry, finished once.
#[tokio::test]
async fn tables_of_schema_5_keep_requested_retries() {
    let (store, _client, _schema) = restored(include_str!("fixtures/instances-v5.sql")).await;
    bounda::store::contract::a_retry_request_is_kept_then_finished_once(&store).await;
}

// Issue 45: tables an older build wrote keep the keys of commands from other services once
// migrated: each kept with its events once, a second delivery refused whole.
#[tokio::test]
async fn tables_of_schema_5_keep_arrived_commands_keys() {
    let (store, _client, _schema) = restored(include_str!("fixtures/instances-v5.sql")).await;
    bounda::store::contract::an_arrived_commands_key_is_kept_with_its_events_once(&store).await;
}
