//! Files an older bounda wrote, opened by this one: migrated, and read as that build meant them.
//! `fixtures/README.md` says which build wrote each and how.

use bounda::store::CopyStore;
use bounda_sqlite::SqliteStore;
use rusqlite::Connection;

/// The database `dump` (`sqlite3 .dump` of a file an older build wrote) restored to a file, and
/// opened by this build, with the directory that holds it.
fn restored(dump: &str) -> (SqliteStore, std::path::PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("old.db");
    Connection::open(&path)
        .and_then(|conn| conn.execute_batch(dump))
        .expect("the dump restores");
    let store = SqliteStore::open(&path).expect("the old file opens, migrated");
    (store, path, dir)
}

// Issue 19: claims written before they kept their end lapse on the reader's lease; claims taken
// afterwards keep theirs.
#[tokio::test]
async fn claims_of_schema_7_lapse_on_the_readers_lease_and_new_ones_on_their_own() {
    let (store, path, _dir) = restored(include_str!("fixtures/claims-v7.sql"));
    let version: u32 = Connection::open(&path)
        .and_then(|c| c.query_row("PRAGMA user_version", [], |row| row.get(0)))
        .expect("readable");
    assert_eq!(version, 16, "migrated from 7 to this build's schema");
    bounda::store::contract::claims_of_an_older_build_lapse_on_the_readers_lease(&store).await;
    let ends: Vec<Option<String>> = Connection::open(&path)
        .and_then(|conn| {
            conn.prepare(
                "SELECT lease_until FROM bounda_inbox UNION ALL
                 SELECT lease_until FROM bounda_scheduled_commands UNION ALL
                 SELECT lease_until FROM bounda_dead_letters",
            )?
            .query_map([], |row| row.get(0))?
            .collect()
        })
        .expect("readable");
    assert_eq!(
        ends,
        vec![Some("2026-01-01T00:01:04.002Z".to_owned()); 3],
        "each claim taken last holds its end: taken at 34.002 s with 30 s"
    );
}

// Issue 24: the instances of a file written before the instances index are indexed when it
// migrates, from their streams and deadline entries; its deadline entries obey pauses and
// limits.
#[tokio::test]
async fn the_instances_of_a_file_of_schema_10_are_indexed_when_it_migrates() {
    let (store, path, _dir) = restored(include_str!("fixtures/instances-v10.sql"));
    let version: u32 = Connection::open(&path)
        .and_then(|c| c.query_row("PRAGMA user_version", [], |row| row.get(0)))
        .expect("readable");
    assert_eq!(version, 16, "migrated from 10 to this build's schema");
    bounda::store::contract::the_instances_an_older_build_wrote_are_indexed(&store).await;
    bounda::store::contract::the_deadlines_an_older_build_wrote_obey_pauses(&store).await;
    bounda::store::contract::the_deadlines_an_older_build_wrote_obey_limits(&store).await;
    bounda::store::contract::the_checkpoints_an_older_build_wrote_take_bookmarks(&store).await;
}

// Issue 24: a file with more process instances than the fill writes at once, written without
// the index, is filled whole when it migrates.
#[tokio::test]
async fn thousands_of_instances_written_before_the_index_are_filled_when_it_migrates() {
    use bounda::store::contract;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("unindexed.db");
    let store = SqliteStore::open(&path).expect("a new file");
    contract::streams_written_without_the_index(&store).await;
    drop(store);
    bounda_sqlite::downgrade(&path, 10).expect("back to schema 10");
    let store = SqliteStore::open(&path).expect("the file migrates");
    contract::the_unindexed_streams_are_filled(&store).await;
}

// Issue 20: a file an older build wrote is no copy, and copies out whole into a new file, which
// is one.
#[tokio::test]
async fn a_file_of_schema_7_is_no_copy_and_copies_whole_into_one() {
    use bounda::store::{LetterFilter, Store};
    let (store, _path, _dir) = restored(include_str!("fixtures/claims-v7.sql"));
    assert_eq!(store.copied().await.expect("readable"), None);
    let copy = SqliteStore::in_memory().expect("a store");
    let now = bounda::Instant::parse("2026-02-01T00:00:00Z").expect("a moment");
    let copied = bounda::store::copy(&store, &copy, "old.db", now)
        .await
        .expect("the old file copies");
    assert_eq!(
        copy.inbox_page(None, 100).await.expect("readable"),
        store.inbox_page(None, 100).await.expect("readable")
    );
    assert_eq!(
        copy.dead_letters(&LetterFilter::default())
            .await
            .expect("readable"),
        store
            .dead_letters(&LetterFilter::default())
            .await
            .expect("readable")
    );
    assert_eq!(copied.inbox, 1);
    assert_eq!(copied.dead_letters, 1);
    let mark = copy.copied().await.expect("readable").expect("a copy");
    assert_eq!((mark.copied_at, mark.source.as_str()), (now, "old.db"));
}

// Issue 20: a command that only reads production (a copy, a preview) opens it as it is: a file
// of an older schema is refused, not migrated, so the build that wrote it can still open it.
#[test]
fn a_file_of_an_older_schema_is_refused_as_it_is_and_left_unchanged() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("old.db");
    Connection::open(&path)
        .and_then(|conn| conn.execute_batch(include_str!("fixtures/claims-v7.sql")))
        .expect("the dump restores");
    let refused = SqliteStore::open_as_is(&path).expect_err("refused");
    assert!(
        refused.to_string().contains("has schema version 7"),
        "{refused}"
    );
    let version: u32 = Connection::open(&path)
        .and_then(|c| c.query_row("PRAGMA user_version", [], |row| row.get(0)))
        .expect("readable");
    assert_eq!(version, 7, "not migrated");
    SqliteStore::open(&path).expect("migrated once opened for work");
    SqliteStore::open_as_is(&path).expect("opened as it is at this build's schema");
}

// Issue 22: a file an older build wrote takes read models once migrated: their tables are made
// beside its log, batches written with their checkpoints, holds kept.
#[tokio::test]
async fn a_file_of_schema_7_takes_read_models() {
    let (store, _path, _dir) = restored(include_str!("fixtures/claims-v7.sql"));
    bounda::store::contract::read_model_tables_are_made_and_brought_up_at_start(&store).await;
    bounda::store::contract::a_read_model_hold_counts_its_attempts_at_one_event(&store).await;
}

// Issue 44: a file an older build wrote keeps the retries operators request of the workers once
// migrated: each kept with its entry, finished once.
#[tokio::test]
async fn a_file_of_schema_10_keeps_requested_retries() {
    let (store, _path, _dir) = restored(include_str!("fixtures/instances-v10.sql"));
    bounda::store::contract::a_retry_request_is_kept_then_finished_once(&store).await;
}

// Issue 45: a file an older build wrote keeps the keys of commands from other services once
// migrated: each kept with its events once, a second delivery refused whole.
#[tokio::test]
async fn a_file_of_schema_10_keeps_arrived_commands_keys() {
    let (store, _path, _dir) = restored(include_str!("fixtures/instances-v10.sql"));
    bounda::store::contract::an_arrived_commands_key_is_kept_with_its_events_once(&store).await;
}
