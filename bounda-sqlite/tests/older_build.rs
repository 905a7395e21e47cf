//! Files an older bounda wrote, opened by this one: migrated, and read as that build meant them.
//! `fixtures/README.md` says which build wrote each and how.

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
    assert_eq!(version, 8, "migrated from 7");
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
