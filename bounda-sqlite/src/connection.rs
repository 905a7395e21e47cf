//! Per-connection settings, applied and verified before the store is used.

use rusqlite::Connection;

use bounda::store::StoreError;

/// How much a commit waits for the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// Every commit reaches the disk before it returns: nothing committed is lost, even on power
    /// loss. The default, because a committed event is a promise to the caller.
    #[default]
    Full,
    /// In WAL mode, commits survive a crash of the process but the last ones may be lost on power
    /// loss; several times faster per commit on most disks (`PERFORMANCE.md`). A commit then
    /// waits for the disk only for a WAL checkpoint, which a thread of the store's runs beside
    /// the commits instead, but for one in about 8,000 pages written, which copies what the
    /// thread left and lets the WAL start over.
    Normal,
}

/// How the store opens a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// How long a statement waits for another process's write lock, in milliseconds.
    pub busy_timeout_ms: u32,
    /// See [`Synchronous`].
    pub synchronous: Synchronous,
    /// The most pages (4 KiB each by default) the file may grow to, as `PRAGMA max_page_count`:
    /// a commit that needs more fails whole, as on a full disk, and is retried. `None` leaves
    /// SQLite's own limit.
    pub max_pages: Option<u32>,
}

impl Default for Options {
    /// A 5 s busy timeout and `synchronous = FULL`.
    fn default() -> Options {
        Options {
            busy_timeout_ms: 5_000,
            synchronous: Synchronous::Full,
            max_pages: None,
        }
    }
}

/// How many prepared statements the connection keeps: more than the store has (its queries
/// are built from a few dozen shapes).
const STATEMENTS: usize = 256;

/// Applies the pragmas; a file written to (`wal`) must end up in WAL mode, or opening fails. One
/// opened read-only is left in the journal mode it has.
pub(crate) fn configure(conn: &Connection, options: Options, wal: bool) -> Result<(), StoreError> {
    // Every statement the store runs stays prepared: a firing's commit alone runs more than
    // rusqlite's default sixteen, which then evicted each other and were prepared again.
    conn.set_prepared_statement_cache_capacity(STATEMENTS);
    conn.busy_timeout(std::time::Duration::from_millis(u64::from(
        options.busy_timeout_ms,
    )))
    .map_err(crate::sql("cannot set the busy timeout"))?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(crate::sql("cannot enable foreign keys"))?;
    synchronous(conn, options.synchronous)?;
    // A group commit's savepoints copy each page they change into a sub-journal: in memory,
    // not a temporary file written and read back.
    conn.pragma_update(None, "temp_store", "MEMORY")
        .map_err(crate::sql("cannot set temp_store"))?;
    // Keep plans stable so statements whose plan depends on a bound value (`LIMIT ?`, ranges)
    // stay prepared in the cache instead of being prepared again after every use.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map_err(crate::sql("cannot enable query planner stability"))?;
    if let Some(pages) = options.max_pages.filter(|_| wal) {
        conn.pragma_update(None, "max_page_count", pages)
            .map_err(crate::sql("cannot set max_page_count"))?;
    }
    if wal {
        let mode = wal_mode(conn, options.busy_timeout_ms)
            .map_err(crate::sql("cannot set the journal mode"))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::new(format!(
                "the database would not switch to WAL (journal_mode is `{mode}`); \
                 is it on a file system without shared memory?"
            )));
        }
    }
    Ok(())
}

/// Sets how much `conn`'s commits (and checkpoints) wait for the disk.
pub(crate) fn synchronous(conn: &Connection, synchronous: Synchronous) -> Result<(), StoreError> {
    let pragma = match synchronous {
        Synchronous::Full => "FULL",
        Synchronous::Normal => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", pragma)
        .map_err(crate::sql("cannot set synchronous"))
}

/// Switches the file to WAL. The switch on a new file can answer "busy" at once while another
/// opener migrates it, without waiting on the busy timeout, so it is tried again until the
/// timeout has passed.
fn wal_mode(conn: &Connection, busy_timeout_ms: u32) -> rusqlite::Result<String> {
    let deadline =
        std::time::Instant::now() + std::time::Duration::from_millis(u64::from(busy_timeout_ms));
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0)) {
            Err(error) if crate::busy(&error) && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            answer => return answer,
        }
    }
}
