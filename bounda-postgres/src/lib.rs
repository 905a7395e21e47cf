//! The PostgreSQL store of bounda: the same app on several machines, against one server.
//!
//! [`PostgresStore::connect`] opens a pool on a server (over TLS as the address's `sslmode`
//! and `sslrootcert` say, as libpq reads them) and migrates the
//! tables under a schema and table prefix of your choice, refusing tables written by a newer
//! bounda. The store implements [`bounda::store::Store`], so an app runs on it as on SQLite:
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use bounda::App;
//! use bounda_postgres::{Options, PostgresStore};
//!
//! let store = PostgresStore::connect("postgres://shop@db.internal/shop", Options::default()).await?;
//! let app = App::builder(store).build().await?;
//! app.run().await?;
//! # Ok(())
//! # }
//! ```
//!
//! Appends keep one global order without holes under concurrent writers on any number of
//! machines; due work is claimed with `FOR UPDATE SKIP LOCKED`, fenced by claim id, so workers
//! share it and a worker whose lease lapsed cannot settle what another took over;
//! [`PostgresStore::wakeups`] hears appends from other machines at their commit.

#![warn(missing_docs)]

mod address;
mod bookmarks;
mod claims;
mod import;
mod instances;
mod limits;
mod names;
mod opener;
mod pipeline;
mod place;
mod read_models;
mod rows;
mod schema;
mod sql;
mod statements;
mod store;
#[cfg(feature = "testing")]
pub mod testing;
mod tls;
mod wake;
mod wave;

use bounda::store::StoreError;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};

pub use opener::Servers;
pub use schema::SCHEMA_VERSION;
pub use wake::Wakeups;

/// How long connecting, or waiting for a pooled connection's recycling, may take.
const NETWORK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Where the tables go, and how many connections the pool keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The schema that holds the tables, created if missing. Default `bounda`.
    pub schema: String,
    /// Put before every table's name (`shop_events`), so several apps can share a schema.
    /// Default empty.
    pub table_prefix: String,
    /// Connections in the pool. Default 8.
    pub pool_size: usize,
    /// How long the server keeps a session that stopped talking inside a transaction before
    /// it ends it, rolling back and releasing its locks. A machine cut off from the network
    /// mid-commit would otherwise hold the versions of the streams it was appending to, and
    /// every append to them, until the network came back. The store's transactions never wait
    /// on anything else. Default 5 s.
    pub idle_in_transaction_timeout: bounda::Duration,
    /// How long one of the store's statements may run before the server cancels it
    /// (`statement_timeout`), failing the operation with the server's reason. `None` (the
    /// default) keeps the server's or the role's setting.
    pub statement_timeout: Option<bounda::Duration>,
    /// How long one of the store's statements may wait for a lock another session holds
    /// (`lock_timeout`) before it fails, rather than queue behind a migration or an operator's
    /// `LOCK`. `None` (the default) keeps the server's or the role's setting.
    pub lock_timeout: Option<bounda::Duration>,
    /// What `pg_stat_activity` calls this process's connections, so an operator sees who holds
    /// what. By default `bounda <host> <pid>`; an `application_name` in the address wins.
    pub application_name: Option<String>,
    /// The address the connection that listens for other processes' writes goes to, when not
    /// the pool's: `LISTEN` needs a session of its own, which a pooler in transaction mode
    /// does not keep, so behind one the pool's address is the pooler's and this one the
    /// server's. The address may say it too: `listen_host` and `listen_port` (default 5432)
    /// give the same address at the server's host and port. `None` (the default) listens on
    /// the pool's address, or where the address says.
    pub listen_url: Option<String>,
    /// Whether the address is a pooler in transaction mode (PgBouncer's `pool_mode =
    /// transaction`), which lends a server connection for one transaction at a time; the
    /// address says so too with `pool_mode=transaction`. The store then keeps nothing in a
    /// session: no statement stays prepared, and the limits are set in each transaction.
    /// Without `listen_url` the processes poll for each other's writes. Default `false`.
    pub pooled: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            schema: "bounda".to_owned(),
            table_prefix: String::new(),
            pool_size: 8,
            idle_in_transaction_timeout: bounda::seconds(5),
            statement_timeout: None,
            lock_timeout: None,
            application_name: None,
            listen_url: None,
            pooled: false,
        }
    }
}

