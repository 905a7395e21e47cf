//! What every statement shares: errors that say what was being done, transactions at the
//! isolation the store's locking assumes, and the way statements reach the server.
//!
//! Straight to the server, a connection keeps its session: each statement is prepared once per
//! connection and the session's limits are set when it opens. Through a pooler in transaction
//! mode (PgBouncer's `pool_mode = transaction`) a connection is lent a server connection for
//! one transaction at a time, and nothing of a session survives between two: no statement
//! prepared in one is there in the next, and the pooler passes no session settings. So there
//! every statement runs in a transaction that sets the limits first (`SET LOCAL`), as an unnamed
//! statement with the parameter types this store learnt for its text once, by messages the
//! server runs whatever the caller does once they are sent (the text prepared under a name of
//! its own, its types read, in a transaction rolled back, the name released), which leave
//! nothing behind on the server connection, even when the caller stops waiting (at most, inside
//! a transaction, a name of its own when the reading of the types fails after it).

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bounda::store::StoreError;
use deadpool_postgres::GenericClient;
use futures_util::TryStreamExt;
use tokio_postgres::IsolationLevel;
use tokio_postgres::types::{ToSql, Type};

/// A condition, always true, that lets the transaction of the statement holding it commit
/// without waiting for the disk (`synchronous_commit` off for that transaction alone). For what
/// a crash may lose with no harm: an inbox claim (its runner's commit, which reads it, is lost
/// with it) and a subscriber's checkpoint moved past what the inbox records as handled (read
/// again, it is skipped). Whatever commits later waiting for the disk flushes it too, the log
/// being written in order, so nothing kept can rest on it and be kept without it. Never in a
/// wave's transaction, whose commit must wait.
macro_rules! unflushed {
    () => {
        "(SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL"
    };
}
pub(crate) use unflushed;

/// A failed statement's error, saying what was being done, and marked unavailable when the
/// server could not be reached.
pub(crate) fn failed(what: &str) -> impl FnOnce(tokio_postgres::Error) -> StoreError + '_ {
    move |error| {
        let unavailable = unreachable(&error);
        // A statement this connection prepared that its server connection does not know: a
        // pooler in transaction mode lent it another.
        let what = match error.code()
            == Some(&tokio_postgres::error::SqlState::INVALID_SQL_STATEMENT_NAME)
        {
            true => format!(
                "{what} (a statement prepared on this connection is gone: is a pooler in transaction mode between the store and the server? Say so with `pool_mode=transaction` in the address)"
            ),
            false => what.to_owned(),
        };
        StoreError::with_source(what, error).unavailable_if(unavailable)
    }
}

/// Whether `error` says the server is out of reach, which waiting mends: the connection refused,
/// reset or closed, or the server shutting down, starting or out of connections. A read-only or
/// full database, a refused password or a schema error is not.
pub(crate) fn unreachable(error: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    if error.is_closed() {
        return true;
    }
    if let Some(code) = error.code() {
        return code.code().starts_with("08")
            || [
                SqlState::ADMIN_SHUTDOWN,
                SqlState::CRASH_SHUTDOWN,
                SqlState::CANNOT_CONNECT_NOW,
                SqlState::TOO_MANY_CONNECTIONS,
            ]
            .contains(code);
    }
    // No server answer at all: connecting or talking to it failed (refused, reset, timed out).
    std::error::Error::source(error).is_some_and(|source| source.is::<std::io::Error>())
}

/// How the store's statements reach the server: straight, or through a pooler in transaction
/// mode.
#[derive(Debug)]
pub(crate) enum Route {
    /// Each connection is a session of its own.
    Direct,
    /// Through a pooler that lends a server connection for one transaction at a time.
    Pooled(Pooled),
}

/// What statements through a pooler in transaction mode need: the session's limits to set in
/// each transaction, and each statement's parameter types, learnt once.
#[derive(Debug)]
pub(crate) struct Pooled {
    /// `SET LOCAL` of each limit, run first in every transaction.
    settings: String,
    /// The beginning of a transaction of its own for a statement outside one, setting the
    /// limits that bound a statement; `None` when none is set, and a statement runs alone (its
    /// own transaction already).
    alone: Option<String>,
    /// The parameter types of each statement's text, as the server read them.
    types: Mutex<HashMap<String, Arc<[Type]>>>,
}

