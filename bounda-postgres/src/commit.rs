//! Applying a write set inside a transaction or savepoint: every precondition is checked by the
//! statement that writes, and the first one that fails makes the caller roll back.
//!
//! Global order: a transaction that appends takes the one-row position counter (`{t}head`)
//! with [`lock_head`] before anything else and holds it until it commits. Appenders are
//! serialised, so a position is visible only after every smaller one is, and a subscriber reading
//! past its checkpoint never skips an event that commits later with a smaller position.

use bounda::Instant;
use bounda::store::{
    Append, Appended, CommitError, Committed, DeadLetter, InboxMark, InboxOutcome, LetterHold,
    LetterSettle, ScheduledEntry, ScheduledOutcome, ScheduledRelease, Snapshot, StoreError,
    WriteSet,
};
use deadpool_postgres::GenericClient;

use crate::names::Names;
use crate::rows::{self, bigint};
use crate::sql::{execute, failed, query_one, query_opt};

/// Takes the position counter for this transaction: called before the first statement of a
/// transaction that may append, so appenders queue here and read stream versions only once it
/// is theirs (two appends to one stream then meet as a stale version, not a unique violation).
pub(crate) async fn lock_head(
    client: &impl GenericClient,
    names: &Names,
) -> Result<(), StoreError> {
    query_one(
        client,
        &names.sql("SELECT position FROM {t}head WHERE id = 1 FOR UPDATE"),
        &[],
    )
    .await
    .map_err(failed("cannot take the position counter"))?;
    Ok(())
}

/// Writes `writes` on `client`, inside a transaction or savepoint the caller rolls back on
/// error, having taken the position counter if `writes` appends. The scheduler release runs
/// before the new entries, so a step can settle its own claim and re-arm the same key.
pub(crate) async fn apply(
    client: &impl GenericClient,
    names: &Names,
    writes: &WriteSet,
) -> Result<Committed, CommitError> {
    if let Some(hold) = &writes.require_letter {
        require_held(client, names, hold).await?;
    }
    // A letter filed with its claim's give-up keeps the run's first failure.
    let first_failure = match writes.dead_letters.is_empty() {
        true => None,
        false => first_failure(client, names, writes).await?,
    };
    let mut committed = Committed::default();
    let head_before = match writes.skip.is_empty() || writes.appends.is_empty() {
        true => None,
        false => Some(head(client, names).await?),
    };
    for append in &writes.appends {
        append_events(client, names, append, &mut committed).await?;
    }
    if let Some(last) = committed.events.last() {
        let last = bigint("a position", last.position)?;
        execute(
            client,
            &names.sql("UPDATE {t}head SET position = $1 WHERE id = 1"),
            &[&last],
        )
        .await
        .map_err(failed("cannot move the position counter"))?;
        notify(client, names).await?;
        if let Some(before) = head_before {
            for subscriber in &writes.skip {
                execute(
                    client,
                    &names.sql(
                        "UPDATE {t}checkpoints SET position = $3
                         WHERE subscriber = $1 AND position = $2",
                    ),
                    &[subscriber, &before, &last],
                )
                .await
                .map_err(failed("cannot move a checkpoint"))?;
            }
        }
    }
    if let Some(mark) = &writes.inbox {
        settle_inbox(client, names, mark).await?;
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
        (Some((release, entry)), _) => move_entry(client, names, release, entry).await?,
        (None, Some(release)) => release_scheduled(client, names, release).await?,
        (None, None) => {}
    }
    for key in &writes.unschedule {
        execute(
            client,
            &names.sql("DELETE FROM {t}scheduled_commands WHERE dedupe_key = $1"),
            &[key],
        )
        .await
        .map_err(failed("cannot unschedule"))?;
    }
    let moved_key = moved.map(|(release, _)| release.dedupe_key.as_str());
    // An entry scheduled may come due before what idle runners elsewhere wait for: it wakes
    // them, at the commit. An entry this runner re-arms in place is its own to run.
    if writes
        .schedule
        .iter()
        .any(|entry| Some(entry.dedupe_key.as_str()) != moved_key)
    {
        notify(client, names).await?;
    }
    for entry in writes
        .schedule
        .iter()
        .filter(|entry| Some(entry.dedupe_key.as_str()) != moved_key)
    {
        schedule(client, names, entry).await?;
    }
    for letter in &writes.dead_letters {
        let first_failed_at = first_failure
            .filter(|first| *first < letter.first_failed_at)
            .unwrap_or(letter.first_failed_at);
        file_letter(client, names, letter, first_failed_at).await?;
    }
    for snapshot in &writes.snapshots {
        keep_snapshot(client, names, snapshot).await?;
    }
    if let Some(next) = &writes.claim_due {
        committed.claimed = crate::store::claim(
            client,
            names,
            &next.claim_id,
            next.now,
            next.lease,
            next.limit,
        )
        .await?;
    }
    if let Some(settle) = &writes.settle_letter {
        settle_letter(client, names, settle).await?;
    }
    Ok(committed)
}

