//! `impl Store for PostgresStore`: reads, claims, commits.
//!
//! Claims scale past one machine: due scheduler entries are claimed in batches with
//! `FOR UPDATE SKIP LOCKED`, so workers take different entries without waiting on each other,
//! and every claim is fenced by its id, so a worker whose lease lapsed cannot settle what another
//! took over.

use bounda::store::{
    Bookmark, Capabilities, CommitError, Committed, CopyMark, CopyStore, Cursor, DeadLetter,
    Import, InOrder, InboxClaim, InboxEntry, InboxFailure, InboxPair, IngressRecord, IngressStore,
    InstanceCounts, InstanceIndex, InstanceQuery, InstanceRow, LetterFilter, LimitKey, LimitStore,
    LimitWindow, Listener, Pause, PauseStore, PauseTarget, RetryOutcome, RetryRequest,
    ScheduledEntry, Snapshot, Store, StoreError, StreamTail, WakeUps, WriteSet, async_trait,
    protocol,
};
use bounda::{Duration, Instant, RecordedEvent, millis};
use chrono::{DateTime, Utc};

use crate::claims::{PAUSED, claim, claim_batch, claim_one, free_claim};
use crate::limits::{self, LIMITED};
use crate::rows::{self, bigint, limit};
use crate::sql::{Conn, Params, execute, failed, query, query_one, query_opt, transaction};
use crate::{PostgresStore, place, statements, wave};

#[async_trait]
impl Store for PostgresStore {
    async fn read_stream(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        // Versions start at 1.
        self.read_stream_after(aggregate_type, aggregate_id, 0)
            .await
    }

    async fn read_stream_after(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
        version: u64,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        let rows = self
            .stream_rows(
                "cannot read a stream",
                &format!(
                    "SELECT {} FROM {{t}}events
                 WHERE aggregate_type = $1 AND aggregate_id = $2 AND version > $3
                 ORDER BY version",
                    rows::EVENT_COLUMNS
                ),
                &[
                    &aggregate_type,
                    &aggregate_id,
                    &bigint("a version", version)?,
                ],
            )
            .await?;
        rows.iter().map(rows::event).collect()
    }

    async fn read_tails(
        &self,
        aggregate_type: &str,
        ids: &[String],
    ) -> Result<Vec<StreamTail>, StoreError> {
        // One statement, so each stream's events follow the snapshot it read with no gap. A
        // row per event after its stream's snapshot, or one with no event for a stream that
        // has none; `n` keeps the streams in the order asked. Each stream's snapshot and events
        // are looked up through their indexes, a stream at a time: `OFFSET 0` keeps the
        // planner from joining whole tables instead, as it would on a new table's statistics.
        let events: Vec<String> = rows::EVENT_COLUMNS
            .split(", ")
            .map(|column| format!("e.{column}"))
            .collect();
        let rows = self
            .stream_rows(
                "cannot read streams",
                &format!(
                    "SELECT {}, w.n, s.version, s.state
                     FROM unnest($2::text[]) WITH ORDINALITY AS w(id, n)
                     LEFT JOIN LATERAL (
                         SELECT version, state FROM {{t}}snapshots
                         WHERE aggregate_type = $1 AND aggregate_id = w.id OFFSET 0) s ON true
                     LEFT JOIN LATERAL (
                         SELECT * FROM {{t}}events x
                         WHERE x.aggregate_type = $1 AND x.aggregate_id = w.id
                             AND x.version > coalesce(s.version, 0)
                         ORDER BY x.version OFFSET 0) e ON true
                     ORDER BY w.n, e.version",
                    events.join(", ")
                ),
                &[&aggregate_type, &ids],
            )
            .await?;
        rows::tails(&rows, aggregate_type, ids)
    }

    async fn stream_ids(
        &self,
        aggregate_type: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        // Each stream's first event, through the index on (type, id, version); paged in the
        // database's own order of ids, which the comparison and the sort share.
        let rows = self
            .rows(
                "cannot read stream ids",
                "SELECT aggregate_id FROM {t}events
                 WHERE aggregate_type = $1 AND aggregate_id > $2 AND version = 1
                 ORDER BY aggregate_id LIMIT $3",
                &[&aggregate_type, &after.unwrap_or(""), &rows::limit(limit)],
            )
            .await?;
        rows.iter().map(|row| rows::get(row, 0)).collect()
    }

    async fn snapshot(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
    ) -> Result<Option<Snapshot>, StoreError> {
        let row = self
            .row(
                "cannot read a snapshot",
                "SELECT version, state FROM {t}snapshots
                 WHERE aggregate_type = $1 AND aggregate_id = $2",
                &[&aggregate_type, &aggregate_id],
            )
            .await?;
        row.map(|row| rows::snapshot(&row, aggregate_type, aggregate_id))
            .transpose()
    }

    async fn read_all(&self, after: u64, limit: usize) -> Result<Vec<RecordedEvent>, StoreError> {
        let rows = self
            .placed_rows(
                "cannot read events",
                &format!(
                    "SELECT {} FROM {{t}}events WHERE position > $1 ORDER BY position LIMIT $2",
                    rows::EVENT_COLUMNS
                ),
                &[&bigint("a position", after)?, &rows::limit(limit)],
            )
            .await?;
        rows.iter().map(rows::event).collect()
    }