impl Route {
    /// Through a pooler in transaction mode, with `limits` (each setting and its value) set in
    /// each transaction. `idle_in_transaction_session_timeout` bounds only transactions of
    /// several statements; the others bound a statement alone too.
    pub(crate) fn pooled(limits: &[(&str, String)]) -> Route {
        let set = |(setting, value): &(&str, String)| format!("SET LOCAL {setting} = {value}; ");
        let settings: String = limits.iter().map(set).collect();
        let bounding: String = limits
            .iter()
            .filter(|(setting, _)| *setting != "idle_in_transaction_session_timeout")
            .map(set)
            .collect();
        Route::Pooled(Pooled {
            alone: (!bounding.is_empty())
                .then(|| format!("START TRANSACTION ISOLATION LEVEL READ COMMITTED; {bounding}")),
            settings,
            types: Mutex::default(),
        })
    }
}

/// A connection of the pool, with the way its statements reach the server.
pub(crate) struct Conn {
    client: deadpool_postgres::Object,
    route: Arc<Route>,
}

impl Conn {
    pub(crate) fn new(client: deadpool_postgres::Object, route: Arc<Route>) -> Conn {
        Conn { client, route }
    }

    /// Runs `sql`, one or several statements, by the simple protocol, which keeps nothing on
    /// the server connection.
    pub(crate) async fn batch_execute(&self, sql: &str) -> Result<(), tokio_postgres::Error> {
        self.client.batch_execute(sql).await
    }
}

/// A transaction on a connection of the pool: rolled back when dropped uncommitted.
pub(crate) struct Tx<'a> {
    tx: deadpool_postgres::Transaction<'a>,
    route: &'a Route,
}

impl Tx<'_> {
    /// Runs `sql`, one or several statements, by the simple protocol.
    pub(crate) async fn batch_execute(&self, sql: &str) -> Result<(), tokio_postgres::Error> {
        self.tx.batch_execute(sql).await
    }

    pub(crate) async fn commit(self) -> Result<(), tokio_postgres::Error> {
        self.tx.commit().await
    }

    pub(crate) async fn rollback(self) -> Result<(), tokio_postgres::Error> {
        self.tx.rollback().await
    }
}

/// A transaction at READ COMMITTED, whatever the server's or role's default: each statement
/// sees what committed before it, which the serialised appends and the claims rely on. Through
/// a pooler, the session's limits are set first.
pub(crate) async fn transaction(conn: &mut Conn) -> Result<Tx<'_>, StoreError> {
    let route = &*conn.route;
    let tx = conn
        .client
        .build_transaction()
        .isolation_level(IsolationLevel::ReadCommitted)
        .start()
        .await
        .map_err(failed("cannot begin a transaction"))?;
    if let Route::Pooled(pooled) = route
        && !pooled.settings.is_empty()
    {
        tx.batch_execute(&pooled.settings)
            .await
            .map_err(failed("cannot set the transaction's limits"))?;
    }
    Ok(Tx { tx, route })
}

/// Where statements run: a connection, each statement on its own, or a transaction.
pub(crate) trait Session: Sync {
    /// Its client, which prepares and caches statements.
    type Client: GenericClient + Sync;

    fn client(&self) -> &Self::Client;

    /// The connection underneath, which runs unnamed statements.
    fn postgres(&self) -> &tokio_postgres::Client;

    fn route(&self) -> &Route;

    /// Whether its statements run outside a transaction, each on its own.
    fn alone(&self) -> bool;
}

impl Session for Conn {
    type Client = deadpool_postgres::Object;

    fn client(&self) -> &deadpool_postgres::Object {
        &self.client
    }

    fn postgres(&self) -> &tokio_postgres::Client {
        &self.client
    }

    fn route(&self) -> &Route {
        &self.route
    }

    fn alone(&self) -> bool {
        true
    }
}

impl<'a> Session for Tx<'a> {
    type Client = deadpool_postgres::Transaction<'a>;

    fn client(&self) -> &deadpool_postgres::Transaction<'a> {
        &self.tx
    }

    fn postgres(&self) -> &tokio_postgres::Client {
        self.tx.client()
    }

    fn route(&self) -> &Route {
        self.route
    }

    fn alone(&self) -> bool {
        false
    }
}

/// Parameters of a statement.
pub(crate) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// Parameters with the types the server reads them as.
type Typed<'a> = Vec<(&'a (dyn ToSql + Sync), Type)>;

impl Pooled {
    /// The parameter types of `sql`, learnt on `session` the first time.
    pub(crate) async fn types(
        &self,
        session: &impl Session,
        sql: &str,
    ) -> Result<Arc<[Type]>, tokio_postgres::Error> {
        if let Some(types) = self.known(sql) {
            return Ok(types);
        }
        let types = learn(self, session, sql).await?;
        self.types
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(sql.to_owned(), types.clone());
        Ok(types)
    }

    /// The parameter types of `sql`, if learnt.
    pub(crate) fn known(&self, sql: &str) -> Option<Arc<[Type]>> {
        self.types
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(sql)
            .cloned()
    }