/// Wakes every process listening on these tables, at the commit (and not if it rolls back).
async fn notify(client: &impl GenericClient, names: &Names) -> Result<(), StoreError> {
    execute(client, "SELECT pg_notify($1, '')", &[&names.channel()])
        .await
        .map_err(failed("cannot notify the listeners"))?;
    Ok(())
}

/// When the run whose claim `writes` settles first failed, if it failed before.
async fn first_failure(
    client: &impl GenericClient,
    names: &Names,
    writes: &WriteSet,
) -> Result<Option<Instant>, CommitError> {
    let row = if let Some(mark) = &writes.inbox {
        query_opt(
            client,
            &names.sql("SELECT first_failed_at FROM {t}inbox WHERE handler = $1 AND event_id = $2"),
            &[&mark.handler, &mark.event_id],
        )
        .await
    } else if let Some(release) = &writes.scheduled {
        query_opt(
            client,
            &names.sql("SELECT first_failed_at FROM {t}scheduled_commands WHERE dedupe_key = $1"),
            &[&release.dedupe_key],
        )
        .await
    } else {
        return Ok(None);
    }
    .map_err(failed("cannot read a claim's first failure"))?;
    Ok(match row {
        Some(row) => rows::optional_instant(&row, 0)?,
        None => None,
    })
}

/// The position of the last event, 0 when there is none.
pub(crate) async fn head(client: &impl GenericClient, names: &Names) -> Result<i64, StoreError> {
    let row = query_one(
        client,
        &names.sql("SELECT position FROM {t}head WHERE id = 1"),
        &[],
    )
    .await
    .map_err(failed("cannot read the head"))?;
    rows::get(&row, 0)
}

async fn append_events(
    client: &impl GenericClient,
    names: &Names,
    append: &Append,
    committed: &mut Committed,
) -> Result<(), CommitError> {
    let row = query_one(
        client,
        &names.sql(
            "SELECT coalesce(max(version), 0) FROM {t}events
             WHERE aggregate_type = $1 AND aggregate_id = $2",
        ),
        &[&append.aggregate_type, &append.aggregate_id],
    )
    .await
    .map_err(failed("cannot read a stream's version"))?;
    let actual = rows::unsigned(&row, 0)?;
    if actual != append.expected_version {
        return Err(CommitError::StreamMoved {
            aggregate_type: append.aggregate_type.clone(),
            aggregate_id: append.aggregate_id.clone(),
            expected_version: append.expected_version,
            actual_version: actual,
        });
    }
    let mut position = match committed.events.last() {
        Some(last) => bigint("a position", last.position)?,
        None => head(client, names).await?,
    };
    let insert = names.sql(
        "INSERT INTO {t}events (position, id, aggregate_type, aggregate_id, version, type, payload,
             timestamp, metadata)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    );
    for (offset, event) in append.events.iter().enumerate() {
        position += 1;
        let version = append.expected_version + offset as u64 + 1;
        let metadata = serde_json::to_value(&event.metadata)
            .map_err(|e| StoreError::with_source("cannot write metadata", e))?;
        execute(
            client,
            &insert,
            &[
                &position,
                &event.id,
                &append.aggregate_type,
                &append.aggregate_id,
                &bigint("a version", version)?,
                &event.event_type,
                &event.payload,
                &event.timestamp.to_chrono(),
                &metadata,
            ],
        )
        .await
        .map_err(failed("cannot append an event"))?;
        committed.events.push(Appended {
            id: event.id.clone(),
            position: position as u64,
            version,
        });
    }
    Ok(())
}

