//! A store that fails on purpose, as a lock, a full disk or a broken one makes a real store fail:
//! wrap any store in a [`FaultyStore`] and test that an app loses nothing through its faults,
//! under `TestApp` or `App::run`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use bounda::store::Store;
//! use bounda::testing::{Fault, FaultyStore};
//!
//! let store = Arc::new(FaultyStore::new(
//!     Arc::new(bounda_sqlite::SqliteStore::in_memory()?),
//!     7,   // the seed: which commits fail, the same on every run
//!     250, // a quarter of them
//! ));
//! for _ in 0..40 {
//!     let _ = store.commit(&Default::default()).await;
//! }
//! assert!(store.injected().total() > 0);
//! store.fail_reads(true);
//! assert!(store.head().await.is_ok(), "the head is not the log");
//! assert!(store.read_all(0, 10).await.is_err());
//! # let _ = Fault::Busy;
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::store::read_models::ReadModelStore;
use crate::store::{
    Bookmark, CommitError, Committed, CopyMark, Cursor, DeadLetter, Import, InOrder, InboxClaim,
    InboxEntry, InboxFailure, InboxPair, LetterFilter, Listener, ScheduledEntry, Snapshot, Store,
    StoreError, StreamTail, WriteSet,
};
use crate::{Duration, Instant, RecordedEvent};

/// How a commit fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Refused: another writer holds the database past the busy timeout. Nothing written.
    Busy,
    /// Refused: the disk is full. Nothing written.
    Full,
    /// Refused: an I/O error. Nothing written.
    Io,
    /// Written, yet the caller sees an I/O error: the reply was lost after the commit.
    AfterWrite,
}

impl Fault {
    /// Every kind, in the order [`InjectedFaults`] counts them.
    pub const ALL: [Fault; 4] = [Fault::Busy, Fault::Full, Fault::Io, Fault::AfterWrite];

    /// The error the caller sees, as a real store words it.
    pub fn error(self) -> CommitError {
        CommitError::Store(StoreError::new(match self {
            Fault::Busy => "cannot commit: database is locked",
            Fault::Full => "cannot commit: database or disk is full",
            Fault::Io => "cannot commit: disk I/O error",
            Fault::AfterWrite => "cannot commit: disk I/O error after the write",
        }))
    }
}

/// How many commits failed, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InjectedFaults {
    /// Refused as locked.
    pub busy: u64,
    /// Refused as full.
    pub full: u64,
    /// Refused with an I/O error.
    pub io: u64,
    /// Written, answered with an error.
    pub after_write: u64,
}

impl InjectedFaults {
    /// Every fault injected.
    pub fn total(&self) -> u64 {
        self.busy + self.full + self.io + self.after_write
    }

    /// Adds `other`'s counts.
    pub(crate) fn add(&mut self, other: &InjectedFaults) {
        self.busy += other.busy;
        self.full += other.full;
        self.io += other.io;
        self.after_write += other.after_write;
    }
}

/// Which calls fail: commits chosen by a seed, and reads while told to.
#[derive(Debug)]
struct Plan {
    seed: u64,
    /// Out of 1000 commits, how many fail.
    per_mille: u64,
    commits: AtomicU64,
    armed: AtomicBool,
    reads_fail: AtomicBool,
    injected: [AtomicU64; 4],
}

impl Plan {
    /// The fault of the next commit, if it fails: the `n`th commit while armed fails, or not,
    /// the same way on every run of a seed.
    fn commit(&self) -> Option<Fault> {
        if !self.armed.load(Ordering::SeqCst) {
            return None;
        }
        let call = self.commits.fetch_add(1, Ordering::SeqCst);
        let roll = (call ^ self.seed)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29)
            .wrapping_mul(0xbf58_476d_1ce4_e5b9);
        if roll % 1000 >= self.per_mille {
            return None;
        }
        let kind = (roll / 1000 % 4) as usize;
        self.injected[kind].fetch_add(1, Ordering::SeqCst);
        Some(Fault::ALL[kind])
    }

    /// A read of the log or a stream fails while reads are told to.
    fn read(&self) -> Result<(), StoreError> {
        match self.reads_fail.load(Ordering::SeqCst) {
            true => Err(StoreError::new("cannot read: disk I/O error")),
            false => Ok(()),
        }
    }
}

