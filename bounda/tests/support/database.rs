//! The store the runtime's tests run on: SQLite by default, PostgreSQL with
//! `BOUNDA_TEST_STORE=postgres` (a throwaway server the tests start, or `BOUNDA_POSTGRES_URL`),
//! and PostgreSQL through PgBouncer in transaction pooling with `BOUNDA_TEST_STORE=postgres-pooled`
//! (the pool's address the pooler's, the listening connection's the server's, as the deploying
//! guide says to run it).
//! One switch for the whole suite; tests about SQLite itself (its files, its pragmas, its
//! failures) build their `SqliteStore` directly.

use std::sync::Arc;

use bounda::store::Store;
use bounda_postgres::{Options, PostgresStore, testing};
use bounda_sqlite::{ScratchFile, SqliteStore};

/// Which store the suite runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Postgres,
    PostgresPooled,
}

/// What `BOUNDA_TEST_STORE` asks for; any other value stops the test saying what it takes.
pub fn kind() -> Kind {
    match std::env::var("BOUNDA_TEST_STORE").as_deref() {
        Err(_) | Ok("" | "sqlite") => Kind::Sqlite,
        Ok("postgres") => Kind::Postgres,
        Ok("postgres-pooled") => Kind::PostgresPooled,
        Ok(other) => panic!(
            "BOUNDA_TEST_STORE is `{other}`: it takes `sqlite` (the default), `postgres` or `postgres-pooled`"
        ),
    }
}

/// The address a PostgreSQL store of the suite connects to, and its options, for `schema` on
/// the server `url` names: straight, or through the pooler.
fn postgres(url: &str, schema: &str) -> (String, Options) {
    let options = Options {
        schema: schema.to_owned(),
        ..Options::default()
    };
    match kind() {
        Kind::PostgresPooled => {
            let pooler = testing::pooled_url()
                .unwrap_or_else(|how| panic!("{how}"))
                .unwrap_or_else(|| panic!("the tests put no pooler in front of a server of one's own (BOUNDA_POSTGRES_URL)"));
            let options = Options {
                listen_url: Some(url.to_owned()),
                ..options
            };
            (format!("{pooler} pool_mode=transaction"), options)
        }
        _ => (url.to_owned(), options),
    }
}

/// A fresh, empty store.
pub async fn store() -> Arc<dyn Store> {
    match kind() {
        Kind::Sqlite => Arc::new(SqliteStore::in_memory().expect("an in-memory store")),
        Kind::Postgres | Kind::PostgresPooled => Database::new().open().await,
    }
}

/// One database that several stores open, as several processes or machines would: a SQLite file
/// or a PostgreSQL schema.
pub enum Database {
    Sqlite(ScratchFile),
    Postgres { url: String, schema: String },
}

impl Database {
    /// A new, empty database.
    pub fn new() -> Database {
        match kind() {
            Kind::Sqlite => Database::Sqlite(ScratchFile::new()),
            Kind::Postgres | Kind::PostgresPooled => {
                let (url, schema) = testing::schema("shared").unwrap_or_else(|how| panic!("{how}"));
                Database::Postgres { url, schema }
            }
        }
    }

    /// A store on it, of its own: another process's connection.
    pub async fn open(&self) -> Arc<dyn Store> {
        match self {
            Database::Sqlite(file) => {
                Arc::new(SqliteStore::open(file.path()).expect("the file opens"))
            }
            Database::Postgres { url, schema } => {
                let (url, options) = postgres(url, schema);
                Arc::new(
                    PostgresStore::connect(&url, options)
                        .await
                        .expect("the test server answers"),
                )
            }
        }
    }
}

/// The suite's database as the simulation harness opens it: each schedule a fresh one, each
/// runner and restart a store of its own on it.
#[async_trait::async_trait]
impl bounda::testing::simulate::Database for Database {
    async fn open(&self) -> Result<Arc<dyn Store>, bounda::Error> {
        Ok(Database::open(self).await)
    }

    async fn check(&self) -> Result<(), String> {
        match self {
            Database::Sqlite(file) => file.check().await,
            // PostgreSQL keeps its own.
            Database::Postgres { .. } => Ok(()),
        }
    }
}
