//! What only the SQLite store promises: its pragmas, its migrations, its file.

use bounda::store::{Append, Metadata, NewEvent, ScheduledEntry, Store, WriteSet};
use bounda_sqlite::{Options, SqliteStore, Synchronous};
use rusqlite::Connection;

fn one_event(id: &str) -> WriteSet {
    WriteSet {
        appends: vec![Append {
            aggregate_type: "Order".into(),
            aggregate_id: "o-1".into(),
            expected_version: 0,
            events: vec![NewEvent {
                id: id.into(),
                event_type: "OrderPlaced".into(),
                payload: serde_json::json!({ "order_id": "o-1" }),
                timestamp: "2026-01-01T00:00:00Z".parse().expect("a moment"),
                metadata: Metadata::of_command("cmd-1"),
            }],
        }],
        ..WriteSet::default()
    }
}

// spec 202
#[tokio::test]
async fn a_file_is_opened_in_wal_mode_with_a_5s_busy_timeout_and_full_sync() {
    let dir = tempfile::tempdir().expect("a directory");
    let store = SqliteStore::open(dir.path().join("app.db")).expect("a store");
    assert_eq!(store.journal_mode().expect("readable"), "wal");
    assert_eq!(store.busy_timeout_ms().expect("readable"), 5_000);
    assert_eq!(store.synchronous().expect("readable"), 2, "FULL");

    let relaxed = Options {
        synchronous: Synchronous::Normal,
        ..Options::default()
    };
    let store = SqliteStore::open_with(dir.path().join("relaxed.db"), relaxed).expect("a store");
    assert_eq!(store.synchronous().expect("readable"), 1, "NORMAL");
}

#[tokio::test]
async fn in_memory_needs_no_file() {
    let store = SqliteStore::in_memory().expect("a store");
    assert_eq!(store.journal_mode().expect("readable"), "memory");
    store.commit(&one_event("e-1")).await.expect("committed");
    assert_eq!(store.head().await.expect("readable"), 1);
}

#[tokio::test]
async fn a_reopened_file_keeps_its_events_and_schema() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("app.db");
    SqliteStore::open(&path)
        .expect("a store")
        .commit(&one_event("e-1"))
        .await
        .expect("committed");
    let store = SqliteStore::open(&path).expect("reopened");
    assert_eq!(
        store
            .read_event("e-1")
            .await
            .expect("readable")
            .map(|e| e.version),
        Some(1)
    );
    let version: u32 = Connection::open(&path)
        .and_then(|c| c.query_row("PRAGMA user_version", [], |row| row.get(0)))
        .expect("readable");
    assert_eq!(version, 16, "migrations are counted in user_version");
}

#[tokio::test]
async fn a_database_from_a_newer_bounda_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("future.db");
    {
        let conn = Connection::open(&path).expect("a file");
        conn.execute_batch("CREATE TABLE bounda_future (x); PRAGMA user_version = 99;")
            .expect("written");
    }
    let before = std::fs::read(&path).expect("readable");
    let error = SqliteStore::open(&path).expect_err("refused");
    let message = error.to_string();
    assert!(message.contains("schema version 99"), "{message}");
    assert!(message.contains("upgrade bounda"), "{message}");
    assert_eq!(
        std::fs::read(&path).expect("readable"),
        before,
        "not a byte changed"
    );
    let mode: String = Connection::open(&path)
        .and_then(|c| c.query_row("PRAGMA journal_mode", [], |row| row.get(0)))
        .expect("readable");
    assert_eq!(mode, "delete", "not even switched to WAL");
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("notes.txt");
    std::fs::write(
        &path,
        "this is not a database, just some words long enough to fill a header",
    )
    .expect("written");
    let error = SqliteStore::open(&path).expect_err("refused");
    assert!(error.to_string().contains("schema version"), "{error}");
}

