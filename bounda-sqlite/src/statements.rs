//! The SQLite statements of the write protocol (`bounda::store::protocol`): each reads or writes
//! one thing on a connection inside a transaction or savepoint, and the protocol decides what its
//! answer means. SQLite answers at once, so the protocol is driven to its end without waiting.

use std::ops::RangeInclusive;

use bounda::Instant;
use bounda::store::protocol::{self, InboxSettle, Inserted, Statements};
use bounda::store::{
    Append, ClaimDue, CommitError, Committed, DeadLetter, InboxMark, IngressRecord, InstanceChange,
    LetterSettle, RetryRequest, ScheduledEntry, ScheduledRelease, Snapshot, StoreError, WriteSet,
};
use rusqlite::{Connection, OptionalExtension, params};

use crate::{claims, rows, sql};

/// How scheduling meets an entry kept under the same key: moved, unless it is identical (then
/// left untouched, its claim and revision included); moving one a worker holds keeps the claim,
/// marked rescheduled.
pub(crate) const SCHEDULE_CONFLICT: &str = "ON CONFLICT (dedupe_key) DO UPDATE SET
         command_type = excluded.command_type, aggregate_id = excluded.aggregate_id,
         payload = excluded.payload, execute_at = excluded.execute_at,
         context = excluded.context, attempts = 0, last_error = NULL,
         first_failed_at = NULL, rescheduled = (claim_id IS NOT NULL),
         revision = revision + 1
     WHERE command_type IS NOT excluded.command_type
        OR aggregate_id IS NOT excluded.aggregate_id
        OR payload IS NOT excluded.payload
        OR execute_at IS NOT excluded.execute_at
        OR context IS NOT excluded.context";

/// How keeping a snapshot meets the one kept: replaced only by a newer one.
pub(crate) const SNAPSHOT_CONFLICT: &str =
    "ON CONFLICT (aggregate_type, aggregate_id) DO UPDATE SET
         version = excluded.version, state = excluded.state
     WHERE excluded.version > version";

/// Writes `writes` on `conn`, which is inside a transaction or savepoint the caller rolls back on
/// error.
pub(crate) fn apply(conn: &Connection, writes: &WriteSet) -> Result<Committed, CommitError> {
    protocol::apply_at_once(&mut On(conn), writes)
}

/// The position of the last event, 0 when there is none.
pub(crate) fn head(conn: &Connection) -> Result<u64, StoreError> {
    conn.prepare_cached("SELECT COALESCE(MAX(position), 0) FROM bounda_events")
        .and_then(|mut s| s.query_row([], |row| row.get(0)))
        .map_err(sql("cannot read the head"))
}

/// Files a letter once: the same id again leaves the first as it is.
pub(crate) fn file_letter(conn: &Connection, letter: &DeadLetter) -> Result<(), StoreError> {
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
            letter.kind.as_str(),
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

/// The statements on one connection.
struct On<'a>(&'a Connection);

impl On<'_> {
    /// Runs `statement` with `params`, answering the rows it changed.
    fn execute(
        &self,
        what: &'static str,
        statement: &str,
        params: impl rusqlite::Params,
    ) -> Result<u64, StoreError> {
        self.0
            .prepare_cached(statement)
            .and_then(|mut s| s.execute(params))
            .map(|changed| changed as u64)
            .map_err(sql(what))
    }

    /// The moment in the first column of the row `statement` answers, if any.
    fn moment(
        &self,
        what: &'static str,
        statement: &str,
        params: impl rusqlite::Params,
    ) -> Result<Option<Instant>, StoreError> {
        let text: Option<String> = self
            .0
            .prepare_cached(statement)
            .and_then(|mut s| s.query_row(params, |row| row.get(0)).optional())
            .map_err(sql(what))?
            .flatten();
        text.map(|text| {
            Instant::parse(&text).map_err(|e| StoreError::with_source("unreadable moment", e))
        })
        .transpose()
    }
}

