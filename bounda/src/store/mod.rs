//! What the runtime keeps: the event store, checkpoints, the inbox, the scheduler and dead letters.
//!
//! The runtime decides; the store applies. An attempt produces a [`WriteSet`] that
//! [`Store::commit`] writes atomically or refuses with the precondition that failed
//! ([`CommitError`]), writing nothing. [`Store::commit_many`] commits several write sets in one
//! transaction, each still all-or-nothing, so a store can pass the disk's flush latency (see
//! `PERFORMANCE.md`). Every store passes the contract suite in `store::contract` (feature
//! `contract-tests`).
//!
//! The trait is asynchronous, so a store on a networked database waits for its server without
//! holding one of the runtime's threads; a store that answers at once (SQLite, in microseconds)
//! returns ready futures. Its methods return boxed futures ([`macro@async_trait`]), so the runtime
//! holds any store as `Arc<dyn Store>`.

pub mod bookmarks;
pub mod capabilities;
#[cfg(feature = "contract-tests")]
pub mod contract;
mod copy;
mod error;
pub mod forward;
pub mod ingress;
pub mod instances;
pub mod limits;
pub mod migrations;
pub mod open;
pub mod pauses;
pub mod protocol;
pub mod read_models;
mod records;
pub mod retry_requests;
pub(crate) mod unreadable;
pub mod wake_ups;
mod write_set;

pub use crate::event::Metadata;
pub(crate) use error::chain;
pub use error::{CommitError, StoreError};
pub use records::{
    Appended, Committed, DeadLetter, InboxClaim, InboxFailure, InboxPair, LetterFilter, LetterKind,
    LetterStatus, NewEvent, ScheduledEntry, Snapshot, StreamTail,
};
pub use write_set::{
    Append, ClaimDue, InboxMark, InboxOutcome, LetterHold, LetterSettle, ScheduledOutcome,
    ScheduledRelease, WriteSet,
};

pub use bookmarks::{Bookmark, Cursor};
pub use capabilities::Capabilities;
pub(crate) use copy::mark as copy_mark;
pub use copy::{Copied, CopyMark, CopyStore, Import, InboxEntry, InboxStatus, copy, transfer};
pub use ingress::{IngressRecord, IngressStore};
pub use instances::{
    InstanceChange, InstanceCounts, InstanceCursor, InstanceIndex, InstanceOrder, InstanceQuery,
    InstanceRow, InstanceStatus, NextDue,
};
pub use limits::{LimitKey, LimitKind, LimitStore, LimitWindow};
pub use open::{Address, Opener, Opening, Place};
pub use pauses::{Pause, PauseStore, PauseTarget, Paused};
pub use retry_requests::{RetryOutcome, RetryRequest};
pub use unreadable::{Columns, Unreadable};
pub use wake_ups::{Listener, WakeUps};

pub use async_trait::async_trait;

use crate::{Duration, Instant, RecordedEvent};

