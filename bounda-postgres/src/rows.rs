//! Rows to the runtime's types, and the runtime's numbers and moments to PostgreSQL's. A column
//! that does not read is an error naming it, never a panic.

use bounda::store::{
    Columns, DeadLetter, InboxEntry, InboxStatus, LetterKind, LetterStatus, Metadata,
    ScheduledEntry, Snapshot, StoreError, StreamTail,
};
use bounda::{Instant, RecordedEvent};
use chrono::{DateTime, Utc};
use tokio_postgres::Row;
use tokio_postgres::types::{FromSql, Type};

/// The columns [`event`] reads, in order.
pub(crate) const EVENT_COLUMNS: &str =
    "position, id, aggregate_type, aggregate_id, version, type, payload, timestamp, metadata";

/// The columns [`scheduled`] reads, in order, of the table aliased `s`.
pub(crate) const SCHEDULED_COLUMNS: &str = "s.dedupe_key, s.command_type, s.aggregate_id, \
     s.payload, s.execute_at, s.context, s.attempts, s.last_error, s.revision, s.claim_id, \
     s.claimed_at";

/// The columns [`dead_letter`] reads, in order.
pub(crate) const LETTER_COLUMNS: &str = "id, kind, handler, event_id, event_type, aggregate_type, \
     aggregate_id, error_type, error_message, error_stack, attempts, first_failed_at, \
     last_failed_at, status, payload";

/// Column `index` of `row`, or an error naming it.
pub(crate) fn get<'a, T: FromSql<'a>>(row: &'a Row, index: usize) -> Result<T, StoreError> {
    row.try_get(index).map_err(|e| {
        let column = row
            .columns()
            .get(index)
            .map_or("?", tokio_postgres::Column::name);
        StoreError::with_source(format!("column `{column}` does not read"), e)
    })
}

/// A `JSON` column's text as the server sent it, which a row parses straight into the type it
/// holds (no `serde_json::Value` between them).
pub(crate) struct JsonText<'a>(pub(crate) &'a [u8]);

impl<'a> FromSql<'a> for JsonText<'a> {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(JsonText(raw))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::JSON
    }
}

/// A `BIGINT` column that holds a count or position.
pub(crate) fn unsigned(row: &Row, index: usize) -> Result<u64, StoreError> {
    let value: i64 = get(row, index)?;
    u64::try_from(value).map_err(|_| StoreError::new(format!("a negative count {value} was read")))
}

/// An `INTEGER` column that holds a count.
pub(crate) fn count(row: &Row, index: usize) -> Result<u32, StoreError> {
    let value: i32 = get(row, index)?;
    u32::try_from(value).map_err(|_| StoreError::new(format!("a negative count {value} was read")))
}

/// A `TIMESTAMPTZ` column.
pub(crate) fn instant(row: &Row, index: usize) -> Result<Instant, StoreError> {
    Ok(Instant::from(get::<DateTime<Utc>>(row, index)?))
}

/// A nullable `TIMESTAMPTZ` column.
pub(crate) fn optional_instant(row: &Row, index: usize) -> Result<Option<Instant>, StoreError> {
    Ok(get::<Option<DateTime<Utc>>>(row, index)?.map(Instant::from))
}

/// `value` as PostgreSQL's `BIGINT`, or an error naming it.
pub(crate) fn bigint(what: &str, value: u64) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| {
        StoreError::new(format!(
            "{what} {value} is beyond what the database stores (2^63 - 1)"
        ))
    })
}

/// A row limit as `BIGINT`: anything beyond is no limit.
pub(crate) fn limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

/// A row of [`EVENT_COLUMNS`]. Metadata of another shape, or JSON the server keeps but no
/// `serde_json` value holds (a number beyond a double's range, nesting deeper than 128), marks
/// the event unreadable, with its text as stored, instead of failing the read: its row fails
/// alone, named.
pub(crate) fn event(row: &Row) -> Result<RecordedEvent, StoreError> {
    let mut columns = Columns::new("events");
    let JsonText(metadata) = get(row, 8)?;
    let read = Metadata::from_stored(metadata);
    let metadata = columns.or("metadata", read, Metadata::unread(), || {
        String::from_utf8_lossy(metadata).into_owned()
    });
    Ok(RecordedEvent {
        position: unsigned(row, 0)?,
        id: get(row, 1)?,
        aggregate_type: get(row, 2)?,
        aggregate_id: get(row, 3)?,
        version: unsigned(row, 4)?,
        event_type: get(row, 5)?,
        payload: get(row, 6)?,
        timestamp: instant(row, 7)?,
        metadata,
        unreadable: columns.unreadable(),
    })
}

