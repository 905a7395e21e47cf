//! The PostgreSQL statements of the write protocol (`bounda::store::protocol`): each reads or
//! writes one thing inside a transaction or savepoint, and the protocol decides what its answer
//! means.
//!
//! Global order: an append inserts its events at placeholder positions and takes no lock any
//! other appender needs; once it has committed, [`place`] gives them their positions (see the
//! schema's migration 4, and ARCHITECTURE.md). Two appends to one stream meet on the stream's
//! unique version: the later waits for the earlier's commit and then finds its version taken.

use std::ops::RangeInclusive;

use bounda::Instant;
use bounda::store::protocol::{self, InboxSettle, Inserted, Statements};
use bounda::store::{
    Append, ClaimDue, CommitError, Committed, DeadLetter, InboxMark, IngressRecord, InstanceChange,
    LetterSettle, RetryOutcome, RetryRequest, ScheduledEntry, ScheduledRelease, Snapshot,
    StoreError, WriteSet,
};
use tokio_postgres::types::ToSql;

use crate::claims;
use crate::names::Names;
use crate::pipeline::{Expect, Owned, Pipeline, owned};
use crate::rows::{self, bigint};
use crate::sql::{Params, Session, execute, failed, query_one, query_opt};

/// How scheduling meets an entry kept under the same key (aliased `s`): moved, unless it is
/// identical (then left untouched, its claim and revision included); moving one a worker holds
/// keeps the claim, marked rescheduled.
pub(crate) const SCHEDULE_CONFLICT: &str = "ON CONFLICT (dedupe_key) DO UPDATE SET
         command_type = excluded.command_type, aggregate_id = excluded.aggregate_id,
         payload = excluded.payload, execute_at = excluded.execute_at,
         context = excluded.context, attempts = 0, last_error = NULL,
         first_failed_at = NULL, rescheduled = (s.claim_id IS NOT NULL),
         revision = s.revision + 1
     WHERE (s.command_type, s.aggregate_id, s.payload::text, s.execute_at, s.context::text)
         IS DISTINCT FROM (excluded.command_type, excluded.aggregate_id,
             excluded.payload::text, excluded.execute_at, excluded.context::text)";

/// How keeping a snapshot meets the one kept (aliased `s`): replaced only by a newer one.
pub(crate) const SNAPSHOT_CONFLICT: &str =
    "ON CONFLICT (aggregate_type, aggregate_id) DO UPDATE SET
         version = excluded.version, state = excluded.state
     WHERE excluded.version > s.version";

/// Writes `writes` on `client`, inside a transaction or savepoint the caller rolls back on
/// error. Its events are placed once it has committed, by [`place`].
pub(crate) async fn apply(
    client: &impl Session,
    names: &Names,
    writes: &WriteSet,
) -> Result<Committed, CommitError> {
    protocol::apply(&mut On::exact(client, names), writes).await
}

/// Writes each of `writes` on `client` in turn, every statement sent without waiting for the
/// answer of the one before (see [`Pipeline`]): `Some` answers when every statement answered as
/// foreseen, to be committed; `None` when one did not (a stream moved, a claim lost, an error),
/// and the caller rolls back and writes them again the exact way, each in its savepoint.
pub(crate) async fn apply_pipelined(
    client: &impl Session,
    names: &Names,
    writes: &[WriteSet],
) -> Option<Vec<Committed>> {
    let mut on = On {
        client,
        names,
        pipeline: Some(Pipeline::default()),
    };
    let mut results = Vec::with_capacity(writes.len());
    for writes in writes {
        results.push(protocol::apply(&mut on, writes).await.ok()?);
    }
    on.drain().await.ok()?;
    Some(results)
}

/// Takes the head row for this transaction, as a placer does: a copy's import writes positions
/// of its own, and no placer gives any meanwhile.
pub(crate) async fn lock_head(client: &impl Session, names: &Names) -> Result<(), StoreError> {
    query_one(
        client,
        &names.sql("SELECT position FROM {t}head WHERE id = 1 FOR UPDATE"),
        &[],
    )
    .await
    .map_err(failed("cannot take the head row"))?;
    Ok(())
}

