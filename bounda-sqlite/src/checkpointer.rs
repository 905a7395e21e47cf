//! WAL checkpoints on a thread of their own at `synchronous = NORMAL`, so a commit does not
//! wait for one.
//!
//! SQLite's own automatic checkpoint runs inside the commit that takes the WAL past a thousand
//! pages: that commit copies the WAL into the database file and waits for the disk before it
//! returns, and the runner's next wave waits with it. At `NORMAL` that is the only time a
//! commit waits for the disk. Here the writer's WAL hook only wakes a thread that holds its own
//! connection to the file and runs a `PASSIVE` checkpoint (which never blocks a writer or a
//! reader) on the machine's other core, while the writer goes on. Should that thread fall
//! behind (a reader holding an old snapshot, a slow disk), the writer checkpoints inline once
//! the WAL passes [`INLINE_PAGES`], as SQLite would have, so the WAL stays bounded whatever the
//! thread does.
//!
//! At `FULL` every commit waits for the disk, and a commit beside a checkpoint waits for the
//! checkpoint's writes as well: a command a commit went from 16k to 11k/s on this machine with
//! the thread. So at `FULL` the checkpoint stays where SQLite runs it (`SqliteStore::setup`).

use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use bounda::store::StoreError;
use rusqlite::{Connection, OpenFlags};

use crate::connection::{self, Options};

/// WAL pages past which the thread is woken: SQLite's own threshold for its automatic
/// checkpoint.
pub(crate) const BACKGROUND_PAGES: i32 = 1_000;

/// WAL pages past which the writer checkpoints inline: the thread has fallen this far behind.
pub(crate) const INLINE_PAGES: i32 = 8 * BACKGROUND_PAGES;

/// What the writer's hook and the thread share.
#[derive(Debug, Default)]
struct Shared {
    wake: Mutex<Wake>,
    woken: Condvar,
    /// Checkpoints the thread has run.
    background: AtomicU64,
    /// Checkpoints the writer ran inline.
    inline: AtomicU64,
    /// The WAL's pages copied into the file by the thread's last checkpoint: the thread is
    /// woken for a thousand pages more, not at every commit while the WAL is long.
    backfilled: AtomicI32,
}

#[derive(Debug, Default)]
struct Wake {
    /// The WAL passed [`BACKGROUND_PAGES`] since the thread last looked.
    due: bool,
    /// The store is closing.
    stop: bool,
    /// Tests hold the thread back to see the writer's own checkpoint.
    #[cfg(feature = "testing")]
    held: bool,
}

/// The thread that checkpoints a file's WAL, stopped and joined when dropped.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts the thread on its own connection to `path`, with the durability of `options`
    /// (a checkpoint syncs as the writer's commits do), and hooks `writer` to wake it.
    pub(crate) fn start(
        writer: &mut Connection,
        path: &Path,
        options: Options,
    ) -> Result<Checkpointer, StoreError> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| {
            StoreError::with_source(
                format!("cannot open `{}` for its checkpoints", path.display()),
                e,
            )
        })?;
        connection::synchronous(&conn, options.synchronous)?;
        let shared = Arc::new(Shared::default());
        let hook = Arc::clone(&shared);
        writer
            .wal_hook(Some(move |wal: &mut rusqlite::hooks::Wal, pages: i32| {
                hook.written(wal, pages)
            }))
            .map_err(crate::sql("cannot install the WAL hook"))?;
        let on_thread = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("bounda-sqlite-checkpoints".to_owned())
            .spawn(move || on_thread.run(&conn))
            .map_err(|e| StoreError::with_source("cannot start the checkpoint thread", e))?;
        Ok(Checkpointer {
            shared,
            thread: Some(thread),
        })
    }

    /// Checkpoints the thread has run, and the writer inline.
    #[cfg(feature = "testing")]
    pub(crate) fn counts(&self) -> (u64, u64) {
        (
            self.shared.background.load(Ordering::Relaxed),
            self.shared.inline.load(Ordering::Relaxed),
        )
    }

    /// Holds the thread back (`true`) or lets it go on: for tests of the writer's own
    /// checkpoint.
    #[cfg(feature = "testing")]
    pub(crate) fn hold(&self, held: bool) {
        if let Ok(mut wake) = self.shared.wake.lock() {
            wake.held = held;
            self.shared.woken.notify_one();
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        if let Ok(mut wake) = self.shared.wake.lock() {
            wake.stop = true;
        }
        self.shared.woken.notify_one();
        if let Some(thread) = self.thread.take() {
            // The thread's errors are logged where they happen; a panic there, which nothing
            // in it should raise, was reported by the panic hook.
            let _ = thread.join();
        }
    }
}

