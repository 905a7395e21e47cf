//! A copy's pages written as they were ([`CopyStore::import`](bounda::store::CopyStore::import)), and the
//! mark that says a schema holds a copy: how a SQLite file moves to PostgreSQL when one machine
//! is no longer enough, and how older data is brought onto a server.

use bounda::store::{CopyMark, Import, StoreError};

use crate::names::Names;
use crate::rows::{self, bigint};
use crate::sql::{Session, Tx, execute, failed, query_opt};

/// Writes `records` in the transaction `tx`.
pub(crate) async fn write(tx: &Tx<'_>, names: &Names, records: &Import) -> Result<(), StoreError> {
    let insert_event = names.sql(
        "INSERT INTO {t}events (position, id, aggregate_type, aggregate_id, version, type, payload,
             timestamp, metadata)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    );
    for event in &records.events {
        let metadata = serde_json::to_value(&event.metadata)
            .map_err(|e| StoreError::with_source("cannot write metadata", e))?;
        execute(
            tx,
            &insert_event,
            &[
                &bigint("a position", event.position)?,
                &event.id,
                &event.aggregate_type,
                &event.aggregate_id,
                &bigint("a version", event.version)?,
                &event.event_type,
                &event.payload,
                &event.timestamp.to_chrono(),
                &metadata,
            ],
        )
        .await
        .map_err(failed("cannot copy an event"))?;
    }
    if let Some(last) = records.events.iter().map(|e| e.position).max() {
        // The counter appends take their positions from: past every copied one.
        execute(
            tx,
            &names.sql("UPDATE {t}head SET position = GREATEST(position, $1) WHERE id = 1"),
            &[&bigint("a position", last)?],
        )
        .await
        .map_err(failed("cannot move the head past the copied events"))?;
    }
    let insert_checkpoint =
        names.sql("INSERT INTO {t}checkpoints (subscriber, position) VALUES ($1, $2)");
    for (subscriber, position) in &records.checkpoints {
        execute(
            tx,
            &insert_checkpoint,
            &[subscriber, &bigint("a checkpoint position", *position)?],
        )
        .await
        .map_err(failed("cannot copy a checkpoint"))?;
    }
    let insert_inbox = names.sql(
        "INSERT INTO {t}inbox
             (handler, event_id, status, attempts, last_error, retry_at, first_failed_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    );
    for entry in &records.inbox {
        execute(
            tx,
            &insert_inbox,
            &[
                &entry.handler,
                &entry.event_id,
                &entry.status.as_str(),
                &count(entry.attempts)?,
                &entry.last_error,
                &entry.retry_at.map(bounda::Instant::to_chrono),
                &entry.first_failed_at.map(bounda::Instant::to_chrono),
            ],
        )
        .await
        .map_err(failed("cannot copy an inbox entry"))?;
    }
    let insert_scheduled = names.sql(
        "INSERT INTO {t}scheduled_commands
             (dedupe_key, command_type, aggregate_id, payload, execute_at, context, attempts,
              last_error, revision)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    );
    for entry in &records.scheduled {
        execute(
            tx,
            &insert_scheduled,
            &[
                &entry.dedupe_key,
                &entry.command_type,
                &entry.aggregate_id,
                &entry.payload,
                &entry.execute_at.to_chrono(),
                &entry.context,
                &count(entry.attempts)?,
                &entry.last_error,
                &bigint("a revision", entry.revision)?,
            ],
        )
        .await
        .map_err(failed("cannot copy a scheduler entry"))?;
    }
    // A letter is filed as a commit files it; the target is empty, so none is there already.
    for letter in &records.dead_letters {
        crate::statements::file_letter(tx, names, letter).await?;
    }
    for record in &records.ingress {
        execute(
            tx,
            &names.sql(
                "INSERT INTO {t}ingress (key, fingerprint, answer, decided_at)
                 VALUES ($1, $2, $3, $4) ON CONFLICT (key) DO NOTHING",
            ),
            &[
                &record.key,
                &record.fingerprint,
                &record.answer,
                &record.decided_at.to_chrono(),
            ],
        )
        .await
        .map_err(failed("cannot copy an arrived command's key"))?;
    }
    if records.fill_instances {
        crate::instances::fill(tx, names).await?;
    }
    if let Some(mark) = &records.mark {
        execute(
            tx,
            &names.sql("INSERT INTO {t}copy (copied_at, source, head) VALUES ($1, $2, $3)"),
            &[
                &mark.copied_at.to_chrono(),
                &mark.source,
                &bigint("a position", mark.head)?,
            ],
        )
        .await
        .map_err(failed("cannot mark the copy"))?;
    }
    Ok(())
}

/// A count as PostgreSQL's `INTEGER`.
fn count(value: u32) -> Result<i32, StoreError> {
    i32::try_from(value).map_err(|_| StoreError::new(format!("a count {value} too large to store")))
}

/// The copy's mark, if this schema holds a copy.
pub(crate) async fn mark(
    client: &impl Session,
    names: &Names,
) -> Result<Option<CopyMark>, StoreError> {
    let row = query_opt(
        client,
        &names.sql("SELECT copied_at, source, head FROM {t}copy"),
        &[],
    )
    .await
    .map_err(failed("cannot read the copy's mark"))?;
    row.map(|row| {
        Ok(CopyMark {
            copied_at: rows::instant(&row, 0)?,
            source: rows::get(&row, 1)?,
            head: rows::unsigned(&row, 2)?,
        })
    })
    .transpose()
}
