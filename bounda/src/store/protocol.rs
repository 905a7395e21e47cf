//! The write protocol: how a [`WriteSet`] is written, once for every store.
//!
//! A store opens a transaction (or a savepoint of one), hands [`apply`] its [`Statements`] on
//! it, and commits if `apply` answers `Ok`, or rolls back if it answers an error. Every
//! decision lives here: the order of the steps (the scheduler's release before the new entries,
//! so a run can settle its own claim and re-arm the same key), the entry moved in place, the
//! first failure a letter keeps, a claim held or lost, a letter fenced on its status, the
//! checkpoints moved past what no one takes, the next claim in the same transaction. A store
//! supplies only the statements, each of which writes or reads one thing and reports what it
//! found; the precondition it checks is the statement that writes, so nothing can land between
//! a check and its write.

pub mod wave;

use std::pin::pin;
use std::task::{Context, Poll, Waker};

use crate::Instant;
use crate::store::copy::InboxStatus;
use crate::store::error::{CommitError, StoreError};
use crate::store::ingress::IngressRecord;
use crate::store::instances::InstanceChange;
use crate::store::records::{Appended, Committed, DeadLetter, ScheduledEntry, Snapshot};
use crate::store::retry_requests::RetryRequest;
use crate::store::write_set::{
    Append, ClaimDue, InboxMark, InboxOutcome, LetterSettle, ScheduledOutcome, ScheduledRelease,
    WriteSet,
};

/// The statements of one store, run inside the transaction or savepoint a write set is written
/// in. Each answers what it found or how many rows it changed; [`apply`] decides what that
/// means. A store that answers at once (SQLite) runs them synchronously and returns ready
/// futures.
// Driven only through `apply` on a store's own concrete type, whose futures' auto traits the
// compiler knows: a store on a network gets `Send` futures without a bound here.
#[allow(async_fn_in_trait)]
pub trait Statements {
    /// A dead letter's stored status and the claim of the retry holding it, if it exists. A
    /// store whose writers run at once keeps the row so until the commit (`FOR SHARE`), so a
    /// discard waits for the step that requires the letter.
    async fn letter(&mut self, id: &str) -> Result<Option<(String, Option<String>)>, StoreError>;

    /// When the run holding the inbox pair first failed, if it failed before.
    async fn inbox_first_failure(
        &mut self,
        handler: &str,
        event_id: &str,
    ) -> Result<Option<Instant>, StoreError>;

    /// When the run holding the scheduler entry first failed, if it failed before.
    async fn scheduled_first_failure(&mut self, key: &str) -> Result<Option<Instant>, StoreError>;

    /// The version of a stream, 0 when it has no event.
    async fn stream_version(
        &mut self,
        aggregate_type: &str,
        aggregate_id: &str,
    ) -> Result<u64, StoreError>;

    /// Inserts the events of `append` at `versions` (those after its expected one), only if
    /// the stream stands at `append.expected_version`, answering where they stand;
    /// [`Inserted::Taken`] when it does not, or when another transaction took one of those
    /// versions first (a store whose appenders do not wait for each other finds out here).
    async fn insert_events(
        &mut self,
        append: &Append,
        versions: std::ops::RangeInclusive<u64>,
    ) -> Result<Inserted, StoreError>;

    /// Moves `subscriber`'s checkpoint from `from` to `to`, only if it stands at `from`.
    async fn skip_checkpoint(
        &mut self,
        subscriber: &str,
        from: u64,
        to: u64,
    ) -> Result<(), StoreError>;

    /// Settles an inbox claim that ran as `settle` says, while it is still `mark.claim_id`'s and
    /// pending: released, the attempt counted unless it succeeded, the last error kept when
    /// there is no new one, the first failure kept. Answers the rows changed.
    async fn settle_inbox(
        &mut self,
        mark: &InboxMark,
        settle: &InboxSettle<'_>,
    ) -> Result<u64, StoreError>;

    /// Gives an inbox claim back unrun, while it is still `mark.claim_id`'s and pending: free at
    /// once, no attempt counted. Answers the rows changed.
    async fn release_inbox(&mut self, mark: &InboxMark) -> Result<u64, StoreError>;

    /// Removes a claimed entry, unless it was rescheduled while held. Answers the rows changed.
    async fn complete_scheduled(&mut self, release: &ScheduledRelease) -> Result<u64, StoreError>;