    async fn read_event(&self, id: &str) -> Result<Option<RecordedEvent>, StoreError> {
        let row = self
            .stream_rows(
                "cannot read an event",
                &format!(
                    "SELECT {} FROM {{t}}events WHERE id = $1",
                    rows::EVENT_COLUMNS
                ),
                &[&id],
            )
            .await?;
        row.first().map(rows::event).transpose()
    }

    async fn head(&self) -> Result<u64, StoreError> {
        let client = self.client().await?;
        place::before(&client, &self.names, statements::head(&client, &self.names)).await
    }

    async fn commit(&self, writes: &WriteSet) -> Result<Committed, CommitError> {
        if let Some(committed) = self
            .commit_pipelined(std::slice::from_ref(writes), Way::Pipelined, Placing::Wait)
            .await?
        {
            return committed.into_iter().next().unwrap_or_else(|| {
                Err(StoreError::new("a pipelined commit answered no write set").into())
            });
        }
        let mut client = self.client().await?;
        let tx = transaction(&mut client).await?;
        // On an error, dropping the transaction rolls it back before the connection is used
        // again.
        let committed = statements::apply(&tx, &self.names, writes).await?;
        tx.commit().await.map_err(failed("cannot commit"))?;
        let mut results = [Ok(committed)];
        self.committed(
            &client,
            std::slice::from_ref(writes),
            &mut results,
            Placing::Wait,
        )
        .await;
        let [result] = results;
        result
    }

    /// One transaction whose statements are sent without waiting for each other's answers: the
    /// wave's write sets in a statement per kind of write, or should that not go as foreseen,
    /// a few statements per write set; should one of those not answer as foreseen either, a
    /// transaction per 50 write sets, a savepoint each (group commit), each write set failing
    /// alone.
    async fn commit_many(&self, writes: &[WriteSet]) -> Vec<Result<Committed, CommitError>> {
        let ways: &[Way] = match bounda::store::protocol::wave::worth_a_wave(writes) {
            false => &[Way::Pipelined],
            true => &[Way::Wave, Way::Pipelined],
        };
        for way in ways {
            match self
                .commit_pipelined(writes, *way, Placing::UnlessBusy)
                .await
            {
                Ok(Some(results)) => return results,
                Err(error) => return each_failed(writes, &error).collect(),
                Ok(None) => {}
            }
        }
        let mut results = Vec::with_capacity(writes.len());
        for chunk in writes.chunks(SAVEPOINTS) {
            match self.commit_in_savepoints(chunk).await {
                Ok(committed) => results.extend(committed),
                Err(error) => results.extend(each_failed(chunk, &error)),
            }
        }
        results
    }

    async fn checkpoint(&self, subscriber: &str) -> Result<Option<u64>, StoreError> {
        let row = self
            .row(
                "cannot read a checkpoint",
                "SELECT position FROM {t}checkpoints WHERE subscriber = $1",
                &[&subscriber],
            )
            .await?;
        row.map(|row| rows::unsigned(&row, 0)).transpose()
    }

    async fn checkpoints(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let rows = self
            .rows(
                "cannot read checkpoints",
                "SELECT subscriber, position FROM {t}checkpoints ORDER BY subscriber",
                &[],
            )
            .await?;
        rows.iter()
            .map(|row| Ok((rows::get(row, 0)?, rows::unsigned(row, 1)?)))
            .collect()
    }

    async fn move_checkpoint(
        &self,
        subscriber: &str,
        from: Option<u64>,
        to: u64,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let to = bigint("a checkpoint position", to)?;
        let changed = match from {
            None => {
                execute(
                    &client,
                    &self.names.sql(
                        "INSERT INTO {t}checkpoints (subscriber, position) VALUES ($1, $2)
                         ON CONFLICT (subscriber) DO NOTHING",
                    ),
                    &[&subscriber, &to],
                )
                .await
            }
            Some(from) => {
                execute(
                    &client,
                    &self.names.sql(
                        "UPDATE {t}checkpoints SET position = $3
                         WHERE subscriber = $1 AND position = $2",
                    ),
                    &[&subscriber, &bigint("a checkpoint position", from)?, &to],
                )
                .await
            }
        }
        .map_err(failed("cannot move a checkpoint"))?;
        Ok(changed == 1)
    }

    async fn cursor(&self, subscriber: &str) -> Result<Option<Cursor>, StoreError> {
        let client = self.client().await?;
        crate::bookmarks::cursor(&client, &self.names, subscriber).await
    }

    async fn pass_checkpoint(
        &self,
        subscriber: &str,
        from: u64,
        to: u64,
        bookmarks: &[Bookmark],
    ) -> Result<bool, StoreError> {
        // Most passes leave none: the checkpoint's move alone, one round trip.
        if bookmarks.is_empty() {
            let changed = self
                .changed(
                    "cannot move a checkpoint",
                    crate::bookmarks::PASS,
                    &[
                        &subscriber,
                        &bigint("a checkpoint position", from)?,
                        &bigint("a checkpoint position", to)?,
                    ],
                )
                .await?;
            return Ok(changed == 1);
        }
        let mut client = self.client().await?;
        crate::bookmarks::pass(&mut client, &self.names, subscriber, from, to, bookmarks).await
    }

