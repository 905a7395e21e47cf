//! `impl Store for SqliteStore`: reads, claims, commits.

use bounda::store::{
    Bookmark, Capabilities, CommitError, Committed, CopyMark, CopyStore, Cursor, DeadLetter,
    Import, InOrder, InboxClaim, InboxEntry, InboxFailure, InboxPair, IngressRecord, IngressStore,
    InstanceCounts, InstanceIndex, InstanceQuery, InstanceRow, LetterFilter, LimitKey, LimitStore,
    LimitWindow, Pause, PauseStore, PauseTarget, RetryRequest, ScheduledEntry, Snapshot, Store,
    StoreError, StreamTail, WriteSet, async_trait,
};
use bounda::{Duration, Instant, RecordedEvent, millis};
use rusqlite::types::Value;
use rusqlite::{OptionalExtension, TransactionBehavior, params, params_from_iter};

use crate::claims::{PAUSED, claim, claim_one, expired_before, free_claim, lease_until};
use crate::limits::limited;
use crate::{SqliteStore, rows, sql, statements};

/// The four moments `next_due_at` reads, as stored.
type Moments = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

#[async_trait]
impl Store for SqliteStore {
    async fn read_stream(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        // Versions start at 1.
        self.read_stream_after(aggregate_type, aggregate_id, 0)
            .await
    }

    async fn stream_ids(
        &self,
        aggregate_type: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let conn = self.lock()?;
        // Each stream's first event, through the index on (type, id, version).
        let mut statement = conn
            .prepare_cached(
                "SELECT aggregate_id FROM bounda_events
                 WHERE aggregate_type = ?1 AND aggregate_id > ?2 AND version = 1
                 ORDER BY aggregate_id LIMIT ?3",
            )
            .map_err(sql("cannot prepare a read of stream ids"))?;
        statement
            .query_map(
                params![aggregate_type, after.unwrap_or(""), limit as i64],
                |row| row.get(0),
            )
            .and_then(Iterator::collect)
            .map_err(sql("cannot read stream ids"))
    }

    async fn read_stream_after(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
        version: u64,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        let conn = self.lock()?;
        crate::reads::stream_after(&conn, aggregate_type, aggregate_id, version)
    }

    async fn read_tails(
        &self,
        aggregate_type: &str,
        ids: &[String],
    ) -> Result<Vec<StreamTail>, StoreError> {
        let conn = self.lock()?;
        crate::reads::tails(&conn, aggregate_type, ids)
    }

    async fn snapshot(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
    ) -> Result<Option<Snapshot>, StoreError> {
        let conn = self.lock()?;
        crate::reads::snapshot(&conn, aggregate_type, aggregate_id)
    }

    async fn read_all(&self, after: u64, limit: usize) -> Result<Vec<RecordedEvent>, StoreError> {
        let conn = self.lock()?;
        let mut statement = conn
            .prepare_cached(&format!(
                "SELECT {} FROM bounda_events WHERE position > ?1 ORDER BY position LIMIT ?2",
                rows::EVENT_COLUMNS
            ))
            .map_err(sql("cannot prepare a read"))?;
        statement
            .query_map(params![after, rows::limit(limit)], rows::event)
            .and_then(Iterator::collect)
            .map_err(sql("cannot read events"))
    }

    async fn read_event(&self, id: &str) -> Result<Option<RecordedEvent>, StoreError> {
        let conn = self.lock()?;
        conn.prepare_cached(&format!(
            "SELECT {} FROM bounda_events WHERE id = ?1",
            rows::EVENT_COLUMNS
        ))
        .and_then(|mut s| s.query_row([id], rows::event).optional())
        .map_err(sql("cannot read an event"))
    }

    async fn head(&self) -> Result<u64, StoreError> {
        statements::head(&*self.lock()?)
    }

