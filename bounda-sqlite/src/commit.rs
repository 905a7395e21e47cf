//! Applying a write set inside a transaction or savepoint: every precondition is checked by the
//! statement that writes, and the first one that fails makes the caller roll back.

use bounda::Instant;
use bounda::store::{
    Append, Appended, CommitError, Committed, DeadLetter, InboxMark, InboxOutcome, LetterHold,
    LetterSettle, ScheduledEntry, ScheduledOutcome, ScheduledRelease, Snapshot, WriteSet,
};
use rusqlite::{Connection, OptionalExtension, params};

use crate::rows;
use crate::sql;

/// Writes `writes` on `conn`, which is inside a transaction or savepoint the caller rolls back on
/// error. The scheduler release runs before the new entries, so a step can settle its own claim
/// and re-arm the same key.
pub(crate) fn apply(conn: &Connection, writes: &WriteSet) -> Result<Committed, CommitError> {
    if let Some(hold) = &writes.require_letter {
        require_held(conn, hold)?;
    }
    // A letter filed with its claim's give-up keeps the run's first failure.
    let first_failure = match writes.dead_letters.is_empty() {
        true => None,
        false => first_failure(conn, writes)?,
    };
    let mut committed = Committed::default();
    let head_before = match writes.skip.is_empty() || writes.appends.is_empty() {
        true => None,
        false => Some(head(conn)?),
    };
    for append in &writes.appends {
        append_events(conn, append, &mut committed)?;
    }
    if let (Some(before), Some(after)) = (head_before, committed.events.last()) {
        for subscriber in &writes.skip {
            conn.prepare_cached(
                "UPDATE bounda_checkpoints SET position = ?3 WHERE subscriber = ?1 AND position = ?2",
            )
            .and_then(|mut s| s.execute(params![subscriber, before, after.position]))
            .map_err(sql("cannot move a checkpoint"))?;
        }
    }
    if let Some(mark) = &writes.inbox {
        settle_inbox(conn, mark)?;
    }
    // A run that completes its entry and schedules the same key again (a deadline re-armed at
    // the instance's next moment) moves the entry in place: one row written, not two.
    let moved = writes.scheduled.as_ref().and_then(|release| {
        let completes = release.outcome == ScheduledOutcome::Complete;
        let again = writes
            .schedule
            .iter()
            .find(|e| e.dedupe_key == release.dedupe_key);
        again.filter(|_| completes).map(|entry| (release, entry))
    });
    match (moved, &writes.scheduled) {
        (Some((release, entry)), _) => move_entry(conn, release, entry)?,
        (None, Some(release)) => release_scheduled(conn, release)?,
        (None, None) => {}
    }
    for key in &writes.unschedule {
        conn.prepare_cached("DELETE FROM bounda_scheduled_commands WHERE dedupe_key = ?1")
            .and_then(|mut statement| statement.execute([key]))
            .map_err(sql("cannot unschedule"))?;
    }
    let moved_key = moved.map(|(release, _)| release.dedupe_key.as_str());
    for entry in writes
        .schedule
        .iter()
        .filter(|entry| Some(entry.dedupe_key.as_str()) != moved_key)
    {
        schedule(conn, entry)?;
    }
    for letter in &writes.dead_letters {
        match first_failure.filter(|first| *first < letter.first_failed_at) {
            Some(first) => file_letter(
                conn,
                &DeadLetter {
                    first_failed_at: first,
                    ..letter.clone()
                },
            )?,
            None => file_letter(conn, letter)?,
        }
    }
    for snapshot in &writes.snapshots {
        keep_snapshot(conn, snapshot)?;
    }
    if let Some(next) = &writes.claim_due {
        committed.claimed =
            crate::store::claim(conn, &next.claim_id, next.now, next.lease, next.limit)?;
    }
    if let Some(settle) = &writes.settle_letter {
        settle_letter(conn, settle)?;
    }
    Ok(committed)
}

/// When the run whose claim `writes` settles first failed, if it failed before.
fn first_failure(conn: &Connection, writes: &WriteSet) -> Result<Option<Instant>, CommitError> {
    let text: Option<String> = if let Some(mark) = &writes.inbox {
        conn.prepare_cached(
            "SELECT first_failed_at FROM bounda_inbox WHERE handler = ?1 AND event_id = ?2",
        )
        .and_then(|mut s| {
            s.query_row(params![mark.handler, mark.event_id], |row| row.get(0))
                .optional()
        })
        .map_err(sql("cannot read a claim's first failure"))?
        .flatten()
    } else if let Some(release) = &writes.scheduled {
        conn.prepare_cached(
            "SELECT first_failed_at FROM bounda_scheduled_commands WHERE dedupe_key = ?1",
        )
        .and_then(|mut s| {
            s.query_row([&release.dedupe_key], |row| row.get(0))
                .optional()
        })
        .map_err(sql("cannot read a claim's first failure"))?
        .flatten()
    } else {
        None
    };
    text.map(|text| {
        Instant::parse(&text)
            .map_err(|e| bounda::store::StoreError::with_source("unreadable moment", e).into())
    })
    .transpose()
}

