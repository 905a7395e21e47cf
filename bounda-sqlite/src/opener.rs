//! [`Files`]: how a service opens SQLite files from `--db`.

use std::path::Path;
use std::sync::Arc;

use bounda::store::{Address, Opener, Opening, Place, Store, StoreError};

use crate::SqliteStore;

/// Opens SQLite files: a service's [`Opener`] on one machine. A server's address is refused,
/// saying which opener opens it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Files;

#[bounda::store::async_trait]
impl Opener for Files {
    async fn open(
        &self,
        address: &Address,
        _place: &Place,
        opening: Opening,
    ) -> Result<Arc<dyn Store>, StoreError> {
        let path = match address {
            Address::File(path) => path,
            Address::Server(_) => {
                return Err(StoreError::new(format!(
                    "`{address}` is a database server's address, and this service opens SQLite \
                     files only: open its stores with `bounda_postgres::Servers(bounda_sqlite::Files)`, \
                     or give a file's path"
                )));
            }
        };
        Ok(Arc::new(match opening {
            Opening::Create => SqliteStore::open(path)?,
            Opening::Existing => SqliteStore::open_existing(path)?,
            Opening::AsIs => SqliteStore::open_as_is(path)?,
        }))
    }

    async fn new_file(&self, path: &Path) -> Result<Arc<dyn Store>, StoreError> {
        Ok(Arc::new(SqliteStore::open(path)?))
    }

    async fn scratch_copy(
        &self,
        from: &dyn Store,
        source: &str,
    ) -> Result<Arc<dyn Store>, StoreError> {
        Ok(Arc::new(
            SqliteStore::in_memory_copy_of(from, source).await?,
        ))
    }
}