    async fn commit(&self, writes: &WriteSet) -> Result<Committed, CommitError> {
        let mut conn = self.lock()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql("cannot begin a write"))?;
        let committed = statements::apply(&tx, writes)?;
        tx.commit().map_err(sql("cannot commit"))?;
        Ok(committed)
    }

    /// One transaction (group commit): the wave's write sets in a statement per kind of write,
    /// or, should that not go as foreseen, a savepoint per write set, each failing alone.
    async fn commit_many(&self, writes: &[WriteSet]) -> Vec<Result<Committed, CommitError>> {
        // Each write set gets the whole cause (`cannot commit: disk I/O error`).
        let failed = |error: StoreError| -> Vec<Result<Committed, CommitError>> {
            writes
                .iter()
                .map(|_| Err(CommitError::Store(error.flattened())))
                .collect()
        };
        let mut conn = match self.lock() {
            Ok(conn) => conn,
            Err(error) => return failed(error),
        };
        let mut tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
            Ok(tx) => tx,
            Err(error) => return failed(StoreError::with_source("cannot begin a write", error)),
        };
        // The wave in a statement per kind of write; written the exact way, each write set in
        // a savepoint of its own, when that does not go as foreseen.
        if bounda::store::protocol::wave::worth_a_wave(writes) {
            match crate::wave::write(&mut tx, writes) {
                Ok(Some(committed)) => {
                    return match tx.commit() {
                        Ok(()) => committed.into_iter().map(Ok).collect(),
                        Err(error) => failed(StoreError::with_source("cannot commit", error)),
                    };
                }
                Ok(None) => {}
                Err(error) => return failed(error),
            }
        }
        let mut results = Vec::with_capacity(writes.len());
        for write in writes {
            let result = tx
                .savepoint()
                .map_err(|e| {
                    CommitError::Store(StoreError::with_source("cannot open a savepoint", e))
                })
                .and_then(|savepoint| {
                    // Dropping a savepoint that was not committed rolls it back.
                    let committed = statements::apply(&savepoint, write)?;
                    savepoint
                        .commit()
                        .map_err(|e| StoreError::with_source("cannot release a savepoint", e))?;
                    Ok(committed)
                });
            results.push(result);
        }
        match tx.commit() {
            Ok(()) => results,
            Err(error) => failed(StoreError::with_source("cannot commit", error)),
        }
    }

    async fn checkpoint(&self, subscriber: &str) -> Result<Option<u64>, StoreError> {
        let conn = self.lock()?;
        conn.prepare_cached("SELECT position FROM bounda_checkpoints WHERE subscriber = ?1")
            .and_then(|mut s| s.query_row([subscriber], |row| row.get(0)).optional())
            .map_err(sql("cannot read a checkpoint"))
    }

    async fn checkpoints(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let conn = self.lock()?;
        let mut statement = conn
            .prepare_cached(
                "SELECT subscriber, position FROM bounda_checkpoints ORDER BY subscriber",
            )
            .map_err(sql("cannot prepare a checkpoint read"))?;
        statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .and_then(Iterator::collect)
            .map_err(sql("cannot read checkpoints"))
    }

    async fn move_checkpoint(
        &self,
        subscriber: &str,
        from: Option<u64>,
        to: u64,
    ) -> Result<bool, StoreError> {
        let conn = self.lock()?;
        let changed = match from {
            None => conn
                .prepare_cached(
                    "INSERT INTO bounda_checkpoints (subscriber, position) VALUES (?1, ?2)
                     ON CONFLICT (subscriber) DO NOTHING",
                )
                .and_then(|mut s| s.execute(params![subscriber, to])),
            Some(from) => conn
                .prepare_cached(
                    "UPDATE bounda_checkpoints SET position = ?3
                     WHERE subscriber = ?1 AND position = ?2",
                )
                .and_then(|mut s| s.execute(params![subscriber, from, to])),
        }
        .map_err(sql("cannot move a checkpoint"))?;
        Ok(changed == 1)
    }

    async fn cursor(&self, subscriber: &str) -> Result<Option<Cursor>, StoreError> {
        let conn = self.lock()?;
        crate::bookmarks::cursor(&conn, subscriber)
    }

    async fn pass_checkpoint(
        &self,
        subscriber: &str,
        from: u64,
        to: u64,
        bookmarks: &[Bookmark],
    ) -> Result<bool, StoreError> {
        // Most passes leave none: the checkpoint's move alone, one statement.
        if bookmarks.is_empty() {
            return self.move_checkpoint(subscriber, Some(from), to).await;
        }
        let mut conn = self.lock()?;
        crate::bookmarks::pass(&mut conn, subscriber, from, to, bookmarks)
    }

    async fn return_to_bookmarks(
        &self,
        subscriber: &str,
        holders: &[(&str, &str)],
    ) -> Result<(), StoreError> {
        let mut conn = self.lock()?;
        crate::bookmarks::return_to(&mut conn, subscriber, holders)
    }

    async fn claim_inbox(
        &self,
        handler: &str,
        event_id: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<InboxClaim, StoreError> {
        let conn = self.lock()?;
        claim_one(&conn, handler, event_id, claim_id, now, lease)
    }

    /// The whole batch in one write transaction.
    async fn claim_inbox_batch(
        &self,
        pairs: &[InboxPair<'_>],
        claim_id: &str,
        now: Instant,
        lease: Duration,
        order: &mut InOrder,
    ) -> Result<Vec<InboxClaim>, StoreError> {
        if pairs.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = self.lock()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql("cannot begin a write"))?;
        let mut claims = Vec::with_capacity(pairs.len());
        for pair in pairs {
            let claim = match order.skips(pair) {
                true => InboxClaim::Skipped,
                false => claim_one(&tx, pair.handler, pair.event_id, claim_id, now, lease)?,
            };
            order.saw(pair, &claim);
            claims.push(claim);
        }
        tx.commit().map_err(sql("cannot commit"))?;
        Ok(claims)
    }

    async fn renew_inbox(
        &self,
        handler: &str,
        event_id: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        let conn = self.lock()?;
        conn.prepare_cached(
            "UPDATE bounda_inbox SET claimed_at = ?4, lease_until = ?5
             WHERE handler = ?1 AND event_id = ?2 AND claim_id = ?3 AND status = 'pending'",
        )
        .and_then(|mut s| {
            s.execute(params![
                handler,
                event_id,
                claim_id,
                now.to_string(),
                lease_until(now, lease)
            ])
        })
        .map(|changed| changed == 1)
        .map_err(sql("cannot renew an inbox claim"))
    }

    async fn inbox_failures(
        &self,
        handler: &str,
        limit: usize,
    ) -> Result<Vec<InboxFailure>, StoreError> {
        let conn = self.lock()?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        conn.prepare_cached(
            "SELECT event_id, attempts, last_error, retry_at FROM bounda_inbox
             WHERE handler = ?1 AND status = 'failed'
             ORDER BY retry_at, event_id LIMIT ?2",
        )
        .and_then(|mut s| {
            s.query_map(params![handler, limit], |row| {
                Ok(InboxFailure {
                    handler: handler.to_owned(),
                    event_id: row.get(0)?,
                    attempts: row.get(1)?,
                    last_error: row.get(2)?,
                    retry_at: rows::instant(row, 3)?,
                })
            })?
            .collect()
        })
        .map_err(sql("cannot read inbox failures"))
    }

    async fn claim_due(
        &self,
        claim_id: &str,
        now: Instant,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        let conn = self.lock()?;
        // Nothing due is the common answer: find it out with a read, not a write transaction.
        let due: Option<i64> = conn
            .prepare_cached(concat!(
                "SELECT 1 FROM bounda_scheduled_commands WHERE execute_at <= ?1 AND ",
                free_claim!("?1", "?2"),
                " LIMIT 1"
            ))
            .and_then(|mut s| {
                s.query_row(
                    params![now.to_string(), expired_before(now, lease)],
                    |row| row.get(0),
                )
                .optional()
            })
            .map_err(sql("cannot look for due entries"))?;
        if due.is_none() {
            return Ok(Vec::new());
        }
        claim(&conn, claim_id, now, lease, limit)
    }

    async fn renew_scheduled(
        &self,
        dedupe_key: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        let conn = self.lock()?;
        conn.prepare_cached(
            "UPDATE bounda_scheduled_commands SET claimed_at = ?3, lease_until = ?4
             WHERE dedupe_key = ?1 AND claim_id = ?2",
        )
        .and_then(|mut s| {
            s.execute(params![
                dedupe_key,
                claim_id,
                now.to_string(),
                lease_until(now, lease)
            ])
        })
        .map(|changed| changed == 1)
        .map_err(sql("cannot renew a scheduler claim"))
    }

    async fn next_due_at(
        &self,
        now: Instant,
        lease: Duration,
    ) -> Result<Option<Instant>, StoreError> {
        let conn = self.lock()?;
        let (free, ending, unended, window): Moments = conn
            .prepare_cached(&format!(
                "SELECT
                     (SELECT execute_at FROM bounda_scheduled_commands s
                      WHERE claimed_at IS NULL AND NOT {PAUSED} AND NOT {}
                      ORDER BY execute_at LIMIT 1),
                     (SELECT MIN(lease_until) FROM bounda_scheduled_commands
                      WHERE lease_until IS NOT NULL),
                     (SELECT MIN(claimed_at) FROM bounda_scheduled_commands
                      WHERE claimed_at IS NOT NULL AND lease_until IS NULL),
                     (SELECT MIN(ends) FROM bounda_limits WHERE ends > ?1 AND taken >= cap)",
                limited!("?1"),
            ))
            .and_then(|mut s| {
                s.query_row([now.to_string()], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
                })
            })
            .map_err(sql("cannot read the next due moment"))?;
        let parse = |text: Option<String>| {
            text.map(|text| Instant::parse(&text))
                .transpose()
                .map_err(|e| StoreError::with_source("unreadable moment", e))
        };
        // A due moment that does not read (a hand edit) is due as the claim compares it, as
        // text: now when it sorts at or before now, else unknown (the runner's poll finds it, or
        // `unclaimable_entries` names it).
        let free = free.and_then(|text| match Instant::parse(&text) {
            Ok(at) => Some(at),
            Err(_) => (text <= now.to_string()).then_some(now),
        });
        // A claimed entry is due again 1 ms after its lease ends (spec 176); one claimed without
        // its end, `lease` after it was taken.
        let ending = parse(ending)?.map(|until| until + millis(1));
        let unended = parse(unended)?.map(|claimed_at| claimed_at + lease + millis(1));
        // A used-up limit's entries are due when its window ends.
        let window = parse(window)?;
        Ok(free
            .into_iter()
            .chain(ending)
            .chain(unended)
            .chain(window)
            .min())
    }

    async fn next_scheduled_retry(&self) -> Result<Option<Instant>, StoreError> {
        let conn = self.lock()?;
        let text: Option<String> = conn
            .prepare_cached(&format!(
                "SELECT MIN(execute_at) FROM bounda_scheduled_commands s
                 WHERE attempts > 0 AND claimed_at IS NULL AND NOT {PAUSED}",
            ))
            .and_then(|mut s| s.query_row([], |row| row.get(0)))
            .map_err(sql("cannot read scheduled retries"))?;
        text.map(|text| {
            Instant::parse(&text).map_err(|e| StoreError::with_source("unreadable moment", e))
        })
        .transpose()
    }

    async fn scheduled_page(
        &self,
        command_type: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        let conn = self.lock()?;
        let mut statement = conn
            .prepare_cached(&format!(
                "SELECT {} FROM bounda_scheduled_commands
                 WHERE command_type = ?1 AND dedupe_key > ?2 ORDER BY dedupe_key LIMIT ?3",
                rows::SCHEDULED_COLUMNS
            ))
            .map_err(sql("cannot prepare a scheduler page"))?;
        statement
            .query_map(
                params![command_type, after.unwrap_or(""), limit as i64],
                rows::scheduled,
            )
            .and_then(Iterator::collect)
            .map_err(sql("cannot read a scheduler page"))
    }

    async fn scheduled_types(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let conn = self.lock()?;
        let mut statement = conn
            .prepare_cached(
                "SELECT command_type, COUNT(*) FROM bounda_scheduled_commands
                 GROUP BY command_type ORDER BY command_type",
            )
            .map_err(sql("cannot prepare a read of scheduler types"))?;
        statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .and_then(Iterator::collect)
            .map_err(sql("cannot read scheduler types"))
    }

    async fn scheduled_of_type(
        &self,
        command_type: &str,
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        let conn = self.lock()?;
        let mut statement = conn
            .prepare_cached(&format!(
                "SELECT {} FROM bounda_scheduled_commands WHERE command_type = ?1
                 ORDER BY execute_at, dedupe_key",
                rows::SCHEDULED_COLUMNS
            ))
            .map_err(sql("cannot prepare a scheduler read"))?;
        statement
            .query_map([command_type], rows::scheduled)
            .and_then(Iterator::collect)
            .map_err(sql("cannot read scheduler entries"))
    }

    /// Both through the due-moment index.
    async fn scheduled_until(
        &self,
        command_type: &str,
        until: Instant,
        limit: usize,
    ) -> Result<(Vec<ScheduledEntry>, bool), StoreError> {
        let conn = self.lock()?;
        let entries = conn
            .prepare_cached(&format!(
                "SELECT {} FROM bounda_scheduled_commands
                 WHERE execute_at <= ?2 AND command_type = ?1
                 ORDER BY execute_at, dedupe_key LIMIT ?3",
                rows::SCHEDULED_COLUMNS
            ))
            .and_then(|mut s| {
                s.query_map(
                    params![command_type, until.to_string(), rows::limit(limit)],
                    rows::scheduled,
                )?
                .collect::<Result<Vec<_>, _>>()
            })
            .map_err(sql("cannot read scheduler entries"))?;
        let later = conn
            .prepare_cached(
                "SELECT 1 FROM bounda_scheduled_commands
                 WHERE execute_at > ?2 AND command_type = ?1
                 ORDER BY execute_at LIMIT 1",
            )
            .and_then(|mut s| {
                s.query_row(params![command_type, until.to_string()], |_| Ok(()))
                    .optional()
            })
            .map_err(sql("cannot look for later entries"))?
            .is_some();
        Ok((entries, later))
    }

    async fn scheduled(&self, dedupe_key: &str) -> Result<Option<ScheduledEntry>, StoreError> {
        let conn = self.lock()?;
        crate::reads::scheduled(&conn, dedupe_key)
    }

    async fn scheduled_many(
        &self,
        dedupe_keys: &[String],
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        let conn = self.lock()?;
        crate::reads::scheduled_many(&conn, dedupe_keys)
    }

    async fn unclaimable_entries(&self, limit: usize) -> Result<Vec<ScheduledEntry>, StoreError> {
        // Every moment this store writes starts with a digit; one that sorts after `9` (`:`
        // follows it) never comes due, as the claim compares text. (One that sorts before `0`
        // is due at once, and claimed.) A range of the due-moment index.
        let conn = self.lock()?;
        conn.prepare_cached(&format!(
            "SELECT {} FROM bounda_scheduled_commands WHERE execute_at >= ':' LIMIT ?1",
            rows::SCHEDULED_COLUMNS
        ))
        .and_then(|mut s| {
            s.query_map([rows::limit(limit)], rows::scheduled)?
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(sql("cannot read the scheduler"))
    }

    async fn claim_letter(
        &self,
        id: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        let conn = self.lock()?;
        conn.prepare_cached(concat!(
            "UPDATE bounda_dead_letters SET claim_id = ?2, claimed_at = ?3, lease_until = ?5
             WHERE id = ?1 AND status = 'failed' AND ",
            free_claim!("?3", "?4")
        ))
        .and_then(|mut s| {
            s.execute(params![
                id,
                claim_id,
                now.to_string(),
                expired_before(now, lease),
                lease_until(now, lease)
            ])
        })
        .map(|changed| changed == 1)
        .map_err(sql("cannot claim a dead letter"))
    }

    async fn renew_letter(
        &self,
        id: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        let conn = self.lock()?;
        conn.prepare_cached(
            "UPDATE bounda_dead_letters SET claimed_at = ?3, lease_until = ?4
             WHERE id = ?1 AND claim_id = ?2 AND status = 'failed'",
        )
        .and_then(|mut s| {
            s.execute(params![
                id,
                claim_id,
                now.to_string(),
                lease_until(now, lease)
            ])
        })
        .map(|changed| changed == 1)
        .map_err(sql("cannot renew a dead letter's claim"))
    }

    async fn release_letter(&self, id: &str, claim_id: &str) -> Result<(), StoreError> {
        let conn = self.lock()?;
        conn.prepare_cached(
            "UPDATE bounda_dead_letters SET claim_id = NULL, claimed_at = NULL, lease_until = NULL
             WHERE id = ?1 AND claim_id = ?2",
        )
        .and_then(|mut s| s.execute(params![id, claim_id]))
        .map(|_| ())
        .map_err(sql("cannot release a dead letter"))
    }

    async fn dead_letters(&self, filter: &LetterFilter) -> Result<Vec<DeadLetter>, StoreError> {
        let (clause, mut values) = letter_filter(filter);
        let limit = filter.limit.map_or(-1, |limit| limit as i64);
        values.push(Value::Integer(limit));
        let conn = self.lock()?;
        let mut statement = conn
            .prepare(&format!(
                "SELECT {} FROM bounda_dead_letters {clause} ORDER BY seq LIMIT ?{}",
                rows::LETTER_COLUMNS,
                values.len()
            ))
            .map_err(sql("cannot prepare a dead-letter read"))?;
        statement
            .query_map(params_from_iter(values), rows::dead_letter)
            .and_then(Iterator::collect)
            .map_err(sql("cannot read dead letters"))
    }

    async fn count_dead_letters(&self, filter: &LetterFilter) -> Result<u64, StoreError> {
        let (clause, values) = letter_filter(filter);
        let conn = self.lock()?;
        conn.query_row(
            &format!("SELECT COUNT(*) FROM bounda_dead_letters {clause}"),
            params_from_iter(values),
            |row| row.get(0),
        )
        .map_err(sql("cannot count dead letters"))
    }

    async fn dead_letter(&self, id: &str) -> Result<Option<DeadLetter>, StoreError> {
        let conn = self.lock()?;
        conn.prepare_cached(&format!(
            "SELECT {} FROM bounda_dead_letters WHERE id = ?1",
            rows::LETTER_COLUMNS
        ))
        .and_then(|mut s| s.query_row([id], rows::dead_letter).optional())
        .map_err(sql("cannot read a dead letter"))
    }

    async fn retry_requests(&self, letter: &str) -> Result<Vec<RetryRequest>, StoreError> {
        let conn = self.lock()?;
        crate::retry_requests::of_letter(&conn, letter)
    }

    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::core()
            .named("the SQLite store")
            .with_ingress(self)
            .with_read_models(self)
            .with_copies(self)
            .with_instances(self)
            .with_limits(self)
            .with_pauses(self)
    }
}

