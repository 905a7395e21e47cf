//! A store that loses races on purpose: before each of its first commits to a stream, another
//! writer appends to that stream, so the commit finds it moved. It can also fail reading one
//! event, as a disk would. Commits failing as a lock, a full disk or a broken one makes them are
//! `bounda::testing::FaultyStore`'s.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use std::sync::Arc;

use bounda::store::forward::Forward;
use bounda::store::*;
use bounda::{Duration, Instant, RecordedEvent};

pub struct Racing {
    /// The store it wraps: the suite's ([`super::database`]).
    pub inner: Arc<dyn Store>,
    /// How many commits still lose their race.
    pub races: AtomicU32,
    /// Races to arm once the first commit is through.
    pub after_first: AtomicU32,
    /// An event whose reads fail.
    pub unreadable: Mutex<Option<String>>,
    /// Whether reading the log fails, as a broken disk would.
    pub log_fails: std::sync::atomic::AtomicBool,
    /// Whether reading the log fails as a database server out of reach does (restarting, a
    /// failover): an error marked unavailable.
    pub log_unreachable: std::sync::atomic::AtomicBool,
    /// How often the log was read.
    pub log_reads: AtomicU32,
    /// How often one stream, or its snapshot, was read.
    pub stream_reads: AtomicU32,
    /// How often several streams were read at once (`read_tails`).
    pub tails_reads: AtomicU32,
    /// How often one scheduler entry was read (`scheduled`).
    pub entry_reads: AtomicU32,
    /// How often several scheduler entries were read at once (`scheduled_many`).
    pub entries_reads: AtomicU32,
    /// Whether releasing a letter's claim fails.
    pub release_fails: AtomicBool,
    /// Whether a group commit's answer is one short, as a broken store's would be.
    pub short_answers: AtomicBool,
    /// Whether a batch of inbox claims is answered one short.
    pub short_claims: AtomicBool,
    /// Whether it says it is a store a round trip away, whose worker prepares its next batch
    /// while the last commits (`Capabilities::pipelined_batches`).
    pub pipelined: AtomicBool,
    /// How often due entries were claimed on their own (`claim_due`).
    pub claims: AtomicU32,
    /// How often due entries were claimed in a commit (a write set's `claim_due`).
    pub claims_in_commits: AtomicU32,
    /// How often due entries were claimed on their own while a commit was under way.
    pub claims_beside_commits: AtomicU32,
    /// How often a subscriber's deliveries were claimed while a commit was under way.
    pub inbox_claims_beside_commits: AtomicU32,
    /// Commits under way: while `pipelined`, a commit waits a turn first, as one a round trip
    /// away does, so what runs beside it can.
    committing: AtomicU32,
    /// Another operator's retry, which takes letter `.0` at `.1` just before the next commit
    /// fenced on that letter.
    pub rival_retry: Mutex<Option<(String, Instant)>>,
}

impl Racing {
    /// How often, so far, streams were read one at a time and several at once.
    pub fn reads(&self) -> (u32, u32) {
        (
            self.stream_reads.load(Ordering::SeqCst),
            self.tails_reads.load(Ordering::SeqCst),
        )
    }

    /// The reads made since [`Racing::reads`] answered `before`.
    pub fn reads_since(&self, before: (u32, u32)) -> (u32, u32) {
        let (streams, tails) = self.reads();
        (streams - before.0, tails - before.1)
    }

    /// How often, so far, scheduler entries were read one at a time and several at once.
    pub fn entry_reads(&self) -> (u32, u32) {
        (
            self.entry_reads.load(Ordering::SeqCst),
            self.entries_reads.load(Ordering::SeqCst),
        )
    }

    /// How often, so far, due entries were claimed on their own, in a commit, and on their own
    /// while a commit was under way.
    pub fn claims(&self) -> (u32, u32, u32) {
        (
            self.claims.load(Ordering::SeqCst),
            self.claims_in_commits.load(Ordering::SeqCst),
            self.claims_beside_commits.load(Ordering::SeqCst),
        )
    }

    /// A fresh store of the suite's whose first `races` commits lose their race.
    pub async fn losing(races: u32) -> Racing {
        Racing::over(super::database::store().await, races)
    }