    async fn return_to_bookmarks(
        &self,
        subscriber: &str,
        holders: &[(&str, &str)],
    ) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        crate::bookmarks::return_to(&mut client, &self.names, subscriber, holders).await
    }

    async fn claim_inbox(
        &self,
        handler: &str,
        event_id: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<InboxClaim, StoreError> {
        let client = self.client().await?;
        claim_one(
            &client,
            &self.names,
            (handler, event_id),
            claim_id,
            now,
            lease,
        )
        .await
    }

    /// In two round trips: where the pairs stand, then the claim of those taken.
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
        let client = self.client().await?;
        claim_batch(&client, &self.names, pairs, claim_id, now, lease, order).await
    }

    async fn renew_inbox(
        &self,
        handler: &str,
        event_id: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        let changed = self
            .changed(
                "cannot renew an inbox claim",
                "UPDATE {t}inbox SET claimed_at = $4, lease_until = $5
                 WHERE handler = $1 AND event_id = $2 AND claim_id = $3 AND status = 'pending'",
                &[
                    &handler,
                    &event_id,
                    &claim_id,
                    &now.to_chrono(),
                    &(now + lease).to_chrono(),
                ],
            )
            .await?;
        Ok(changed == 1)
    }

    async fn inbox_failures(
        &self,
        handler: &str,
        limit: usize,
    ) -> Result<Vec<InboxFailure>, StoreError> {
        let rows = self
            .rows(
                "cannot read inbox failures",
                "SELECT event_id, attempts, last_error, retry_at FROM {t}inbox
                 WHERE handler = $1 AND status = 'failed' AND retry_at IS NOT NULL
                 ORDER BY retry_at, event_id LIMIT $2",
                &[&handler, &rows::limit(limit)],
            )
            .await?;
        rows.iter()
            .map(|row| {
                Ok(InboxFailure {
                    handler: handler.to_owned(),
                    event_id: rows::get(row, 0)?,
                    attempts: rows::count(row, 1)?,
                    last_error: rows::get(row, 2)?,
                    retry_at: rows::instant(row, 3)?,
                })
            })
            .collect()
    }

    async fn claim_due(
        &self,
        claim_id: &str,
        now: Instant,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        let client = self.client().await?;
        claim(&client, &self.names, claim_id, now, lease, limit).await
    }

    async fn renew_scheduled(
        &self,
        dedupe_key: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        let changed = self
            .changed(
                "cannot renew a scheduler claim",
                "UPDATE {t}scheduled_commands SET claimed_at = $3, lease_until = $4
                 WHERE dedupe_key = $1 AND claim_id = $2",
                &[
                    &dedupe_key,
                    &claim_id,
                    &now.to_chrono(),
                    &(now + lease).to_chrono(),
                ],
            )
            .await?;
        Ok(changed == 1)
    }

    async fn next_due_at(
        &self,
        now: Instant,
        lease: Duration,
    ) -> Result<Option<Instant>, StoreError> {
        let row = self
            .one(
                "cannot read the next due moment",
                &format!(
                    "SELECT free.at,
                         (SELECT min(lease_until) FROM {{t}}scheduled_commands
                          WHERE execute_at <= coalesce(free.at, 'infinity')
                              AND claimed_at IS NOT NULL),
                         (SELECT min(claimed_at) FROM {{t}}scheduled_commands
                          WHERE execute_at <= coalesce(free.at, 'infinity')
                              AND claimed_at IS NOT NULL AND lease_until IS NULL),
                         (SELECT min(ends) FROM {{t}}limits WHERE ends > $1 AND taken >= cap)
                     FROM (SELECT (SELECT execute_at FROM {{t}}scheduled_commands s
                          WHERE claimed_at IS NULL AND NOT {PAUSED} AND NOT {LIMITED}
                          ORDER BY execute_at LIMIT 1) AS at) AS free"
                ),
                &[&now.to_chrono()],
            )
            .await?;
        // Claims are read along the due moments, up to the first free entry: an entry was due
        // when it was claimed (one moved later while claimed is due at the later of its moment
        // and its claim's end, so past the first free one it cannot come sooner), and no index
        // of the claim's columns is kept (see migration 14).
        let free = rows::optional_instant(&row, 0)?;
        // A claimed entry is due again 1 ms after its lease ends (spec 176); one claimed without
        // its end, `lease` after it was taken.
        let ending = rows::optional_instant(&row, 1)?.map(|until| until + millis(1));
        let unended = rows::optional_instant(&row, 2)?.map(|at| at + lease + millis(1));
        // A used-up limit's entries are due when its window ends.
        let window = rows::optional_instant(&row, 3)?;
        Ok(free
            .into_iter()
            .chain(ending)
            .chain(unended)
            .chain(window)
            .min())
    }

    async fn next_scheduled_retry(&self) -> Result<Option<Instant>, StoreError> {
        let row = self
            .one(
                "cannot read scheduled retries",
                &format!(
                    "SELECT min(execute_at) FROM {{t}}scheduled_commands s
                     WHERE attempts > 0 AND claimed_at IS NULL AND NOT {PAUSED}"
                ),
                &[],
            )
            .await?;
        rows::optional_instant(&row, 0)
    }

    async fn scheduled_page(
        &self,
        command_type: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        let rows = self
            .rows(
                "cannot read a scheduler page",
                &format!(
                    "SELECT {} FROM {{t}}scheduled_commands s
                     WHERE command_type = $1 AND dedupe_key > $2 ORDER BY dedupe_key LIMIT $3",
                    rows::SCHEDULED_COLUMNS
                ),
                &[&command_type, &after.unwrap_or(""), &rows::limit(limit)],
            )
            .await?;
        rows.iter().map(rows::scheduled).collect()
    }

    async fn scheduled_types(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let rows = self
            .rows(
                "cannot read scheduler types",
                "SELECT command_type, count(*) FROM {t}scheduled_commands
                 GROUP BY command_type ORDER BY command_type",
                &[],
            )
            .await?;
        rows.iter()
            .map(|row| Ok((rows::get(row, 0)?, rows::unsigned(row, 1)?)))
            .collect()
    }

    async fn scheduled_of_type(
        &self,
        command_type: &str,
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        let rows = self
            .rows(
                "cannot read scheduler entries",
                &format!(
                    "SELECT {} FROM {{t}}scheduled_commands s WHERE command_type = $1
                 ORDER BY execute_at, dedupe_key",
                    rows::SCHEDULED_COLUMNS
                ),
                &[&command_type],
            )
            .await?;
        rows.iter().map(rows::scheduled).collect()
    }

    /// Both through the due-moment index.
    async fn scheduled_until(
        &self,
        command_type: &str,
        until: Instant,
        limit: usize,
    ) -> Result<(Vec<ScheduledEntry>, bool), StoreError> {
        let rows = self
            .rows(
                "cannot read scheduler entries",
                &format!(
                    "SELECT {} FROM {{t}}scheduled_commands s
                     WHERE execute_at <= $2 AND command_type = $1
                     ORDER BY execute_at, dedupe_key LIMIT $3",
                    rows::SCHEDULED_COLUMNS
                ),
                &[&command_type, &until.to_chrono(), &rows::limit(limit)],
            )
            .await?;
        let entries = rows
            .iter()
            .map(rows::scheduled)
            .collect::<Result<Vec<_>, _>>()?;
        let later = self
            .row(
                "cannot look for later entries",
                "SELECT 1 FROM {t}scheduled_commands
                 WHERE execute_at > $2 AND command_type = $1
                 ORDER BY execute_at LIMIT 1",
                &[&command_type, &until.to_chrono()],
            )
            .await?
            .is_some();
        Ok((entries, later))
    }

    /// None: the due moment is a typed column, so every entry's reads.
    async fn unclaimable_entries(&self, _: usize) -> Result<Vec<ScheduledEntry>, StoreError> {
        Ok(Vec::new())
    }

    async fn scheduled(&self, dedupe_key: &str) -> Result<Option<ScheduledEntry>, StoreError> {
        let row = self
            .row(
                "cannot read a scheduler entry",
                &format!(
                    "SELECT {} FROM {{t}}scheduled_commands s WHERE dedupe_key = $1",
                    rows::SCHEDULED_COLUMNS
                ),
                &[&dedupe_key],
            )
            .await?;
        row.as_ref().map(rows::scheduled).transpose()
    }

    async fn scheduled_many(
        &self,
        dedupe_keys: &[String],
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        let rows = self
            .rows(
                "cannot read scheduler entries",
                &format!(
                    // Each key looked up in the primary key, whatever the table's size when
                    // the statement was planned: `= ANY($1)`, or a join the planner may hash,
                    // scans the whole table under a plan made while it was small.
                    "SELECT {} FROM unnest($1::text[]) AS k(key)
                     CROSS JOIN LATERAL (SELECT * FROM {{t}}scheduled_commands s
                         WHERE s.dedupe_key = k.key OFFSET 0) s",
                    rows::SCHEDULED_COLUMNS
                ),
                &[&dedupe_keys],
            )
            .await?;
        rows.iter().map(rows::scheduled).collect()
    }

    async fn claim_letter(
        &self,
        id: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        let changed = self
            .changed(
                "cannot claim a dead letter",
                concat!(
                    "UPDATE {t}dead_letters SET claim_id = $2, claimed_at = $3, lease_until = $5
                     WHERE id = $1 AND status = 'failed' AND ",
                    free_claim!("", "$3", "$4")
                ),
                &[
                    &id,
                    &claim_id,
                    &now.to_chrono(),
                    &(now - lease).to_chrono(),
                    &(now + lease).to_chrono(),
                ],
            )
            .await?;
        Ok(changed == 1)
    }

    async fn renew_letter(
        &self,
        id: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        let changed = self
            .changed(
                "cannot renew a dead letter's claim",
                "UPDATE {t}dead_letters SET claimed_at = $3, lease_until = $4
                 WHERE id = $1 AND claim_id = $2 AND status = 'failed'",
                &[&id, &claim_id, &now.to_chrono(), &(now + lease).to_chrono()],
            )
            .await?;
        Ok(changed == 1)
    }

    async fn release_letter(&self, id: &str, claim_id: &str) -> Result<(), StoreError> {
        self.changed(
            "cannot release a dead letter",
            "UPDATE {t}dead_letters SET claim_id = NULL, claimed_at = NULL, lease_until = NULL
                 WHERE id = $1 AND claim_id = $2",
            &[&id, &claim_id],
        )
        .await?;
        Ok(())
    }

    fn capabilities(&self) -> Capabilities<'_> {
        let capabilities = Capabilities::core()
            .named("the PostgreSQL store")
            .with_ingress(self)
            .with_read_models(self)
            .with_copies(self)
            .with_instances(self)
            .with_limits(self)
            .with_pauses(self)
            .with_pipelined_batches();
        // A pooler in transaction mode drops a session's `LISTEN` with its transaction: only a
        // store with a listening address hears other processes' writes.
        match self.listening {
            Some(_) => capabilities.with_wake_ups(self),
            None => capabilities,
        }
    }

    async fn dead_letters(&self, filter: &LetterFilter) -> Result<Vec<DeadLetter>, StoreError> {
        let client = self.client().await?;
        let params = LetterParams::of(filter);
        let limit = filter.limit.map(limit);
        let mut values = params.values().to_vec();
        values.push(&limit);
        let rows = query(
            &client,
            &self.names.sql(&format!(
                "SELECT {} FROM {{t}}dead_letters WHERE {LETTER_FILTER} ORDER BY seq LIMIT $7",
                rows::LETTER_COLUMNS
            )),
            &values,
        )
        .await
        .map_err(failed("cannot read dead letters"))?;
        rows.iter().map(rows::dead_letter).collect()
    }

    async fn count_dead_letters(&self, filter: &LetterFilter) -> Result<u64, StoreError> {
        let client = self.client().await?;
        let params = LetterParams::of(filter);
        let row = query_one(
            &client,
            &self.names.sql(&format!(
                "SELECT count(*) FROM {{t}}dead_letters WHERE {LETTER_FILTER}"
            )),
            &params.values(),
        )
        .await
        .map_err(failed("cannot count dead letters"))?;
        rows::unsigned(&row, 0)
    }

    async fn dead_letter(&self, id: &str) -> Result<Option<DeadLetter>, StoreError> {
        let row = self
            .row(
                "cannot read a dead letter",
                &format!(
                    "SELECT {} FROM {{t}}dead_letters WHERE id = $1",
                    rows::LETTER_COLUMNS
                ),
                &[&id],
            )
            .await?;
        row.as_ref().map(rows::dead_letter).transpose()
    }

    async fn retry_requests(&self, letter: &str) -> Result<Vec<RetryRequest>, StoreError> {
        let client = self.client().await?;
        let read = query(
            &client,
            &self.names.sql(
                "SELECT id, letter, by_whom, requested_at, finished_at, outcome
                 FROM {t}retry_requests WHERE letter = $1 ORDER BY requested_at, id",
            ),
            &[&letter],
        )
        .await
        .map_err(failed("cannot read the retries requested of a letter"))?;
        read.iter()
            .map(|row| {
                Ok(RetryRequest {
                    id: rows::get(row, 0)?,
                    letter: rows::get(row, 1)?,
                    by: rows::get(row, 2)?,
                    requested_at: rows::instant(row, 3)?,
                    finished_at: rows::optional_instant(row, 4)?,
                    outcome: rows::get::<Option<String>>(row, 5)?
                        .map(|text| RetryOutcome::from_text(&text)),
                })
            })
            .collect()
    }
}