#[async_trait]
impl IngressStore for SqliteStore {
    async fn ingress_answer(&self, key: &str) -> Result<Option<IngressRecord>, StoreError> {
        let conn = self.lock()?;
        crate::ingress::answer(&conn, key)
    }
    async fn ingress_page(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<IngressRecord>, StoreError> {
        let conn = self.lock()?;
        crate::ingress::page(&conn, after, limit)
    }
}

#[async_trait]
impl CopyStore for SqliteStore {
    async fn inbox_page(
        &self,
        after: Option<(&str, &str)>,
        limit: usize,
    ) -> Result<Vec<InboxEntry>, StoreError> {
        let conn = self.lock()?;
        crate::import::inbox_page(&conn, after, limit)
    }
    async fn import(&self, records: &Import) -> Result<(), StoreError> {
        let mut conn = self.lock()?;
        crate::import::import(&mut conn, records)
    }
    async fn copied(&self) -> Result<Option<CopyMark>, StoreError> {
        let conn = self.lock()?;
        crate::import::mark(&conn)
    }
}

#[async_trait]
impl InstanceIndex for SqliteStore {
    async fn instances(&self, query: &InstanceQuery) -> Result<Vec<InstanceRow>, StoreError> {
        let conn = self.lock()?;
        crate::instances::list(&conn, query)
    }
    async fn count_instances(&self, query: &InstanceQuery) -> Result<u64, StoreError> {
        let conn = self.lock()?;
        crate::instances::count(&conn, query)
    }
    async fn instance_counts(&self, now: Instant) -> Result<Vec<InstanceCounts>, StoreError> {
        let conn = self.lock()?;
        crate::instances::counts(&conn, now)
    }
}

#[async_trait]
impl LimitStore for SqliteStore {
    async fn take_permits(
        &self,
        key: &LimitKey,
        ends: Instant,
        per: Duration,
        cap: u32,
        wanted: u32,
    ) -> Result<u32, StoreError> {
        let conn = self.lock()?;
        crate::limits::take(&conn, key, ends, per, cap, wanted)
    }
    async fn return_permits(
        &self,
        key: &LimitKey,
        ends: Instant,
        count: u32,
    ) -> Result<(), StoreError> {
        let conn = self.lock()?;
        crate::limits::give_back(&conn, key, ends, count)
    }
    async fn drop_limit(&self, key: &LimitKey) -> Result<(), StoreError> {
        let conn = self.lock()?;
        crate::limits::drop(&conn, key)
    }
    async fn limit_windows(&self, now: Instant) -> Result<Vec<LimitWindow>, StoreError> {
        let conn = self.lock()?;
        crate::limits::windows(&conn, now)
    }
    async fn held_by_limits(&self, now: Instant) -> Result<Vec<(LimitKey, u64)>, StoreError> {
        let conn = self.lock()?;
        crate::limits::held(&conn, now)
    }
}

#[async_trait]
impl PauseStore for SqliteStore {
    async fn pause(&self, pause: &Pause) -> Result<bool, StoreError> {
        let conn = self.lock()?;
        conn.prepare_cached(
            "INSERT INTO bounda_pauses (kind, name, instance, since, by, reason)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING",
        )
        .and_then(|mut s| {
            s.execute(params![
                pause.target.kind(),
                pause.target.name(),
                pause.target.instance(),
                pause.since.to_string(),
                pause.by,
                pause.reason,
            ])
        })
        .map(|changed| changed > 0)
        .map_err(sql("cannot pause"))
    }

