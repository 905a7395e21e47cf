//! What the store keeps, as the runtime reads it back.

use serde::{Deserialize, Serialize};

use crate::Instant;
use crate::event::Metadata;

/// An event to append.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// Its id.
    pub id: String,
    /// The event type.
    pub event_type: String,
    /// The payload.
    pub payload: serde_json::Value,
    /// When it was decided.
    pub timestamp: Instant,
    /// How it came to be.
    pub metadata: Metadata,
}

/// Where an appended event landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// The event's id.
    pub id: String,
    /// Its place in the global stream; 0 if the store did not tell it at the commit: a store
    /// that places events once they have committed may leave a group commit's events to the
    /// placer already at work, or to the next reader, as it does when its placing fails.
    pub position: u64,
    /// Its version in its stream.
    pub version: u64,
}

/// What a committed write set stored.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Committed {
    /// The appended events, in order.
    pub events: Vec<Appended>,
    /// The scheduler entries the write set's [`ClaimDue`](crate::store::ClaimDue) claimed, in
    /// due order.
    pub claimed: Vec<ScheduledEntry>,
}

/// A row of the scheduler: a delayed command, a delayed policy run or a process deadline.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduledEntry {
    /// Its key: the same key schedules once.
    pub dedupe_key: String,
    /// What runs: a command type, or a runtime kind such as `bounda.ProcessDeadline`.
    pub command_type: String,
    /// The aggregate instance it concerns.
    pub aggregate_id: String,
    /// The command payload as JSON.
    pub payload: serde_json::Value,
    /// When it is due.
    pub execute_at: Instant,
    /// What the runtime needs to run it in context (correlation, causation, key).
    pub context: serde_json::Value,
    /// Runs that failed; a run whose claim lapsed (its runner killed) is not counted.
    pub attempts: u32,
    /// The last failure, if any.
    pub last_error: Option<String>,
    /// Bumped whenever the entry is rescheduled.
    pub revision: u64,
    /// The claim this worker holds, once claimed.
    pub claim_id: Option<String>,
    /// When it was claimed.
    pub claimed_at: Option<Instant>,
    /// The first column of its row that does not read, if one does not: a run of it fails
    /// naming the entry, and its letter keeps the text as stored.
    pub unreadable: Option<Box<crate::store::Unreadable>>,
}

impl ScheduledEntry {
    /// A new entry, as scheduled: `payload` to run as `command_type` for `aggregate_id` at
    /// `execute_at`, under `dedupe_key`, with no context, never run, unclaimed.
    pub fn new(
        dedupe_key: impl Into<String>,
        command_type: impl Into<String>,
        aggregate_id: impl Into<String>,
        payload: serde_json::Value,
        execute_at: Instant,
    ) -> ScheduledEntry {
        ScheduledEntry {
            dedupe_key: dedupe_key.into(),
            command_type: command_type.into(),
            aggregate_id: aggregate_id.into(),
            payload,
            execute_at,
            context: serde_json::json!({}),
            attempts: 0,
            last_error: None,
            revision: 0,
            claim_id: None,
            claimed_at: None,
            unreadable: None,
        }
    }
}

/// What claiming `(handler, event)` in the inbox found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InboxClaim {
    /// The claim is ours; this is the `attempt`-th run (from 1): one more than the runs that
    /// failed before (a run whose claim lapsed, its runner killed, is not counted).
    Claimed {
        /// The run's number, the first being 1.
        attempt: u32,
    },
    /// It already succeeded: not run again.
    Succeeded,
    /// Another runner holds it until its lease ends.
    Held,
    /// It failed and waits for its back-off until `retry_at`.
    Waiting {
        /// When the retry is due.
        retry_at: Instant,
    },
    /// It was given up on and dead-lettered.
    DeadLettered,
    /// Not tried: it waits behind an earlier pair of the batch (its instance's pair held by
    /// another runner, or its handler's pair waiting for a retry), or the batch already holds as
    /// many claims as it takes.
    Skipped,
}

/// One `(handler, event)` pair to claim in a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InboxPair<'a> {
    /// The reaction's name.
    pub handler: &'a str,
    /// The event it reacts to.
    pub event_id: &'a str,
    /// The instance the run concerns (a process instance, or the event's aggregate instance
    /// for a policy): one handler's pairs of one lane run in order, on one runner at a time.
    pub lane: &'a str,
}

/// An inbox entry waiting for its retry (`Lag`'s `failing`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxFailure {
    /// The handler.
    pub handler: String,
    /// The event it failed on.
    pub event_id: String,
    /// Runs so far.
    pub attempts: u32,
    /// The last error.
    pub last_error: Option<String>,
    /// When the retry is due.
    pub retry_at: Instant,
}