/// A pool of connections to one server, with bounda's tables migrated.
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    names: names::Names,
    /// The address's TLS settings, which say why TLS refused a server.
    tls: tls::Settings,
    /// How statements reach the server: straight, or through a pooler in transaction mode.
    route: std::sync::Arc<sql::Route>,
    /// Where the listening connection goes, and its TLS: the pool's unless
    /// `Options::listen_url` names another address; none behind a pooler in transaction mode
    /// without one, where the processes poll.
    listening: Option<(
        tokio_postgres::Config,
        Option<tokio_postgres_rustls::MakeRustlsConnect>,
    )>,
    /// The version this store's connecting migrated the tables from, if it did.
    migrated: std::sync::Arc<std::sync::OnceLock<i32>>,
    /// Wakes the processes listening once something they may run has committed.
    notifier: std::sync::Arc<wake::Notifier>,
    /// Whether a wave may hold the head, from the other writers seen at work.
    head_turns: std::sync::Arc<place::HeadTurns>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("tables", &self.names.tables())
            .finish_non_exhaustive()
    }
}

/// The settings of a connection to `url`, and its TLS connector: the address's TLS (none over
/// a local socket), the session's time limits, this process's name, and bounds on connecting.
fn connection(url: &str, options: &Options) -> Result<Connection, StoreError> {
    let address = address::split(url)?;
    let pooled = address.pooled || options.pooled;
    let tls = address.tls;
    let mut config: tokio_postgres::Config = address
        .rest
        .parse()
        .map_err(|e| StoreError::with_source("the database address does not read", e))?;
    // A local socket carries no TLS: libpq ignores `sslmode` there, and so does the store.
    let local = !config.get_hosts().is_empty()
        && config
            .get_hosts()
            .iter()
            .all(|host| matches!(host, tokio_postgres::config::Host::Unix(_)));
    let connector = match local {
        true => {
            config.ssl_mode(tokio_postgres::config::SslMode::Disable);
            None
        }
        false => {
            config.ssl_mode(tls.negotiation());
            tls.connector()?
        }
    };
    let mut limits = vec![(
        "idle_in_transaction_session_timeout",
        options.idle_in_transaction_timeout.as_millis().max(1),
    )];
    for (setting, limit) in [
        ("statement_timeout", options.statement_timeout),
        ("lock_timeout", options.lock_timeout),
    ] {
        if let Some(limit) = limit {
            limits.push((setting, limit.as_millis().max(1)));
        }
    }
    if config.get_application_name().is_none() {
        let name = options
            .application_name
            .clone()
            .unwrap_or_else(process_name);
        config.application_name(&name);
    }
    // Straight to the server, the limits are the session's, set as it opens. A pooler in
    // transaction mode passes no session settings (PgBouncer refuses `options`): each
    // transaction sets them.
    let route = match pooled {
        true => {
            if config.get_options().is_some() {
                return Err(StoreError::new(
                    "the database address names a pooler in transaction mode and has `options`, \
                     which a pooler does not pass to the server: set the limits in the store's \
                     `Options` (they are set in each transaction), or on the role \
                     (`ALTER ROLE … SET`)",
                ));
            }
            let limits: Vec<(&str, String)> = limits
                .iter()
                .map(|(setting, millis)| (*setting, millis.to_string()))
                .collect();
            sql::Route::pooled(&limits)
        }
        false => {
            let mut session: Vec<String> = limits
                .iter()
                .map(|(setting, millis)| format!("-c {setting}={millis}"))
                .collect();
            if let Some(theirs) = config.get_options() {
                session.insert(0, theirs.to_owned());
            }
            config.options(session.join(" "));
            sql::Route::Direct
        }
    };
    // A server that does not answer is an error after a while, not a wait without end:
    // connecting is bounded, and a connection whose sent data goes unacknowledged (a cut
    // network) is dropped by the kernel after `tcp_user_timeout`, idle ones probed by
    // keepalives.
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(NETWORK_TIMEOUT);
    }
    config.keepalives_idle(NETWORK_TIMEOUT);
    config.tcp_user_timeout(NETWORK_TIMEOUT * 3);
    Ok(Connection {
        config,
        tls,
        connector,
        route,
        listen: address.listen,
    })
}

