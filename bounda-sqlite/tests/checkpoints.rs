//! At `synchronous = NORMAL` a file's WAL is checkpointed by a thread of the store's, beside its
//! commits (issue 47): the writer checkpoints inline only once the WAL has grown long (about
//! once in 8,000 pages, so the WAL starts over, or whenever the thread is held back). At `FULL`
//! the commit that needs a checkpoint runs it, as SQLite does.

use std::path::Path;
use std::time::{Duration, Instant};

use bounda::store::{Append, Metadata, NewEvent, Store, WriteSet};
use bounda_sqlite::{Options, SqliteStore, Synchronous};

/// Events of 64 KiB each (sixteen pages of the WAL), in commits of ten, numbered from `first`.
async fn write_large_events(store: &SqliteStore, first: usize, count: usize) {
    let payload = serde_json::json!({ "text": "x".repeat(64 * 1024) });
    for start in (first..first + count).step_by(10) {
        let writes: Vec<WriteSet> = (start..(start + 10).min(first + count))
            .map(|n| WriteSet {
                appends: vec![Append {
                    aggregate_type: "Document".into(),
                    aggregate_id: format!("d-{n}"),
                    expected_version: 0,
                    events: vec![NewEvent {
                        id: format!("e-{n}"),
                        event_type: "DocumentWritten".into(),
                        payload: payload.clone(),
                        timestamp: "2026-01-01T00:00:00Z".parse().expect("a moment"),
                        metadata: Metadata::of_command(&format!("cmd-{n}")),
                    }],
                }],
                ..WriteSet::default()
            })
            .collect();
        for result in store.commit_many(&writes).await {
            result.expect("committed");
        }
    }
}

/// Waits until `done` holds of the store's checkpoint counts, or fails after ten seconds.
fn wait_for(store: &SqliteStore, what: &str, done: impl Fn((u64, u64)) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done(store.wal_checkpoints()) {
        assert!(
            Instant::now() < deadline,
            "{what}: checkpoints (thread, writer) {:?}",
            store.wal_checkpoints()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A store on `path` at `synchronous = NORMAL`.
fn normal(path: &Path) -> SqliteStore {
    let options = Options {
        synchronous: Synchronous::Normal,
        ..Options::default()
    };
    SqliteStore::open_with(path, options).expect("a store")
}

fn wal(path: &Path) -> std::path::PathBuf {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    wal.into()
}

/// The frames the WAL of the file at `path` has room for: its header, then a header and a page
/// of 4 KiB each.
fn wal_frames(path: &Path) -> u64 {
    let length = std::fs::metadata(wal(path)).expect("a WAL").len();
    length.saturating_sub(32) / (24 + 4096)
}

#[tokio::test]
async fn the_wal_is_checkpointed_beside_the_writer_and_left_empty_when_the_store_closes() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("app.db");
    let store = normal(&path);
    // 1,600 events of sixteen pages, 25,600 pages in commits of 160: SQLite's own automatic
    // checkpoint would have run in 25 of those commits.
    write_large_events(&store, 0, 1_600).await;
    let (thread, writer) = store.wal_checkpoints();
    eprintln!("checkpoints: {thread} by the thread, {writer} by the writer");
    assert!(
        (1..=40).contains(&thread),
        "the thread checkpointed, at most about once each thousand pages, not at every commit \
         once the WAL was long ({thread})"
    );
    assert!(
        writer <= 4,
        "the writer checkpointed only when the WAL was long, at most once each 8,000 pages \
         ({writer})"
    );
    let frames = wal_frames(&path);
    assert!(
        frames < 12_000,
        "the WAL was taken up again from its start, not grown to {frames} pages"
    );
    drop(store);
    assert!(
        !wal(&path).exists(),
        "the store's last connection checkpointed and removed the WAL"
    );
}

#[tokio::test]
async fn with_the_thread_behind_the_writer_checkpoints_once_the_wal_is_long() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("app.db");
    let store = normal(&path);
    store.hold_wal_checkpoints(true);
    // 600 events of sixteen pages: past the eight thousand pages the writer allows.
    write_large_events(&store, 0, 600).await;
    let (thread, writer) = store.wal_checkpoints();
    assert_eq!(thread, 0, "the thread was held back");
    assert!(writer >= 1, "the writer checkpointed the long WAL itself");
    store.hold_wal_checkpoints(false);
    write_large_events(&store, 600, 80).await;
    wait_for(&store, "the thread goes on once let go", |(thread, _)| {
        thread >= 1
    });
}

#[tokio::test]
async fn at_full_the_commit_that_needs_a_checkpoint_runs_it() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("app.db");
    let store = SqliteStore::open(&path).expect("a store at FULL");
    // 1,600 events of sixteen pages: SQLite's own checkpoint keeps the WAL near a thousand
    // pages, with no thread.
    write_large_events(&store, 0, 1_600).await;
    assert_eq!(
        store.wal_checkpoints(),
        (0, 0),
        "no thread, no hook of the store's"
    );
    let frames = wal_frames(&path);
    assert!(
        frames < 2_000,
        "SQLite's own checkpoint took the WAL up again from its start: {frames} pages"
    );
}