    /// `params` with the types the server reads them as, learnt once for `sql`.
    async fn typed<'p>(
        &self,
        session: &impl Session,
        sql: &str,
        params: Params<'p>,
    ) -> Result<Typed<'p>, tokio_postgres::Error> {
        // A statement without parameters needs no types: nothing is learnt for it.
        if params.is_empty() {
            return Ok(Vec::new());
        }
        let types = self.types(session, sql).await?;
        Ok(params.iter().copied().zip(types.iter().cloned()).collect())
    }

    /// Runs `statement` on `session`: in its transaction, or alone outside one; alone, in a
    /// transaction of its own that sets the limits first when a limit bounds a statement, its
    /// beginning, the statement and its end sent together.
    async fn enclosed<T>(
        &self,
        session: &impl Session,
        statement: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, tokio_postgres::Error> {
        let (Some(begin), true) = (&self.alone, session.alone()) else {
            return statement.await;
        };
        let client = session.postgres();
        // Polled in order, so sent in order; a failed statement's end rolls back.
        let (begun, answer, ended) = futures_util::future::join3(
            client.batch_execute(begin),
            statement,
            client.batch_execute("COMMIT"),
        )
        .await;
        begun?;
        let answer = answer?;
        ended?;
        Ok(answer)
    }
}

/// The parameter types of `sql`, learnt on `session` by two messages of the simple protocol sent
/// together, which the server runs whatever the caller does once they are sent. The first opens
/// a transaction (bounded by the store's limits; a savepoint inside the session's), prepares
/// the text under a name of this learning's own and reads its types; the second rolls that
/// back, and the name is released (outside a transaction, by the second message, whatever the
/// first met; inside one, by the first, so a failure of the reading after the `PREPARE` leaves
/// that name, which nothing else uses). So a caller giving a learning up half-way (a runner's
/// idle check does, when its timer fires) leaves nothing on the server connection the pooler
/// lent. The learning by statements sent in turn it replaces left a transaction open there
/// when given up after its `BEGIN`, and a named statement, for another process's of that name
/// to collide with, when given up before its `Parse` was answered. `sql` is one statement: an
/// operator's text of several is refused before it is learnt ([`one_statement`]).
async fn learn(
    pooled: &Pooled,
    session: &impl Session,
    sql: &str,
) -> Result<Arc<[Type]>, tokio_postgres::Error> {
    let name = learning_name();
    let (open, release, close) = match session.alone() {
        true => (
            pooled.alone.as_deref().unwrap_or("BEGIN"),
            String::new(),
            format!("ROLLBACK; DEALLOCATE {name}"),
        ),
        false => (
            "SAVEPOINT bounda_learning",
            format!("; DEALLOCATE {name}"),
            "ROLLBACK TO SAVEPOINT bounda_learning; RELEASE SAVEPOINT bounda_learning".to_owned(),
        ),
    };
    // The text's end on a line of its own, so a comment closing it comments out nothing after.
    let learning = format!(
        "{open}; PREPARE {name} AS {sql}\n; \
         SELECT parameter_types::oid[]::text AS {LEARNT} \
         FROM pg_catalog.pg_prepared_statements WHERE name = '{name}'{release}"
    );
    let client = session.postgres();
    // Polled in order, so sent in order, both at the first poll. The first's failure is told
    // first: after it, outside a transaction, the second's release of a name never prepared
    // fails too.
    let (learnt, closed) =
        futures_util::future::join(client.simple_query(&learning), client.batch_execute(&close))
            .await;
    let learnt = learnt?;
    closed?;
    // The row is there: the text was prepared by this session a statement before.
    let listed = learnt.iter().find_map(|answer| match answer {
        tokio_postgres::SimpleQueryMessage::Row(row)
            if row.columns().first().map(|column| column.name()) == Some(LEARNT) =>
        {
            row.get(0)
        }
        _ => None,
    });
    Ok(listed.map(types_of).unwrap_or_default().into())
}

/// A name for one learning that no other uses: of this process (a number drawn at random once,
/// as process ids repeat across hosts) and of this learning in it.
fn learning_name() -> String {
    static PROCESS: OnceLock<u64> = OnceLock::new();
    static LEARNINGS: AtomicU64 = AtomicU64::new(0);
    let process = PROCESS.get_or_init(|| {
        std::collections::hash_map::RandomState::new().hash_one(std::process::id())
    });
    let learning = LEARNINGS.fetch_add(1, Ordering::Relaxed);
    format!("bounda_learnt_{process:016x}_{learning}")
}