/// A row of [`SCHEDULED_COLUMNS`].
pub(crate) fn scheduled(row: &Row) -> Result<ScheduledEntry, StoreError> {
    Ok(ScheduledEntry {
        dedupe_key: get(row, 0)?,
        command_type: get(row, 1)?,
        aggregate_id: get(row, 2)?,
        payload: get(row, 3)?,
        execute_at: instant(row, 4)?,
        context: get(row, 5)?,
        attempts: count(row, 6)?,
        last_error: get(row, 7)?,
        revision: unsigned(row, 8)?,
        claim_id: get(row, 9)?,
        claimed_at: optional_instant(row, 10)?,
        // Its columns are typed: JSON that parses and moments that do.
        unreadable: None,
    })
}

/// A snapshot of `aggregate_type:aggregate_id` from its `version, state` row.
pub(crate) fn snapshot(
    row: &Row,
    aggregate_type: &str,
    aggregate_id: &str,
) -> Result<Snapshot, StoreError> {
    Ok(Snapshot {
        aggregate_type: aggregate_type.to_owned(),
        aggregate_id: aggregate_id.to_owned(),
        version: unsigned(row, 0)?,
        state: get(row, 1)?,
    })
}

/// The streams `ids` of `aggregate_type` from rows of [`EVENT_COLUMNS`] followed by the
/// stream's place among `ids` (from 1), its snapshot's version and state (both null when it has
/// none): one row per event, or one with a null event for a stream with none, by place.
pub(crate) fn tails(
    rows: &[Row],
    aggregate_type: &str,
    ids: &[String],
) -> Result<Vec<StreamTail>, StoreError> {
    let mut tails: Vec<StreamTail> = ids.iter().map(StreamTail::empty).collect();
    for row in rows {
        let place: i64 = get(row, 9)?;
        let tail = usize::try_from(place - 1)
            .ok()
            .and_then(|index| tails.get_mut(index))
            .ok_or_else(|| StoreError::new(format!("a stream's place {place} was not asked")))?;
        if tail.snapshot.is_none()
            && let Some(version) = get::<Option<i64>>(row, 10)?
        {
            tail.snapshot = Some(Snapshot {
                aggregate_type: aggregate_type.to_owned(),
                aggregate_id: tail.aggregate_id.clone(),
                version: u64::try_from(version).map_err(|_| {
                    StoreError::new(format!("a negative snapshot version {version} was read"))
                })?,
                state: get(row, 11)?,
            });
        }
        if get::<Option<String>>(row, 1)?.is_some() {
            tail.events.push(event(row)?);
        }
    }
    Ok(tails)
}

/// A letter kind as stored.
fn kind(text: &str) -> Result<LetterKind, StoreError> {
    LetterKind::parse(text)
        .ok_or_else(|| StoreError::new(format!("unknown dead-letter kind `{text}`")))
}

/// A letter status as stored.
fn status(text: &str) -> Result<LetterStatus, StoreError> {
    [
        LetterStatus::Failed,
        LetterStatus::Retried,
        LetterStatus::Discarded,
    ]
    .into_iter()
    .find(|status| status.as_str() == text)
    .ok_or_else(|| StoreError::new(format!("unknown dead-letter status `{text}`")))
}

/// A row of [`LETTER_COLUMNS`].
pub(crate) fn dead_letter(row: &Row) -> Result<DeadLetter, StoreError> {
    Ok(DeadLetter {
        id: get(row, 0)?,
        kind: kind(get(row, 1)?)?,
        handler: get(row, 2)?,
        event_id: get(row, 3)?,
        event_type: get(row, 4)?,
        aggregate_type: get(row, 5)?,
        aggregate_id: get(row, 6)?,
        error_type: get(row, 7)?,
        error_message: get(row, 8)?,
        error_stack: get(row, 9)?,
        attempts: count(row, 10)?,
        first_failed_at: instant(row, 11)?,
        last_failed_at: instant(row, 12)?,
        status: status(get(row, 13)?)?,
        payload: get(row, 14)?,
    })
}

/// A row of `handler, event_id, status, attempts, last_error, retry_at, first_failed_at`.
pub(crate) fn inbox_entry(row: &Row) -> Result<InboxEntry, StoreError> {
    let status: String = get(row, 2)?;
    Ok(InboxEntry {
        handler: get(row, 0)?,
        event_id: get(row, 1)?,
        status: InboxStatus::parse(&status)
            .ok_or_else(|| StoreError::new(format!("unknown inbox status `{status}`")))?,
        attempts: count(row, 3)?,
        last_error: get(row, 4)?,
        retry_at: optional_instant(row, 5)?,
        first_failed_at: optional_instant(row, 6)?,
    })
}
