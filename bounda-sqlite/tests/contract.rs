//! The store contract, on SQLite in memory and on a file.

mod in_memory {
    bounda::store_contract_tests!(
        async || bounda_sqlite::SqliteStore::in_memory().expect("a store")
    );
}

mod on_a_file {
    /// A store on a fresh file, with the directory that holds it.
    async fn store() -> (bounda_sqlite::SqliteStore, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store =
            bounda_sqlite::SqliteStore::open(dir.path().join("bounda.db")).expect("a store");
        (store, dir)
    }

    bounda::store_contract_tests!(store);
}