/// The position of the last event, 0 when there is none.
pub(crate) async fn head(client: &impl Session, names: &Names) -> Result<u64, StoreError> {
    let row = query_one(
        client,
        &names.sql("SELECT position FROM {t}head WHERE id = 1"),
        &[],
    )
    .await
    .map_err(failed("cannot read the head"))?;
    rows::unsigned(&row, 0)
}

/// Files a letter once: the same id again leaves the first as it is.
pub(crate) async fn file_letter(
    client: &impl Session,
    names: &Names,
    letter: &DeadLetter,
) -> Result<(), StoreError> {
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
            &letter.first_failed_at.to_chrono(),
            &letter.last_failed_at.to_chrono(),
            &letter.status.as_str(),
            &letter.payload,
        ],
    )
    .await
    .map_err(failed("cannot file a dead letter"))?;
    Ok(())
}

/// The statements on one transaction or savepoint: each answered before the next is sent, or,
/// with a [`Pipeline`], writes sent at once and answered as foreseen.
struct On<'a, C> {
    client: &'a C,
    names: &'a Names,
    pipeline: Option<Pipeline<'a>>,
}

impl<'a, C: Session> On<'a, C> {
    fn exact(client: &'a C, names: &'a Names) -> On<'a, C> {
        On {
            client,
            names,
            pipeline: None,
        }
    }

    /// Runs `template` (`{t}` naming the tables), answering the rows it changed; in a pipeline,
    /// sends it and answers what `expect` foresees, checked when the pipeline drains.
    async fn execute(
        &mut self,
        what: &'static str,
        expect: Expect,
        template: &str,
        params: Owned,
    ) -> Result<u64, StoreError> {
        let sql = self.names.sql(template);
        let Some(pipeline) = &mut self.pipeline else {
            let params: Vec<&(dyn ToSql + Sync)> = params
                .iter()
                .map(|param| param.as_ref() as &(dyn ToSql + Sync))
                .collect();
            return execute(self.client, &sql, &params)
                .await
                .map_err(failed(what));
        };
        pipeline.send(self.client, what, expect, &sql, params).await
    }

    /// Waits for the answers of the statements sent, in order: an error, or an answer that is
    /// not the one foreseen, fails the write sets of the pipeline.
    async fn drain(&mut self) -> Result<(), StoreError> {
        match &mut self.pipeline {
            Some(pipeline) => pipeline.drain().await,
            None => Ok(()),
        }
    }

    /// The row `template` answers, if any: in a pipeline, once what was sent has answered.
    async fn row(
        &mut self,
        what: &'static str,
        template: &str,
        params: Params<'_>,
    ) -> Result<Option<tokio_postgres::Row>, StoreError> {
        self.drain().await?;
        query_opt(self.client, &self.names.sql(template), params)
            .await
            .map_err(failed(what))
    }

    /// The moment in the first column of the row `template` answers, if any.
    async fn moment(
        &mut self,
        template: &str,
        params: Params<'_>,
    ) -> Result<Option<Instant>, StoreError> {
        match self
            .row("cannot read a claim's first failure", template, params)
            .await?
        {
            Some(row) => rows::optional_instant(&row, 0),
            None => Ok(None),
        }
    }
}

