//! A copy's pages written as they were ([`CopyStore::import`](bounda::store::CopyStore::import)), the
//! inbox read a page at a time, and the mark that says a file is a copy.

use bounda::Instant;
use bounda::store::{CopyMark, Import, InboxEntry, InboxStatus, StoreError};
use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::rows;
use crate::sql;

/// A row of `handler, event_id, status, attempts, last_error, retry_at, first_failed_at`.
fn inbox_entry(row: &Row<'_>) -> rusqlite::Result<InboxEntry> {
    let status: String = row.get(2)?;
    let Some(status) = InboxStatus::parse(&status) else {
        return Err(rusqlite::Error::InvalidColumnType(
            2,
            status,
            rusqlite::types::Type::Text,
        ));
    };
    Ok(InboxEntry {
        handler: row.get(0)?,
        event_id: row.get(1)?,
        status,
        attempts: row.get(3)?,
        last_error: row.get(4)?,
        retry_at: rows::optional_instant(row, 5)?,
        first_failed_at: rows::optional_instant(row, 6)?,
    })
}

/// Up to `limit` inbox entries after `after`, in key order.
pub(crate) fn inbox_page(
    conn: &Connection,
    after: Option<(&str, &str)>,
    limit: usize,
) -> Result<Vec<InboxEntry>, StoreError> {
    let (handler, event_id) = after.unwrap_or(("", ""));
    let mut statement = conn
        .prepare_cached(
            "SELECT handler, event_id, status, attempts, last_error, retry_at, first_failed_at
             FROM bounda_inbox WHERE (handler, event_id) > (?1, ?2)
             ORDER BY handler, event_id LIMIT ?3",
        )
        .map_err(sql("cannot prepare a read of the inbox"))?;
    statement
        .query_map(params![handler, event_id, rows::limit(limit)], inbox_entry)
        .and_then(Iterator::collect)
        .map_err(sql("cannot read the inbox"))
}

/// The copy's mark, if this file is a copy.
pub(crate) fn mark(conn: &Connection) -> Result<Option<CopyMark>, StoreError> {
    conn.prepare_cached("SELECT copied_at, source, head FROM bounda_copy")
        .and_then(|mut s| {
            s.query_row([], |row| {
                Ok(CopyMark {
                    copied_at: rows::instant(row, 0)?,
                    source: row.get(1)?,
                    head: row.get(2)?,
                })
            })
            .optional()
        })
        .map_err(sql("cannot read the copy's mark"))
}

/// Writes `records` in one transaction on `conn`.
pub(crate) fn import(conn: &mut Connection, records: &Import) -> Result<(), StoreError> {
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(sql("cannot start a copy's write"))?;
    write(&tx, records)?;
    tx.commit().map_err(sql("cannot commit a copy's write"))
}

fn text(instant: Option<Instant>) -> Option<String> {
    instant.map(|instant| instant.to_string())
}

fn json(value: &bounda::store::Metadata) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::with_source("cannot write metadata", e))
}

fn write(tx: &Connection, records: &Import) -> Result<(), StoreError> {
    let mut events = tx
        .prepare_cached(
            "INSERT INTO bounda_events
                 (position, id, aggregate_type, aggregate_id, version, type, payload, timestamp,
                  metadata)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )
        .map_err(sql("cannot prepare a copy of events"))?;
    for event in &records.events {
        events
            .execute(params![
                event.position,
                event.id,
                event.aggregate_type,
                event.aggregate_id,
                event.version,
                event.event_type,
                event.payload.to_string(),
                event.timestamp.to_string(),
                json(&event.metadata)?,
            ])
            .map_err(sql("cannot copy an event"))?;
    }
    let mut checkpoints = tx
        .prepare_cached("INSERT INTO bounda_checkpoints (subscriber, position) VALUES (?1, ?2)")
        .map_err(sql("cannot prepare a copy of checkpoints"))?;
    for (subscriber, position) in &records.checkpoints {
        checkpoints
            .execute(params![subscriber, position])
            .map_err(sql("cannot copy a checkpoint"))?;
    }
    let mut inbox = tx
        .prepare_cached(
            "INSERT INTO bounda_inbox
                 (handler, event_id, status, attempts, last_error, retry_at, first_failed_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .map_err(sql("cannot prepare a copy of the inbox"))?;
    for entry in &records.inbox {
        inbox
            .execute(params![
                entry.handler,
                entry.event_id,
                entry.status.as_str(),
                entry.attempts,
                entry.last_error,
                text(entry.retry_at),
                text(entry.first_failed_at),
            ])
            .map_err(sql("cannot copy an inbox entry"))?;
    }
    let mut scheduled = tx
        .prepare_cached(
            "INSERT INTO bounda_scheduled_commands
                 (dedupe_key, command_type, aggregate_id, payload, execute_at, context, attempts,
                  last_error, revision)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )
        .map_err(sql("cannot prepare a copy of scheduler entries"))?;
    for entry in &records.scheduled {
        scheduled
            .execute(params![
                entry.dedupe_key,
                entry.command_type,
                entry.aggregate_id,
                entry.payload.to_string(),
                entry.execute_at.to_string(),
                entry.context.to_string(),
                entry.attempts,
                entry.last_error,
                entry.revision,
            ])
            .map_err(sql("cannot copy a scheduler entry"))?;
    }
    // A letter is filed as a commit files it; the target is empty, so none is there already.
    for letter in &records.dead_letters {
        crate::statements::file_letter(tx, letter)?;
    }
    for record in &records.ingress {
        crate::ingress::keep(tx, record)?;
    }
    if records.fill_instances {
        crate::instances::fill(tx).map_err(sql("cannot fill the copy's instances index"))?;
    }
    if let Some(mark) = &records.mark {
        tx.prepare_cached("INSERT INTO bounda_copy (copied_at, source, head) VALUES (?1, ?2, ?3)")
            .and_then(|mut s| {
                s.execute(params![mark.copied_at.to_string(), mark.source, mark.head])
            })
            .map_err(sql("cannot mark the copy"))?;
    }
    Ok(())
}
