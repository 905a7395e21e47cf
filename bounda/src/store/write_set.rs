//! A write set: everything one attempt writes, committed together or not at all.

use crate::Instant;
#[cfg(doc)]
use crate::store::error::CommitError;
use crate::store::ingress::IngressRecord;
use crate::store::instances::{
    DeadlinePayload, InstanceChange, InstanceStatus, NextDue, STREAM_PREFIX, entry_key,
};
use crate::store::records::{DeadLetter, LetterStatus, NewEvent, ScheduledEntry, Snapshot};
use crate::store::retry_requests::RetryRequest;

/// Events to append to one stream, at the version the decision saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Append {
    /// The aggregate type.
    pub aggregate_type: String,
    /// The aggregate instance.
    pub aggregate_id: String,
    /// The stream's version when the decision was made; the append fails if it moved.
    pub expected_version: u64,
    /// The events, in order.
    pub events: Vec<NewEvent>,
}

/// How an attempt settles its inbox claim.
#[derive(Debug, Clone, PartialEq)]
pub enum InboxOutcome {
    /// Done: never run again.
    Succeeded,
    /// Failed; run again once `retry_at` has come.
    Failed {
        /// When the retry is due.
        retry_at: Instant,
        /// Why it failed.
        error: String,
        /// When it failed: the first failure of a run is kept for its letter.
        failed_at: Instant,
    },
    /// Given up on; its dead letter is in the same write set.
    DeadLettered {
        /// Why it failed.
        error: String,
    },
    /// Not run: the claim is given back and its attempt not counted, so the next runner takes
    /// it at once (a batch cut short by a held handler or a shutdown).
    Released,
}

/// Settles the claim `claim_id` on `(handler, event_id)`: written only while the claim is still
/// ours, else the whole write set rolls back with [`CommitError::ClaimLost`].
#[derive(Debug, Clone, PartialEq)]
pub struct InboxMark {
    /// The reaction's name.
    pub handler: String,
    /// The event it reacted to.
    pub event_id: String,
    /// The claim taken before the attempt.
    pub claim_id: String,
    /// How it ended.
    pub outcome: InboxOutcome,
}

/// How a worker settles a scheduler entry it claimed.
#[derive(Debug, Clone, PartialEq)]
pub enum ScheduledOutcome {
    /// Ran: the entry is removed.
    Complete,
    /// Failed: released, due again at `execute_at`, one more attempt counted.
    Retry {
        /// When to run again.
        execute_at: Instant,
        /// Why it failed.
        error: String,
        /// When it failed: the first failure of a run is kept for its letter.
        failed_at: Instant,
    },
    /// Not run (reached too late in a batch): released, no attempt counted.
    Defer,
}

/// Settles the claim `claim_id` on scheduler entry `dedupe_key`; written only while the claim is
/// still ours, else [`CommitError::ScheduledClaimLost`].
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduledRelease {
    /// The entry.
    pub dedupe_key: String,
    /// The claim the worker took.
    pub claim_id: String,
    /// How it ended.
    pub outcome: ScheduledOutcome,
}

/// Moves a dead letter out of `failed`: written only while it is `failed`, else
/// [`CommitError::LetterSettled`].
#[derive(Debug, Clone, PartialEq)]
pub struct LetterSettle {
    /// The letter.
    pub id: String,
    /// `retried` or `discarded`.
    pub status: LetterStatus,
}

/// A dead letter an operator's retry holds: a write set that requires it is written only while
/// the letter is `failed` and still held by `claim_id`, else it is refused with
/// [`CommitError::LetterSettled`].
#[derive(Debug, Clone, PartialEq)]
pub struct LetterHold {
    /// The letter.
    pub id: String,
    /// The retry's claim on it.
    pub claim_id: String,
}

