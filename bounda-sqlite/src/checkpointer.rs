//! WAL checkpoints on a thread of their own at `synchronous = NORMAL`, so a commit does not
//! wait for one.
//!
//! SQLite's own automatic checkpoint runs inside the commit that takes the WAL past a thousand
//! pages: that commit copies the WAL into the database file and waits for the disk before it
//! returns, and the runner's next wave waits with it. At `NORMAL` that is the only time a
//! commit waits for the disk. Here the writer's WAL hook only wakes a thread that holds its own
//! connection to the file and runs a `PASSIVE` checkpoint (which never waits for a writer or a
//! reader) on the machine's other core, while the writer goes on.
//!
//! SQLite takes the WAL up again from its start only when a write begins with every page of it
//! copied, which a thread copying beside a writer that never pauses seldom sees. So once the WAL
//! passes [`INLINE_PAGES`] the writer checkpoints inline, as SQLite would have, after the
//! thread's checkpoint under way if there is one: the WAL is then copied whole, taken up again
//! at the next write, and stays bounded however slow the thread is.
//!
//! At `FULL` every commit waits for the disk, and a commit beside a checkpoint waits for the
//! checkpoint's writes as well: commands of a commit each went from 16k to 11k/s on this
//! machine with the thread. So at `FULL` the checkpoint stays where SQLite runs it
//! (`SqliteStore::setup`).

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use bounda::store::StoreError;
use rusqlite::{Connection, OpenFlags};

use crate::connection::{self, Options};

/// WAL pages not yet copied past which the thread is woken: SQLite's own threshold for its
/// automatic checkpoint.
pub(crate) const BACKGROUND_PAGES: i32 = 1_000;

/// WAL pages past which the writer checkpoints inline, so the WAL is copied whole and taken up
/// again from its start: about 32 MiB of WAL at most, where SQLite's own checkpoint keeps it
/// near 4 MiB.
pub(crate) const INLINE_PAGES: i32 = 8 * BACKGROUND_PAGES;

/// What the writer's hook and the thread share.
#[derive(Debug, Default)]
struct Shared {
    wake: Mutex<Wake>,
    woken: Condvar,
    /// Held by whoever checkpoints: the writer past [`INLINE_PAGES`] waits for the thread's
    /// checkpoint to end rather than meeting SQLite's checkpoint lock, which waits for no one.
    /// A `PASSIVE` checkpoint never waits for the writer, so the wait ends.
    checkpointing: Mutex<()>,
    /// Checkpoints the thread has run.
    background: AtomicU64,
    /// Checkpoints the writer ran inline.
    inline: AtomicU64,
    /// A checkpoint failed and none has succeeded since: the failure is logged once.
    failing: AtomicBool,
}

#[derive(Debug, Default)]
struct Wake {
    /// The WAL's length after the writer's last commit.
    pages: i32,
    /// The WAL's pages the last checkpoint copied into the file.
    copied: i32,
    /// The store is closing.
    stop: bool,
    /// Tests hold the thread back to see the writer's own checkpoint.
    #[cfg(feature = "testing")]
    held: bool,
}

impl Wake {
    /// The WAL's pages not copied yet: all of a WAL shorter than what was copied, which was
    /// taken up again from its start since.
    fn behind(&self) -> i32 {
        match self.pages < self.copied {
            true => self.pages,
            false => self.pages - self.copied,
        }
    }

    /// Whether the thread checkpoints now.
    fn due(&self) -> bool {
        self.behind() >= BACKGROUND_PAGES && !held(self)
    }
}

/// The thread that checkpoints a file's WAL, stopped and joined when dropped.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts the thread on its own connection to `path`, opened as the writer's with the
    /// durability of `options` (a checkpoint syncs as the writer's commits do), and hooks
    /// `writer` to wake it.
    pub(crate) fn start(
        writer: &mut Connection,
        path: &Path,
        options: Options,
    ) -> Result<Checkpointer, StoreError> {
        let conn =
            Connection::open_with_flags(path, OpenFlags::default() - OpenFlags::SQLITE_OPEN_CREATE)
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
                hook.written(wal, pages);
                // An error answered here would be the commit's, which stands.
                Ok(())
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
        self.shared.wake().held = held;
        self.shared.woken.notify_one();
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.shared.wake().stop = true;
        self.shared.woken.notify_one();
        if let Some(thread) = self.thread.take() {
            // The thread's failures are logged where they happen; a panic there, which nothing
            // in it raises, was reported by the panic hook.
            let _ = thread.join();
        }
    }
}

impl Shared {
    /// What the writer and the thread know of the WAL. Nothing panics while holding it; were
    /// it poisoned all the same, what it holds is still whole.
    fn wake(&self) -> MutexGuard<'_, Wake> {
        self.wake.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The writer's WAL hook, after each commit: `pages` is the WAL's length.
    fn written(&self, wal: &mut rusqlite::hooks::Wal, pages: i32) {
        if pages < INLINE_PAGES {
            let mut wake = self.wake();
            wake.pages = pages;
            if wake.due() {
                self.woken.notify_one();
            }
            return;
        }
        let checkpointing = self
            .checkpointing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let result = wal.checkpoint();
        drop(checkpointing);
        if result.is_ok() {
            self.inline.fetch_add(1, Ordering::Relaxed);
            let mut wake = self.wake();
            (wake.pages, wake.copied) = (pages, pages);
        }
        self.report(result, "the WAL checkpoint the writer ran inline");
    }

    /// The thread: a checkpoint each time the WAL has grown a thousand pages past what the
    /// last one copied, until the store closes.
    fn run(&self, conn: &Connection) {
        while self.next() {
            let checkpointing = self
                .checkpointing
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let result =
                conn.wal_checkpoint_v2(None::<&str>, rusqlite::wal::CheckpointMode::PASSIVE);
            drop(checkpointing);
            let result = result.map(|(_, copied)| {
                self.background.fetch_add(1, Ordering::Relaxed);
                self.wake().copied = copied.max(0);
            });
            self.report(result, "a background WAL checkpoint");
        }
    }

    /// Waits until a checkpoint is due (`true`) or the store closes (`false`).
    fn next(&self) -> bool {
        let mut wake = self.wake();
        loop {
            if wake.stop {
                return false;
            }
            if wake.due() {
                return true;
            }
            wake = self
                .woken
                .wait(wake)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Logs a checkpoint's failure with its cause once, when checkpoints start failing, not at
    /// each commit while they do; another connection checkpointing the file (`BUSY`) is no
    /// failure. What a checkpoint leaves is copied by a later one.
    fn report(&self, result: rusqlite::Result<()>, what: &str) {
        match result {
            Ok(()) => self.failing.store(false, Ordering::Relaxed),
            Err(error) if crate::busy(&error) => {}
            Err(error) => {
                if !self.failing.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        error = %error,
                        "{what} failed; a later commit tries again"
                    );
                }
            }
        }
    }
}

#[cfg(feature = "testing")]
fn held(wake: &Wake) -> bool {
    wake.held
}

#[cfg(not(feature = "testing"))]
fn held(_: &Wake) -> bool {
    false
}