/// A store for the runtime. See the module documentation.
///
/// Implement it with the [`async_trait`](macro@async_trait) attribute re-exported here:
/// `#[bounda::store::async_trait] impl Store for MyStore { async fn head(&self) -> … }`.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// The events of one stream, oldest first.
    async fn read_stream(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
    ) -> Result<Vec<RecordedEvent>, StoreError>;

    /// The events of one stream after `version`, oldest first.
    async fn read_stream_after(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
        version: u64,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        let mut events = self.read_stream(aggregate_type, aggregate_id).await?;
        events.retain(|event| event.version > version);
        Ok(events)
    }

    /// The snapshot kept for a stream, if any.
    async fn snapshot(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
    ) -> Result<Option<Snapshot>, StoreError>;

    /// Streams `ids` of `aggregate_type`, in the order of `ids`: each with its snapshot, if one
    /// is kept, and its events after the snapshot's version, read as one, so the events follow
    /// the snapshot with no gap (a stream with neither is answered empty). How the runtime
    /// reads a page of process instances in a round trip or two. This default reads each in
    /// turn; a store on a server overrides it with one query.
    async fn read_tails(
        &self,
        aggregate_type: &str,
        ids: &[String],
    ) -> Result<Vec<StreamTail>, StoreError> {
        let mut tails = Vec::with_capacity(ids.len());
        for id in ids {
            let snapshot = self.snapshot(aggregate_type, id).await?;
            let after = snapshot.as_ref().map_or(0, |snapshot| snapshot.version);
            // Read after the snapshot: a stream only grows, so nothing between is missed.
            let events = self.read_stream_after(aggregate_type, id, after).await?;
            tails.push(StreamTail {
                aggregate_id: id.clone(),
                snapshot,
                events,
            });
        }
        Ok(tails)
    }

    /// Up to `limit` events of the global stream after `position`, in position order.
    async fn read_all(&self, after: u64, limit: usize) -> Result<Vec<RecordedEvent>, StoreError>;

    /// The event with this id.
    async fn read_event(&self, id: &str) -> Result<Option<RecordedEvent>, StoreError>;

    /// Up to `limit` ids of the streams of `aggregate_type`, in id order, after `after` (from
    /// the first when `None`): how the runtime finds every instance of a process without
    /// reading the log. This default reads the whole log; a store overrides it with an
    /// index.
    async fn stream_ids(
        &self,
        aggregate_type: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let mut ids = std::collections::BTreeSet::new();
        let mut position = 0;
        loop {
            let events = self.read_all(position, 1_000).await?;
            let Some(last) = events.last() else { break };
            position = last.position;
            for event in events {
                if event.aggregate_type == aggregate_type
                    && after.is_none_or(|after| event.aggregate_id.as_str() > after)
                {
                    ids.insert(event.aggregate_id);
                }
            }
        }
        Ok(ids.into_iter().take(limit).collect())
    }

    /// The position of the last event, 0 when there is none.
    async fn head(&self) -> Result<u64, StoreError>;

    /// Commits one write set atomically.
    async fn commit(&self, writes: &WriteSet) -> Result<Committed, CommitError>;

    /// Commits several write sets in one transaction, each all-or-nothing on its own: one whose
    /// precondition fails is left out, the others are written. Answers in the same order.
    async fn commit_many(&self, writes: &[WriteSet]) -> Vec<Result<Committed, CommitError>> {
        let mut answers = Vec::with_capacity(writes.len());
        for writes in writes {
            answers.push(self.commit(writes).await);
        }
        answers
    }

    /// A subscriber's checkpoint, or `None` before its first pass.
    async fn checkpoint(&self, subscriber: &str) -> Result<Option<u64>, StoreError>;

    /// Every checkpoint, by subscriber name.
    async fn checkpoints(&self) -> Result<Vec<(String, u64)>, StoreError>;

    /// Moves a checkpoint from `from` (`None`: not yet created) to `to` by compare-and-set.
    /// Returns `false`, writing nothing, when someone else moved it first.
    async fn move_checkpoint(
        &self,
        subscriber: &str,
        from: Option<u64>,
        to: u64,
    ) -> Result<bool, StoreError>;

    /// Where `subscriber` stands: its checkpoint and its [`bookmarks`], read at one moment (a
    /// return to a bookmark committing meanwhile is seen whole or not at all), or `None` before
    /// its first pass.
    async fn cursor(&self, subscriber: &str) -> Result<Option<Cursor>, StoreError>;

    /// Moves `subscriber`'s checkpoint from `from` to `to` by compare-and-set, as
    /// [`move_checkpoint`](Store::move_checkpoint) does, leaving `bookmarks` where it passed
    /// held events, in one transaction: a bookmark already left for the same handler and lane
    /// keeps the earlier position. Returns `false`, writing nothing, when someone else moved
    /// it first.
    async fn pass_checkpoint(
        &self,
        subscriber: &str,
        from: u64,
        to: u64,
        bookmarks: &[Bookmark],
    ) -> Result<bool, StoreError>;

    /// Returns `subscriber` to its bookmarks of `holders` (handler and lane, as
    /// [`Bookmark::lane_key`] stores it), in one transaction: deletes them and moves its
    /// checkpoint back to just before the first of them, as stored, if it stands after it.
    /// Bookmarks already returned to are nothing to return to.
    async fn return_to_bookmarks(
        &self,
        subscriber: &str,
        holders: &[(&str, &str)],
    ) -> Result<(), StoreError>;

    /// Claims `(handler, event_id)` for one run, outside any attempt's transaction:
    /// a new claim, a lapsed one, or a failure whose retry is due is taken under
    /// `claim_id` until `now + lease`; anything else is reported as it stands.
    ///
    /// A claim lapses once the lease it was taken or last renewed with has passed, whatever
    /// the lease of the runner that finds it (a lease that ends now has not passed yet). A claim
    /// stored without its end, by a store that kept none, lapses `lease` after it was taken.
    async fn claim_inbox(
        &self,
        handler: &str,
        event_id: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<InboxClaim, StoreError>;

    /// Claims `pairs` in order for one batch of runs, all under `claim_id`, as
    /// [`claim_inbox`](Store::claim_inbox) does one, following `order`: a pair it
    /// [`skips`](InOrder::skips) is left alone and answered [`InboxClaim::Skipped`], and every
    /// answer is told to [`saw`](InOrder::saw). So once a handler's pair of a lane is held by
    /// another runner, its later pairs of that lane wait, while its other lanes go on; once a
    /// pair waits for its retry, its handler's later pairs wait; and no more than the order's
    /// limit are claimed. `order` carries over from one call to the next of the same pass.
    /// A store should take a batch in as few round trips as it can; this default takes one
    /// statement per pair.
    async fn claim_inbox_batch(
        &self,
        pairs: &[InboxPair<'_>],
        claim_id: &str,
        now: Instant,
        lease: Duration,
        order: &mut InOrder,
    ) -> Result<Vec<InboxClaim>, StoreError> {
        let mut claims = Vec::with_capacity(pairs.len());
        for pair in pairs {
            let claim = match order.skips(pair) {
                true => InboxClaim::Skipped,
                false => {
                    self.claim_inbox(pair.handler, pair.event_id, claim_id, now, lease)
                        .await?
                }
            };
            order.saw(pair, &claim);
            claims.push(claim);
        }
        Ok(claims)
    }

    /// Renews a claim before a rerun: held until `now + lease`. `false` when the claim is no
    /// longer ours.
    async fn renew_inbox(
        &self,
        handler: &str,
        event_id: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError>;

    /// The earliest retry moment of a failed inbox entry of `handler`, if any.
    async fn next_inbox_retry(&self, handler: &str) -> Result<Option<Instant>, StoreError> {
        Ok(self
            .inbox_failures(handler, 1)
            .await?
            .first()
            .map(|failure| failure.retry_at))
    }

    /// Up to `limit` failed inbox entries of `handler`, the first retry first.
    async fn inbox_failures(
        &self,
        handler: &str,
        limit: usize,
    ) -> Result<Vec<InboxFailure>, StoreError>;

    /// Claims up to `limit` scheduler entries due at `now` whose claim is free or has lapsed
    /// (as [`claim_inbox`](Store::claim_inbox) says), ordered by (`execute_at`, `dedupe_key`),
    /// each until `now + lease`. Taking over a lapsed claim counts no attempt: only runs that
    /// failed do.
    async fn claim_due(
        &self,
        claim_id: &str,
        now: Instant,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<ScheduledEntry>, StoreError>;

    /// Renews a scheduler claim: held until `now + lease`. `false` when the claim is no longer
    /// ours.
    async fn renew_scheduled(
        &self,
        dedupe_key: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError>;

    /// The earliest moment a scheduler entry becomes due, as seen at `now`; a claimed entry
    /// counts as due again 1 ms after its lease ends (`lease` after it was taken, for a claim
    /// stored without its end), and the entries of a limit whose window's permits are used up
    /// at `now` ([`limits`]) when the window ends.
    async fn next_due_at(
        &self,
        now: Instant,
        lease: Duration,
    ) -> Result<Option<Instant>, StoreError>;

    /// The earliest moment a scheduler entry that failed before is due to run again: what a test
    /// clock moves to while retries are pending.
    async fn next_scheduled_retry(&self) -> Result<Option<Instant>, StoreError>;

    /// Every scheduler entry of `command_type`, by due moment.
    async fn scheduled_of_type(
        &self,
        command_type: &str,
    ) -> Result<Vec<ScheduledEntry>, StoreError>;

    /// Up to `limit` scheduler entries of `command_type` in key order, after key `after` (from
    /// the first when `None`): every entry of a type read a page at a time, in bounded memory.
    /// This default reads every entry of the type; a store overrides it with its key index.
    async fn scheduled_page(
        &self,
        command_type: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        let mut entries = self.scheduled_of_type(command_type).await?;
        entries.retain(|entry| after.is_none_or(|after| entry.dedupe_key.as_str() > after));
        entries.sort_by(|a, b| a.dedupe_key.cmp(&b.dedupe_key));
        entries.truncate(limit);
        Ok(entries)
    }

    /// Each type the scheduler holds entries of, with how many, by type: what a check before a
    /// deploy reads to find entries whose command, policy or process the build no longer has.
    async fn scheduled_types(&self) -> Result<Vec<(String, u64)>, StoreError>;

    /// Up to `limit` scheduler entries of `command_type` due at or before `until`, by due
    /// moment, and whether any of that type is due after it: what a page shows of the hours
    /// ahead, however many are pending. A store should read both through its due-moment index;
    /// this default reads every entry of the type.
    async fn scheduled_until(
        &self,
        command_type: &str,
        until: Instant,
        limit: usize,
    ) -> Result<(Vec<ScheduledEntry>, bool), StoreError> {
        let entries = self.scheduled_of_type(command_type).await?;
        let later = entries.iter().any(|entry| entry.execute_at > until);
        let due = entries
            .into_iter()
            .filter(|entry| entry.execute_at <= until)
            .take(limit)
            .collect();
        Ok((due, later))
    }

    /// Up to `limit` scheduler entries whose due moment does not read, so that no claim takes
    /// them: what `lag` counts, and `check` names. A store whose moments are typed columns
    /// never holds one, and answers none.
    async fn unclaimable_entries(&self, limit: usize) -> Result<Vec<ScheduledEntry>, StoreError>;

    /// The scheduler entry with this key.
    async fn scheduled(&self, dedupe_key: &str) -> Result<Option<ScheduledEntry>, StoreError>;

    /// The scheduler entries with these keys, in no particular order; a key with none is left
    /// out. How the runtime reads a page of instances' entries at once. This default reads each
    /// in turn; a store on a server overrides it with one query.
    async fn scheduled_many(
        &self,
        dedupe_keys: &[String],
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        let mut entries = Vec::with_capacity(dedupe_keys.len());
        for key in dedupe_keys {
            entries.extend(self.scheduled(key).await?);
        }
        Ok(entries)
    }

    /// Claims dead letter `id` for one operator's retry under `claim_id` until `now + lease`:
    /// taken while it is `failed` and no other retry holds it (or that retry's claim has
    /// lapsed, as [`claim_inbox`](Store::claim_inbox) says). `false` when it is settled or
    /// being retried.
    async fn claim_letter(
        &self,
        id: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError>;

    /// Renews the retry claim `claim_id` on letter `id`: held until `now + lease`, so a retry of
    /// many steps keeps its letter. `false` when the claim is no longer ours or the letter is
    /// no longer `failed`.
    async fn renew_letter(
        &self,
        id: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError>;

    /// Gives back the retry claim `claim_id` on letter `id`, if it still holds it.
    async fn release_letter(&self, id: &str, claim_id: &str) -> Result<(), StoreError>;

    /// Dead letters matching `filter`, oldest first.
    async fn dead_letters(&self, filter: &LetterFilter) -> Result<Vec<DeadLetter>, StoreError>;

    /// How many dead letters match `filter` (its `limit` ignored).
    async fn count_dead_letters(&self, filter: &LetterFilter) -> Result<u64, StoreError>;

    /// The dead letter with this id.
    async fn dead_letter(&self, id: &str) -> Result<Option<DeadLetter>, StoreError>;

    /// The retries requested of letter `letter` ([`retry_requests`]), oldest first, each with
    /// its outcome once a worker ran it.
    async fn retry_requests(&self, letter: &str) -> Result<Vec<RetryRequest>, StoreError>;

    /// What the store keeps beyond the core ([`Capabilities`]): what uses a capability it lacks
    /// is refused, naming it, before it changes anything.
    fn capabilities(&self) -> Capabilities<'_>;
}

/// The order a subscriber's pass claims its inbox pairs in, carried from one batch claim to
/// the next of the pass ([`Store::claim_inbox_batch`]): a store asks
/// [`skips`](InOrder::skips) before claiming a pair and tells [`saw`](InOrder::saw) the answer.
///
/// - A pair held by another runner holds its handler's later pairs of the same lane (one
///   instance's steps never run at once on two runners, nor out of order), not its other lanes:
///   several runners share one subscriber's work.
/// - A pair waiting for its retry holds all its handler's later pairs, as the checkpoint does;
///   for a handler told to [`wait_by_lane`](InOrder::wait_by_lane) (a relay, whose streams are
///   independent), only those of its lane.
/// - Once `limit` pairs are claimed, the rest wait for a later pass.
#[derive(Debug, Clone)]
pub struct InOrder {
    limit: usize,
    claimed: usize,
    waiting: std::collections::HashSet<String>,
    /// The handlers whose waiting pair holds only its own lane.
    by_lane: std::collections::HashSet<String>,
    /// The lanes held, by handler.
    held: std::collections::HashMap<String, std::collections::HashSet<String>>,
}

impl InOrder {
    /// An order that claims at most `limit` pairs.
    pub fn new(limit: usize) -> InOrder {
        InOrder {
            limit,
            claimed: 0,
            waiting: Default::default(),
            by_lane: Default::default(),
            held: Default::default(),
        }
    }

    /// A pair of `handler` waiting for its retry holds only its lane's later pairs.
    pub fn wait_by_lane(&mut self, handler: &str) {
        self.by_lane.insert(handler.to_owned());
    }

    /// Holds every pair of `handler` (a paused policy or process): none is claimed.
    pub fn hold_handler(&mut self, handler: &str) {
        self.waiting.insert(handler.to_owned());
    }

    /// Holds the pairs of `handler` in `lane` (a paused instance): none is claimed.
    pub fn hold_lane(&mut self, handler: &str, lane: &str) {
        self.held
            .entry(handler.to_owned())
            .or_default()
            .insert(lane.to_owned());
    }

    /// Whether `pair` is left unclaimed: the claims are all taken, or an earlier pair holds it.
    pub fn skips(&self, pair: &InboxPair<'_>) -> bool {
        self.full()
            || self.waiting.contains(pair.handler)
            || self
                .held
                .get(pair.handler)
                .is_some_and(|lanes| lanes.contains(pair.lane))
    }

    /// Records how `pair` was answered.
    pub fn saw(&mut self, pair: &InboxPair<'_>, claim: &InboxClaim) {
        match claim {
            InboxClaim::Claimed { .. } => self.claimed += 1,
            InboxClaim::Waiting { .. } if !self.by_lane.contains(pair.handler) => {
                self.waiting.insert(pair.handler.to_owned());
            }
            InboxClaim::Waiting { .. } | InboxClaim::Held | InboxClaim::Skipped => {
                self.held
                    .entry(pair.handler.to_owned())
                    .or_default()
                    .insert(pair.lane.to_owned());
            }
            InboxClaim::Succeeded | InboxClaim::DeadLettered => {}
        }
    }

    /// Starts the next batch of the same pass: as many claims again, and whatever held a pair
    /// so far still holds its later ones.
    pub fn next_batch(&mut self) {
        self.claimed = 0;
    }

    /// Whether as many pairs as it takes are claimed.
    pub fn full(&self) -> bool {
        self.claimed >= self.limit
    }
}
