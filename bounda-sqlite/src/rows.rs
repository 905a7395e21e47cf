//! Rows to the runtime's types. Text that does not parse is a conversion error naming the
//! column, never a panic.

use bounda::store::{Columns, DeadLetter, LetterKind, LetterStatus, Metadata, ScheduledEntry};
use bounda::{Instant, RecordedEvent};
use rusqlite::Row;
use rusqlite::types::{Type, ValueRef};
use serde_json::Value;

/// The columns [`event`] reads, in order.
pub(crate) const EVENT_COLUMNS: &str =
    "position, id, aggregate_type, aggregate_id, version, type, payload, timestamp, metadata";

/// The columns [`scheduled`] reads, in order.
pub(crate) const SCHEDULED_COLUMNS: &str = "dedupe_key, command_type, aggregate_id, payload, \
     execute_at, context, attempts, last_error, revision, claim_id, claimed_at";

/// The columns [`dead_letter`] reads, in order.
pub(crate) const LETTER_COLUMNS: &str = "id, kind, handler, event_id, event_type, aggregate_type, \
     aggregate_id, error_type, error_message, error_stack, attempts, first_failed_at, \
     last_failed_at, status, payload";

fn conversion(
    index: usize,
    error: impl std::error::Error + Send + Sync + 'static,
) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(index, Type::Text, Box::new(error))
}

/// An ISO 8601 column.
pub(crate) fn instant(row: &Row<'_>, index: usize) -> rusqlite::Result<Instant> {
    let text: String = row.get(index)?;
    Instant::parse(&text).map_err(|e| conversion(index, e))
}

/// A nullable ISO 8601 column.
pub(crate) fn optional_instant(row: &Row<'_>, index: usize) -> rusqlite::Result<Option<Instant>> {
    let text: Option<String> = row.get(index)?;
    text.map(|text| Instant::parse(&text).map_err(|e| conversion(index, e)))
        .transpose()
}

/// A JSON column.
pub(crate) fn json(row: &Row<'_>, index: usize) -> rusqlite::Result<serde_json::Value> {
    let text: String = row.get(index)?;
    serde_json::from_str(&text).map_err(|e| conversion(index, e))
}

/// Column `index`'s text as stored, whatever its type, for a row that does not read.
fn stored(row: &Row<'_>, index: usize) -> String {
    match row.get_ref(index) {
        Ok(ValueRef::Text(text) | ValueRef::Blob(text)) => String::from_utf8_lossy(text).into(),
        Ok(ValueRef::Integer(value)) => value.to_string(),
        Ok(ValueRef::Real(value)) => value.to_string(),
        Ok(ValueRef::Null) => "NULL".to_owned(),
        Err(error) => format!("(unreadable: {error})"),
    }
}

/// A text column's text, read in place, or why not.
fn text_of<'row>(row: &'row Row<'_>, index: usize) -> Result<&'row str, String> {
    match row.get_ref(index).map_err(|error| error.to_string())? {
        ValueRef::Text(text) => {
            std::str::from_utf8(text).map_err(|error| format!("not UTF-8: {error}"))
        }
        other => Err(format!("not text: {}", other.data_type())),
    }
}

/// A JSON column, or why not.
fn json_of(row: &Row<'_>, index: usize) -> Result<Value, String> {
    serde_json::from_str(text_of(row, index)?).map_err(|error| format!("not JSON: {error}"))
}

/// An ISO 8601 column, or why not.
fn moment(row: &Row<'_>, index: usize) -> Result<Instant, String> {
    let text: String = row.get(index).map_err(|error| error.to_string())?;
    Instant::parse(&text).map_err(|error| error.to_string())
}

