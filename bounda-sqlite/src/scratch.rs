//! A SQLite file that lives as long as a test: the database a simulation's runners open, close
//! and open again.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bounda::Error;
use bounda::store::Store;
use bounda::testing::simulate::Database;

use crate::SqliteStore;

/// A fresh SQLite file in a temporary directory, removed when dropped: each
/// [`open`](Database::open) is a connection of its own, as another process's would be, and the
/// end of a simulation runs `PRAGMA integrity_check` on it.
#[derive(Debug)]
pub struct ScratchFile {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl ScratchFile {
    /// A new, empty file. A test machine without a writable temporary directory is the one
    /// case this panics on, naming the cause.
    pub fn new() -> ScratchFile {
        let dir = tempfile::tempdir()
            .unwrap_or_else(|error| panic!("a temporary directory for a scratch file: {error}"));
        ScratchFile {
            path: dir.path().join("bounda.db"),
            _dir: dir,
        }
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Default for ScratchFile {
    fn default() -> ScratchFile {
        ScratchFile::new()
    }
}

#[async_trait::async_trait]
impl Database for ScratchFile {
    async fn open(&self) -> Result<Arc<dyn Store>, Error> {
        Ok(Arc::new(SqliteStore::open(&self.path)?))
    }

    async fn check(&self) -> Result<(), String> {
        let conn = rusqlite::Connection::open(&self.path).map_err(|e| e.to_string())?;
        let answer: String = conn
            .query_row("PRAGMA integrity_check", [], |row| row.get(0))
            .map_err(|e| e.to_string())?;
        match answer.as_str() {
            "ok" => Ok(()),
            other => Err(format!("integrity check: {other}")),
        }
    }
}