impl<C: Session> Statements for On<'_, C> {
    /// Read `FOR SHARE`: an operator's discard, or another retry's claim, waits for this step
    /// instead of landing between its check and its commit.
    async fn letter(&mut self, id: &str) -> Result<Option<(String, Option<String>)>, StoreError> {
        let row = self
            .row(
                "cannot read a dead letter",
                "SELECT status, claim_id FROM {t}dead_letters WHERE id = $1 FOR SHARE",
                &[&id],
            )
            .await?;
        row.map(|row| Ok((rows::get(&row, 0)?, rows::get(&row, 1)?)))
            .transpose()
    }

    async fn inbox_first_failure(
        &mut self,
        handler: &str,
        event_id: &str,
    ) -> Result<Option<Instant>, StoreError> {
        self.moment(
            "SELECT first_failed_at FROM {t}inbox WHERE handler = $1 AND event_id = $2",
            &[&handler, &event_id],
        )
        .await
    }

    async fn scheduled_first_failure(&mut self, key: &str) -> Result<Option<Instant>, StoreError> {
        self.moment(
            "SELECT first_failed_at FROM {t}scheduled_commands WHERE dedupe_key = $1",
            &[&key],
        )
        .await
    }

    async fn stream_version(
        &mut self,
        aggregate_type: &str,
        aggregate_id: &str,
    ) -> Result<u64, StoreError> {
        self.drain().await?;
        let row = query_one(
            self.client,
            &self.names.sql(
                "SELECT coalesce(max(version), 0) FROM {t}events
                 WHERE aggregate_type = $1 AND aggregate_id = $2",
            ),
            &[&aggregate_type, &aggregate_id],
        )
        .await
        .map_err(failed("cannot read a stream's version"))?;
        rows::unsigned(&row, 0)
    }

    /// One statement for the stream's events, at placeholder positions, checking the stream's
    /// version as it inserts. A version taken by a transaction still open is waited for; once
    /// it commits, the insert leaves out the rows whose version is taken, which is how a stale
    /// version shows.
    async fn insert_events(
        &mut self,
        append: &Append,
        versions: RangeInclusive<u64>,
    ) -> Result<Inserted, StoreError> {
        let count = append.events.len();
        let (mut ids, mut numbers, mut types) = (
            Vec::with_capacity(count),
            Vec::with_capacity(count),
            Vec::with_capacity(count),
        );
        let (mut payloads, mut timestamps, mut metadata) = (
            Vec::with_capacity(count),
            Vec::with_capacity(count),
            Vec::with_capacity(count),
        );
        for (event, version) in append.events.iter().zip(versions) {
            ids.push(event.id.clone());
            numbers.push(bigint("a version", version)?);
            types.push(event.event_type.clone());
            payloads.push(event.payload.clone());
            timestamps.push(event.timestamp.to_chrono());
            metadata.push(
                serde_json::to_value(&event.metadata)
                    .map_err(|e| StoreError::with_source("cannot write metadata", e))?,
            );
        }
        let inserted = self
            .execute(
                "cannot append an event",
                Expect::Rows(count as u64),
                "INSERT INTO {t}events (id, aggregate_type, aggregate_id, version, type, payload,
                     timestamp, metadata)
                 SELECT id, $2, $3, version, type, payload, timestamp, metadata
                 FROM unnest($1::text[], $4::bigint[], $5::text[], $6::json[],
                     $7::timestamptz[], $8::json[])
                     AS e (id, version, type, payload, timestamp, metadata)
                 WHERE (SELECT coalesce(max(s.version), 0) FROM {t}events s
                        WHERE s.aggregate_type = $2 AND s.aggregate_id = $3) = $9
                 ON CONFLICT (aggregate_type, aggregate_id, version) DO NOTHING",
                owned![
                    ids,
                    append.aggregate_type.clone(),
                    append.aggregate_id.clone(),
                    numbers,
                    types,
                    payloads,
                    timestamps,
                    metadata,
                    bigint("a version", append.expected_version)?,
                ],
            )
            .await?;
        Ok(match inserted == count as u64 {
            true => Inserted::Unplaced,
            false => Inserted::Taken,
        })
    }

    async fn skip_checkpoint(
        &mut self,
        subscriber: &str,
        from: u64,
        to: u64,
    ) -> Result<(), StoreError> {
        self.execute(
            "cannot move a checkpoint",
            Expect::Any,
            "UPDATE {t}checkpoints SET position = $3 WHERE subscriber = $1 AND position = $2",
            owned![
                subscriber.to_owned(),
                bigint("a position", from)?,
                bigint("a position", to)?,
            ],
        )
        .await?;
        Ok(())
    }

    async fn settle_inbox(
        &mut self,
        mark: &InboxMark,
        settle: &InboxSettle<'_>,
    ) -> Result<u64, StoreError> {
        self.execute(
            "cannot settle an inbox claim",
            Expect::Some,
            "UPDATE {t}inbox
             SET status = $4, retry_at = $5, last_error = coalesce($6, last_error),
                 first_failed_at = coalesce(first_failed_at, $7), claimed_at = NULL,
                 lease_until = NULL,
                 attempts = attempts + (CASE WHEN $4 <> 'succeeded' THEN 1 ELSE 0 END)
             WHERE handler = $1 AND event_id = $2 AND claim_id = $3 AND status = 'pending'",
            owned![
                mark.handler.clone(),
                mark.event_id.clone(),
                mark.claim_id.clone(),
                settle.status.as_str(),
                settle.retry_at.map(Instant::to_chrono),
                settle.error.map(str::to_owned),
                settle.failed_at.map(Instant::to_chrono),
            ],
        )
        .await
    }

    async fn release_inbox(&mut self, mark: &InboxMark) -> Result<u64, StoreError> {
        self.execute(
            "cannot release an inbox claim",
            Expect::Some,
            "UPDATE {t}inbox SET claimed_at = NULL, lease_until = NULL, claim_id = NULL
             WHERE handler = $1 AND event_id = $2 AND claim_id = $3 AND status = 'pending'",
            owned![
                mark.handler.clone(),
                mark.event_id.clone(),
                mark.claim_id.clone()
            ],
        )
        .await
    }

    async fn complete_scheduled(&mut self, release: &ScheduledRelease) -> Result<u64, StoreError> {
        self.execute(
            "cannot release a scheduler claim",
            Expect::Some,
            "DELETE FROM {t}scheduled_commands
             WHERE dedupe_key = $1 AND claim_id = $2 AND NOT rescheduled",
            owned![release.dedupe_key.clone(), release.claim_id.clone()],
        )
        .await
    }

    async fn retry_scheduled(
        &mut self,
        release: &ScheduledRelease,
        execute_at: Instant,
        error: &str,
        failed_at: Instant,
    ) -> Result<u64, StoreError> {
        self.execute(
            "cannot release a scheduler claim",
            Expect::Some,
            "UPDATE {t}scheduled_commands
             SET execute_at = $3, last_error = $4, attempts = attempts + 1,
                 first_failed_at = coalesce(first_failed_at, $5),
                 claimed_at = NULL, lease_until = NULL, claim_id = NULL
             WHERE dedupe_key = $1 AND claim_id = $2 AND NOT rescheduled",
            owned![
                release.dedupe_key.clone(),
                release.claim_id.clone(),
                execute_at.to_chrono(),
                error.to_owned(),
                failed_at.to_chrono(),
            ],
        )
        .await
    }

    async fn give_back_scheduled(&mut self, release: &ScheduledRelease) -> Result<u64, StoreError> {
        self.execute(
            "cannot release a scheduler claim",
            Expect::Some,
            "UPDATE {t}scheduled_commands
             SET claimed_at = NULL, lease_until = NULL, claim_id = NULL, rescheduled = FALSE
             WHERE dedupe_key = $1 AND claim_id = $2",
            owned![release.dedupe_key.clone(), release.claim_id.clone()],
        )
        .await
    }

    async fn move_entry(
        &mut self,
        release: &ScheduledRelease,
        entry: &ScheduledEntry,
    ) -> Result<u64, StoreError> {
        self.execute(
            "cannot move a scheduler entry",
            Expect::Some,
            "UPDATE {t}scheduled_commands
             SET command_type = $3, aggregate_id = $4, payload = $5, execute_at = $6,
                 context = $7, attempts = 0, last_error = NULL, first_failed_at = NULL,
                 claimed_at = NULL, lease_until = NULL, claim_id = NULL, rescheduled = FALSE,
                 revision = revision + 1
             WHERE dedupe_key = $1 AND claim_id = $2",
            owned![
                release.dedupe_key.clone(),
                release.claim_id.clone(),
                entry.command_type.clone(),
                entry.aggregate_id.clone(),
                entry.payload.clone(),
                entry.execute_at.to_chrono(),
                entry.context.clone(),
            ],
        )
        .await
    }

    async fn unschedule(&mut self, key: &str) -> Result<(), StoreError> {
        self.execute(
            "cannot unschedule",
            Expect::Any,
            "DELETE FROM {t}scheduled_commands WHERE dedupe_key = $1",
            owned![key.to_owned()],
        )
        .await?;
        Ok(())
    }

    async fn schedule(&mut self, entry: &ScheduledEntry) -> Result<(), StoreError> {
        self.execute(
            "cannot schedule",
            Expect::Any,
            &format!(
                "INSERT INTO {{t}}scheduled_commands AS s
                     (dedupe_key, command_type, aggregate_id, payload, execute_at, context)
                 VALUES ($1, $2, $3, $4, $5, $6) {SCHEDULE_CONFLICT}"
            ),
            owned![
                entry.dedupe_key.clone(),
                entry.command_type.clone(),
                entry.aggregate_id.clone(),
                entry.payload.clone(),
                entry.execute_at.to_chrono(),
                entry.context.clone(),
            ],
        )
        .await?;
        Ok(())
    }

    async fn file_letter(&mut self, letter: &DeadLetter) -> Result<(), StoreError> {
        self.drain().await?;
        file_letter(self.client, self.names, letter).await
    }

    async fn keep_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), StoreError> {
        self.execute(
            "cannot keep a snapshot",
            Expect::Any,
            &format!(
                "INSERT INTO {{t}}snapshots AS s (aggregate_type, aggregate_id, version, state)
                 VALUES ($1, $2, $3, $4) {SNAPSHOT_CONFLICT}"
            ),
            owned![
                snapshot.aggregate_type.clone(),
                snapshot.aggregate_id.clone(),
                bigint("a snapshot version", snapshot.version)?,
                snapshot.state.clone(),
            ],
        )
        .await?;
        Ok(())
    }

    async fn index_instance(&mut self, change: &InstanceChange) -> Result<(), StoreError> {
        for (statement, params, _) in crate::instances::index(&[change]) {
            self.execute(
                "cannot write the instances index",
                Expect::Any,
                &statement,
                params,
            )
            .await?;
        }
        Ok(())
    }

    async fn claim_due(&mut self, claim: &ClaimDue) -> Result<Vec<ScheduledEntry>, StoreError> {
        self.drain().await?;
        claims::claim(
            self.client,
            self.names,
            &claim.claim_id,
            claim.now,
            claim.lease,
            claim.limit,
        )
        .await
    }

    async fn settle_letter(&mut self, settle: &LetterSettle) -> Result<u64, StoreError> {
        self.execute(
            "cannot settle a dead letter",
            Expect::Some,
            "UPDATE {t}dead_letters SET status = $2 WHERE id = $1 AND status = 'failed'",
            owned![settle.id.clone(), settle.status.as_str()],
        )
        .await
    }

    async fn keep_retry_request(&mut self, request: &RetryRequest) -> Result<(), StoreError> {
        self.execute(
            "cannot keep a requested retry",
            Expect::Any,
            "INSERT INTO {t}retry_requests AS r
                 (id, letter, by_whom, requested_at, finished_at, outcome)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (id) DO UPDATE SET
                 finished_at = excluded.finished_at, outcome = excluded.outcome
             WHERE r.outcome IS NULL",
            owned![
                request.id.clone(),
                request.letter.clone(),
                request.by.clone(),
                request.requested_at.to_chrono(),
                request.finished_at.map(Instant::to_chrono),
                request.outcome.as_ref().map(RetryOutcome::to_text),
            ],
        )
        .await?;
        Ok(())
    }

    async fn keep_ingress(&mut self, record: &IngressRecord) -> Result<u64, StoreError> {
        self.execute(
            "cannot keep an arrived command's key",
            Expect::Some,
            "INSERT INTO {t}ingress (key, fingerprint, answer, decided_at)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT (key) DO NOTHING",
            owned![
                record.key.clone(),
                record.fingerprint.clone(),
                record.answer.clone(),
                record.decided_at.to_chrono(),
            ],
        )
        .await
    }
}
