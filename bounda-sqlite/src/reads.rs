//! The reads by key that the runtime makes one at a time or a page at once: a stream after a
//! version, a snapshot, a scheduler entry. A page holds the connection once for all its reads.

use bounda::RecordedEvent;
use bounda::store::{ScheduledEntry, Snapshot, StoreError, StreamTail};
use rusqlite::{Connection, OptionalExtension, params};

use crate::{rows, sql};

/// The events of stream `aggregate_type:aggregate_id` after `version`, oldest first.
pub(crate) fn stream_after(
    conn: &Connection,
    aggregate_type: &str,
    aggregate_id: &str,
    version: u64,
) -> Result<Vec<RecordedEvent>, StoreError> {
    let mut statement = conn
        .prepare_cached(&format!(
            "SELECT {} FROM bounda_events
             WHERE aggregate_type = ?1 AND aggregate_id = ?2 AND version > ?3
             ORDER BY version",
            rows::EVENT_COLUMNS
        ))
        .map_err(sql("cannot prepare a stream read"))?;
    statement
        .query_map(params![aggregate_type, aggregate_id, version], rows::event)
        .and_then(Iterator::collect)
        .map_err(sql("cannot read a stream"))
}

/// The snapshot kept for stream `aggregate_type:aggregate_id`, if any.
pub(crate) fn snapshot(
    conn: &Connection,
    aggregate_type: &str,
    aggregate_id: &str,
) -> Result<Option<Snapshot>, StoreError> {
    conn.prepare_cached(
        "SELECT version, state FROM bounda_snapshots
         WHERE aggregate_type = ?1 AND aggregate_id = ?2",
    )
    .and_then(|mut s| {
        s.query_row(params![aggregate_type, aggregate_id], |row| {
            Ok(Snapshot {
                aggregate_type: aggregate_type.to_owned(),
                aggregate_id: aggregate_id.to_owned(),
                version: row.get(0)?,
                // A state that does not read is no snapshot: the stream is folded whole.
                state: rows::json(row, 1).unwrap_or(serde_json::Value::Null),
            })
        })
        .optional()
    })
    .map_err(sql("cannot read a snapshot"))
}

/// Streams `ids` of `aggregate_type`, each its snapshot and the events after it, in the order
/// of `ids`. The snapshot is read first: a stream only grows, so no event after it is missed.
pub(crate) fn tails(
    conn: &Connection,
    aggregate_type: &str,
    ids: &[String],
) -> Result<Vec<StreamTail>, StoreError> {
    at_once(conn, || {
        ids.iter()
            .map(|id| {
                let snapshot = snapshot(conn, aggregate_type, id)?;
                let after = snapshot.as_ref().map_or(0, |snapshot| snapshot.version);
                Ok(StreamTail {
                    aggregate_id: id.clone(),
                    events: stream_after(conn, aggregate_type, id, after)?,
                    snapshot,
                })
            })
            .collect()
    })
}

/// The scheduler entries with keys `dedupe_keys` that exist, in the order asked.
pub(crate) fn scheduled_many(
    conn: &Connection,
    dedupe_keys: &[String],
) -> Result<Vec<ScheduledEntry>, StoreError> {
    at_once(conn, || {
        let mut entries = Vec::with_capacity(dedupe_keys.len());
        for key in dedupe_keys {
            entries.extend(scheduled(conn, key)?);
        }
        Ok(entries)
    })
}

/// Runs the reads of `page` in one read transaction: they see one state of the file, and the
/// file's read lock is taken once for the page instead of once per statement.
fn at_once<T>(
    conn: &Connection,
    page: impl FnOnce() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let transaction = conn
        .unchecked_transaction()
        .map_err(sql("cannot begin a read"))?;
    let read = page()?;
    transaction.commit().map_err(sql("cannot end a read"))?;
    Ok(read)
}

/// The scheduler entry with key `dedupe_key`, if any.
pub(crate) fn scheduled(
    conn: &Connection,
    dedupe_key: &str,
) -> Result<Option<ScheduledEntry>, StoreError> {
    conn.prepare_cached(&format!(
        "SELECT {} FROM bounda_scheduled_commands WHERE dedupe_key = ?1",
        rows::SCHEDULED_COLUMNS
    ))
    .and_then(|mut s| s.query_row([dedupe_key], rows::scheduled).optional())
    .map_err(sql("cannot read a scheduler entry"))
}
