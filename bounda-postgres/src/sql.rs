//! What every statement shares: errors that say what was being done, transactions at the
//! isolation the store's locking assumes, and statements prepared once per connection.

use bounda::store::StoreError;
use deadpool_postgres::GenericClient;
use tokio_postgres::IsolationLevel;
use tokio_postgres::types::ToSql;

/// A failed statement's error, saying what was being done, and marked unavailable when the
/// server could not be reached.
pub(crate) fn failed(what: &str) -> impl FnOnce(tokio_postgres::Error) -> StoreError + '_ {
    move |error| {
        let unavailable = unreachable(&error);
        StoreError::with_source(what.to_owned(), error).unavailable_if(unavailable)
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

/// A transaction at READ COMMITTED, whatever the server's or role's default: each statement
/// sees what committed before it, which the serialised appends and the claims rely on.
pub(crate) async fn transaction(
    client: &mut deadpool_postgres::Object,
) -> Result<deadpool_postgres::Transaction<'_>, StoreError> {
    client
        .build_transaction()
        .isolation_level(IsolationLevel::ReadCommitted)
        .start()
        .await
        .map_err(failed("cannot begin a transaction"))
}

/// Parameters of a statement.
pub(crate) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// Runs `sql`, prepared once per connection; how many rows it changed.
pub(crate) async fn execute(
    client: &impl GenericClient,
    sql: &str,
    params: Params<'_>,
) -> Result<u64, tokio_postgres::Error> {
    let statement = client.prepare_cached(sql).await?;
    client.execute(&statement, params).await
}

/// The rows `sql` answers, prepared once per connection.
pub(crate) async fn query(
    client: &impl GenericClient,
    sql: &str,
    params: Params<'_>,
) -> Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
    let statement = client.prepare_cached(sql).await?;
    client.query(&statement, params).await
}

/// The row `sql` answers, if any, prepared once per connection.
pub(crate) async fn query_opt(
    client: &impl GenericClient,
    sql: &str,
    params: Params<'_>,
) -> Result<Option<tokio_postgres::Row>, tokio_postgres::Error> {
    let statement = client.prepare_cached(sql).await?;
    client.query_opt(&statement, params).await
}

/// The one row `sql` answers, prepared once per connection.
pub(crate) async fn query_one(
    client: &impl GenericClient,
    sql: &str,
    params: Params<'_>,
) -> Result<tokio_postgres::Row, tokio_postgres::Error> {
    let statement = client.prepare_cached(sql).await?;
    client.query_one(&statement, params).await
}
