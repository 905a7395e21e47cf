//! Arrived commands' keys (`bounda::store::ingress`): each key an arrived command was decided
//! under, with the answer it got.

use bounda::store::{IngressRecord, StoreError};
use rusqlite::{Connection, OptionalExtension, params};

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
    let read = conn
        .prepare_cached(
            "SELECT key, fingerprint, answer, decided_at FROM bounda_ingress WHERE key = ?1",
        )
        .and_then(|mut statement| {
            statement
                .query_row([key], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        rows::instant(row, 3)?,
                    ))
                })
                .optional()
        })
        .map_err(sql("cannot read an arrived command's key"))?;
    read.map(|(key, fingerprint, answer, decided_at)| {
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
    .transpose()
}
