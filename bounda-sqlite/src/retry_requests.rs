//! Requested retries (`bounda::store::retry_requests`): who asked to retry a letter, when, and
//! what the worker's retry did.

use bounda::store::{RetryOutcome, RetryRequest, StoreError};
use rusqlite::{Connection, params};

use crate::{rows, sql};

/// Keeps `request`: a new one as it is; a finished one gives the stored request its outcome,
/// unless that has one already.
pub(crate) fn keep(conn: &Connection, request: &RetryRequest) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO bounda_retry_requests (id, letter, by, requested_at, finished_at, outcome)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (id) DO UPDATE SET
             finished_at = excluded.finished_at, outcome = excluded.outcome
         WHERE outcome IS NULL",
    )
    .and_then(|mut statement| {
        statement.execute(params![
            request.id,
            request.letter,
            request.by,
            request.requested_at.to_string(),
            request.finished_at.map(|at| at.to_string()),
            request.outcome.as_ref().map(RetryOutcome::to_text),
        ])
    })
    .map_err(sql("cannot keep a requested retry"))?;
    Ok(())
}

/// The retries requested of `letter`, oldest first.
pub(crate) fn of_letter(conn: &Connection, letter: &str) -> Result<Vec<RetryRequest>, StoreError> {
    conn.prepare_cached(
        "SELECT id, letter, by, requested_at, finished_at, outcome FROM bounda_retry_requests
         WHERE letter = ?1 ORDER BY requested_at, id",
    )
    .and_then(|mut statement| {
        statement
            .query_map([letter], |row| {
                Ok(RetryRequest {
                    id: row.get(0)?,
                    letter: row.get(1)?,
                    by: row.get(2)?,
                    requested_at: rows::instant(row, 3)?,
                    finished_at: rows::optional_instant(row, 4)?,
                    outcome: row
                        .get::<_, Option<String>>(5)?
                        .map(|text| RetryOutcome::from_text(&text)),
                })
            })?
            .collect()
    })
    .map_err(sql("cannot read the retries requested of a letter"))
}