/// Whether `sql` is one statement as far as a `;` can tell: none before its end, its trailing
/// ones and blanks aside. A `;` inside a quote or a comment counts too: learnt through a pooler,
/// a text of two statements would run its second (a `COMMIT` in it ending the learning's
/// transaction early), so such a text is refused, not read closer.
pub(crate) fn one_statement(sql: &str) -> bool {
    !sql.trim_end_matches(|c: char| c == ';' || c.is_whitespace())
        .contains(';')
}

/// The column [`learn`] reads a text's parameter types from.
const LEARNT: &str = "bounda_learnt_types";

/// The types of an `oid[]` in its text form (`{25,1184}`), as the server writes it. A type the
/// client does not know by its number (none of bounda's parameters has one) is named by it.
fn types_of(oids: &str) -> Vec<Type> {
    oids.trim_matches(|c| c == '{' || c == '}')
        .split(',')
        .filter(|oid| !oid.is_empty())
        .map(|oid| {
            let oid: u32 = oid.trim().parse().unwrap_or(0);
            Type::from_oid(oid).unwrap_or_else(|| {
                Type::new(
                    format!("oid {oid}"),
                    oid,
                    tokio_postgres::types::Kind::Simple,
                    "pg_catalog".to_owned(),
                )
            })
        })
        .collect()
}

/// How many rows `stream` changed, once read to its end.
pub(crate) async fn changed(
    stream: tokio_postgres::RowStream,
) -> Result<u64, tokio_postgres::Error> {
    let mut stream = std::pin::pin!(stream);
    while stream.try_next().await?.is_some() {}
    Ok(stream.rows_affected().unwrap_or(0))
}

/// Runs `sql`; how many rows it changed.
pub(crate) async fn execute(
    session: &impl Session,
    sql: &str,
    params: Params<'_>,
) -> Result<u64, tokio_postgres::Error> {
    match session.route() {
        Route::Direct => {
            let statement = session.client().prepare_cached(sql).await?;
            session.client().execute(&statement, params).await
        }
        Route::Pooled(pooled) => {
            let typed = pooled.typed(session, sql, params).await?;
            let client = session.postgres();
            pooled
                .enclosed(session, async {
                    changed(client.query_typed_raw(sql, typed.iter().cloned()).await?).await
                })
                .await
        }
    }
}

/// The rows `sql` answers.
pub(crate) async fn query(
    session: &impl Session,
    sql: &str,
    params: Params<'_>,
) -> Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
    match session.route() {
        Route::Direct => {
            let statement = session.client().prepare_cached(sql).await?;
            session.client().query(&statement, params).await
        }
        Route::Pooled(pooled) => {
            let typed = pooled.typed(session, sql, params).await?;
            pooled
                .enclosed(session, session.postgres().query_typed(sql, &typed))
                .await
        }
    }
}

/// The row `sql` answers, if any.
pub(crate) async fn query_opt(
    session: &impl Session,
    sql: &str,
    params: Params<'_>,
) -> Result<Option<tokio_postgres::Row>, tokio_postgres::Error> {
    match session.route() {
        Route::Direct => {
            let statement = session.client().prepare_cached(sql).await?;
            session.client().query_opt(&statement, params).await
        }
        Route::Pooled(pooled) => {
            let typed = pooled.typed(session, sql, params).await?;
            pooled
                .enclosed(session, session.postgres().query_typed_opt(sql, &typed))
                .await
        }
    }
}

/// The one row `sql` answers.
pub(crate) async fn query_one(
    session: &impl Session,
    sql: &str,
    params: Params<'_>,
) -> Result<tokio_postgres::Row, tokio_postgres::Error> {
    match session.route() {
        Route::Direct => {
            let statement = session.client().prepare_cached(sql).await?;
            session.client().query_one(&statement, params).await
        }
        Route::Pooled(pooled) => {
            let typed = pooled.typed(session, sql, params).await?;
            pooled
                .enclosed(session, session.postgres().query_typed_one(sql, &typed))
                .await
        }
    }
}

/// The rows of `sql`, a text run once or seldom (an operator's query), for which nothing is
/// kept: prepared for this run only.
pub(crate) async fn query_once(
    session: &impl Session,
    sql: &str,
    params: Params<'_>,
) -> Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
    match session.route() {
        Route::Direct => session.client().query(sql, params).await,
        Route::Pooled(pooled) => {
            let types = match params.is_empty() {
                true => Arc::from([]),
                false => learn(pooled, session, sql).await?,
            };
            let typed: Typed<'_> = params.iter().copied().zip(types.iter().cloned()).collect();
            pooled
                .enclosed(session, session.postgres().query_typed(sql, &typed))
                .await
        }
    }
}
