//! Arrived commands' keys (`bounda::store::ingress`): each key an arrived command was decided
//! under, with the answer it got.

use bounda::store::{IngressRecord, StoreError};
use rusqlite::{Connection, params};

use crate::{rows, sql};

/// Keeps `record` unless its key is kept: the rows inserted.
pub(crate) fn keep(conn: &Connection, record: &IngressRecord) -> Result<u64, StoreError> {
    conn.prepare_cached(
        "INSERT INTO bounda_ingress (key, fingerprint, answer, decided_at)
         VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (key) DO NOTHING",
    )
    .and_then(|mut statement| {
        statement.execute(params![
            record.key,
            record.fingerprint,
            record.answer.to_string(),
            record.decided_at.to_string(),
        ])
    })
    .map(|rows| rows as u64)
    .map_err(sql("cannot keep an arrived command's key"))
}

/// The record of key `key`, if it is kept.
pub(crate) fn answer(conn: &Connection, key: &str) -> Result<Option<IngressRecord>, StoreError> {
    Ok(read(
        conn,
        "SELECT key, fingerprint, answer, decided_at FROM bounda_ingress WHERE key = ?1",
        params![key],
    )?
    .pop())
}

/// Up to `limit` records in key order, after key `after` (from the first when `None`).
pub(crate) fn page(
    conn: &Connection,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<IngressRecord>, StoreError> {
    read(
        conn,
        "SELECT key, fingerprint, answer, decided_at FROM bounda_ingress
         WHERE key > ?1 ORDER BY key LIMIT ?2",
        params![
            after.unwrap_or(""),
            i64::try_from(limit).unwrap_or(i64::MAX)
        ],
    )
}

/// The records `query` selects with `params`.
fn read(
    conn: &Connection,
    query: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<IngressRecord>, StoreError> {
    let rows: Vec<(String, String, String, bounda::Instant)> = conn
        .prepare_cached(query)
        .and_then(|mut statement| {
            statement
                .query_map(params, |row| {
                    Ok((
                        row.get(0)?,
                        row.get(1)?,
                        row.get(2)?,
                        rows::instant(row, 3)?,
                    ))
                })?
                .collect()
        })
        .map_err(sql("cannot read the keys of arrived commands"))?;
    rows.into_iter()
        .map(|(key, fingerprint, answer, decided_at)| {
            let answer = serde_json::from_str(&answer).map_err(|error| {
                StoreError::new(format!(
                    "the answer kept for idempotency key `{key}` does not read: {error}"
                ))
            })?;
            Ok(IngressRecord {
                key,
                fingerprint,
                answer,
                decided_at,
            })
        })
        .collect()
}