#[async_trait]
impl IngressStore for PostgresStore {
    async fn ingress_answer(&self, key: &str) -> Result<Option<IngressRecord>, StoreError> {
        Ok(self.ingress_records("WHERE key = $1", &[&key]).await?.pop())
    }
    async fn ingress_page(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<IngressRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.ingress_records(
            "WHERE key > $1 ORDER BY key LIMIT $2",
            &[&after.unwrap_or(""), &limit],
        )
        .await
    }
}

#[async_trait]
impl WakeUps for PostgresStore {
    /// A connection of its own, listening on these tables' channel.
    async fn listen(&self) -> Result<Box<dyn Listener>, StoreError> {
        Ok(Box::new(self.wakeups().await?))
    }
}

#[async_trait]
impl CopyStore for PostgresStore {
    async fn inbox_page(
        &self,
        after: Option<(&str, &str)>,
        limit: usize,
    ) -> Result<Vec<InboxEntry>, StoreError> {
        let (handler, event_id) = after.unwrap_or(("", ""));
        let rows = self
            .rows(
                "cannot read the inbox",
                "SELECT handler, event_id, status, attempts, last_error, retry_at, first_failed_at
                 FROM {t}inbox WHERE (handler, event_id) > ($1, $2)
                 ORDER BY handler, event_id LIMIT $3",
                &[&handler, &event_id, &rows::limit(limit)],
            )
            .await?;
        rows.iter().map(rows::inbox_entry).collect()
    }
    async fn import(&self, records: &Import) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = transaction(&mut client).await?;
        if !records.events.is_empty() {
            statements::lock_head(&tx, &self.names).await?;
        }
        crate::import::write(&tx, &self.names, records).await?;
        tx.commit()
            .await
            .map_err(failed("cannot commit a copy's write"))
    }
    async fn copied(&self) -> Result<Option<CopyMark>, StoreError> {
        let client = self.client().await?;
        crate::import::mark(&client, &self.names).await
    }
}

