//! Wrappers that cannot forget a method: a wrapper implements [`Forward`], naming the store it
//! wraps and overriding what it changes; every other method goes to the wrapped store, and
//! [`Store`] follows for it. A method added to the store later reaches every wrapper without an
//! edit.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use bounda::store::{Committed, CommitError, Store, WriteSet, async_trait, forward::Forward};
//!
//! /// Counts commits, and changes nothing else.
//! struct Counting {
//!     inner: Arc<dyn Store>,
//!     commits: AtomicU64,
//! }
//!
//! #[async_trait]
//! impl Forward for Counting {
//!     fn inner(&self) -> &dyn Store {
//!         &*self.inner
//!     }
//!
//!     async fn commit(&self, writes: &WriteSet) -> Result<Committed, CommitError> {
//!         self.commits.fetch_add(1, Ordering::Relaxed);
//!         self.inner.commit(writes).await
//!     }
//! }
//!
//! fn store(counting: Counting) -> Arc<dyn Store> {
//!     Arc::new(counting)
//! }
//! ```

use super::*;
use crate::{Duration, Instant, RecordedEvent};

/// A store around another: every method goes to [`inner`](Forward::inner) unless the wrapper
/// overrides it. Each method is the [`Store`] method of the same name.
#[async_trait]
pub trait Forward: Send + Sync + 'static {
    /// The store this one wraps.
    fn inner(&self) -> &dyn Store;

    /// Forwards [`Store::capabilities`]: the wrapped store's own, which this one's callers use
    /// as they are.
    fn capabilities(&self) -> Capabilities<'_> {
        self.inner().capabilities()
    }

    /// Forwards [`Store::read_stream`].
    async fn read_stream(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        self.inner().read_stream(aggregate_type, aggregate_id).await
    }

    /// Forwards [`Store::read_stream_after`].
    async fn read_stream_after(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
        version: u64,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        self.inner()
            .read_stream_after(aggregate_type, aggregate_id, version)
            .await
    }

    /// Forwards [`Store::snapshot`].
    async fn snapshot(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
    ) -> Result<Option<Snapshot>, StoreError> {
        self.inner().snapshot(aggregate_type, aggregate_id).await
    }

    /// Forwards [`Store::read_tails`].
    async fn read_tails(
        &self,
        aggregate_type: &str,
        ids: &[String],
    ) -> Result<Vec<StreamTail>, StoreError> {
        self.inner().read_tails(aggregate_type, ids).await
    }

    /// Forwards [`Store::read_all`].
    async fn read_all(&self, after: u64, limit: usize) -> Result<Vec<RecordedEvent>, StoreError> {
        self.inner().read_all(after, limit).await
    }

    /// Forwards [`Store::read_event`].
    async fn read_event(&self, id: &str) -> Result<Option<RecordedEvent>, StoreError> {
        self.inner().read_event(id).await
    }

    /// Forwards [`Store::stream_ids`].
    async fn stream_ids(
        &self,
        aggregate_type: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        self.inner().stream_ids(aggregate_type, after, limit).await
    }

    /// Forwards [`Store::head`].
    async fn head(&self) -> Result<u64, StoreError> {
        self.inner().head().await
    }

    /// Forwards [`Store::commit`].
    async fn commit(&self, writes: &WriteSet) -> Result<Committed, CommitError> {
        self.inner().commit(writes).await
    }

    /// Forwards [`Store::commit_many`].
    async fn commit_many(&self, writes: &[WriteSet]) -> Vec<Result<Committed, CommitError>> {
        self.inner().commit_many(writes).await
    }

    /// Forwards [`Store::checkpoint`].
    async fn checkpoint(&self, subscriber: &str) -> Result<Option<u64>, StoreError> {
        self.inner().checkpoint(subscriber).await
    }

    /// Forwards [`Store::checkpoints`].
    async fn checkpoints(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.inner().checkpoints().await
    }

    /// Forwards [`Store::move_checkpoint`].
    async fn move_checkpoint(
        &self,
        subscriber: &str,
        from: Option<u64>,
        to: u64,
    ) -> Result<bool, StoreError> {
        self.inner().move_checkpoint(subscriber, from, to).await
    }

    /// Forwards [`Store::cursor`].
    async fn cursor(&self, subscriber: &str) -> Result<Option<Cursor>, StoreError> {
        self.inner().cursor(subscriber).await
    }

    /// Forwards [`Store::pass_checkpoint`].
    async fn pass_checkpoint(
        &self,
        subscriber: &str,
        from: u64,
        to: u64,
        bookmarks: &[Bookmark],
    ) -> Result<bool, StoreError> {
        self.inner()
            .pass_checkpoint(subscriber, from, to, bookmarks)
            .await
    }

    /// Forwards [`Store::return_to_bookmarks`].
    async fn return_to_bookmarks(
        &self,
        subscriber: &str,
        holders: &[(&str, &str)],
    ) -> Result<(), StoreError> {
        self.inner().return_to_bookmarks(subscriber, holders).await
    }

    /// Forwards [`Store::claim_inbox`].
    async fn claim_inbox(
        &self,
        handler: &str,
        event_id: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<InboxClaim, StoreError> {
        self.inner()
            .claim_inbox(handler, event_id, claim_id, now, lease)
            .await
    }

    /// Forwards [`Store::claim_inbox_batch`].
    async fn claim_inbox_batch(
        &self,
        pairs: &[InboxPair<'_>],
        claim_id: &str,
        now: Instant,
        lease: Duration,
        order: &mut InOrder,
    ) -> Result<Vec<InboxClaim>, StoreError> {
        self.inner()
            .claim_inbox_batch(pairs, claim_id, now, lease, order)
            .await
    }

    /// Forwards [`Store::renew_inbox`].
    async fn renew_inbox(
        &self,
        handler: &str,
        event_id: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        self.inner()
            .renew_inbox(handler, event_id, claim_id, now, lease)
            .await
    }

    /// Forwards [`Store::next_inbox_retry`].
    async fn next_inbox_retry(&self, handler: &str) -> Result<Option<Instant>, StoreError> {
        self.inner().next_inbox_retry(handler).await
    }

    /// Forwards [`Store::inbox_failures`].
    async fn inbox_failures(
        &self,
        handler: &str,
        limit: usize,
    ) -> Result<Vec<InboxFailure>, StoreError> {
        self.inner().inbox_failures(handler, limit).await
    }

    /// Forwards [`Store::claim_due`].
    async fn claim_due(
        &self,
        claim_id: &str,
        now: Instant,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        self.inner().claim_due(claim_id, now, lease, limit).await
    }

    /// Forwards [`Store::renew_scheduled`].
    async fn renew_scheduled(
        &self,
        dedupe_key: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        self.inner()
            .renew_scheduled(dedupe_key, claim_id, now, lease)
            .await
    }

    /// Forwards [`Store::next_due_at`].
    async fn next_due_at(
        &self,
        now: Instant,
        lease: Duration,
    ) -> Result<Option<Instant>, StoreError> {
        self.inner().next_due_at(now, lease).await
    }

    /// Forwards [`Store::next_scheduled_retry`].
    async fn next_scheduled_retry(&self) -> Result<Option<Instant>, StoreError> {
        self.inner().next_scheduled_retry().await
    }

    /// Forwards [`Store::scheduled_of_type`].
    async fn scheduled_of_type(
        &self,
        command_type: &str,
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        self.inner().scheduled_of_type(command_type).await
    }

    /// Forwards [`Store::scheduled_page`].
    async fn scheduled_page(
        &self,
        command_type: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        self.inner()
            .scheduled_page(command_type, after, limit)
            .await
    }

    /// Forwards [`Store::scheduled_types`].
    async fn scheduled_types(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.inner().scheduled_types().await
    }

    /// Forwards [`Store::scheduled_until`].
    async fn scheduled_until(
        &self,
        command_type: &str,
        until: Instant,
        limit: usize,
    ) -> Result<(Vec<ScheduledEntry>, bool), StoreError> {
        self.inner()
            .scheduled_until(command_type, until, limit)
            .await
    }

    /// Forwards [`Store::unclaimable_entries`].
    async fn unclaimable_entries(&self, limit: usize) -> Result<Vec<ScheduledEntry>, StoreError> {
        self.inner().unclaimable_entries(limit).await
    }

    /// Forwards [`Store::scheduled`].
    async fn scheduled(&self, dedupe_key: &str) -> Result<Option<ScheduledEntry>, StoreError> {
        self.inner().scheduled(dedupe_key).await
    }

    /// Forwards [`Store::scheduled_many`].
    async fn scheduled_many(
        &self,
        dedupe_keys: &[String],
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        self.inner().scheduled_many(dedupe_keys).await
    }

    /// Forwards [`Store::claim_letter`].
    async fn claim_letter(
        &self,
        id: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        self.inner().claim_letter(id, claim_id, now, lease).await
    }

    /// Forwards [`Store::renew_letter`].
    async fn renew_letter(
        &self,
        id: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        self.inner().renew_letter(id, claim_id, now, lease).await
    }

    /// Forwards [`Store::release_letter`].
    async fn release_letter(&self, id: &str, claim_id: &str) -> Result<(), StoreError> {
        self.inner().release_letter(id, claim_id).await
    }

    /// Forwards [`Store::dead_letters`].
    async fn dead_letters(&self, filter: &LetterFilter) -> Result<Vec<DeadLetter>, StoreError> {
        self.inner().dead_letters(filter).await
    }

    /// Forwards [`Store::count_dead_letters`].
    async fn count_dead_letters(&self, filter: &LetterFilter) -> Result<u64, StoreError> {
        self.inner().count_dead_letters(filter).await
    }

    /// Forwards [`Store::dead_letter`].
    async fn dead_letter(&self, id: &str) -> Result<Option<DeadLetter>, StoreError> {
        self.inner().dead_letter(id).await
    }

    /// Forwards [`Store::retry_requests`].
    async fn retry_requests(&self, letter: &str) -> Result<Vec<RetryRequest>, StoreError> {
        self.inner().retry_requests(letter).await
    }
}

#[async_trait]
impl<W: Forward> Store for W {
    fn capabilities(&self) -> Capabilities<'_> {
        Forward::capabilities(self)
    }

    async fn read_stream(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        Forward::read_stream(self, aggregate_type, aggregate_id).await
    }

    async fn read_stream_after(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
        version: u64,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        Forward::read_stream_after(self, aggregate_type, aggregate_id, version).await
    }

    async fn snapshot(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
    ) -> Result<Option<Snapshot>, StoreError> {
        Forward::snapshot(self, aggregate_type, aggregate_id).await
    }

    async fn read_tails(
        &self,
        aggregate_type: &str,
        ids: &[String],
    ) -> Result<Vec<StreamTail>, StoreError> {
        Forward::read_tails(self, aggregate_type, ids).await
    }

    async fn read_all(&self, after: u64, limit: usize) -> Result<Vec<RecordedEvent>, StoreError> {
        Forward::read_all(self, after, limit).await
    }

    async fn read_event(&self, id: &str) -> Result<Option<RecordedEvent>, StoreError> {
        Forward::read_event(self, id).await
    }

    async fn stream_ids(
        &self,
        aggregate_type: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        Forward::stream_ids(self, aggregate_type, after, limit).await
    }

    async fn head(&self) -> Result<u64, StoreError> {
        Forward::head(self).await
    }

    async fn commit(&self, writes: &WriteSet) -> Result<Committed, CommitError> {
        Forward::commit(self, writes).await
    }

    async fn commit_many(&self, writes: &[WriteSet]) -> Vec<Result<Committed, CommitError>> {
        Forward::commit_many(self, writes).await
    }

    async fn checkpoint(&self, subscriber: &str) -> Result<Option<u64>, StoreError> {
        Forward::checkpoint(self, subscriber).await
    }

    async fn checkpoints(&self) -> Result<Vec<(String, u64)>, StoreError> {
        Forward::checkpoints(self).await
    }

    async fn move_checkpoint(
        &self,
        subscriber: &str,
        from: Option<u64>,
        to: u64,
    ) -> Result<bool, StoreError> {
        Forward::move_checkpoint(self, subscriber, from, to).await
    }

    async fn cursor(&self, subscriber: &str) -> Result<Option<Cursor>, StoreError> {
        Forward::cursor(self, subscriber).await
    }

    async fn pass_checkpoint(
        &self,
        subscriber: &str,
        from: u64,
        to: u64,
        bookmarks: &[Bookmark],
    ) -> Result<bool, StoreError> {
        Forward::pass_checkpoint(self, subscriber, from, to, bookmarks).await
    }

    async fn return_to_bookmarks(
        &self,
        subscriber: &str,
        holders: &[(&str, &str)],
    ) -> Result<(), StoreError> {
        Forward::return_to_bookmarks(self, subscriber, holders).await
    }

    async fn claim_inbox(
        &self,
        handler: &str,
        event_id: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<InboxClaim, StoreError> {
        Forward::claim_inbox(self, handler, event_id, claim_id, now, lease).await
    }

    async fn claim_inbox_batch(
        &self,
        pairs: &[InboxPair<'_>],
        claim_id: &str,
        now: Instant,
        lease: Duration,
        order: &mut InOrder,
    ) -> Result<Vec<InboxClaim>, StoreError> {
        Forward::claim_inbox_batch(self, pairs, claim_id, now, lease, order).await
    }

    async fn renew_inbox(
        &self,
        handler: &str,
        event_id: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        Forward::renew_inbox(self, handler, event_id, claim_id, now, lease).await
    }

    async fn next_inbox_retry(&self, handler: &str) -> Result<Option<Instant>, StoreError> {
        Forward::next_inbox_retry(self, handler).await
    }

    async fn inbox_failures(
        &self,
        handler: &str,
        limit: usize,
    ) -> Result<Vec<InboxFailure>, StoreError> {
        Forward::inbox_failures(self, handler, limit).await
    }

    async fn claim_due(
        &self,
        claim_id: &str,
        now: Instant,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        Forward::claim_due(self, claim_id, now, lease, limit).await
    }

    async fn renew_scheduled(
        &self,
        dedupe_key: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        Forward::renew_scheduled(self, dedupe_key, claim_id, now, lease).await
    }

    async fn next_due_at(
        &self,
        now: Instant,
        lease: Duration,
    ) -> Result<Option<Instant>, StoreError> {
        Forward::next_due_at(self, now, lease).await
    }

    async fn next_scheduled_retry(&self) -> Result<Option<Instant>, StoreError> {
        Forward::next_scheduled_retry(self).await
    }

    async fn scheduled_of_type(
        &self,
        command_type: &str,
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        Forward::scheduled_of_type(self, command_type).await
    }

    async fn scheduled_page(
        &self,
        command_type: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        Forward::scheduled_page(self, command_type, after, limit).await
    }

    async fn scheduled_types(&self) -> Result<Vec<(String, u64)>, StoreError> {
        Forward::scheduled_types(self).await
    }

    async fn scheduled_until(
        &self,
        command_type: &str,
        until: Instant,
        limit: usize,
    ) -> Result<(Vec<ScheduledEntry>, bool), StoreError> {
        Forward::scheduled_until(self, command_type, until, limit).await
    }

    async fn unclaimable_entries(&self, limit: usize) -> Result<Vec<ScheduledEntry>, StoreError> {
        Forward::unclaimable_entries(self, limit).await
    }

    async fn scheduled(&self, dedupe_key: &str) -> Result<Option<ScheduledEntry>, StoreError> {
        Forward::scheduled(self, dedupe_key).await
    }

    async fn scheduled_many(
        &self,
        dedupe_keys: &[String],
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        Forward::scheduled_many(self, dedupe_keys).await
    }

    async fn claim_letter(
        &self,
        id: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        Forward::claim_letter(self, id, claim_id, now, lease).await
    }

    async fn renew_letter(
        &self,
        id: &str,
        claim_id: &str,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        Forward::renew_letter(self, id, claim_id, now, lease).await
    }

    async fn release_letter(&self, id: &str, claim_id: &str) -> Result<(), StoreError> {
        Forward::release_letter(self, id, claim_id).await
    }

    async fn dead_letters(&self, filter: &LetterFilter) -> Result<Vec<DeadLetter>, StoreError> {
        Forward::dead_letters(self, filter).await
    }

    async fn count_dead_letters(&self, filter: &LetterFilter) -> Result<u64, StoreError> {
        Forward::count_dead_letters(self, filter).await
    }

    async fn dead_letter(&self, id: &str) -> Result<Option<DeadLetter>, StoreError> {
        Forward::dead_letter(self, id).await
    }

    async fn retry_requests(&self, letter: &str) -> Result<Vec<RetryRequest>, StoreError> {
        Forward::retry_requests(self, letter).await
    }
}