/// How to connect to one address.
struct Connection {
    config: tokio_postgres::Config,
    /// The address's TLS settings, which say why TLS refused a server.
    tls: tls::Settings,
    connector: Option<tokio_postgres_rustls::MakeRustlsConnect>,
    /// How statements reach the server: straight, or through a pooler.
    route: sql::Route,
    /// The listening connection's address, when the address names one (`listen_host`,
    /// `listen_port`).
    listen: Option<String>,
}

/// `bounda <host> <pid>`: this process, as `pg_stat_activity` shows it by default.
fn process_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    format!("bounda {host} {}", std::process::id())
}

impl PostgresStore {
    /// Connects to the server of `url` (`postgres://user@host/db`, or `host=/run/postgresql
    /// dbname=app`) and migrates the tables under `options`' schema and prefix.
    pub async fn connect(url: &str, options: Options) -> Result<PostgresStore, StoreError> {
        let store = PostgresStore::connect_pool(url, options)?;
        store.migrate().await?;
        Ok(store)
    }

    /// The pool, not connected yet.
    fn connect_pool(url: &str, options: Options) -> Result<PostgresStore, StoreError> {
        let names = names::Names::new(&options.schema, &options.table_prefix)?;
        let Connection {
            config,
            tls,
            connector,
            route,
            listen,
        } = connection(url, &options)?;
        let listening = match options.listen_url.as_ref().or(listen.as_ref()) {
            Some(listen) => {
                let listen = connection(listen, &options)?;
                if matches!(listen.route, sql::Route::Pooled(_)) {
                    return Err(StoreError::new(
                        "the listening address (`Options::listen_url`, or `listen_host` and \
                         `listen_port` in the address) names a pooler in transaction mode, which \
                         keeps no session to listen in: name the server itself",
                    ));
                }
                Some((listen.config, listen.connector))
            }
            None => match route {
                sql::Route::Direct => Some((config.clone(), connector.clone())),
                // A pooler in transaction mode drops a session's `LISTEN` with its transaction.
                sql::Route::Pooled(_) => {
                    tracing::info!(
                        tables = %names.tables(),
                        "the store's address is a pooler in transaction mode and names no \
                         listening address (`listen_host` and `listen_port` in the address, or \
                         `Options::listen_url`): runners find other processes' writes at their \
                         next poll"
                    );
                    None
                }
            },
        };
        let manager_config = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        let manager = match connector.clone() {
            Some(connector) => Manager::from_config(config.clone(), connector, manager_config),
            None => Manager::from_config(config.clone(), tokio_postgres::NoTls, manager_config),
        };
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(NETWORK_TIMEOUT * 3))
            .create_timeout(Some(NETWORK_TIMEOUT))
            .recycle_timeout(Some(NETWORK_TIMEOUT))
            .build()
            .map_err(|e| StoreError::with_source("cannot build the connection pool", e))?;
        Ok(PostgresStore {
            pool,
            names,
            tls,
            route: std::sync::Arc::new(route),
            listening,
            migrated: Default::default(),
            notifier: Default::default(),
            head_turns: Default::default(),
        })
    }

    /// Runs the migrations the tables lack.
    async fn migrate(&self) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let from = schema::migrate(&mut client, &self.names).await?;
        if let Some(from) = from {
            let _ = self.migrated.set(from);
        }
        Ok(())
    }

    /// The schema version this store migrated the tables from when it connected, or `None`
    /// when they were at this build's version already, or another process starting at the same
    /// time migrated them (it waited for that one, then went on).
    pub fn migrated_from(&self) -> Option<i32> {
        self.migrated.get().copied()
    }

    /// Connects to tables that exist already at this build's schema, to write to them: an
    /// operator's command must not create an empty set of tables on a mistyped address or
    /// schema, nor upgrade them (a runner does, or `migrate`). Tables of another schema version
    /// are refused, unchanged.
    pub async fn connect_existing(
        url: &str,
        options: Options,
    ) -> Result<PostgresStore, StoreError> {
        let store = PostgresStore::connect_pool(url, options)?;
        store.require_tables().await?;
        let version = store.schema_version().await?;
        if version < SCHEMA_VERSION {
            return Err(StoreError::new(format!(
                "the tables `{}*` have schema version {version}, and this build reads version {SCHEMA_VERSION}: an operator's command does not upgrade them. Run `migrate` (or start a runner) with this build first; nothing was changed",
                store.names.tables()
            )));
        }
        store.migrate().await?;
        Ok(store)
    }

    /// Connects to tables that exist already, as they are, without migrating them: what a
    /// command that only reads uses (`lag`, `check`, a copy, a preview), so the build in
    /// production can still read them afterwards. Tables of another schema version than this
    /// build's are refused, unchanged.
    pub async fn connect_as_is(url: &str, options: Options) -> Result<PostgresStore, StoreError> {
        let store = PostgresStore::connect_pool(url, options)?;
        store.require_tables().await?;
        let version = store.schema_version().await?;
        if version != SCHEMA_VERSION {
            return Err(StoreError::new(format!(
                "the tables `{}*` have schema version {version}, and this build reads version {SCHEMA_VERSION}: connecting here would migrate them, and the build that wrote them could not read them again. Copy a restored dump of them instead (nothing was changed)",
                store.names.tables()
            )));
        }
        Ok(store)
    }

    /// Refuses an address or schema without bounda's tables.
    async fn require_tables(&self) -> Result<(), StoreError> {
        let store = self;
        let client = store.client().await?;
        let row = sql::query_one(
            &client,
            "SELECT to_regclass($1) IS NOT NULL",
            &[&format!("{}schema", store.names.tables())],
        )
        .await
        .map_err(sql::failed("cannot look for bounda's tables"))?;
        if !row.try_get::<_, bool>(0).unwrap_or(false) {
            return Err(StoreError::new(format!(
                "no bounda tables `{}*` on this server; check the address and the schema",
                store.names.tables()
            )));
        }
        Ok(())
    }

    /// The schema version of the tables.
    pub async fn schema_version(&self) -> Result<i32, StoreError> {
        let client = self.client().await?;
        let row = sql::query_one(
            &client,
            &format!("SELECT version FROM {}schema", self.names.tables()),
            &[],
        )
        .await
        .map_err(sql::failed("cannot read the schema version"))?;
        row.try_get(0)
            .map_err(|e| StoreError::with_source("cannot read the schema version", e))
    }

    async fn client(&self) -> Result<sql::Conn, StoreError> {
        const FAILED: &str = "cannot connect to the database";
        let client = self.pool.get().await.map_err(|error| match error {
            // The server's own error, not the pool's wrapping of it ("Error occurred while
            // creating a new object: ..."), so the cause reads first.
            deadpool_postgres::PoolError::Backend(error) => {
                // A server TLS refuses is one to mend, not one to wait for.
                if let Some(why) = self.tls.refusal(&error) {
                    return StoreError::new(format!("{FAILED}: {why} ({error})"));
                }
                // PgBouncer refuses the session settings a server takes as it opens.
                if let Some(db) = error.as_db_error()
                    && db.message().starts_with("unsupported startup parameter")
                {
                    return StoreError::new(format!(
                        "{FAILED}: the address answered `{}`, as a pooler does: if it is a pooler in transaction mode, say so with `pool_mode=transaction` in the address (or `Options::pooled`)",
                        db.message()
                    ));
                }
                let unavailable = sql::unreachable(&error);
                StoreError::with_source(FAILED, error).unavailable_if(unavailable)
            }
            deadpool_postgres::PoolError::Timeout(_) => {
                StoreError::with_source(FAILED, error).unavailable_if(true)
            }
            other => StoreError::with_source(FAILED, other),
        })?;
        Ok(sql::Conn::new(client, self.route.clone()))
    }
}
