//! The SQLite store of bounda: events, checkpoints, inbox, scheduler and dead letters in one file
//! or in memory, through rusqlite with SQLite bundled, so a fresh machine needs nothing installed.
//!
//! ```
//! use bounda::store::Store;
//! use bounda_sqlite::SqliteStore;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), bounda::store::StoreError> {
//! let store = SqliteStore::in_memory()?;
//! assert_eq!(store.head().await?, 0);
//! # Ok(())
//! # }
//! ```

/// The value at `$path` of JSON column `$column`, or NULL when the column is not JSON (a hand
/// edit): `json_extract` alone would fail the whole statement, and with it every row it reads.
macro_rules! json_field {
    ($column:literal, $path:literal) => {
        concat!(
            "(CASE WHEN json_valid(",
            $column,
            ") THEN json_extract(",
            $column,
            ", '",
            $path,
            "') END)"
        )
    };
}

mod bookmarks;
mod checkpointer;
mod claims;
mod connection;
mod import;
mod ingress;
mod instances;
mod limits;
mod opener;
mod read_models;
mod reads;
mod retry_requests;
mod rows;
mod schema;
#[cfg(feature = "testing")]
mod scratch;
mod statements;
mod store;
mod wave;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bounda::store::{Store, StoreError};
use rusqlite::{Connection, OpenFlags};

pub use connection::{Options, Synchronous};
pub use opener::Files;
#[cfg(feature = "testing")]
pub use schema::downgrade;
#[cfg(feature = "testing")]
pub use scratch::ScratchFile;

/// How a file is opened, and what it must be already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Created if missing (or empty), brought to this build's schema.
    Create,
    /// A bounda database at this build's schema, written to, never migrated.
    Write,
    /// A bounda database at this build's schema, read-only.
    Read,
}

/// The SQLite store. One connection, behind a mutex: SQLite has one writer per file anyway, and
/// statements within a process run one after another around write transactions.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Mutex<Connection>,
    /// The thread that checkpoints the file's WAL, for a file written to at `NORMAL`; it stops
    /// when the store is dropped, and whichever of the two connections closes last checkpoints
    /// and removes the WAL, as SQLite does, unless another process has the file open.
    #[cfg_attr(
        not(feature = "testing"),
        expect(dead_code, reason = "kept for its drop, which stops the thread")
    )]
    checkpointer: Option<checkpointer::Checkpointer>,
    /// Write transactions committed on this connection, counted by SQLite's commit hook.
    commits: Arc<AtomicU64>,
    /// Statements run on this connection, counted once [`count_statements`] is called.
    ///
    /// [`count_statements`]: SqliteStore::count_statements
    statements: Arc<AtomicU64>,
}