    /// Releases a claimed entry that failed, due again at `execute_at` with one more attempt
    /// counted and its first failure kept, unless it was rescheduled while held. Answers the
    /// rows changed.
    async fn retry_scheduled(
        &mut self,
        release: &ScheduledRelease,
        execute_at: Instant,
        error: &str,
        failed_at: Instant,
    ) -> Result<u64, StoreError>;

    /// Gives a claimed entry back as it stands, its schedule kept and its rescheduled mark
    /// cleared. Answers the rows changed.
    async fn give_back_scheduled(&mut self, release: &ScheduledRelease) -> Result<u64, StoreError>;

    /// Rewrites the claimed entry's row as `entry`: released, its attempts and error cleared, its
    /// revision bumped. Answers the rows changed.
    async fn move_entry(
        &mut self,
        release: &ScheduledRelease,
        entry: &ScheduledEntry,
    ) -> Result<u64, StoreError>;

    /// Removes an entry, claimed or not.
    async fn unschedule(&mut self, key: &str) -> Result<(), StoreError>;

    /// Adds or moves an entry; an identical one is left untouched, its claim and revision
    /// included. Moving one a worker holds keeps the claim, marked rescheduled.
    async fn schedule(&mut self, entry: &ScheduledEntry) -> Result<(), StoreError>;

    /// Files a letter as it is; the same id again leaves the first as it is.
    async fn file_letter(&mut self, letter: &DeadLetter) -> Result<(), StoreError>;

    /// Keeps a snapshot unless a newer one is kept already.
    async fn keep_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), StoreError>;

    /// Writes what `change` changes in its instance's row of the instances index: a new row
    /// when the change starts the instance (or none is kept yet), else only what it changes.
    async fn index_instance(&mut self, change: &InstanceChange) -> Result<(), StoreError>;

    /// Claims the next due entries, as [`Store::claim_due`](crate::store::Store::claim_due).
    async fn claim_due(&mut self, claim: &ClaimDue) -> Result<Vec<ScheduledEntry>, StoreError>;

    /// Moves a letter out of `failed`, only while it is `failed`. Answers the rows changed.
    async fn settle_letter(&mut self, settle: &LetterSettle) -> Result<u64, StoreError>;

    /// Keeps a requested retry: a new one as it is; a finished one gives its stored request the
    /// outcome, unless that has one already (the first outcome stands).
    async fn keep_retry_request(&mut self, request: &RetryRequest) -> Result<(), StoreError>;

    /// Keeps an arrived command's key and answer unless the key is kept already: the rows
    /// inserted, 0 or 1.
    async fn keep_ingress(&mut self, record: &IngressRecord) -> Result<u64, StoreError>;
}

/// What inserting a stream's events found.
#[derive(Debug, Clone, PartialEq)]
pub enum Inserted {
    /// Inserted, at these positions in the global order, in order.
    At(Vec<u64>),
    /// Inserted; the store gives their positions once they have committed, and moves the
    /// skipping subscribers past them itself (a store whose appenders do not wait for each
    /// other: see `bounda-postgres`). Until then their [`Appended::position`] is 0.
    Unplaced,
    /// The stream was not at the expected version, or another transaction took one of the
    /// versions first: the stream moved.
    Taken,
}

/// How an inbox claim that ran is settled, as its row keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxSettle<'a> {
    /// The pair's new status: succeeded, failed or dead.
    pub status: InboxStatus,
    /// When a failed pair's retry is due.
    pub retry_at: Option<Instant>,
    /// Why it failed, if it did.
    pub error: Option<&'a str>,
    /// When it failed, if it did: kept unless an earlier failure is.
    pub failed_at: Option<Instant>,
}