/// The position of the last event, 0 when there is none.
fn head(conn: &Connection) -> Result<u64, CommitError> {
    Ok(conn
        .prepare_cached("SELECT COALESCE(MAX(position), 0) FROM bounda_events")
        .and_then(|mut s| s.query_row([], |row| row.get(0)))
        .map_err(sql("cannot read the head"))?)
}

fn append_events(
    conn: &Connection,
    append: &Append,
    committed: &mut Committed,
) -> Result<(), CommitError> {
    let actual: u64 = conn
        .prepare_cached(
            "SELECT COALESCE(MAX(version), 0) FROM bounda_events
             WHERE aggregate_type = ?1 AND aggregate_id = ?2",
        )
        .and_then(|mut statement| {
            statement.query_row(params![append.aggregate_type, append.aggregate_id], |row| {
                row.get(0)
            })
        })
        .map_err(sql("cannot read a stream's version"))?;
    if actual != append.expected_version {
        return Err(CommitError::StreamMoved {
            aggregate_type: append.aggregate_type.clone(),
            aggregate_id: append.aggregate_id.clone(),
            expected_version: append.expected_version,
            actual_version: actual,
        });
    }
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO bounda_events
                 (id, aggregate_type, aggregate_id, version, type, payload, timestamp, metadata)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .map_err(sql("cannot prepare the append"))?;
    for (offset, event) in append.events.iter().enumerate() {
        let version = append.expected_version + offset as u64 + 1;
        let metadata = serde_json::to_string(&event.metadata)
            .map_err(|e| bounda::store::StoreError::with_source("cannot write metadata", e))?;
        insert
            .execute(params![
                event.id,
                append.aggregate_type,
                append.aggregate_id,
                version,
                event.event_type,
                event.payload.to_string(),
                event.timestamp.to_string(),
                metadata,
            ])
            .map_err(sql("cannot append an event"))?;
        committed.events.push(Appended {
            id: event.id.clone(),
            position: conn.last_insert_rowid() as u64,
            version,
        });
    }
    Ok(())
}

fn settle_inbox(conn: &Connection, mark: &InboxMark) -> Result<(), CommitError> {
    let (status, retry_at, error, failed_at) = match &mark.outcome {
        InboxOutcome::Succeeded => ("succeeded", None, None, None),
        InboxOutcome::Failed {
            retry_at,
            error,
            failed_at,
        } => (
            "failed",
            Some(retry_at.to_string()),
            Some(error.as_str()),
            Some(failed_at.to_string()),
        ),
        InboxOutcome::DeadLettered { error } => ("dead", None, Some(error.as_str()), None),
        InboxOutcome::Released => return release_inbox(conn, mark),
    };
    let changed = conn
        .prepare_cached(
            "UPDATE bounda_inbox
             SET status = ?4, retry_at = ?5, last_error = COALESCE(?6, last_error),
                 first_failed_at = COALESCE(first_failed_at, ?7), claimed_at = NULL,
                 lease_until = NULL, attempts = attempts + (?4 <> 'succeeded')
             WHERE handler = ?1 AND event_id = ?2 AND claim_id = ?3 AND status = 'pending'",
        )
        .and_then(|mut statement| {
            statement.execute(params![
                mark.handler,
                mark.event_id,
                mark.claim_id,
                status,
                retry_at,
                error,
                failed_at
            ])
        })
        .map_err(sql("cannot settle an inbox claim"))?;
    claim_held(changed, mark)
}

/// Gives a claim back unrun: free at once, no attempt counted.
fn release_inbox(conn: &Connection, mark: &InboxMark) -> Result<(), CommitError> {
    let changed = conn
        .prepare_cached(
            "UPDATE bounda_inbox
             SET claimed_at = NULL, lease_until = NULL, claim_id = NULL
             WHERE handler = ?1 AND event_id = ?2 AND claim_id = ?3 AND status = 'pending'",
        )
        .and_then(|mut statement| {
            statement.execute(params![mark.handler, mark.event_id, mark.claim_id])
        })
        .map_err(sql("cannot release an inbox claim"))?;
    claim_held(changed, mark)
}