#[async_trait]
impl InstanceIndex for PostgresStore {
    async fn instances(&self, query: &InstanceQuery) -> Result<Vec<InstanceRow>, StoreError> {
        let client = self.client().await?;
        crate::instances::list(&client, &self.names, query).await
    }
    async fn count_instances(&self, query: &InstanceQuery) -> Result<u64, StoreError> {
        let client = self.client().await?;
        crate::instances::count(&client, &self.names, query).await
    }
    async fn instance_counts(&self, now: Instant) -> Result<Vec<InstanceCounts>, StoreError> {
        let client = self.client().await?;
        crate::instances::counts(&client, &self.names, now).await
    }
}

#[async_trait]
impl LimitStore for PostgresStore {
    async fn take_permits(
        &self,
        key: &LimitKey,
        ends: Instant,
        per: Duration,
        cap: u32,
        wanted: u32,
    ) -> Result<u32, StoreError> {
        let per_ms = i64::try_from(per.as_millis()).unwrap_or(i64::MAX);
        let row = self
            .one(
                "cannot take a limit's permits",
                limits::TAKE,
                &[
                    &key.kind.as_str(),
                    &key.name,
                    &ends.to_chrono(),
                    &limits::count(cap),
                    &limits::count(wanted),
                    &per_ms,
                    &(ends + per).to_chrono(),
                ],
            )
            .await?;
        let granted: i32 = rows::get(&row, 0)?;
        Ok(u32::try_from(granted).unwrap_or(0))
    }
    async fn return_permits(
        &self,
        key: &LimitKey,
        ends: Instant,
        count: u32,
    ) -> Result<(), StoreError> {
        self.changed(
            "cannot give back a limit's permits",
            limits::GIVE_BACK,
            &[
                &key.kind.as_str(),
                &key.name,
                &ends.to_chrono(),
                &limits::count(count),
            ],
        )
        .await
        .map(|_| ())
    }
    async fn drop_limit(&self, key: &LimitKey) -> Result<(), StoreError> {
        self.changed(
            "cannot forget a limit's window",
            limits::DROP,
            &[&key.kind.as_str(), &key.name],
        )
        .await
        .map(|_| ())
    }
    async fn limit_windows(&self, now: Instant) -> Result<Vec<LimitWindow>, StoreError> {
        let rows = self
            .rows(
                "cannot read the limits",
                limits::WINDOWS,
                &[&now.to_chrono()],
            )
            .await?;
        rows.iter().map(limits::window).collect()
    }
    async fn held_by_limits(&self, now: Instant) -> Result<Vec<(LimitKey, u64)>, StoreError> {
        let rows = self
            .rows(
                "cannot read what the limits hold",
                limits::HELD,
                &[&now.to_chrono()],
            )
            .await?;
        rows.iter()
            .map(|row| {
                let count: i64 = rows::get(row, 2)?;
                Ok((limits::key(row)?, u64::try_from(count).unwrap_or(0)))
            })
            .collect()
    }
}

