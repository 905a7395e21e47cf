//! What every statement shares: errors that say what was being done, transactions at the
//! isolation the store's locking assumes, and numbers that fit PostgreSQL's.

use bounda::store::StoreError;
use tokio_postgres::IsolationLevel;

/// A failed statement's error, saying what was being done.
pub(crate) fn failed(what: &str) -> impl FnOnce(tokio_postgres::Error) -> StoreError + '_ {
    move |error| StoreError::with_source(what.to_owned(), error)
}

/// A transaction at READ COMMITTED, whatever the server's or role's default: each statement
/// sees what committed before it, which the serialised appends and the claims rely on.
pub(crate) async fn transaction(
    client: &mut tokio_postgres::Client,
) -> Result<tokio_postgres::Transaction<'_>, StoreError> {
    client
        .build_transaction()
        .isolation_level(IsolationLevel::ReadCommitted)
        .start()
        .await
        .map_err(failed("cannot begin a transaction"))
}

/// `value` as PostgreSQL's `BIGINT`, or an error naming it.
pub(crate) fn bigint(what: &str, value: u64) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| {
        StoreError::new(format!(
            "{what} {value} is beyond what the database stores (2^63 - 1)"
        ))
    })
}