impl Shared {
    /// The writer's WAL hook, after each commit: `pages` is the WAL's length.
    fn written(&self, wal: &mut rusqlite::hooks::Wal, pages: i32) -> rusqlite::Result<()> {
        if pages >= INLINE_PAGES {
            // As SQLite's own automatic checkpoint: what it cannot do now is left for the next
            // commit, and this one stands either way (an error answered here would be the
            // commit's).
            match wal.checkpoint() {
                Ok(()) => {
                    self.inline.fetch_add(1, Ordering::Relaxed);
                }
                Err(error) if busy(&error) => {}
                Err(error) => tracing::warn!(
                    error = %error,
                    pages,
                    "the WAL checkpoint the writer ran inline failed; the next commit tries again"
                ),
            }
            return Ok(());
        }
        let backfilled = self.backfilled.load(Ordering::Relaxed);
        // A WAL shorter than what was copied was taken up again from its start since.
        let copied = match pages < backfilled {
            true => 0,
            false => backfilled,
        };
        if pages - copied >= BACKGROUND_PAGES
            && let Ok(mut wake) = self.wake.lock()
        {
            wake.due = true;
            self.woken.notify_one();
        }
        Ok(())
    }

    /// The thread: a checkpoint each time the writer wakes it, until the store closes.
    fn run(&self, conn: &Connection) {
        let mut failing = false;
        while self.next() {
            match conn.wal_checkpoint_v2(None::<&str>, rusqlite::wal::CheckpointMode::PASSIVE) {
                Ok((_, copied)) => {
                    self.backfilled.store(copied, Ordering::Relaxed);
                    self.background.fetch_add(1, Ordering::Relaxed);
                    failing = false;
                }
                Err(error) if busy(&error) => {}
                Err(error) => {
                    // Logged when it starts failing, not at every commit while it does; the
                    // writer checkpoints inline once the WAL grows long.
                    if !failing {
                        tracing::warn!(
                            error = %error,
                            "a background WAL checkpoint failed; it is tried again at the next \
                             commit"
                        );
                    }
                    failing = true;
                }
            }
        }
    }

    /// Waits until a checkpoint is due (`true`) or the store closes (`false`).
    fn next(&self) -> bool {
        let Ok(mut wake) = self.wake.lock() else {
            return false;
        };
        loop {
            if wake.stop {
                return false;
            }
            if wake.due && !held(&wake) {
                wake.due = false;
                return true;
            }
            wake = match self.woken.wait(wake) {
                Ok(wake) => wake,
                Err(_) => return false,
            };
        }
    }
}

/// Another connection (the writer, another runner on the file) is checkpointing the file now:
/// nothing failed, and what is left is done at a later commit.
fn busy(error: &rusqlite::Error) -> bool {
    matches!(error, rusqlite::Error::SqliteFailure(error, _)
        if error.code == rusqlite::ErrorCode::DatabaseBusy)
}

#[cfg(feature = "testing")]
fn held(wake: &Wake) -> bool {
    wake.held
}

#[cfg(not(feature = "testing"))]
fn held(_: &Wake) -> bool {
    false
}