/// A store around another whose commits fail as a seed chooses (refused busy, full or with an
/// I/O error before writing, or written and answered with an error), and whose reads of the
/// log and of streams fail while told to. Everything else goes to the store it wraps, read
/// models included.
pub struct FaultyStore {
    inner: Arc<dyn Store>,
    plan: Plan,
}

impl std::fmt::Debug for FaultyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultyStore")
            .field("plan", &self.plan)
            .finish_non_exhaustive()
    }
}

impl FaultyStore {
    /// `inner`, `per_mille` of whose commits (out of 1,000) fail, chosen by `seed`; armed at
    /// once.
    pub fn new(inner: Arc<dyn Store>, seed: u64, per_mille: u64) -> FaultyStore {
        FaultyStore {
            inner,
            plan: Plan {
                seed,
                per_mille: per_mille.min(1000),
                commits: AtomicU64::new(0),
                armed: AtomicBool::new(true),
                reads_fail: AtomicBool::new(false),
                injected: Default::default(),
            },
        }
    }

    /// Whether commits fail from now on: a test disarms the faults to see that, once they stop,
    /// nothing was lost.
    pub fn arm(&self, armed: bool) {
        self.plan.armed.store(armed, Ordering::SeqCst);
    }

    /// Whether reads of the log and of streams fail from now on, as a broken disk's.
    pub fn fail_reads(&self, failing: bool) {
        self.plan.reads_fail.store(failing, Ordering::SeqCst);
    }

    /// How many commits failed so far, by kind.
    pub fn injected(&self) -> InjectedFaults {
        let [busy, full, io, after_write] = self
            .plan
            .injected
            .each_ref()
            .map(|n| n.load(Ordering::SeqCst));
        InjectedFaults {
            busy,
            full,
            io,
            after_write,
        }
    }

    /// The store it wraps.
    pub fn inner(&self) -> &Arc<dyn Store> {
        &self.inner
    }
}

#[async_trait::async_trait]
impl Store for FaultyStore {
    async fn read_stream(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        self.plan.read()?;
        self.inner.read_stream(aggregate_type, aggregate_id).await
    }

    async fn read_stream_after(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
        version: u64,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        self.plan.read()?;
        self.inner
            .read_stream_after(aggregate_type, aggregate_id, version)
            .await
    }

    async fn snapshot(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
    ) -> Result<Option<Snapshot>, StoreError> {
        self.plan.read()?;
        self.inner.snapshot(aggregate_type, aggregate_id).await
    }

    async fn read_tails(
        &self,
        aggregate_type: &str,
        ids: &[String],
    ) -> Result<Vec<StreamTail>, StoreError> {
        self.plan.read()?;
        self.inner.read_tails(aggregate_type, ids).await
    }

    async fn read_all(&self, after: u64, limit: usize) -> Result<Vec<RecordedEvent>, StoreError> {
        self.plan.read()?;
        self.inner.read_all(after, limit).await
    }

    async fn read_event(&self, id: &str) -> Result<Option<RecordedEvent>, StoreError> {
        self.plan.read()?;
        self.inner.read_event(id).await
    }

    async fn stream_ids(
        &self,
        aggregate_type: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        self.plan.read()?;
        self.inner.stream_ids(aggregate_type, after, limit).await
    }

    async fn head(&self) -> Result<u64, StoreError> {
        self.inner.head().await
    }

    async fn checkpoint(&self, subscriber: &str) -> Result<Option<u64>, StoreError> {
        self.inner.checkpoint(subscriber).await
    }

    async fn checkpoints(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.inner.checkpoints().await
    }

    async fn move_checkpoint(
        &self,
        subscriber: &str,
        from: Option<u64>,
        to: u64,
    ) -> Result<bool, StoreError> {
        self.inner.move_checkpoint(subscriber, from, to).await
    }

    async fn cursor(&self, subscriber: &str) -> Result<Option<Cursor>, StoreError> {
        self.inner.cursor(subscriber).await
    }

