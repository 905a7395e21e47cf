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

use crate::RecordedEvent;
use crate::store::forward::Forward;
use crate::store::{CommitError, Committed, Snapshot, Store, StoreError, StreamTail, WriteSet};

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
impl Forward for FaultyStore {
    fn inner(&self) -> &dyn Store {
        &*self.inner
    }

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