async fn settle_inbox(
    client: &impl GenericClient,
    names: &Names,
    mark: &InboxMark,
) -> Result<(), CommitError> {
    let (status, retry_at, error, failed_at) = match &mark.outcome {
        InboxOutcome::Succeeded => ("succeeded", None, None, None),
        InboxOutcome::Failed {
            retry_at,
            error,
            failed_at,
        } => (
            "failed",
            Some(retry_at.to_chrono()),
            Some(error.as_str()),
            Some(failed_at.to_chrono()),
        ),
        InboxOutcome::DeadLettered { error } => ("dead", None, Some(error.as_str()), None),
        InboxOutcome::Released => return release_inbox(client, names, mark).await,
    };
    let changed = execute(
        client,
        &names.sql(
            "UPDATE {t}inbox
             SET status = $4, retry_at = $5, last_error = coalesce($6, last_error),
                 first_failed_at = coalesce(first_failed_at, $7), claimed_at = NULL,
                 lease_until = NULL, attempts = attempts + (CASE WHEN $4 <> 'succeeded' THEN 1 ELSE 0 END)
             WHERE handler = $1 AND event_id = $2 AND claim_id = $3 AND status = 'pending'",
        ),
        &[
            &mark.handler,
            &mark.event_id,
            &mark.claim_id,
            &status,
            &retry_at,
            &error,
            &failed_at,
        ],
    )
    .await
    .map_err(failed("cannot settle an inbox claim"))?;
    claim_held(changed, mark)
}

/// Gives a claim back unrun: free at once, no attempt counted.
async fn release_inbox(
    client: &impl GenericClient,
    names: &Names,
    mark: &InboxMark,
) -> Result<(), CommitError> {
    let changed = execute(
        client,
        &names.sql(
            "UPDATE {t}inbox SET claimed_at = NULL, lease_until = NULL, claim_id = NULL
             WHERE handler = $1 AND event_id = $2 AND claim_id = $3 AND status = 'pending'",
        ),
        &[&mark.handler, &mark.event_id, &mark.claim_id],
    )
    .await
    .map_err(failed("cannot release an inbox claim"))?;
    claim_held(changed, mark)
}

/// A settle that changed no row found the claim taken over.
fn claim_held(changed: u64, mark: &InboxMark) -> Result<(), CommitError> {
    if changed == 0 {
        return Err(CommitError::ClaimLost {
            key: format!("{}:{}", mark.handler, mark.event_id),
        });
    }
    Ok(())
}