impl<'a> InboxSettle<'a> {
    /// The settle of `outcome`; `None` for a claim given back unrun.
    fn of(outcome: &'a InboxOutcome) -> Option<InboxSettle<'a>> {
        let settle = |status, retry_at, error, failed_at| InboxSettle {
            status,
            retry_at,
            error,
            failed_at,
        };
        Some(match outcome {
            InboxOutcome::Succeeded => settle(InboxStatus::Succeeded, None, None, None),
            InboxOutcome::Failed {
                retry_at,
                error,
                failed_at,
            } => settle(
                InboxStatus::Failed,
                Some(*retry_at),
                Some(error.as_str()),
                Some(*failed_at),
            ),
            InboxOutcome::DeadLettered { error } => {
                settle(InboxStatus::DeadLettered, None, Some(error.as_str()), None)
            }
            InboxOutcome::Released => return None,
        })
    }
}

/// Writes `writes` with `statements`, inside a transaction or savepoint the caller commits on
/// `Ok` and rolls back on an error. See the module documentation.
pub async fn apply<S: Statements>(
    statements: &mut S,
    writes: &WriteSet,
) -> Result<Committed, CommitError> {
    let s = statements;
    if let Some(hold) = &writes.require_letter {
        match s.letter(&hold.id).await? {
            Some((status, claim_id))
                if status == crate::store::LetterStatus::Failed.as_str()
                    && claim_id.as_deref() == Some(hold.claim_id.as_str()) => {}
            Some(_) => {
                return Err(CommitError::LetterSettled {
                    id: hold.id.clone(),
                });
            }
            None => return Err(no_letter(&hold.id)),
        }
    }
    // A letter filed with its claim's give-up keeps the run's first failure.
    let first_failure = match (&writes.inbox, &writes.scheduled) {
        _ if writes.dead_letters.is_empty() => None,
        (Some(mark), _) => s.inbox_first_failure(&mark.handler, &mark.event_id).await?,
        (None, Some(release)) => s.scheduled_first_failure(&release.dedupe_key).await?,
        (None, None) => None,
    };
    // An arrived command's key first: a second delivery writes nothing of its decision.
    if let Some(record) = &writes.ingress
        && s.keep_ingress(record).await? == 0
    {
        return Err(CommitError::KeyTaken {
            key: record.key.clone(),
        });
    }
    let mut committed = Committed::default();
    let mut placed = true;
    for append in &writes.appends {
        placed &= append_events(s, append, &mut committed).await?;
    }
    // Subscribers that take none of these events and stand just before them move past them,
    // if they are contiguous (no one else's among them): a pass of theirs would do the same.
    if let (Some(first), Some(last), true) =
        (committed.events.first(), committed.events.last(), placed)
        && last.position.checked_sub(first.position) == Some(committed.events.len() as u64 - 1)
    {
        for subscriber in &writes.skip {
            s.skip_checkpoint(subscriber, first.position.saturating_sub(1), last.position)
                .await?;
        }
    }
    if let Some(mark) = &writes.inbox {
        let changed = match InboxSettle::of(&mark.outcome) {
            Some(settle) => s.settle_inbox(mark, &settle).await?,
            None => s.release_inbox(mark).await?,
        };
        if changed == 0 {
            return Err(CommitError::ClaimLost {
                key: format!("{}:{}", mark.handler, mark.event_id),
            });
        }
    }
    let moved = moved_entry(writes);
    match (moved, &writes.scheduled) {
        (Some((release, entry)), _) => {
            if s.move_entry(release, entry).await? == 0 {
                return Err(scheduled_claim_lost(release));
            }
        }
        (None, Some(release)) => release_scheduled(s, release).await?,
        (None, None) => {}
    }
    for key in &writes.unschedule {
        s.unschedule(key).await?;
    }
    let moved_key = moved.map(|(release, _)| release.dedupe_key.as_str());
    for entry in writes
        .schedule
        .iter()
        .filter(|entry| Some(entry.dedupe_key.as_str()) != moved_key)
    {
        s.schedule(entry).await?;
    }
    for letter in &writes.dead_letters {
        match first_failure.filter(|first| *first < letter.first_failed_at) {
            Some(first_failed_at) => {
                let letter = DeadLetter {
                    first_failed_at,
                    ..letter.clone()
                };
                s.file_letter(&letter).await?
            }
            None => s.file_letter(letter).await?,
        }
    }
    for snapshot in &writes.snapshots {
        s.keep_snapshot(snapshot).await?;
    }
    for change in &writes.instances {
        s.index_instance(change).await?;
    }
    for request in &writes.retry_requests {
        s.keep_retry_request(request).await?;
    }
    if let Some(next) = &writes.claim_due {
        committed.claimed = s.claim_due(next).await?;
    }
    if let Some(settle) = &writes.settle_letter
        && s.settle_letter(settle).await? == 0
    {
        return Err(match s.letter(&settle.id).await? {
            Some(_) => CommitError::LetterSettled {
                id: settle.id.clone(),
            },
            None => no_letter(&settle.id),
        });
    }
    Ok(committed)
}

/// [`apply`] for a store whose statements answer at once (their futures are ready when made):
/// driven to its end here, with no runtime. A statement that would wait is a store failure.
pub fn apply_at_once<S: Statements>(
    statements: &mut S,
    writes: &WriteSet,
) -> Result<Committed, CommitError> {
    at_once(apply(statements, writes)).unwrap_or_else(|| {
        Err(StoreError::new("a statement of this store did not answer at once").into())
    })
}

/// `future`'s answer, if it has one when first polled: how a store whose statements answer at
/// once drives the protocol (and [`wave::apply_wave`]) with no runtime. `None` when it would
/// wait.
pub fn at_once<T>(future: impl Future<Output = T>) -> Option<T> {
    match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(answer) => Some(answer),
        Poll::Pending => None,
    }
}