/// A settle that changed no row found the claim taken over.
fn claim_held(changed: usize, mark: &InboxMark) -> Result<(), CommitError> {
    if changed == 0 {
        return Err(CommitError::ClaimLost {
            key: format!("{}:{}", mark.handler, mark.event_id),
        });
    }
    Ok(())
}

/// Settles a scheduler claim. An entry rescheduled while it was held keeps its new schedule:
/// completing or retrying it only gives the claim back.
fn release_scheduled(conn: &Connection, release: &ScheduledRelease) -> Result<(), CommitError> {
    let changed = match &release.outcome {
        ScheduledOutcome::Complete => conn
            .prepare_cached(
                "DELETE FROM bounda_scheduled_commands
                 WHERE dedupe_key = ?1 AND claim_id = ?2 AND rescheduled = 0",
            )
            .and_then(|mut s| s.execute(params![release.dedupe_key, release.claim_id])),
        ScheduledOutcome::Retry {
            execute_at,
            error,
            failed_at,
        } => conn
            .prepare_cached(
                "UPDATE bounda_scheduled_commands
                 SET execute_at = ?3, last_error = ?4, attempts = attempts + 1,
                     first_failed_at = COALESCE(first_failed_at, ?5),
                     claimed_at = NULL, lease_until = NULL, claim_id = NULL
                 WHERE dedupe_key = ?1 AND claim_id = ?2 AND rescheduled = 0",
            )
            .and_then(|mut s| {
                s.execute(params![
                    release.dedupe_key,
                    release.claim_id,
                    execute_at.to_string(),
                    error,
                    failed_at.to_string()
                ])
            }),
        ScheduledOutcome::Defer => Ok(0),
    }
    .map_err(sql("cannot release a scheduler claim"))?;
    // Deferred, or rescheduled meanwhile: the claim is given back, the schedule kept.
    let changed = match changed {
        0 => conn
            .prepare_cached(
                "UPDATE bounda_scheduled_commands
                 SET claimed_at = NULL, lease_until = NULL, claim_id = NULL, rescheduled = 0
                 WHERE dedupe_key = ?1 AND claim_id = ?2",
            )
            .and_then(|mut s| s.execute(params![release.dedupe_key, release.claim_id]))
            .map_err(sql("cannot release a scheduler claim"))?,
        changed => changed,
    };
    if changed == 0 {
        return Err(CommitError::ScheduledClaimLost {
            key: release.dedupe_key.clone(),
        });
    }
    Ok(())
}

/// Completes the claimed entry `release` and schedules `entry` under the same key, as one update
/// of its row: released, its attempts and error cleared, its revision bumped.
fn move_entry(
    conn: &Connection,
    release: &ScheduledRelease,
    entry: &ScheduledEntry,
) -> Result<(), CommitError> {
    let changed = conn
        .prepare_cached(
            "UPDATE bounda_scheduled_commands
             SET command_type = ?3, aggregate_id = ?4, payload = ?5, execute_at = ?6,
                 context = ?7, attempts = 0, last_error = NULL, first_failed_at = NULL,
                 claimed_at = NULL, lease_until = NULL, claim_id = NULL, rescheduled = 0,
                 revision = revision + 1
             WHERE dedupe_key = ?1 AND claim_id = ?2",
        )
        .and_then(|mut s| {
            s.execute(params![
                release.dedupe_key,
                release.claim_id,
                entry.command_type,
                entry.aggregate_id,
                entry.payload.to_string(),
                entry.execute_at.to_string(),
                entry.context.to_string(),
            ])
        })
        .map_err(sql("cannot move a scheduler entry"))?;
    if changed == 0 {
        return Err(CommitError::ScheduledClaimLost {
            key: release.dedupe_key.clone(),
        });
    }
    Ok(())
}

/// Adds or moves an entry; an identical one is left untouched, its claim and revision included.
/// Moving one a worker holds keeps the claim, marked rescheduled: exactly one run commits, and
/// its completion keeps the new schedule.
fn schedule(conn: &Connection, entry: &ScheduledEntry) -> Result<(), CommitError> {
    conn.prepare_cached(
        "INSERT INTO bounda_scheduled_commands
             (dedupe_key, command_type, aggregate_id, payload, execute_at, context, attempts, revision)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, 0)
         ON CONFLICT (dedupe_key) DO UPDATE SET
             command_type = excluded.command_type, aggregate_id = excluded.aggregate_id,
             payload = excluded.payload, execute_at = excluded.execute_at,
             context = excluded.context, attempts = 0, last_error = NULL,
             first_failed_at = NULL, rescheduled = (claim_id IS NOT NULL),
             revision = revision + 1
         WHERE command_type IS NOT excluded.command_type
            OR aggregate_id IS NOT excluded.aggregate_id
            OR payload IS NOT excluded.payload
            OR execute_at IS NOT excluded.execute_at
            OR context IS NOT excluded.context",
    )
    .and_then(|mut statement| {
        statement.execute(params![
            entry.dedupe_key,
            entry.command_type,
            entry.aggregate_id,
            entry.payload.to_string(),
            entry.execute_at.to_string(),
            entry.context.to_string(),
        ])
    })
    .map_err(sql("cannot schedule"))?;
    Ok(())
}