/// Settles a scheduler claim. An entry rescheduled while it was held keeps its new schedule:
/// completing or retrying it only gives the claim back.
async fn release_scheduled(
    client: &impl GenericClient,
    names: &Names,
    release: &ScheduledRelease,
) -> Result<(), CommitError> {
    let changed = match &release.outcome {
        ScheduledOutcome::Complete => {
            execute(
                client,
                &names.sql(
                    "DELETE FROM {t}scheduled_commands
                     WHERE dedupe_key = $1 AND claim_id = $2 AND NOT rescheduled",
                ),
                &[&release.dedupe_key, &release.claim_id],
            )
            .await
        }
        ScheduledOutcome::Retry {
            execute_at,
            error,
            failed_at,
        } => {
            execute(
                client,
                &names.sql(
                    "UPDATE {t}scheduled_commands
                     SET execute_at = $3, last_error = $4, attempts = attempts + 1,
                         first_failed_at = coalesce(first_failed_at, $5),
                         claimed_at = NULL, lease_until = NULL, claim_id = NULL
                     WHERE dedupe_key = $1 AND claim_id = $2 AND NOT rescheduled",
                ),
                &[
                    &release.dedupe_key,
                    &release.claim_id,
                    &execute_at.to_chrono(),
                    error,
                    &failed_at.to_chrono(),
                ],
            )
            .await
        }
        ScheduledOutcome::Defer => Ok(0),
    }
    .map_err(failed("cannot release a scheduler claim"))?;
    // Deferred, or rescheduled meanwhile: the claim is given back, the schedule kept.
    let changed = match changed {
        0 => execute(
            client,
            &names.sql(
                "UPDATE {t}scheduled_commands
                 SET claimed_at = NULL, lease_until = NULL, claim_id = NULL, rescheduled = FALSE
                 WHERE dedupe_key = $1 AND claim_id = $2",
            ),
            &[&release.dedupe_key, &release.claim_id],
        )
        .await
        .map_err(failed("cannot release a scheduler claim"))?,
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
async fn move_entry(
    client: &impl GenericClient,
    names: &Names,
    release: &ScheduledRelease,
    entry: &ScheduledEntry,
) -> Result<(), CommitError> {
    let changed = execute(
        client,
        &names.sql(
            "UPDATE {t}scheduled_commands
             SET command_type = $3, aggregate_id = $4, payload = $5, execute_at = $6,
                 context = $7, attempts = 0, last_error = NULL, first_failed_at = NULL,
                 claimed_at = NULL, lease_until = NULL, claim_id = NULL, rescheduled = FALSE,
                 revision = revision + 1
             WHERE dedupe_key = $1 AND claim_id = $2",
        ),
        &[
            &release.dedupe_key,
            &release.claim_id,
            &entry.command_type,
            &entry.aggregate_id,
            &entry.payload,
            &entry.execute_at.to_chrono(),
            &entry.context,
        ],
    )
    .await
    .map_err(failed("cannot move a scheduler entry"))?;
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
async fn schedule(
    client: &impl GenericClient,
    names: &Names,
    entry: &ScheduledEntry,
) -> Result<(), CommitError> {
    execute(
        client,
        &names.sql(
            "INSERT INTO {t}scheduled_commands AS s
                 (dedupe_key, command_type, aggregate_id, payload, execute_at, context)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (dedupe_key) DO UPDATE SET
                 command_type = excluded.command_type, aggregate_id = excluded.aggregate_id,
                 payload = excluded.payload, execute_at = excluded.execute_at,
                 context = excluded.context, attempts = 0, last_error = NULL,
                 first_failed_at = NULL, rescheduled = (s.claim_id IS NOT NULL),
                 revision = s.revision + 1
             WHERE (s.command_type, s.aggregate_id, s.payload::text, s.execute_at, s.context::text)
                 IS DISTINCT FROM (excluded.command_type, excluded.aggregate_id,
                     excluded.payload::text, excluded.execute_at, excluded.context::text)",
        ),
        &[
            &entry.dedupe_key,
            &entry.command_type,
            &entry.aggregate_id,
            &entry.payload,
            &entry.execute_at.to_chrono(),
            &entry.context,
        ],
    )
    .await
    .map_err(failed("cannot schedule"))?;
    Ok(())
}

/// Files a letter once: the same id again leaves the first as it is.
pub(crate) async fn file_letter(
    client: &impl GenericClient,
    names: &Names,
    letter: &DeadLetter,
    first_failed_at: Instant,
) -> Result<(), CommitError> {
    let attempts = i32::try_from(letter.attempts).unwrap_or(i32::MAX);
    execute(
        client,
        &names.sql(
            "INSERT INTO {t}dead_letters
                 (id, kind, handler, event_id, event_type, aggregate_type, aggregate_id,
                  error_type, error_message, error_stack, attempts, first_failed_at,
                  last_failed_at, status, payload)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
             ON CONFLICT (id) DO NOTHING",
        ),
        &[
            &letter.id,
            &letter.kind.as_str(),
            &letter.handler,
            &letter.event_id,
            &letter.event_type,
            &letter.aggregate_type,
            &letter.aggregate_id,
            &letter.error_type,
            &letter.error_message,
            &letter.error_stack,
            &attempts,
            &first_failed_at.to_chrono(),
            &letter.last_failed_at.to_chrono(),
            &letter.status.as_str(),
            &letter.payload,
        ],
    )
    .await
    .map_err(failed("cannot file a dead letter"))?;
    Ok(())
}

/// Keeps a snapshot unless a newer one is kept already.
async fn keep_snapshot(
    client: &impl GenericClient,
    names: &Names,
    snapshot: &Snapshot,
) -> Result<(), CommitError> {
    execute(
        client,
        &names.sql(
            "INSERT INTO {t}snapshots AS s (aggregate_type, aggregate_id, version, state)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT (aggregate_type, aggregate_id) DO UPDATE SET
                 version = excluded.version, state = excluded.state
             WHERE excluded.version > s.version",
        ),
        &[
            &snapshot.aggregate_type,
            &snapshot.aggregate_id,
            &bigint("a snapshot version", snapshot.version)?,
            &snapshot.state,
        ],
    )
    .await
    .map_err(failed("cannot keep a snapshot"))?;
    Ok(())
}

/// Refuses the write set unless the letter is still `failed` and held by the retry's claim, and
/// keeps it so until the commit: the row is read `FOR SHARE`, so an operator's discard, or
/// another retry's claim, waits for this step instead of landing between its check and its
/// commit.
async fn require_held(
    client: &impl GenericClient,
    names: &Names,
    hold: &LetterHold,
) -> Result<(), CommitError> {
    let row = query_opt(
        client,
        &names.sql("SELECT status, claim_id FROM {t}dead_letters WHERE id = $1 FOR SHARE"),
        &[&hold.id],
    )
    .await
    .map_err(failed("cannot read a dead letter"))?;
    let Some(row) = row else {
        return Err(StoreError::new(format!("no dead letter `{}`", hold.id)).into());
    };
    let status: String = rows::get(&row, 0)?;
    let claim_id: Option<String> = rows::get(&row, 1)?;
    match status == "failed" && claim_id.as_deref() == Some(hold.claim_id.as_str()) {
        true => Ok(()),
        false => Err(CommitError::LetterSettled {
            id: hold.id.clone(),
        }),
    }
}

/// Moves a letter out of `failed`, fenced on its status.
async fn settle_letter(
    client: &impl GenericClient,
    names: &Names,
    settle: &LetterSettle,
) -> Result<(), CommitError> {
    let changed = execute(
        client,
        &names.sql("UPDATE {t}dead_letters SET status = $2 WHERE id = $1 AND status = 'failed'"),
        &[&settle.id, &settle.status.as_str()],
    )
    .await
    .map_err(failed("cannot settle a dead letter"))?;
    if changed == 0 {
        let exists = query_opt(
            client,
            &names.sql("SELECT 1 FROM {t}dead_letters WHERE id = $1"),
            &[&settle.id],
        )
        .await
        .map_err(failed("cannot read a dead letter"))?;
        return Err(match exists {
            Some(_) => CommitError::LetterSettled {
                id: settle.id.clone(),
            },
            None => StoreError::new(format!("no dead letter `{}`", settle.id)).into(),
        });
    }
    Ok(())
}