// Issue 43: a corrupt row is read marked with the column that does not read, not a refusal of
// the whole read (which stopped every reader behind it), and never a panic.
#[tokio::test]
async fn a_corrupt_row_is_read_marked_not_a_panic() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("app.db");
    SqliteStore::open(&path)
        .expect("a store")
        .commit(&one_event("e-1"))
        .await
        .expect("committed");
    Connection::open(&path)
        .and_then(|c| c.execute("UPDATE bounda_events SET timestamp = 'yesterday'", []))
        .expect("corrupted");
    let store = SqliteStore::open(&path).expect("reopened");
    let events = store.read_all(0, 10).await.expect("read around");
    let unreadable = events[0].unreadable.as_ref().expect("marked");
    assert_eq!(
        (unreadable.column.as_str(), unreadable.stored.as_str()),
        ("timestamp", "yesterday")
    );
    let error = events[0].readable().expect_err("unreadable").to_string();
    assert!(
        error.contains("event `e-1` at position 1")
            && error.contains("`yesterday` is not a moment"),
        "{error}"
    );
}

#[tokio::test]
async fn write_transactions_counts_each_commit_once_and_a_group_commit_once() {
    let store = SqliteStore::in_memory().expect("a store");
    let before = store.write_transactions();
    store.commit(&one_event("e-1")).await.expect("committed");
    assert_eq!(store.write_transactions(), before + 1);
    let mut second = one_event("e-2");
    second.appends[0].expected_version = 1;
    let mut third = one_event("e-3");
    third.appends[0].expected_version = 2;
    let results = store.commit_many(&[second, third]).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(
        store.write_transactions(),
        before + 2,
        "two write sets, one transaction"
    );
    store.head().await.expect("a read");
    assert_eq!(
        store.write_transactions(),
        before + 2,
        "a read commits nothing"
    );
}

// issue 47: a wave's write sets are written in a statement per kind of write, not a few per
// write set; a wave with one refused write set is written the exact way, each write set alone.
#[tokio::test]
async fn a_wave_takes_a_few_statements_whatever_its_size_and_the_exact_way_when_refused() {
    const SETS: usize = 100;
    let store = SqliteStore::in_memory().expect("a store");
    store.count_statements().expect("counted");
    let wave = |expected: fn(usize) -> u64| -> Vec<WriteSet> {
        (0..SETS)
            .map(|n| {
                let mut writes = one_event(&format!("e-{n}-{}", expected(n)));
                writes.appends[0].aggregate_id = format!("o-{n}");
                writes.appends[0].expected_version = expected(n);
                writes
            })
            .collect()
    };
    let before = store.statements_run();
    let results = store.commit_many(&wave(|_| 0)).await;
    assert!(results.iter().all(Result::is_ok));
    let as_a_wave = store.statements_run() - before;
    // Begin, a savepoint, the last position, the streams' versions and the events (each in
    // chunks of 64, 32 and 4 rows), the release and the commit.
    assert!(
        as_a_wave <= 12,
        "{as_a_wave} statements for {SETS} write sets"
    );

    // The last one expects a version its stream does not have.
    let before = store.statements_run();
    let results = store
        .commit_many(&wave(|n| if n == SETS - 1 { 7 } else { 1 }))
        .await;
    assert!(results[..SETS - 1].iter().all(Result::is_ok));
    assert!(results[SETS - 1].is_err(), "the refused one fails alone");
    let exact = store.statements_run() - before;
    assert!(
        exact > 3 * SETS as u64,
        "{exact} statements: each write set written alone, in a savepoint"
    );
    assert_eq!(store.head().await.expect("read"), 2 * SETS as u64 - 1);
}