    /// `inner`, whose first `races` commits lose their race.
    pub fn over(inner: Arc<dyn Store>, races: u32) -> Racing {
        Racing {
            inner,
            races: AtomicU32::new(races),
            after_first: AtomicU32::new(0),
            unreadable: Mutex::new(None),
            log_fails: std::sync::atomic::AtomicBool::new(false),
            log_unreachable: std::sync::atomic::AtomicBool::new(false),
            log_reads: AtomicU32::new(0),
            stream_reads: AtomicU32::new(0),
            tails_reads: AtomicU32::new(0),
            entry_reads: AtomicU32::new(0),
            entries_reads: AtomicU32::new(0),
            release_fails: AtomicBool::new(false),
            short_answers: AtomicBool::new(false),
            short_claims: AtomicBool::new(false),
            rival_retry: Mutex::new(None),
            pipelined: AtomicBool::new(false),
            claims: AtomicU32::new(0),
            claims_in_commits: AtomicU32::new(0),
            claims_beside_commits: AtomicU32::new(0),
            inbox_claims_beside_commits: AtomicU32::new(0),
            committing: AtomicU32::new(0),
        }
    }

    /// A fresh store of the suite's that says it is a store a round trip away, whose runners
    /// prepare their next batch while the last commits (`Capabilities::pipelined_batches`).
    pub async fn pipelined() -> Racing {
        let racing = Racing::losing(0).await;
        racing.pipelined.store(true, Ordering::SeqCst);
        racing
    }

    /// How often, so far, a subscriber's deliveries were claimed while a commit was under way.
    pub fn inbox_claims_beside(&self) -> u32 {
        self.inbox_claims_beside_commits.load(Ordering::SeqCst)
    }

    /// Counts a commit under way while `pipelined`, until the guard drops.
    fn under_way(&self) -> Option<Committing<'_>> {
        self.pipelined.load(Ordering::SeqCst).then(|| {
            self.committing.fetch_add(1, Ordering::SeqCst);
            Committing(&self.committing)
        })
    }

    /// A store whose commits lose `races` races once the first commit (an outside command) is
    /// through, so only a reaction's commits lose them.
    pub async fn after_first_commit(races: u32) -> Racing {
        let racing = Racing::losing(0).await;
        racing.after_first.store(races, Ordering::SeqCst);
        racing
    }

    /// The competing writer: one more event on the stream, at the version it has now.
    async fn interfere(&self, append: &Append) {
        let version = self
            .inner
            .read_stream(&append.aggregate_type, &append.aggregate_id)
            .await
            .expect("readable")
            .len() as u64;
        let mut event = append.events[0].clone();
        event.id = format!("rival-{}-{version}", append.aggregate_id);
        let rival = Append {
            expected_version: version,
            events: vec![event],
            ..append.clone()
        };
        self.inner
            .commit(&WriteSet {
                appends: vec![rival],
                ..WriteSet::default()
            })
            .await
            .expect("the rival commits");
    }
}

#[bounda::store::async_trait]
impl Forward for Racing {
    fn inner(&self) -> &dyn Store {
        &*self.inner
    }