    async fn resume(&self, target: &PauseTarget) -> Result<bool, StoreError> {
        let conn = self.lock()?;
        conn.prepare_cached(
            "DELETE FROM bounda_pauses WHERE kind = ?1 AND name = ?2 AND instance = ?3",
        )
        .and_then(|mut s| s.execute(params![target.kind(), target.name(), target.instance()]))
        .map(|changed| changed > 0)
        .map_err(sql("cannot resume"))
    }

    async fn pauses(&self) -> Result<Vec<Pause>, StoreError> {
        let conn = self.lock()?;
        let mut statement = conn
            .prepare_cached(
                "SELECT kind, name, instance, since, by, reason FROM bounda_pauses
                 ORDER BY kind, name, instance",
            )
            .map_err(sql("cannot prepare a read of the pauses"))?;
        let read = statement
            .query_map([], |row| {
                let target: (String, String, String) = (row.get(0)?, row.get(1)?, row.get(2)?);
                Ok((target, rows::instant(row, 3)?, row.get(4)?, row.get(5)?))
            })
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(sql("cannot read the pauses"))?;
        read.into_iter()
            .map(|((kind, name, instance), since, by, reason)| {
                let target = PauseTarget::from_parts(&kind, &name, &instance).ok_or_else(|| {
                    StoreError::new(format!("a pause of kind `{kind}` does not read"))
                })?;
                Ok(Pause {
                    target,
                    since,
                    by,
                    reason,
                })
            })
            .collect()
    }
}

/// The `WHERE` clause of a letter filter, with its numbered parameters.
fn letter_filter(filter: &LetterFilter) -> (String, Vec<Value>) {
    let mut conditions = Vec::new();
    let mut values = Vec::new();
    // `{}` in `condition` is the value's parameter.
    let mut add = |condition: &str, value: String| {
        values.push(Value::Text(value));
        conditions.push(condition.replace("{}", &format!("?{}", values.len())));
    };
    if let Some(kind) = filter.kind {
        add("kind = {}", kind.as_str().to_owned());
    }
    if let Some(handler) = &filter.handler {
        add("handler = {}", handler.clone());
    }
    if let Some(status) = filter.status {
        add("status = {}", rows::status_text(status).to_owned());
    }
    if let Some(text) = &filter.error_contains {
        add("instr(error_message, {}) > 0", text.clone());
    }
    // Moments are stored as fixed-width UTC text, which orders as time does.
    if let Some(from) = filter.failed_from {
        add("last_failed_at >= {}", from.to_string());
    }
    if let Some(until) = filter.failed_until {
        add("last_failed_at < {}", until.to_string());
    }
    let clause = if conditions.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", conditions.join(" AND "))
    };
    (clause, values)
}