// issue 47: a wave's reads are a statement per kind, whatever its size: the streams of a page
// of instances with their snapshots, and the scheduler entries of a page of keys.
#[tokio::test]
async fn a_page_of_streams_or_entries_is_read_in_one_statement() {
    const STREAMS: usize = 100;
    let store = SqliteStore::in_memory().expect("a store");
    let writes: Vec<WriteSet> = (0..STREAMS)
        .map(|n| {
            let mut writes = one_event(&format!("e-{n}"));
            writes.appends[0].aggregate_id = format!("o-{n}");
            // Every other stream has an entry keyed by its id.
            if n % 2 == 0 {
                writes.schedule.push(ScheduledEntry::new(
                    format!("o-{n}"),
                    "Remind",
                    format!("o-{n}"),
                    serde_json::json!({}),
                    bounda::Instant::parse("2026-01-01T00:00:00Z").expect("a moment"),
                ));
            }
            writes
        })
        .collect();
    assert!(store.commit_many(&writes).await.iter().all(Result::is_ok));
    store.count_statements().expect("counted");
    let ids: Vec<String> = (0..STREAMS).rev().map(|n| format!("o-{n}")).collect();
    let before = store.statements_run();
    let tails = store.read_tails("Order", &ids).await.expect("read");
    assert_eq!(
        store.statements_run() - before,
        1,
        "one statement for {STREAMS} streams"
    );
    let read: Vec<(&str, usize)> = tails
        .iter()
        .map(|tail| (tail.aggregate_id.as_str(), tail.events.len()))
        .collect();
    let asked: Vec<(&str, usize)> = ids.iter().map(|id| (id.as_str(), 1)).collect();
    assert_eq!(
        read, asked,
        "each stream with its event, in the order asked"
    );

    let before = store.statements_run();
    let entries = store.scheduled_many(&ids).await.expect("read");
    assert_eq!(
        store.statements_run() - before,
        1,
        "one statement for {STREAMS} keys"
    );
    let keys: Vec<&str> = entries
        .iter()
        .map(|entry| entry.dedupe_key.as_str())
        .collect();
    let kept: Vec<&str> = ids
        .iter()
        .map(String::as_str)
        .filter(|id| {
            id.trim_start_matches("o-")
                .parse::<usize>()
                .is_ok_and(|n| n % 2 == 0)
        })
        .collect();
    assert_eq!(keys, kept, "the entries kept, in the order asked");
}

// A group commit that cannot begin tells each of its write sets why: the lock under "cannot
// begin a write", not the outer words alone.
#[tokio::test]
async fn a_failed_group_commit_gives_each_write_set_the_cause() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("app.db");
    let options = Options {
        busy_timeout_ms: 20,
        ..Options::default()
    };
    let store = SqliteStore::open_with(&path, options).expect("a store");
    let other = Connection::open(&path).expect("another connection");
    other
        .execute_batch("BEGIN IMMEDIATE")
        .expect("the write lock taken");
    let mut second = one_event("e-2");
    second.appends[0].aggregate_id = "o-2".into();
    let results = store.commit_many(&[one_event("e-1"), second]).await;
    assert_eq!(results.len(), 2);
    for result in results {
        let error = result.expect_err("locked out").to_string();
        assert!(
            error.contains("cannot begin a write") && error.contains("locked"),
            "{error}"
        );
    }
}

// Issue 9: processes started together on a new file all open it; each migration runs once.
#[tokio::test]
async fn many_openers_of_one_new_file_all_succeed() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("shared.db");
    let openers: Vec<_> = (0..16)
        .map(|_| {
            let path = path.clone();
            std::thread::spawn(move || SqliteStore::open(&path))
        })
        .collect();
    for opener in openers {
        let opened = opener
            .join()
            .expect("the thread ran")
            .expect("the file opens");
        assert_eq!(opened.head().await.expect("readable"), 0);
    }
}