/// Everything one attempt writes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteSet {
    /// Events to append, per stream.
    pub appends: Vec<Append>,
    /// Scheduler entries to add or move; an identical entry is left untouched.
    pub schedule: Vec<ScheduledEntry>,
    /// Scheduler entries to remove, by key.
    pub unschedule: Vec<String>,
    /// The inbox claim to settle.
    pub inbox: Option<InboxMark>,
    /// The scheduler claim to settle.
    pub scheduled: Option<ScheduledRelease>,
    /// Dead letters to file; one whose id exists already is left as it is. Filed
    /// with the settling of a claim whose run failed before, a letter keeps that first failure
    /// as its `first_failed_at`.
    pub dead_letters: Vec<DeadLetter>,
    /// A dead letter to settle.
    pub settle_letter: Option<LetterSettle>,
    /// A dead letter that must still be `failed` and held by the retry's claim for anything to
    /// be written: each step of an operator's retry is fenced on its letter, so a retry whose
    /// claim another retry took over writes nothing more.
    pub require_letter: Option<LetterHold>,
    /// Subscribers that take none of the events appended here. One whose checkpoint stands just
    /// before them, when no one else's events are among them, moves past them as its own pass
    /// would: in the same transaction, or (a store that places events once they have committed)
    /// with their placing. Work that only records (a process's lifecycle events) costs no
    /// checkpoint write.
    pub skip: Vec<String>,
    /// Snapshots to keep; one older than the snapshot already kept for its stream is ignored.
    pub snapshots: Vec<Snapshot>,
    /// What the appends change in the instances index ([`instances`](crate::store::instances)),
    /// written after them. The runtime derives them from the rest of the write set as it
    /// commits.
    pub instances: Vec<InstanceChange>,
    /// Claims the next due scheduler entries in the same transaction, as
    /// [`Store::claim_due`](crate::store::Store::claim_due) does, answered in
    /// [`Committed::claimed`](crate::store::Committed::claimed): a worker under load commits
    /// one batch and claims the next in one write.
    pub claim_due: Option<ClaimDue>,
    /// Retries an operator requested, to record or to finish: a new one is kept as it is, and a
    /// finished one gives its request its outcome, unless that request has one already.
    pub retry_requests: Vec<RetryRequest>,
    /// The idempotency key an arrived command is decided under, with its answer: written only
    /// if the key is new, else the whole write set is refused with [`CommitError::KeyTaken`].
    pub ingress: Option<IngressRecord>,
}

/// What to claim: up to `limit` entries due at `now` whose claim is free or has lapsed, under
/// `claim_id` until `now + lease`, as [`Store::claim_due`](crate::store::Store::claim_due) does.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimDue {
    /// The claim's id.
    pub claim_id: String,
    /// The moment entries must be due at.
    pub now: Instant,
    /// How long a claim lasts.
    pub lease: crate::Duration,
    /// The most entries to claim.
    pub limit: usize,
}

impl WriteSet {
    /// Whether it writes nothing at all.
    pub fn is_empty(&self) -> bool {
        *self == WriteSet::default()
    }

    /// What these writes change in the instances index: one change per instance stream they
    /// append to (an append without events included: a deadline armed again, fenced on the
    /// stream's version).
    pub(crate) fn instance_changes(&self) -> Vec<InstanceChange> {
        let writes = self;
        writes
            .appends
            .iter()
            .filter_map(|append| {
                let process = append.aggregate_type.strip_prefix(STREAM_PREFIX)?;
                let id = append.aggregate_id.as_str();
                let status =
                    InstanceStatus::after_all(append.events.iter().map(|e| e.event_type.as_str()));
                let key = entry_key(process, id);
                let armed = writes
                    .schedule
                    .iter()
                    .filter(|entry| entry.dedupe_key == key)
                    .find_map(DeadlinePayload::moment);
                let next_due = match (status, armed) {
                    // An instance that leaves running has nothing due, whatever its entry holds
                    // until the entry's run finds it so.
                    (Some(status), _) if status != InstanceStatus::Running => NextDue::Clear,
                    (_, Some(at)) => NextDue::At(at),
                    _ if writes.unschedule.contains(&key) => NextDue::Clear,
                    _ => NextDue::Keep,
                };
                let first = append.events.first();
                Some(InstanceChange {
                    process: process.to_owned(),
                    instance_id: id.to_owned(),
                    at: append.events.last().map(|event| event.timestamp),
                    started: first
                        .filter(|_| append.expected_version == 0)
                        .map(|event| event.metadata.correlation_id.clone()),
                    status,
                    next_due,
                })
            })
            .collect()
    }
}