/// Files a letter once: the same id again leaves the first as it is.
pub(crate) fn file_letter(conn: &Connection, letter: &DeadLetter) -> Result<(), CommitError> {
    conn.prepare_cached(
        "INSERT INTO bounda_dead_letters
             (id, kind, handler, event_id, event_type, aggregate_type, aggregate_id, error_type,
              error_message, error_stack, attempts, first_failed_at, last_failed_at, status,
              payload, seq)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15,
                 (SELECT COALESCE(MAX(seq), 0) + 1 FROM bounda_dead_letters))
         ON CONFLICT (id) DO NOTHING",
    )
    .and_then(|mut statement| {
        statement.execute(params![
            letter.id,
            rows::kind_text(letter.kind),
            letter.handler,
            letter.event_id,
            letter.event_type,
            letter.aggregate_type,
            letter.aggregate_id,
            letter.error_type,
            letter.error_message,
            letter.error_stack,
            letter.attempts,
            letter.first_failed_at.to_string(),
            letter.last_failed_at.to_string(),
            rows::status_text(letter.status),
            letter.payload.as_ref().map(ToString::to_string),
        ])
    })
    .map_err(sql("cannot file a dead letter"))?;
    Ok(())
}

/// Keeps a snapshot unless a newer one is kept already.
fn keep_snapshot(conn: &Connection, snapshot: &Snapshot) -> Result<(), CommitError> {
    conn.prepare_cached(
        "INSERT INTO bounda_snapshots (aggregate_type, aggregate_id, version, state)
         VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (aggregate_type, aggregate_id) DO UPDATE SET
             version = excluded.version, state = excluded.state
         WHERE excluded.version > version",
    )
    .and_then(|mut statement| {
        statement.execute(params![
            snapshot.aggregate_type,
            snapshot.aggregate_id,
            snapshot.version,
            snapshot.state.to_string(),
        ])
    })
    .map_err(sql("cannot keep a snapshot"))?;
    Ok(())
}

/// Refuses the write set unless the letter is still `failed` and held by the retry's claim.
fn require_held(conn: &Connection, hold: &LetterHold) -> Result<(), CommitError> {
    let found: Option<(String, Option<String>)> = conn
        .prepare_cached("SELECT status, claim_id FROM bounda_dead_letters WHERE id = ?1")
        .and_then(|mut s| {
            s.query_row([&hold.id], |row| Ok((row.get(0)?, row.get(1)?)))
                .optional()
        })
        .map_err(sql("cannot read a dead letter"))?;
    match found {
        Some((status, claim_id))
            if status == "failed" && claim_id.as_deref() == Some(hold.claim_id.as_str()) =>
        {
            Ok(())
        }
        Some(_) => Err(CommitError::LetterSettled {
            id: hold.id.clone(),
        }),
        None => Err(bounda::store::StoreError::new(format!("no dead letter `{}`", hold.id)).into()),
    }
}

/// Moves a letter out of `failed`, fenced on its status.
fn settle_letter(conn: &Connection, settle: &LetterSettle) -> Result<(), CommitError> {
    let changed = conn
        .prepare_cached(
            "UPDATE bounda_dead_letters SET status = ?2 WHERE id = ?1 AND status = 'failed'",
        )
        .and_then(|mut s| s.execute(params![settle.id, rows::status_text(settle.status)]))
        .map_err(sql("cannot settle a dead letter"))?;
    if changed == 0 {
        let exists = conn
            .prepare_cached("SELECT 1 FROM bounda_dead_letters WHERE id = ?1")
            .and_then(|mut s| s.query_row([&settle.id], |_| Ok(())).optional())
            .map_err(sql("cannot read a dead letter"))?;
        return Err(match exists {
            Some(()) => CommitError::LetterSettled {
                id: settle.id.clone(),
            },
            None => {
                bounda::store::StoreError::new(format!("no dead letter `{}`", settle.id)).into()
            }
        });
    }
    Ok(())
}