/// A row of [`EVENT_COLUMNS`]. A payload, moment or metadata that does not read marks the event
/// unreadable instead of failing the read: its row fails alone, named.
pub(crate) fn event(row: &Row<'_>) -> rusqlite::Result<RecordedEvent> {
    let mut columns = Columns::new("bounda_events");
    let payload = columns.or("payload", json_of(row, 6), Value::Null, || stored(row, 6));
    let timestamp = columns.or("timestamp", moment(row, 7), Instant::min_value(), || {
        stored(row, 7)
    });
    let metadata = text_of(row, 8).and_then(|text| Metadata::from_stored(text.as_bytes()));
    let metadata = columns.or("metadata", metadata, Metadata::unread(), || stored(row, 8));
    Ok(RecordedEvent {
        position: row.get(0)?,
        id: row.get(1)?,
        aggregate_type: row.get(2)?,
        aggregate_id: row.get(3)?,
        version: row.get(4)?,
        event_type: row.get(5)?,
        payload,
        timestamp,
        metadata,
        unreadable: columns.unreadable(),
    })
}

/// A row of [`SCHEDULED_COLUMNS`]. A payload, context or moment that does not read marks the
/// entry unreadable instead of failing the read: its run fails alone, keeping the text.
pub(crate) fn scheduled(row: &Row<'_>) -> rusqlite::Result<ScheduledEntry> {
    let mut columns = Columns::new("bounda_scheduled_commands");
    let payload = columns.or("payload", json_of(row, 3), Value::Null, || stored(row, 3));
    let execute_at = columns.or("execute_at", moment(row, 4), Instant::min_value(), || {
        stored(row, 4)
    });
    let context = columns.or("context", json_of(row, 5), Value::Null, || stored(row, 5));
    let claimed_at = columns.or(
        "claimed_at",
        optional_instant(row, 10).map_err(|error| error.to_string()),
        None,
        || stored(row, 10),
    );
    Ok(ScheduledEntry {
        dedupe_key: row.get(0)?,
        command_type: row.get(1)?,
        aggregate_id: row.get(2)?,
        payload,
        execute_at,
        context,
        attempts: row.get(6)?,
        last_error: row.get(7)?,
        revision: row.get(8)?,
        claim_id: row.get(9)?,
        claimed_at,
        unreadable: columns.unreadable(),
    })
}

/// A letter status as stored.
pub(crate) fn status_text(status: LetterStatus) -> &'static str {
    match status {
        LetterStatus::Failed => "failed",
        LetterStatus::Retried => "retried",
        LetterStatus::Discarded => "discarded",
    }
}

/// A row of [`LETTER_COLUMNS`].
pub(crate) fn dead_letter(row: &Row<'_>) -> rusqlite::Result<DeadLetter> {
    let kind: String = row.get(1)?;
    let Some(kind) = LetterKind::parse(&kind) else {
        return Err(rusqlite::Error::InvalidColumnType(1, kind, Type::Text));
    };
    let status: String = row.get(13)?;
    let status = match status.as_str() {
        "failed" => LetterStatus::Failed,
        "retried" => LetterStatus::Retried,
        "discarded" => LetterStatus::Discarded,
        _ => return Err(rusqlite::Error::InvalidColumnType(13, status, Type::Text)),
    };
    let payload: Option<String> = row.get(14)?;
    let payload = payload
        .map(|text| serde_json::from_str(&text).map_err(|e| conversion(14, e)))
        .transpose()?;
    Ok(DeadLetter {
        id: row.get(0)?,
        kind,
        handler: row.get(2)?,
        event_id: row.get(3)?,
        event_type: row.get(4)?,
        aggregate_type: row.get(5)?,
        aggregate_id: row.get(6)?,
        error_type: row.get(7)?,
        error_message: row.get(8)?,
        error_stack: row.get(9)?,
        attempts: row.get(10)?,
        first_failed_at: instant(row, 11)?,
        last_failed_at: instant(row, 12)?,
        status,
        payload,
    })
}

/// A row limit as SQLite's integer: anything beyond is no limit.
pub(crate) fn limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}
