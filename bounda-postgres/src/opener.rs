//! [`Servers`]: how a service opens PostgreSQL servers from `--db`, and hands files to another
//! opener.

use std::path::Path;
use std::sync::Arc;

use bounda::store::{Address, Opener, Opening, Place, Store, StoreError};

use crate::{Options, PostgresStore};

/// Opens a server's address (`postgres://…`) in the schema and under the prefix the service's
/// [`Place`] gives, and hands a file's path, a new file and a copy in memory to `F`: a service on
/// several machines opens its stores with `Servers(bounda_sqlite::Files)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Servers<F>(pub F);

#[bounda::store::async_trait]
impl<F: Opener> Opener for Servers<F> {
    async fn open(
        &self,
        address: &Address,
        place: &Place,
        opening: Opening,
    ) -> Result<Arc<dyn Store>, StoreError> {
        let Address::Server(url) = address else {
            return self.0.open(address, place, opening).await;
        };
        let options = Options {
            schema: place.schema.clone(),
            table_prefix: place.prefix.clone(),
            ..Options::default()
        };
        Ok(Arc::new(match opening {
            Opening::Create => PostgresStore::connect(url, options).await?,
            Opening::Existing => PostgresStore::connect_existing(url, options).await?,
            Opening::AsIs => PostgresStore::connect_as_is(url, options).await?,
        }))
    }

    async fn new_file(&self, path: &Path) -> Result<Arc<dyn Store>, StoreError> {
        self.0.new_file(path).await
    }

    async fn scratch_copy(
        &self,
        from: &dyn Store,
        source: &str,
    ) -> Result<Arc<dyn Store>, StoreError> {
        self.0.scratch_copy(from, source).await
    }
}
