//! The file's checkpoints, run beside the writer. SQLite copies the write-ahead log back into
//! the database file once the log passes a thousand pages, and by default the commit that
//! passes it does the copying and its flush, holding up that commit and every write waiting
//! behind it. Here the commit only nudges a thread of the store's own, which checkpoints on a
//! connection of its own while the writer goes on: a checkpoint needs no lock a writer needs.
//! Should that thread fall far behind (a reader holding an old view keeps a checkpoint from
//! finishing), the commit that finds the log ten times that size checkpoints itself, as SQLite
//! would have, so the log stays bounded.

use std::ffi::c_int;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, TrySendError, sync_channel};
use std::thread::JoinHandle;

use bounda::store::StoreError;
use rusqlite::Connection;
use rusqlite::hooks::Wal;
use rusqlite::wal::CheckpointMode;

/// Log pages after which a commit nudges the checkpointer: SQLite's own threshold.
const NUDGE_AT: c_int = 1_000;
/// Log pages after which a commit checkpoints itself: the checkpointer is behind.
const BACKSTOP_AT: c_int = 10_000;

/// The thread that checkpoints a file. It stops once the writer's connection, which holds the
/// only way to nudge it, is closed; dropped, it waits for that.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    thread: Option<JoinHandle<()>>,
    /// Checkpoints the thread has run.
    done: Arc<AtomicU64>,
}

impl Checkpointer {
    /// Starts checkpointing the file `writer` is open on, with `busy_timeout_ms` for its own
    /// connection, and has `writer`'s commits nudge it.
    pub(crate) fn start(
        writer: &mut Connection,
        busy_timeout_ms: u32,
    ) -> Result<Checkpointer, StoreError> {
        let path = writer
            .path()
            .filter(|path| !path.is_empty())
            .ok_or_else(|| StoreError::new("a checkpointer needs a database on a file"))?
            .to_owned();
        let beside = Connection::open(&path)
            .and_then(|conn| {
                conn.busy_timeout(std::time::Duration::from_millis(u64::from(busy_timeout_ms)))?;
                Ok(conn)
            })
            .map_err(|e| {
                StoreError::with_source(format!("cannot open `{path}` to checkpoint it"), e)
            })?;
        let (nudge, nudged) = sync_channel::<()>(1);
        let done = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&done);
        let thread = std::thread::Builder::new()
            .name("bounda-sqlite-checkpoint".into())
            .spawn(move || checkpoint_when_nudged(&beside, &path, &nudged, &counted))
            .map_err(|e| StoreError::with_source("cannot start the checkpointer", e))?;
        writer
            .wal_hook(Some(move |wal: &mut Wal, pages: c_int| {
                if pages >= BACKSTOP_AT {
                    wal.checkpoint_v2(CheckpointMode::PASSIVE)?;
                } else if pages >= NUDGE_AT {
                    // Full: a nudge is already waiting. Gone: the store is closing.
                    match nudge.try_send(()) {
                        Ok(()) | Err(TrySendError::Full(()) | TrySendError::Disconnected(())) => {}
                    }
                }
                Ok(())
            }))
            .map_err(|e| StoreError::with_source("cannot install the log hook", e))?;
        Ok(Checkpointer {
            thread: Some(thread),
            done,
        })
    }

    /// How many checkpoints the thread has run.
    #[cfg(test)]
    pub(crate) fn done(&self) -> u64 {
        self.done.load(Ordering::SeqCst)
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Checkpoints `path` without waiting on anyone each time it is nudged, until the writer closes.
/// A checkpoint that fails is logged and left to the next nudge, or to the writer's own; one
/// that finds another connection checkpointing (another runner on the same file) leaves it to
/// that one.
fn checkpoint_when_nudged(conn: &Connection, path: &str, nudged: &Receiver<()>, done: &AtomicU64) {
    for () in nudged {
        match conn.wal_checkpoint_v2(None::<&str>, CheckpointMode::PASSIVE) {
            Ok(_) => {
                done.fetch_add(1, Ordering::SeqCst);
            }
            Err(rusqlite::Error::SqliteFailure(error, _))
                if error.code == rusqlite::ErrorCode::DatabaseBusy =>
            {
                tracing::debug!(path, "another connection is checkpointing the SQLite log");
            }
            Err(error) => tracing::warn!(
                path,
                error = %error,
                "cannot checkpoint the SQLite log; it is tried again after the next commits"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use bounda::store::{Append, Metadata, NewEvent, Store, WriteSet};

    use crate::SqliteStore;

    /// Commits `n` write sets of an event of about 4 KiB each: a page or more of log each.
    async fn write_pages(store: &SqliteStore, n: usize) {
        for version in 0..n {
            let writes = WriteSet {
                appends: vec![Append {
                    aggregate_type: "Blob".into(),
                    aggregate_id: "b-1".into(),
                    expected_version: version as u64,
                    events: vec![NewEvent {
                        id: format!("e-{version}"),
                        event_type: "Written".into(),
                        payload: serde_json::json!({ "bytes": "x".repeat(4096) }),
                        timestamp: "2026-01-01T00:00:00Z".parse().expect("a moment"),
                        metadata: Metadata::of_command("cmd-1"),
                    }],
                }],
                ..WriteSet::default()
            };
            store.commit(&writes).await.expect("the commit failed");
        }
    }

    // The log is copied back into the file beside the writer, not by the commit that passes a
    // thousand pages; and it stays bounded.
    #[tokio::test]
    async fn the_log_is_checkpointed_beside_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.db");
        let store = SqliteStore::open(&path).unwrap();
        write_pages(&store, 3_000).await;
        let checkpointer = store
            ._checkpointer
            .as_ref()
            .expect("a file has a checkpointer");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while checkpointer.done() == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(
            checkpointer.done() >= 1,
            "no checkpoint ran beside the writer"
        );
        let file = std::fs::metadata(&path).unwrap().len();
        assert!(
            file > 4 << 20,
            "the file holds the checkpointed pages: {file} bytes"
        );
        let log = std::fs::metadata(dir.path().join("app.db-wal"))
            .unwrap()
            .len();
        assert!(log < 10_001 * 4_200, "the log stays bounded: {log} bytes");
        let events = store.read_stream("Blob", "b-1").await.unwrap();
        assert_eq!(events.len(), 3_000);
    }
}