/// A dead letter's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LetterKind {
    /// A policy run.
    Policy,
    /// A process step.
    Process,
    /// A scheduled command.
    Scheduled,
    /// A relay's publish of an event.
    Relay,
    /// A message from another service that could not be taken as a command.
    Ingress,
}

impl LetterKind {
    /// The kind as stored and shown: `policy`, `process`, `scheduled`, `relay` or `ingress`.
    pub fn as_str(self) -> &'static str {
        match self {
            LetterKind::Policy => "policy",
            LetterKind::Process => "process",
            LetterKind::Scheduled => "scheduled",
            LetterKind::Relay => "relay",
            LetterKind::Ingress => "ingress",
        }
    }

    /// The kind stored as `text`, if it is one.
    pub fn parse(text: &str) -> Option<LetterKind> {
        [
            LetterKind::Policy,
            LetterKind::Process,
            LetterKind::Scheduled,
            LetterKind::Relay,
            LetterKind::Ingress,
        ]
        .into_iter()
        .find(|kind| kind.as_str() == text)
    }
}

/// A dead letter's status. Letters are never deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LetterStatus {
    /// Waiting for an operator.
    Failed,
    /// Retried.
    Retried,
    /// Given up.
    Discarded,
}

impl LetterStatus {
    /// The status as stored and shown: `failed`, `retried` or `discarded`.
    pub fn as_str(self) -> &'static str {
        match self {
            LetterStatus::Failed => "failed",
            LetterStatus::Retried => "retried",
            LetterStatus::Discarded => "discarded",
        }
    }
}

/// A run the runtime gave up on.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetter {
    /// Its id; deterministic, so filing it twice finds the first.
    pub id: String,
    /// Policy, process or scheduled.
    pub kind: LetterKind,
    /// The handler (`order.notifyOnOrderPlaced`) or command type.
    pub handler: String,
    /// The event it failed on, if any.
    pub event_id: Option<String>,
    /// That event's type.
    pub event_type: Option<String>,
    /// The aggregate type concerned.
    pub aggregate_type: Option<String>,
    /// The aggregate instance concerned.
    pub aggregate_id: Option<String>,
    /// `terminal` or `retriable_exhausted`.
    pub error_type: String,
    /// The error's message.
    pub error_message: String,
    /// The error's chain of causes.
    pub error_stack: Option<String>,
    /// Runs made before giving up.
    pub attempts: u32,
    /// When it first failed.
    pub first_failed_at: Instant,
    /// When it last failed.
    pub last_failed_at: Instant,
    /// Where it stands.
    pub status: LetterStatus,
    /// The command payload, for scheduled letters.
    pub payload: Option<serde_json::Value>,
}

/// Which dead letters to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LetterFilter {
    /// Only this kind.
    pub kind: Option<LetterKind>,
    /// Only this handler.
    pub handler: Option<String>,
    /// Only this status.
    pub status: Option<LetterStatus>,
    /// Only letters whose error message contains this text.
    pub error_contains: Option<String>,
    /// Only letters that last failed at or after this moment.
    pub failed_from: Option<Instant>,
    /// Only letters that last failed before this moment.
    pub failed_until: Option<Instant>,
    /// At most this many, oldest first.
    pub limit: Option<usize>,
}

/// What the runtime folded from a stream up to `version`, kept so the next load starts there
/// and folds only the events after it. An optimisation: a snapshot that is missing, behind or
/// unreadable costs a longer fold, never a wrong answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The stream's aggregate type.
    pub aggregate_type: String,
    /// The stream's aggregate instance.
    pub aggregate_id: String,
    /// The stream's version it was folded to.
    pub version: u64,
    /// What was folded, as the runtime writes it.
    pub state: serde_json::Value,
}

/// One stream of several read at once ([`Store::read_tails`](crate::store::Store::read_tails)):
/// its snapshot, if one is kept, and its events after the snapshot's version (all of them when
/// none is), oldest first, as one consistent read.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamTail {
    /// The stream's aggregate instance.
    pub aggregate_id: String,
    /// The snapshot kept for it, if any.
    pub snapshot: Option<Snapshot>,
    /// Its events after the snapshot's version.
    pub events: Vec<crate::RecordedEvent>,
}

impl StreamTail {
    /// The tail of a stream with neither snapshot nor events: what a store answers for an id
    /// it has nothing for, and the place it fills as its rows arrive.
    pub fn empty(aggregate_id: impl Into<String>) -> Self {
        Self {
            aggregate_id: aggregate_id.into(),
            ..Self::default()
        }
    }
}
