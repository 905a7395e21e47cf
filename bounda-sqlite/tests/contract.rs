//! The store contract, on SQLite in memory and on a file, and the core's part on a store that
//! keeps the core alone. SQLite keeps every capability but wake-ups: one file has one writer at
//! a time, and runners on it poll.

/// The contract's parts for a store that keeps every capability but wake-ups.
macro_rules! sqlite_contract_tests {
    ($make:expr) => {
        bounda::store_contract_tests!(
            [core, pauses, limits, instances, copies, read_models, ingress]: $make
        );
    };
}

mod in_memory {
    sqlite_contract_tests!(async || bounda_sqlite::SqliteStore::in_memory().expect("a store"));
}

mod on_a_file {
    /// A store on a fresh file, with the directory that holds it.
    async fn store() -> (bounda_sqlite::SqliteStore, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store =
            bounda_sqlite::SqliteStore::open(dir.path().join("bounda.db")).expect("a store");
        (store, dir)
    }

    sqlite_contract_tests!(store);
}

/// The core alone passes the core's contract: what a store author's first store must.
mod core_only {
    bounda::store_contract_tests!(core: async || bounda::testing::CoreOnly(
        std::sync::Arc::new(bounda_sqlite::SqliteStore::in_memory().expect("a store"))
    ));
}