impl SqliteStore {
    /// Opens (or creates) the database at `path` with the default [`Options`]: WAL, a 5 s busy
    /// timeout, `synchronous = FULL`.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_with(path, Options::default())
    }

    /// Opens (or creates) the database at `path` with `options`, bringing it to this build's
    /// schema: what a runner opens. A file another application keeps its own tables in is
    /// refused, unchanged.
    pub fn open_with(path: impl AsRef<Path>, options: Options) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_file(path.as_ref(), options, Access::Create)
    }

    /// Opens the bounda database at `path` to write to it, as it is: what an operator's command
    /// that changes something uses. A missing path, an empty file, another application's file
    /// or a database of another schema version is refused naming the path, unchanged: a
    /// runner (or `migrate`) brings a database to a new schema, never an operator's command.
    pub fn open_existing(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_file(path.as_ref(), Options::default(), Access::Write)
    }

    /// Opens the bounda database at `path` read-only, as it is: what a command that only reads
    /// uses (`lag`, `check`, a copy, a preview), so the build in production can still open it
    /// afterwards, and a backup on a read-only mount can be inspected. Refused, unchanged, as
    /// [`open_existing`](SqliteStore::open_existing) refuses; a database of another schema
    /// version is inspected through a backup of it brought to this build's (`VACUUM INTO`,
    /// then `migrate` on the backup).
    pub fn open_as_is(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_file(path.as_ref(), Options::default(), Access::Read)
    }

    fn open_file(path: &Path, options: Options, access: Access) -> Result<SqliteStore, StoreError> {
        if access != Access::Create && !path.is_file() {
            return Err(StoreError::new(format!(
                "no database at `{}`; check the path",
                path.display()
            )));
        }
        let flags = match access {
            Access::Read => OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            Access::Create | Access::Write => OpenFlags::default(),
        };
        let conn = Connection::open_with_flags(path, flags)
            .map_err(|e| StoreError::with_source(format!("cannot open `{}`", path.display()), e))?;
        // Recognised before anything writes to it, the journal mode included.
        schema::recognise(&conn, path, access)?;
        let written = (access != Access::Read).then_some(path);
        SqliteStore::setup(conn, options, written, access)
    }

    /// A copy of `store` in memory, gone when dropped: what a preview of a deploy runs on, so
    /// the kept copy it was made from (see [`bounda::store::copy`]) stays as it was for the next
    /// preview. A copy of a copy keeps the first copy's moment and source; any other store is
    /// marked as `source`, copied now.
    pub async fn in_memory_copy_of(
        store: &dyn Store,
        source: &str,
    ) -> Result<SqliteStore, StoreError> {
        let copy = SqliteStore::in_memory()?;
        let now = bounda::clock::Clock::now(&bounda::clock::SystemClock);
        bounda::store::copy(store, &copy, source, now).await?;
        Ok(copy)
    }

    /// A database in memory, gone when the store is dropped: for tests.
    pub fn in_memory() -> Result<SqliteStore, StoreError> {
        let conn = Connection::open_in_memory()
            .map_err(|e| StoreError::with_source("cannot open a database in memory", e))?;
        SqliteStore::setup(conn, Options::default(), None, Access::Create)
    }

    /// Configures `conn` and brings it to this build's schema as `access` says; `written` is
    /// the path of a file written to (in WAL mode).
    fn setup(
        mut conn: Connection,
        options: Options,
        written: Option<&Path>,
        access: Access,
    ) -> Result<SqliteStore, StoreError> {
        // Refuse a newer database before anything writes to it, the journal mode included.
        schema::check_version(&conn)?;
        connection::configure(&conn, options, written.is_some())?;
        if access == Access::Create {
            schema::migrate(&mut conn)?;
        }
        // At `NORMAL` a checkpoint is the only wait for the disk, and the writer no longer
        // waits for it; at `FULL` every commit waits for the disk, and one beside a checkpoint
        // waits for the checkpoint's writes too, so the checkpoint stays in the commit that
        // needs it, as SQLite runs it (`checkpointer.rs`).
        let checkpointer = written
            .filter(|_| options.synchronous == Synchronous::Normal)
            .map(|path| checkpointer::Checkpointer::start(&mut conn, path, options))
            .transpose()?;
        let commits = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&commits);
        conn.commit_hook(Some(move || {
            counter.fetch_add(1, Ordering::Relaxed);
            false
        }))
        .map_err(|e| StoreError::with_source("cannot install the commit hook", e))?;
        Ok(SqliteStore {
            conn: Mutex::new(conn),
            checkpointer,
            commits,
            statements: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The connection, or an error if a panic poisoned it.
    fn lock(&self) -> Result<MutexGuard<'_, Connection>, StoreError> {
        self.conn
            .lock()
            .map_err(|_| StoreError::new("the SQLite connection is unusable after a panic"))
    }

    /// How many write transactions this store has committed since it was opened: what a
    /// benchmark divides by the work done to see how well commits are grouped.
    pub fn write_transactions(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Starts counting the statements this store runs (each run of one, reads included), as
    /// [`statements_run`](SqliteStore::statements_run) answers: what a benchmark divides by the
    /// work done to see how many statements a unit of work costs. Off until called, as SQLite
    /// then calls back at each statement.
    pub fn count_statements(&self) -> Result<(), StoreError> {
        let counter = Arc::clone(&self.statements);
        self.lock()?
            .trace_v2(
                rusqlite::trace::TraceEventCodes::SQLITE_TRACE_STMT,
                Some(move |_: rusqlite::trace::TraceEvent<'_>| {
                    counter.fetch_add(1, Ordering::Relaxed);
                }),
            )
            .map_err(|e| StoreError::with_source("cannot count statements", e))
    }

    /// How many statements this store has run since [`count_statements`] was called.
    ///
    /// [`count_statements`]: SqliteStore::count_statements
    pub fn statements_run(&self) -> u64 {
        self.statements.load(Ordering::Relaxed)
    }

    /// The WAL checkpoints run since the store was opened: by its checkpoint thread, and by
    /// the writer itself once the WAL grew long (about once in 8,000 pages, or more often
    /// while the thread is held back). `(0, 0)` for a store with no thread: in memory, opened
    /// read-only, or at `synchronous = FULL`.
    #[cfg(feature = "testing")]
    pub fn wal_checkpoints(&self) -> (u64, u64) {
        self.checkpointer
            .as_ref()
            .map_or((0, 0), checkpointer::Checkpointer::counts)
    }

    /// Holds the checkpoint thread back (`true`) or lets it go on: for tests of what the
    /// writer does while the thread is behind.
    #[cfg(feature = "testing")]
    pub fn hold_wal_checkpoints(&self, held: bool) {
        if let Some(checkpointer) = &self.checkpointer {
            checkpointer.hold(held);
        }
    }

    /// The journal mode in force (`wal` for a file, `memory` in memory).
    pub fn journal_mode(&self) -> Result<String, StoreError> {
        self.pragma("journal_mode")
    }

    /// A pragma's current value, as text.
    fn pragma(&self, name: &str) -> Result<String, StoreError> {
        let conn = self.lock()?;
        conn.query_row(&format!("PRAGMA {name}"), [], |row| {
            row.get::<_, rusqlite::types::Value>(0)
        })
        .map(|value| match value {
            rusqlite::types::Value::Text(text) => text,
            rusqlite::types::Value::Integer(n) => n.to_string(),
            other => format!("{other:?}"),
        })
        .map_err(|e| StoreError::with_source(format!("cannot read PRAGMA {name}"), e))
    }

    /// The busy timeout in force, in milliseconds.
    pub fn busy_timeout_ms(&self) -> Result<u64, StoreError> {
        let text = self.pragma("busy_timeout")?;
        text.parse()
            .map_err(|_| StoreError::new(format!("unexpected busy_timeout `{text}`")))
    }

    /// `PRAGMA synchronous` in force: 0 off, 1 normal, 2 full, 3 extra.
    pub fn synchronous(&self) -> Result<u8, StoreError> {
        let text = self.pragma("synchronous")?;
        text.parse()
            .map_err(|_| StoreError::new(format!("unexpected synchronous `{text}`")))
    }
}

/// Whether `error` is SQLite's `BUSY`: another connection holds what was asked for now.
pub(crate) fn busy(error: &rusqlite::Error) -> bool {
    matches!(error, rusqlite::Error::SqliteFailure(error, _)
        if error.code == rusqlite::ErrorCode::DatabaseBusy)
}

/// A SQLite error as a store error with context.
pub(crate) fn sql(context: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |error| StoreError::with_source(context, error)
}
