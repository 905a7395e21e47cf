//! A store that counts the calls a run makes of it, by method, and forwards each to the store it
//! wraps: what a deadline firing or a reaction asks of the store, beside what it costs. It counts
//! the reads and writes of a wave; the store's other methods are forwarded uncounted, as
//! `Forward` does by construction.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use bounda::store::forward::Forward;
use bounda::store::{
    CommitError, Committed, InOrder, InboxClaim, InboxPair, ScheduledEntry, Snapshot, Store,
    StoreError, StreamTail, WriteSet, async_trait,
};
use bounda::{Duration, Instant, RecordedEvent};

/// `inner`, counting the calls of a wave.
pub struct Counting {
    inner: Arc<dyn Store>,
    calls: Mutex<BTreeMap<&'static str, u64>>,
}

impl Counting {
    /// Counts the calls made of `inner`.
    pub fn new(inner: Arc<dyn Store>) -> Counting {
        Counting {
            inner,
            calls: Mutex::new(BTreeMap::new()),
        }
    }

    fn count(&self, method: &'static str) {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        *calls.entry(method).or_default() += 1;
    }

    /// The calls counted since the last time, by method; counting starts again from none.
    pub fn take(&self) -> BTreeMap<&'static str, u64> {
        std::mem::take(&mut *self.calls.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

#[async_trait]
impl Forward for Counting {
    fn inner(&self) -> &dyn Store {
        &*self.inner
    }

    async fn read_stream(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        self.count("read_stream");
        self.inner.read_stream(aggregate_type, aggregate_id).await
    }

    async fn read_stream_after(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
        version: u64,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        self.count("read_stream_after");
        self.inner
            .read_stream_after(aggregate_type, aggregate_id, version)
            .await
    }

    async fn snapshot(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
    ) -> Result<Option<Snapshot>, StoreError> {
        self.count("snapshot");
        self.inner.snapshot(aggregate_type, aggregate_id).await
    }

    async fn read_tails(
        &self,
        aggregate_type: &str,
        ids: &[String],
    ) -> Result<Vec<StreamTail>, StoreError> {
        self.count("read_tails");
        self.inner.read_tails(aggregate_type, ids).await
    }

    async fn read_all(&self, after: u64, limit: usize) -> Result<Vec<RecordedEvent>, StoreError> {
        self.count("read_all");
        self.inner.read_all(after, limit).await
    }

    async fn head(&self) -> Result<u64, StoreError> {
        self.count("head");
        self.inner.head().await
    }

    async fn commit(&self, writes: &WriteSet) -> Result<Committed, CommitError> {
        self.count("commit");
        self.inner.commit(writes).await
    }

    async fn commit_many(&self, writes: &[WriteSet]) -> Vec<Result<Committed, CommitError>> {
        self.count("commit_many");
        self.inner.commit_many(writes).await
    }

    async fn checkpoint(&self, subscriber: &str) -> Result<Option<u64>, StoreError> {
        self.count("checkpoint");
        self.inner.checkpoint(subscriber).await
    }

    async fn move_checkpoint(
        &self,
        subscriber: &str,
        from: Option<u64>,
        to: u64,
    ) -> Result<bool, StoreError> {
        self.count("move_checkpoint");
        self.inner.move_checkpoint(subscriber, from, to).await
    }

    async fn claim_inbox_batch(
        &self,
        pairs: &[InboxPair<'_>],
        claim_id: &str,
        now: Instant,
        lease: Duration,
        order: &mut InOrder,
    ) -> Result<Vec<InboxClaim>, StoreError> {
        self.count("claim_inbox_batch");
        self.inner
            .claim_inbox_batch(pairs, claim_id, now, lease, order)
            .await
    }

    async fn claim_due(
        &self,
        claim_id: &str,
        now: Instant,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        self.count("claim_due");
        self.inner.claim_due(claim_id, now, lease, limit).await
    }

    async fn next_due_at(
        &self,
        now: Instant,
        lease: Duration,
    ) -> Result<Option<Instant>, StoreError> {
        self.count("next_due_at");
        self.inner.next_due_at(now, lease).await
    }

    async fn scheduled_many(
        &self,
        dedupe_keys: &[String],
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        self.count("scheduled_many");
        self.inner.scheduled_many(dedupe_keys).await
    }

    async fn renew_scheduled(
        &self,
        dedupe_key: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        self.count("renew_scheduled");
        self.inner
            .renew_scheduled(dedupe_key, claim_id, now, lease)
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
        self.count("renew_inbox");
        self.inner
            .renew_inbox(handler, event_id, claim_id, now, lease)
            .await
    }
}