/// Whether others listening on the store should wake once `writes` commits: it appended events,
/// or scheduled an entry that may come due before what idle runners wait for. An entry a run
/// re-arms in place is that runner's own to run.
pub fn wakes_others(writes: &WriteSet) -> bool {
    let moved_key = moved_entry(writes).map(|(release, _)| release.dedupe_key.as_str());
    !writes.appends.is_empty()
        || writes
            .schedule
            .iter()
            .any(|entry| Some(entry.dedupe_key.as_str()) != moved_key)
}

/// A run that completes its entry and schedules the same key again (a deadline re-armed at the
/// instance's next moment) moves the entry in place: one row written, not two.
fn moved_entry(writes: &WriteSet) -> Option<(&ScheduledRelease, &ScheduledEntry)> {
    let release = writes.scheduled.as_ref()?;
    if release.outcome != ScheduledOutcome::Complete {
        return None;
    }
    let entry = writes
        .schedule
        .iter()
        .find(|entry| entry.dedupe_key == release.dedupe_key)?;
    Some((release, entry))
}

/// Appends one stream's events at the version its decision saw, or refuses with the version
/// found. Answers whether their positions are known.
async fn append_events<S: Statements>(
    s: &mut S,
    append: &Append,
    committed: &mut Committed,
) -> Result<bool, CommitError> {
    let moved = |actual_version| CommitError::StreamMoved {
        aggregate_type: append.aggregate_type.clone(),
        aggregate_id: append.aggregate_id.clone(),
        expected_version: append.expected_version,
        actual_version,
    };
    let first = append.expected_version + 1;
    let versions = first..=append.expected_version + append.events.len() as u64;
    let (positions, placed) = match s.insert_events(append, versions).await? {
        Inserted::At(positions) => (positions, true),
        Inserted::Unplaced => (vec![0; append.events.len()], false),
        Inserted::Taken => {
            let actual = s
                .stream_version(&append.aggregate_type, &append.aggregate_id)
                .await?;
            return Err(moved(actual));
        }
    };
    committed
        .events
        .extend(append.events.iter().zip(positions).zip(first..).map(
            |((event, position), version)| Appended {
                id: event.id.clone(),
                position,
                version,
            },
        ));
    Ok(placed)
}

/// Settles a scheduler claim. An entry rescheduled while it was held keeps its new schedule:
/// completing or retrying it only gives the claim back.
async fn release_scheduled<S: Statements>(
    s: &mut S,
    release: &ScheduledRelease,
) -> Result<(), CommitError> {
    let changed = match &release.outcome {
        ScheduledOutcome::Complete => s.complete_scheduled(release).await?,
        ScheduledOutcome::Retry {
            execute_at,
            error,
            failed_at,
        } => {
            s.retry_scheduled(release, *execute_at, error, *failed_at)
                .await?
        }
        ScheduledOutcome::Defer => 0,
    };
    // Deferred, or rescheduled meanwhile: the claim is given back, the schedule kept.
    let changed = match changed {
        0 => s.give_back_scheduled(release).await?,
        changed => changed,
    };
    match changed {
        0 => Err(scheduled_claim_lost(release)),
        _ => Ok(()),
    }
}

fn scheduled_claim_lost(release: &ScheduledRelease) -> CommitError {
    CommitError::ScheduledClaimLost {
        key: release.dedupe_key.clone(),
    }
}

fn no_letter(id: &str) -> CommitError {
    StoreError::new(format!("no dead letter `{id}`")).into()
}