impl Statements for On<'_> {
    async fn letter(&mut self, id: &str) -> Result<Option<(String, Option<String>)>, StoreError> {
        self.0
            .prepare_cached("SELECT status, claim_id FROM bounda_dead_letters WHERE id = ?1")
            .and_then(|mut s| {
                s.query_row([id], |row| Ok((row.get(0)?, row.get(1)?)))
                    .optional()
            })
            .map_err(sql("cannot read a dead letter"))
    }

    async fn inbox_first_failure(
        &mut self,
        handler: &str,
        event_id: &str,
    ) -> Result<Option<Instant>, StoreError> {
        self.moment(
            "cannot read a claim's first failure",
            "SELECT first_failed_at FROM bounda_inbox WHERE handler = ?1 AND event_id = ?2",
            params![handler, event_id],
        )
    }

    async fn scheduled_first_failure(&mut self, key: &str) -> Result<Option<Instant>, StoreError> {
        self.moment(
            "cannot read a claim's first failure",
            "SELECT first_failed_at FROM bounda_scheduled_commands WHERE dedupe_key = ?1",
            [key],
        )
    }

    async fn stream_version(
        &mut self,
        aggregate_type: &str,
        aggregate_id: &str,
    ) -> Result<u64, StoreError> {
        self.0
            .prepare_cached(
                "SELECT COALESCE(MAX(version), 0) FROM bounda_events
                 WHERE aggregate_type = ?1 AND aggregate_id = ?2",
            )
            .and_then(|mut s| s.query_row(params![aggregate_type, aggregate_id], |row| row.get(0)))
            .map_err(sql("cannot read a stream's version"))
    }

    /// SQLite has one writer at a time: the version read before is still the stream's, and the
    /// position is the row id.
    async fn insert_events(
        &mut self,
        append: &Append,
        versions: RangeInclusive<u64>,
    ) -> Result<Inserted, StoreError> {
        let actual = self
            .stream_version(&append.aggregate_type, &append.aggregate_id)
            .await?;
        if actual != append.expected_version {
            return Ok(Inserted::Taken);
        }
        let mut insert = self
            .0
            .prepare_cached(
                "INSERT INTO bounda_events
                     (id, aggregate_type, aggregate_id, version, type, payload, timestamp, metadata)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .map_err(sql("cannot prepare the append"))?;
        let mut positions = Vec::with_capacity(append.events.len());
        for (event, version) in append.events.iter().zip(versions) {
            let metadata = serde_json::to_string(&event.metadata)
                .map_err(|e| StoreError::with_source("cannot write metadata", e))?;
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
            positions.push(self.0.last_insert_rowid() as u64);
        }
        Ok(Inserted::At(positions))
    }

    async fn skip_checkpoint(
        &mut self,
        subscriber: &str,
        from: u64,
        to: u64,
    ) -> Result<(), StoreError> {
        self.execute(
            "cannot move a checkpoint",
            "UPDATE bounda_checkpoints SET position = ?3 WHERE subscriber = ?1 AND position = ?2",
            params![subscriber, from, to],
        )?;
        Ok(())
    }

    async fn settle_inbox(
        &mut self,
        mark: &InboxMark,
        settle: &InboxSettle<'_>,
    ) -> Result<u64, StoreError> {
        self.execute(
            "cannot settle an inbox claim",
            "UPDATE bounda_inbox
             SET status = ?4, retry_at = ?5, last_error = COALESCE(?6, last_error),
                 first_failed_at = COALESCE(first_failed_at, ?7), claimed_at = NULL,
                 lease_until = NULL, attempts = attempts + (?4 <> 'succeeded')
             WHERE handler = ?1 AND event_id = ?2 AND claim_id = ?3 AND status = 'pending'",
            params![
                mark.handler,
                mark.event_id,
                mark.claim_id,
                settle.status.as_str(),
                settle.retry_at.map(|at| at.to_string()),
                settle.error,
                settle.failed_at.map(|at| at.to_string()),
            ],
        )
    }

    async fn release_inbox(&mut self, mark: &InboxMark) -> Result<u64, StoreError> {
        self.execute(
            "cannot release an inbox claim",
            "UPDATE bounda_inbox SET claimed_at = NULL, lease_until = NULL, claim_id = NULL
             WHERE handler = ?1 AND event_id = ?2 AND claim_id = ?3 AND status = 'pending'",
            params![mark.handler, mark.event_id, mark.claim_id],
        )
    }

    async fn complete_scheduled(&mut self, release: &ScheduledRelease) -> Result<u64, StoreError> {
        self.execute(
            "cannot release a scheduler claim",
            "DELETE FROM bounda_scheduled_commands
             WHERE dedupe_key = ?1 AND claim_id = ?2 AND rescheduled = 0",
            params![release.dedupe_key, release.claim_id],
        )
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
            "UPDATE bounda_scheduled_commands
             SET execute_at = ?3, last_error = ?4, attempts = attempts + 1,
                 first_failed_at = COALESCE(first_failed_at, ?5),
                 claimed_at = NULL, lease_until = NULL, claim_id = NULL
             WHERE dedupe_key = ?1 AND claim_id = ?2 AND rescheduled = 0",
            params![
                release.dedupe_key,
                release.claim_id,
                execute_at.to_string(),
                error,
                failed_at.to_string()
            ],
        )
    }

    async fn give_back_scheduled(&mut self, release: &ScheduledRelease) -> Result<u64, StoreError> {
        self.execute(
            "cannot release a scheduler claim",
            "UPDATE bounda_scheduled_commands
             SET claimed_at = NULL, lease_until = NULL, claim_id = NULL, rescheduled = 0
             WHERE dedupe_key = ?1 AND claim_id = ?2",
            params![release.dedupe_key, release.claim_id],
        )
    }

    async fn move_entry(
        &mut self,
        release: &ScheduledRelease,
        entry: &ScheduledEntry,
    ) -> Result<u64, StoreError> {
        self.execute(
            "cannot move a scheduler entry",
            "UPDATE bounda_scheduled_commands
             SET command_type = ?3, aggregate_id = ?4, payload = ?5, execute_at = ?6,
                 context = ?7, attempts = 0, last_error = NULL, first_failed_at = NULL,
                 claimed_at = NULL, lease_until = NULL, claim_id = NULL, rescheduled = 0,
                 revision = revision + 1
             WHERE dedupe_key = ?1 AND claim_id = ?2",
            params![
                release.dedupe_key,
                release.claim_id,
                entry.command_type,
                entry.aggregate_id,
                entry.payload.to_string(),
                entry.execute_at.to_string(),
                entry.context.to_string(),
            ],
        )
    }

    async fn unschedule(&mut self, key: &str) -> Result<(), StoreError> {
        self.execute(
            "cannot unschedule",
            "DELETE FROM bounda_scheduled_commands WHERE dedupe_key = ?1",
            [key],
        )?;
        Ok(())
    }

    async fn schedule(&mut self, entry: &ScheduledEntry) -> Result<(), StoreError> {
        self.execute(
            "cannot schedule",
            &format!(
                "INSERT INTO bounda_scheduled_commands
                     (dedupe_key, command_type, aggregate_id, payload, execute_at, context,
                      attempts, revision)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, 0) {SCHEDULE_CONFLICT}"
            ),
            params![
                entry.dedupe_key,
                entry.command_type,
                entry.aggregate_id,
                entry.payload.to_string(),
                entry.execute_at.to_string(),
                entry.context.to_string(),
            ],
        )?;
        Ok(())
    }

    async fn file_letter(&mut self, letter: &DeadLetter) -> Result<(), StoreError> {
        file_letter(self.0, letter)
    }

    async fn keep_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), StoreError> {
        self.execute(
            "cannot keep a snapshot",
            &format!(
                "INSERT INTO bounda_snapshots (aggregate_type, aggregate_id, version, state)
                 VALUES (?1, ?2, ?3, ?4) {SNAPSHOT_CONFLICT}"
            ),
            params![
                snapshot.aggregate_type,
                snapshot.aggregate_id,
                snapshot.version,
                snapshot.state.to_string(),
            ],
        )?;
        Ok(())
    }

    async fn index_instance(&mut self, change: &InstanceChange) -> Result<(), StoreError> {
        crate::instances::index(self.0, change)?;
        Ok(())
    }

    async fn claim_due(&mut self, claim: &ClaimDue) -> Result<Vec<ScheduledEntry>, StoreError> {
        claims::claim(self.0, &claim.claim_id, claim.now, claim.lease, claim.limit)
    }

    async fn settle_letter(&mut self, settle: &LetterSettle) -> Result<u64, StoreError> {
        self.execute(
            "cannot settle a dead letter",
            "UPDATE bounda_dead_letters SET status = ?2 WHERE id = ?1 AND status = 'failed'",
            params![settle.id, rows::status_text(settle.status)],
        )
    }

    async fn keep_retry_request(&mut self, request: &RetryRequest) -> Result<(), StoreError> {
        crate::retry_requests::keep(self.0, request)
    }

    async fn keep_ingress(&mut self, record: &IngressRecord) -> Result<u64, StoreError> {
        crate::ingress::keep(self.0, record)
    }
}