// Issue 22: projections call no one. SQLite answers at once, so a projection that waits on
// anything but its table has called out: its batch fails, saying so, and writes nothing.
#[tokio::test]
async fn a_projection_that_waits_on_something_else_fails_its_batch() {
    use bounda::read_model::{ColumnDef, SqlType, TableDef};
    use bounda::store::read_models::{Batch, ProjectError, Projector, Rows};
    use futures_util::future::BoxFuture;

    const TABLE: TableDef = TableDef {
        name: "waiting",
        columns: &[ColumnDef {
            name: "id",
            sql_type: SqlType::Text,
            nullable: false,
            key: true,
            unique: false,
            index: false,
        }],
    };
    /// Waits for what never comes, as a call to a port would.
    struct CallsOut;
    impl Projector for CallsOut {
        fn apply<'t>(&'t mut self, _: &'t mut dyn Rows) -> BoxFuture<'t, Result<(), ProjectError>> {
            Box::pin(std::future::pending())
        }
    }

    let store = bounda_sqlite::SqliteStore::in_memory().unwrap();
    let tables = store.capabilities().read_models().unwrap();
    tables.ensure(&TABLE).await.unwrap();
    store
        .move_checkpoint("read-model:waiting", None, 0)
        .await
        .unwrap();
    let batch = Batch {
        table: &TABLE,
        subscriber: "read-model:waiting",
        from: 0,
        to: 3,
        declared: &TABLE.declared(),
        rebuild: None,
    };
    let error = tables.project(&batch, &mut CallsOut).await.unwrap_err();
    assert!(
        error.to_string().contains("projections call no one"),
        "{error}"
    );
    assert_eq!(
        store.checkpoint("read-model:waiting").await.unwrap(),
        Some(0)
    );
    // The connection is usable after it.
    assert_eq!(store.head().await.unwrap(), 0);
}

/// A file another application keeps its own tables in, and its bytes.
fn foreign_file(dir: &std::path::Path) -> (std::path::PathBuf, Vec<u8>) {
    let path = dir.join("other.db");
    Connection::open(&path)
        .and_then(|c| {
            c.execute_batch(
                "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);
                 INSERT INTO users (name) VALUES ('ann');
                 PRAGMA user_version = 42;",
            )
        })
        .expect("written");
    let bytes = std::fs::read(&path).expect("readable");
    (path, bytes)
}

// Issue 43: a store is never opened on another application's file or an empty one it was not
// asked to create: each opening refuses it naming the path and what it found, and the file is
// left as it was (no bounda table, no WAL switch).
#[tokio::test]
async fn a_file_that_is_not_a_bounda_database_is_refused_unchanged() {
    let dir = tempfile::tempdir().expect("a directory");
    let (path, before) = foreign_file(dir.path());
    for opened in [
        SqliteStore::open(&path),
        SqliteStore::open_existing(&path),
        SqliteStore::open_as_is(&path),
    ] {
        let message = opened.expect_err("refused").to_string();
        assert!(
            message.contains("other.db` is not a bounda database")
                && message.contains("users")
                && message.contains("user_version: 42"),
            "{message}"
        );
        assert_eq!(std::fs::read(&path).expect("readable"), before);
    }
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").expect("touched");
    for opened in [
        SqliteStore::open_existing(&empty),
        SqliteStore::open_as_is(&empty),
    ] {
        let message = opened.expect_err("refused").to_string();
        assert!(message.contains("empty.db` is empty"), "{message}");
        assert_eq!(std::fs::metadata(&empty).expect("there").len(), 0);
    }
    SqliteStore::open(&empty).expect("a runner creates the database in an empty file");
}

// Issue 43: a command that only reads opens the file read-only, as it is: a backup made
// read-only can be inspected, and nothing of it changes.
#[tokio::test]
async fn a_read_only_file_is_read_as_it_is() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("backup.db");
    SqliteStore::open(&path)
        .expect("a store")
        .commit(&one_event("e-1"))
        .await
        .expect("committed");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).expect("chmod");
    let before = std::fs::read(&path).expect("readable");
    let store = SqliteStore::open_as_is(&path).expect("opened read-only");
    let events = store.read_all(0, 10).await.expect("read");
    assert_eq!(events.len(), 1);
    let refused = store.commit(&one_event("e-2")).await;
    assert!(refused.is_err(), "a read-only store refuses a write");
    drop(store);
    assert_eq!(std::fs::read(&path).expect("readable"), before);
}
