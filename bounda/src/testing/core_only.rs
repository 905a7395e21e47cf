//! A store with the core alone: what every app needs to run, and none of the capabilities
//! beyond it. A store author's first store looks like this, and an app's tests show with it what
//! runs on such a store and what is refused, naming the capability it lacks.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use bounda::store::Store;
//! use bounda::testing::CoreOnly;
//!
//! let store = CoreOnly(Arc::new(bounda_sqlite::SqliteStore::in_memory()?));
//! assert!(store.capabilities().pauses.is_none());
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;

use crate::store::forward::Forward;
use crate::store::{Capabilities, Store};

/// `0`'s core, without its capabilities.
pub struct CoreOnly(pub Arc<dyn Store>);

impl std::fmt::Debug for CoreOnly {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CoreOnly").finish_non_exhaustive()
    }
}

impl Forward for CoreOnly {
    fn inner(&self) -> &dyn Store {
        &*self.0
    }

    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::core().named("the core-only store")
    }
}