    fn capabilities(&self) -> Capabilities<'_> {
        let capabilities = self.inner.capabilities();
        match self.pipelined.load(Ordering::SeqCst) {
            true => capabilities.with_pipelined_batches(),
            false => capabilities,
        }
    }

    async fn claim_due(
        &self,
        claim_id: &str,
        now: Instant,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        self.claims.fetch_add(1, Ordering::SeqCst);
        if self.committing.load(Ordering::SeqCst) > 0 {
            self.claims_beside_commits.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.claim_due(claim_id, now, lease, limit).await
    }

    async fn read_stream(&self, t: &str, id: &str) -> Result<Vec<RecordedEvent>, StoreError> {
        self.stream_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.read_stream(t, id).await
    }
    async fn read_stream_after(
        &self,
        t: &str,
        id: &str,
        version: u64,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        self.stream_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.read_stream_after(t, id, version).await
    }
    async fn read_tails(&self, t: &str, ids: &[String]) -> Result<Vec<StreamTail>, StoreError> {
        self.tails_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.read_tails(t, ids).await
    }
    async fn scheduled(&self, key: &str) -> Result<Option<ScheduledEntry>, StoreError> {
        self.entry_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.scheduled(key).await
    }
    async fn scheduled_many(&self, keys: &[String]) -> Result<Vec<ScheduledEntry>, StoreError> {
        self.entries_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.scheduled_many(keys).await
    }
    async fn snapshot(&self, t: &str, id: &str) -> Result<Option<Snapshot>, StoreError> {
        self.stream_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.snapshot(t, id).await
    }
    async fn read_all(&self, after: u64, limit: usize) -> Result<Vec<RecordedEvent>, StoreError> {
        self.log_reads.fetch_add(1, Ordering::SeqCst);
        if self.log_fails.load(Ordering::SeqCst) {
            return Err(StoreError::new("cannot read the log: disk I/O error"));
        }
        if self.log_unreachable.load(Ordering::SeqCst) {
            return Err(
                StoreError::new("cannot connect to the database: connection refused")
                    .unavailable_if(true),
            );
        }
        self.inner.read_all(after, limit).await
    }
    async fn read_event(&self, id: &str) -> Result<Option<RecordedEvent>, StoreError> {
        let unreadable = self.unreadable.lock().expect("not poisoned").clone();
        if unreadable.as_deref() == Some(id) {
            return Err(StoreError::new(format!(
                "cannot read event `{id}`: disk I/O error"
            )));
        }
        self.inner.read_event(id).await
    }

    async fn commit_many(&self, writes: &[WriteSet]) -> Vec<Result<Committed, CommitError>> {
        if self.short_answers.load(Ordering::SeqCst) {
            let mut answers = self.inner.commit_many(writes).await;
            answers.pop();
            return answers;
        }
        // Each write set loses its race on its own; the whole wave is one commit under way.
        let _wave = self.under_way();
        let mut answers = Vec::with_capacity(writes.len());
        for writes in writes {
            answers.push(Forward::commit(self, writes).await);
        }
        answers
    }
    async fn commit(&self, writes: &WriteSet) -> Result<Committed, CommitError> {
        if writes.claim_due.is_some() {
            self.claims_in_commits.fetch_add(1, Ordering::SeqCst);
        }
        let rival = match &writes.require_letter {
            Some(hold) => {
                let mut rival = self.rival_retry.lock().expect("not poisoned");
                rival.take_if(|(id, _)| *id == hold.id)
            }
            None => None,
        };
        if let Some((id, at)) = rival {
            let taken = self
                .inner
                .claim_letter(&id, "rival-operator", at, bounda::seconds(60))
                .await
                .expect("the rival's claim is answered");
            assert!(taken, "the rival retry takes letter `{id}` at {at}");
        }
        if let Some(append) = writes.appends.first()
            && self.races.load(Ordering::SeqCst) > 0
        {
            self.races.fetch_sub(1, Ordering::SeqCst);
            self.interfere(append).await;
        }
        let under_way = self.under_way();
        if under_way.is_some() {
            tokio::task::yield_now().await;
        }
        let result = self.inner.commit(writes).await;
        drop(under_way);
        let armed = self.after_first.swap(0, Ordering::SeqCst);
        self.races.fetch_add(armed, Ordering::SeqCst);
        result
    }
    async fn claim_inbox_batch(
        &self,
        pairs: &[InboxPair<'_>],
        claim_id: &str,
        now: Instant,
        lease: Duration,
        order: &mut InOrder,
    ) -> Result<Vec<InboxClaim>, StoreError> {
        if self.committing.load(Ordering::SeqCst) > 0 {
            self.inbox_claims_beside_commits
                .fetch_add(1, Ordering::SeqCst);
        }
        let mut claims = self
            .inner
            .claim_inbox_batch(pairs, claim_id, now, lease, order)
            .await?;
        if self.short_claims.load(Ordering::SeqCst) {
            claims.pop();
        }
        Ok(claims)
    }
    async fn release_letter(&self, id: &str, claim_id: &str) -> Result<(), StoreError> {
        if self.release_fails.load(Ordering::SeqCst) {
            return Err(StoreError::new("the disk went away"));
        }
        self.inner.release_letter(id, claim_id).await
    }
}

/// A commit under way, counted in `Racing::committing` until dropped.
struct Committing<'a>(&'a AtomicU32);

impl Drop for Committing<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