    async fn pass_checkpoint(
        &self,
        subscriber: &str,
        from: u64,
        to: u64,
        bookmarks: &[Bookmark],
    ) -> Result<bool, StoreError> {
        self.inner
            .pass_checkpoint(subscriber, from, to, bookmarks)
            .await
    }

    async fn return_to_bookmarks(
        &self,
        subscriber: &str,
        holders: &[(&str, &str)],
    ) -> Result<(), StoreError> {
        self.inner.return_to_bookmarks(subscriber, holders).await
    }

    async fn claim_inbox(
        &self,
        handler: &str,
        event_id: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<InboxClaim, StoreError> {
        self.inner
            .claim_inbox(handler, event_id, claim_id, now, lease)
            .await
    }

    async fn claim_inbox_batch(
        &self,
        pairs: &[InboxPair<'_>],
        claim_id: &str,
        now: Instant,
        lease: Duration,
        order: &mut InOrder,
    ) -> Result<Vec<InboxClaim>, StoreError> {
        self.inner
            .claim_inbox_batch(pairs, claim_id, now, lease, order)
            .await
    }

    async fn renew_inbox(
        &self,
        handler: &str,
        event_id: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        self.inner
            .renew_inbox(handler, event_id, claim_id, now, lease)
            .await
    }

    async fn next_inbox_retry(&self, handler: &str) -> Result<Option<Instant>, StoreError> {
        self.inner.next_inbox_retry(handler).await
    }

    async fn inbox_failures(
        &self,
        handler: &str,
        limit: usize,
    ) -> Result<Vec<InboxFailure>, StoreError> {
        self.inner.inbox_failures(handler, limit).await
    }

    async fn claim_due(
        &self,
        claim_id: &str,
        now: Instant,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        self.inner.claim_due(claim_id, now, lease, limit).await
    }

    async fn renew_scheduled(
        &self,
        dedupe_key: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        self.inner
            .renew_scheduled(dedupe_key, claim_id, now, lease)
            .await
    }

    async fn next_due_at(
        &self,
        now: Instant,
        lease: Duration,
    ) -> Result<Option<Instant>, StoreError> {
        self.inner.next_due_at(now, lease).await
    }

    async fn next_scheduled_retry(&self) -> Result<Option<Instant>, StoreError> {
        self.inner.next_scheduled_retry().await
    }

    async fn scheduled_of_type(
        &self,
        command_type: &str,
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        self.inner.scheduled_of_type(command_type).await
    }

    async fn scheduled_page(
        &self,
        command_type: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        self.inner.scheduled_page(command_type, after, limit).await
    }

    async fn scheduled_types(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.inner.scheduled_types().await
    }

    async fn scheduled_until(
        &self,
        command_type: &str,
        until: Instant,
        limit: usize,
    ) -> Result<(Vec<ScheduledEntry>, bool), StoreError> {
        self.inner.scheduled_until(command_type, until, limit).await
    }

    async fn unclaimable_entries(&self, limit: usize) -> Result<Vec<ScheduledEntry>, StoreError> {
        self.inner.unclaimable_entries(limit).await
    }

    async fn scheduled(&self, dedupe_key: &str) -> Result<Option<ScheduledEntry>, StoreError> {
        self.inner.scheduled(dedupe_key).await
    }

    async fn scheduled_many(
        &self,
        dedupe_keys: &[String],
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        self.inner.scheduled_many(dedupe_keys).await
    }

    async fn claim_letter(
        &self,
        id: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        self.inner.claim_letter(id, claim_id, now, lease).await
    }

    async fn renew_letter(
        &self,
        id: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        self.inner.renew_letter(id, claim_id, now, lease).await
    }

    async fn release_letter(&self, id: &str, claim_id: &str) -> Result<(), StoreError> {
        self.inner.release_letter(id, claim_id).await
    }

    async fn dead_letters(&self, filter: &LetterFilter) -> Result<Vec<DeadLetter>, StoreError> {
        self.inner.dead_letters(filter).await
    }

    async fn count_dead_letters(&self, filter: &LetterFilter) -> Result<u64, StoreError> {
        self.inner.count_dead_letters(filter).await
    }

    async fn dead_letter(&self, id: &str) -> Result<Option<DeadLetter>, StoreError> {
        self.inner.dead_letter(id).await
    }
    async fn retry_requests(
        &self,
        letter: &str,
    ) -> Result<Vec<crate::store::RetryRequest>, StoreError> {
        self.inner.retry_requests(letter).await
    }
    async fn ingress_answer(
        &self,
        key: &str,
    ) -> Result<Option<crate::store::IngressRecord>, StoreError> {
        self.inner.ingress_answer(key).await
    }
    async fn ingress_page(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<crate::store::IngressRecord>, StoreError> {
        self.inner.ingress_page(after, limit).await
    }

    async fn instances(
        &self,
        query: &crate::store::InstanceQuery,
    ) -> Result<Vec<crate::store::InstanceRow>, StoreError> {
        self.inner.instances(query).await
    }

    async fn count_instances(
        &self,
        query: &crate::store::InstanceQuery,
    ) -> Result<u64, StoreError> {
        self.inner.count_instances(query).await
    }

    async fn instance_counts(
        &self,
        now: Instant,
    ) -> Result<Vec<crate::store::InstanceCounts>, StoreError> {
        self.inner.instance_counts(now).await
    }

    async fn pause(&self, pause: &crate::store::Pause) -> Result<bool, StoreError> {
        self.inner.pause(pause).await
    }

    async fn resume(&self, target: &crate::store::PauseTarget) -> Result<bool, StoreError> {
        self.inner.resume(target).await
    }

    async fn pauses(&self) -> Result<Vec<crate::store::Pause>, StoreError> {
        self.inner.pauses().await
    }

    async fn take_permits(
        &self,
        key: &crate::store::LimitKey,
        ends: Instant,
        per: Duration,
        cap: u32,
        wanted: u32,
    ) -> Result<u32, StoreError> {
        self.inner.take_permits(key, ends, per, cap, wanted).await
    }

    async fn return_permits(
        &self,
        key: &crate::store::LimitKey,
        ends: Instant,
        count: u32,
    ) -> Result<(), StoreError> {
        self.inner.return_permits(key, ends, count).await
    }

    async fn drop_limit(&self, key: &crate::store::LimitKey) -> Result<(), StoreError> {
        self.inner.drop_limit(key).await
    }

    async fn limit_windows(
        &self,
        now: Instant,
    ) -> Result<Vec<crate::store::LimitWindow>, StoreError> {
        self.inner.limit_windows(now).await
    }

    async fn held_by_limits(
        &self,
        now: Instant,
    ) -> Result<Vec<(crate::store::LimitKey, u64)>, StoreError> {
        self.inner.held_by_limits(now).await
    }

    async fn inbox_page(
        &self,
        after: Option<(&str, &str)>,
        limit: usize,
    ) -> Result<Vec<InboxEntry>, StoreError> {
        self.inner.inbox_page(after, limit).await
    }

    async fn import(&self, records: &Import) -> Result<(), StoreError> {
        self.inner.import(records).await
    }

    async fn copied(&self) -> Result<Option<CopyMark>, StoreError> {
        self.inner.copied().await
    }

    fn read_models(&self) -> Option<&dyn ReadModelStore> {
        self.inner.read_models()
    }

    async fn listen(&self) -> Result<Option<Box<dyn Listener>>, StoreError> {
        self.inner.listen().await
    }

    async fn commit(&self, writes: &WriteSet) -> Result<Committed, CommitError> {
        match self.plan.commit() {
            None => self.inner.commit(writes).await,
            Some(Fault::AfterWrite) => {
                let written = self.inner.commit(writes).await;
                written.and(Err(Fault::AfterWrite.error()))
            }
            Some(fault) => Err(fault.error()),
        }
    }

    async fn commit_many(&self, writes: &[WriteSet]) -> Vec<Result<Committed, CommitError>> {
        // One transaction: one fault fails every write set of it.
        match self.plan.commit() {
            None => self.inner.commit_many(writes).await,
            Some(Fault::AfterWrite) => {
                let _ = self.inner.commit_many(writes).await;
                writes
                    .iter()
                    .map(|_| Err(Fault::AfterWrite.error()))
                    .collect()
            }
            Some(fault) => writes.iter().map(|_| Err(fault.error())).collect(),
        }
    }
}
