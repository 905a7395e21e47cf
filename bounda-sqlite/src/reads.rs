//! The reads by key that the runtime makes one at a time or a page at once: a stream after a
//! version, a snapshot, a scheduler entry. A page is one statement, whatever its size.

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
/// of `ids`, in one statement however many they are: the ids go as one JSON array, and each
/// stream's snapshot and events are looked up through their keys, a stream at a time (a left
/// join keeps the ids outermost). A row per event after its stream's snapshot, or one with no
/// event for a stream that has none, ordered by the stream's place among `ids`.
pub(crate) fn tails(
    conn: &Connection,
    aggregate_type: &str,
    ids: &[String],
) -> Result<Vec<StreamTail>, StoreError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut tails: Vec<StreamTail> = ids.iter().map(StreamTail::empty).collect();
    let events: Vec<String> = rows::EVENT_COLUMNS
        .split(", ")
        .map(|column| format!("e.{column}"))
        .collect();
    let mut statement = conn
        .prepare_cached(&format!(
            "SELECT {}, w.key, s.version, s.state
             FROM json_each(?2) AS w
             LEFT JOIN bounda_snapshots s
                 ON s.aggregate_type = ?1 AND s.aggregate_id = w.value
             LEFT JOIN bounda_events e
                 ON e.aggregate_type = ?1 AND e.aggregate_id = w.value
                 AND e.version > coalesce(s.version, 0)
             ORDER BY w.key, e.version",
            events.join(", ")
        ))
        .map_err(sql("cannot prepare a read of streams"))?;
    let ids = serde_json::to_string(ids)
        .map_err(|error| StoreError::new(format!("cannot list the streams to read: {error}")))?;
    let mut rows = statement
        .query(params![aggregate_type, ids])
        .map_err(sql("cannot read streams"))?;
    while let Some(row) = rows.next().map_err(sql("cannot read streams"))? {
        let place: usize = row.get(9).map_err(sql("cannot read streams"))?;
        let tail = tails
            .get_mut(place)
            .ok_or_else(|| StoreError::new(format!("a stream's place {place} was not asked")))?;
        if tail.snapshot.is_none()
            && let Some(version) = row.get(10).map_err(sql("cannot read a snapshot"))?
        {
            tail.snapshot = Some(Snapshot {
                aggregate_type: aggregate_type.to_owned(),
                aggregate_id: tail.aggregate_id.clone(),
                version,
                // A state that does not read is no snapshot: the stream is folded whole.
                state: rows::json(row, 11).unwrap_or(serde_json::Value::Null),
            });
        }
        let event: Option<String> = row.get(1).map_err(sql("cannot read streams"))?;
        if event.is_some() {
            tail.events
                .push(rows::event(row).map_err(sql("cannot read streams"))?);
        }
    }
    Ok(tails)
}

/// The scheduler entries with keys `dedupe_keys` that exist, in the order asked, in one
/// statement: the keys go as one JSON array, looked up one at a time (a cross join keeps them
/// outermost).
pub(crate) fn scheduled_many(
    conn: &Connection,
    dedupe_keys: &[String],
) -> Result<Vec<ScheduledEntry>, StoreError> {
    if dedupe_keys.is_empty() {
        return Ok(Vec::new());
    }
    let columns: Vec<String> = rows::SCHEDULED_COLUMNS
        .split(", ")
        .map(|column| format!("c.{column}"))
        .collect();
    let keys = serde_json::to_string(dedupe_keys)
        .map_err(|error| StoreError::new(format!("cannot list the keys to read: {error}")))?;
    conn.prepare_cached(&format!(
        "SELECT {} FROM json_each(?1) AS w
         CROSS JOIN bounda_scheduled_commands c ON c.dedupe_key = w.value
         ORDER BY w.key",
        columns.join(", ")
    ))
    .and_then(|mut s| s.query_map([keys], rows::scheduled)?.collect())
    .map_err(sql("cannot read scheduler entries"))
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