#[async_trait]
impl PauseStore for PostgresStore {
    async fn pause(&self, pause: &Pause) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let changed = execute(
            &client,
            &self.names.sql(
                "INSERT INTO {t}pauses (kind, name, instance, since, by_whom, reason)
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
            ),
            &[
                &pause.target.kind(),
                &pause.target.name(),
                &pause.target.instance(),
                &pause.since.to_chrono(),
                &pause.by,
                &pause.reason,
            ],
        )
        .await
        .map_err(failed("cannot pause"))?;
        Ok(changed > 0)
    }

    async fn resume(&self, target: &PauseTarget) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let changed = execute(
            &client,
            &self
                .names
                .sql("DELETE FROM {t}pauses WHERE kind = $1 AND name = $2 AND instance = $3"),
            &[&target.kind(), &target.name(), &target.instance()],
        )
        .await
        .map_err(failed("cannot resume"))?;
        Ok(changed > 0)
    }

    async fn pauses(&self) -> Result<Vec<Pause>, StoreError> {
        let client = self.client().await?;
        let read = query(
            &client,
            &self.names.sql(
                "SELECT kind, name, instance, since, by_whom, reason FROM {t}pauses
                 ORDER BY kind, name, instance",
            ),
            &[],
        )
        .await
        .map_err(failed("cannot read the pauses"))?;
        read.iter()
            .map(|row| {
                let (kind, name, instance): (String, String, String) =
                    (rows::get(row, 0)?, rows::get(row, 1)?, rows::get(row, 2)?);
                let target = PauseTarget::from_parts(&kind, &name, &instance).ok_or_else(|| {
                    StoreError::new(format!("a pause of kind `{kind}` does not read"))
                })?;
                Ok(Pause {
                    target,
                    since: rows::instant(row, 3)?,
                    by: rows::get(row, 4)?,
                    reason: rows::get(row, 5)?,
                })
            })
            .collect()
    }
}

impl PostgresStore {
    /// The keys of arrived commands `filter` selects (`WHERE …`, with `params`).
    async fn ingress_records(
        &self,
        filter: &str,
        params: Params<'_>,
    ) -> Result<Vec<IngressRecord>, StoreError> {
        let template =
            format!("SELECT key, fingerprint, answer, decided_at FROM {{t}}ingress {filter}");
        self.rows(
            "cannot read the keys of arrived commands",
            &template,
            params,
        )
        .await?
        .iter()
        .map(|row| {
            Ok(IngressRecord {
                key: rows::get(row, 0)?,
                fingerprint: rows::get(row, 1)?,
                answer: rows::get(row, 2)?,
                decided_at: rows::instant(row, 3)?,
            })
        })
        .collect()
    }

