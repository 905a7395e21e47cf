//! Where a schedule keeps its data: one database its runners open, and open again after a
//! restart, as processes on one machine open one file.

use std::sync::Arc;

use async_trait::async_trait;

use crate::Error;
use crate::store::Store;

/// A database a simulation makes fresh for each schedule: each [`open`](Database::open) is a
/// store of its own on the same data (another process's connection), and
/// [`check`](Database::check) says at the end whether the data is whole.
///
/// `bounda_sqlite::ScratchFile` is one: a SQLite file in a temporary directory.
#[async_trait]
pub trait Database: Send + Sync {
    /// A new store on the database.
    async fn open(&self) -> Result<Arc<dyn Store>, Error>;

    /// Whether the database checks out whole (SQLite's `integrity_check`); by default, yes.
    async fn check(&self) -> Result<(), String> {
        Ok(())
    }
}