    /// The rows `template` (`{t}` naming the tables) answers on a pooled connection; `what`
    /// says what was being done when it fails.
    async fn rows(
        &self,
        what: &str,
        template: &str,
        params: Params<'_>,
    ) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        let client = self.client().await?;
        query(&client, &self.names.sql(template), params)
            .await
            .map_err(failed(what))
    }

    /// The rows `template` answers, reading placed events only (`position > …`), with what is
    /// waiting placed first, in the same round trip: an event whose writer died between its
    /// commit and its placing is placed by the next reader.
    async fn placed_rows(
        &self,
        what: &str,
        template: &str,
        params: Params<'_>,
    ) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        let client = self.client().await?;
        let read = async {
            query(&client, &self.names.sql(template), params)
                .await
                .map_err(failed(what))
        };
        place::before(&client, &self.names, read).await
    }

    /// The events `template` answers (their position first) by stream or id: one still at its
    /// placeholder, committed but not placed yet, is placed and the read made again, so every
    /// event read has its position.
    async fn stream_rows(
        &self,
        what: &str,
        template: &str,
        params: Params<'_>,
    ) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        let client = self.client().await?;
        let statement = self.names.sql(template);
        for _ in 0..PLACING_ROUNDS {
            let rows = query(&client, &statement, params)
                .await
                .map_err(failed(what))?;
            let waiting = rows
                .iter()
                .any(|row| rows::get::<i64>(row, 0).is_ok_and(|position| position < 0));
            if !waiting {
                return Ok(rows);
            }
            place::place(&client, &self.names, &[], &[]).await?;
        }
        Err(StoreError::new(format!(
            "{what}: its events were still waiting to be placed after {PLACING_ROUNDS} placings"
        )))
    }

    /// The row `template` answers, if any; as [`rows`](Self::rows).
    async fn row(
        &self,
        what: &str,
        template: &str,
        params: Params<'_>,
    ) -> Result<Option<tokio_postgres::Row>, StoreError> {
        let client = self.client().await?;
        query_opt(&client, &self.names.sql(template), params)
            .await
            .map_err(failed(what))
    }

    /// The one row `template` answers; as [`rows`](Self::rows).
    async fn one(
        &self,
        what: &str,
        template: &str,
        params: Params<'_>,
    ) -> Result<tokio_postgres::Row, StoreError> {
        let client = self.client().await?;
        query_one(&client, &self.names.sql(template), params)
            .await
            .map_err(failed(what))
    }

    /// How many rows `template` changed; as [`rows`](Self::rows).
    async fn changed(
        &self,
        what: &str,
        template: &str,
        params: Params<'_>,
    ) -> Result<u64, StoreError> {
        let client = self.client().await?;
        execute(&client, &self.names.sql(template), params)
            .await
            .map_err(failed(what))
    }
    /// Writes `writes` in one transaction, pipelined (see `pipeline.rs`), `way` says how: `None` when a
    /// statement did not answer as foreseen, the transaction rolled back, for the caller to
    /// write them the exact way. The error is the transaction's own failure (no connection, a
    /// refused begin or commit), which fails them all, as the exact way's does.
    async fn commit_pipelined(
        &self,
        writes: &[WriteSet],
        way: Way,
        placing: Placing,
    ) -> Result<Option<Vec<Result<Committed, CommitError>>>, StoreError> {
        let mut client = self.client().await?;
        let tx = transaction(&mut client).await?;
        let applied = match way {
            Way::Wave => {
                // Sent ahead of the wave's statements, in the same round trip.
                let (planned, applied) = futures_util::future::join(
                    tx.batch_execute(wave::PLANNING),
                    wave::write(&tx, &self.names, writes, &self.head_turns),
                )
                .await;
                planned.map_err(failed("cannot set how the wave's statements are planned"))?;
                applied
            }
            Way::Pipelined => statements::apply_pipelined(&tx, &self.names, writes).await,
        };
        let Some(committed) = applied else {
            tracing::debug!(
                ?way,
                "a commit did not go as foreseen: written again another way"
            );
            // Rolled back before the connection is used again.
            drop(tx);
            return Ok(None);
        };
        tx.commit().await.map_err(failed("cannot commit"))?;
        let mut results: Vec<_> = committed.into_iter().map(Ok).collect();
        self.committed(&client, writes, &mut results, placing).await;
        Ok(Some(results))
    }

    /// `writes` in one transaction, each in a savepoint of its own: one whose precondition
    /// fails is rolled back alone. The error is the transaction's own failure.
    async fn commit_in_savepoints(
        &self,
        writes: &[WriteSet],
    ) -> Result<Vec<Result<Committed, CommitError>>, StoreError> {
        let mut client = self.client().await?;
        let tx = transaction(&mut client).await?;
        let mut results = Vec::with_capacity(writes.len());
        // Each savepoint is opened in the same round trip as the write set's first statement,
        // and released in the same as the next one's opening (the commit releases the last).
        let mut owed: Option<String> = None;
        for (index, writes) in writes.iter().enumerate() {
            let name = format!("write_set_{index}");
            let opening = match owed.take() {
                Some(release) => format!("{release}; SAVEPOINT {name}"),
                None => format!("SAVEPOINT {name}"),
            };
            let (opened, result) = futures_util::future::join(
                tx.batch_execute(&opening),
                statements::apply(&tx, &self.names, writes),
            )
            .await;
            opened.map_err(failed("cannot open a savepoint"))?;
            match &result {
                Ok(_) => owed = Some(format!("RELEASE SAVEPOINT {name}")),
                // Rolled back to, it still exists: released, so the next is not nested in it.
                Err(_) => tx
                    .batch_execute(&format!(
                        "ROLLBACK TO SAVEPOINT {name}; RELEASE SAVEPOINT {name}"
                    ))
                    .await
                    .map_err(failed("cannot close a savepoint"))?,
            }
            results.push(result);
        }
        tx.commit().await.map_err(failed("cannot commit"))?;
        self.committed(&client, writes, &mut results, Placing::UnlessBusy)
            .await;
        Ok(results)
    }

    /// What follows a commit of `writes`, answered by `results`: the events of those that
    /// committed are placed in the global order (their positions filled in), then the processes
    /// listening are woken. A failure here is logged, not answered: what was written stands, and
    /// the next reader places it.
    async fn committed(
        &self,
        client: &Conn,
        writes: &[WriteSet],
        results: &mut [Result<Committed, CommitError>],
        placing: Placing,
    ) {
        let landed = || {
            writes
                .iter()
                .zip(results.iter())
                .filter(|(_, result)| result.is_ok())
                .map(|(writes, _)| writes)
        };
        let wakes = landed().any(protocol::wakes_others);
        // A wave that held the head wrote its events at their final positions: nothing to place.
        let unplaced = |result: &Result<Committed, CommitError>| {
            result
                .as_ref()
                .is_ok_and(|committed| committed.events.iter().any(|event| event.position == 0))
        };
        let appending: Vec<&WriteSet> = writes
            .iter()
            .zip(results.iter())
            .filter(|(writes, result)| !writes.appends.is_empty() && unplaced(result))
            .map(|(writes, _)| writes)
            .collect();
        if let Some((first, rest)) = appending.split_first() {
            // A subscriber moves past the events only if none of them is its.
            let skip: Vec<&str> = first
                .skip
                .iter()
                .filter(|name| rest.iter().all(|other| other.skip.contains(name)))
                .map(String::as_str)
                .collect();
            let mine: Vec<&str> = appending
                .iter()
                .flat_map(|writes| &writes.appends)
                .flat_map(|append| &append.events)
                .map(|event| event.id.as_str())
                .collect();
            let placed = match placing {
                Placing::Wait => place::place(client, &self.names, &mine, &skip).await,
                Placing::UnlessBusy => {
                    place::place_unless_busy(client, &self.names, &mine, &skip).await
                }
            };
            match placed {
                Ok(positions) => {
                    let events = results
                        .iter_mut()
                        .filter_map(|result| result.as_mut().ok())
                        .flat_map(|committed| &mut committed.events);
                    for event in events {
                        if let Some(position) = positions.get(&event.id) {
                            event.position = *position;
                        }
                    }
                }
                Err(error) => tracing::warn!(
                    error = %error.flattened(),
                    "committed events are not placed in the global order yet: the next reader places them"
                ),
            }
        }
        if wakes {
            self.notifier.notify(client, &self.names.channel()).await;
        }
    }
}

/// How a transaction's statements carry its write sets, sent at once.
#[derive(Debug, Clone, Copy)]
enum Way {
    /// A statement per kind of write for them all (`wave.rs`).
    Wave,
    /// The statements of each write set in turn (`statements::apply_pipelined`).
    Pipelined,
}

/// How a commit's writer places its events once they have committed.
#[derive(Debug, Clone, Copy)]
enum Placing {
    /// Waits for the head, and answers each event's position: a command's answer says where
    /// its events landed.
    Wait,
    /// Places them unless another placer is at work, then answers no positions: a worker's
    /// group commit needs none, and does not queue behind the other workers' placings.
    UnlessBusy,
}

/// The answer to each of `writes` when their transaction failed: each carries the whole chain of
/// causes (the server's own words).
fn each_failed<'a>(
    writes: &'a [WriteSet],
    error: &'a StoreError,
) -> impl Iterator<Item = Result<Committed, CommitError>> + 'a {
    writes
        .iter()
        .map(|_| Err(CommitError::Store(error.flattened())))
}

/// How often a read by stream places what is waiting and reads again before it gives up: each
/// placing places every event committed before it, so a second read finds them placed unless
/// more keep committing to the same stream.
const PLACING_ROUNDS: usize = 20;

/// Write sets per transaction in a group commit. Each savepoint that writes takes a
/// subtransaction id, and past 64 in one transaction PostgreSQL's per-session cache of them
/// overflows: every other session's snapshot then looks them up on disk while it is open.
const SAVEPOINTS: usize = 50;

/// The condition of a letter filter on its first six parameters; a `NULL` one matches all.
const LETTER_FILTER: &str = "($1::text IS NULL OR kind = $1)
     AND ($2::text IS NULL OR handler = $2) AND ($3::text IS NULL OR status = $3)
     AND ($4::text IS NULL OR strpos(error_message, $4) > 0)
     AND ($5::timestamptz IS NULL OR last_failed_at >= $5)
     AND ($6::timestamptz IS NULL OR last_failed_at < $6)";

/// A filter as the parameters of [`LETTER_FILTER`]: kind, handler, status, error text, and
/// the last failure's bounds.
struct LetterParams<'a> {
    kind: Option<&'a str>,
    handler: Option<&'a str>,
    status: Option<&'a str>,
    error: Option<&'a str>,
    from: Option<DateTime<Utc>>,
    until: Option<DateTime<Utc>>,
}

impl<'a> LetterParams<'a> {
    fn of(filter: &'a LetterFilter) -> LetterParams<'a> {
        LetterParams {
            kind: filter.kind.map(|kind| kind.as_str()),
            handler: filter.handler.as_deref(),
            status: filter.status.map(|status| status.as_str()),
            error: filter.error_contains.as_deref(),
            from: filter.failed_from.map(DateTime::<Utc>::from),
            until: filter.failed_until.map(DateTime::<Utc>::from),
        }
    }

    /// The parameters, in [`LETTER_FILTER`]'s order.
    fn values(&self) -> [&(dyn tokio_postgres::types::ToSql + Sync); 6] {
        [
            &self.kind,
            &self.handler,
            &self.status,
            &self.error,
            &self.from,
            &self.until,
        ]
    }
}
