//! What a command answers a handler that sends it: the events it decided, or its typed
//! rejection; and, sent with a delay, when it will run.

use crate::Instant;

/// The events a command decided, in order. An empty list means "already done".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    /// The aggregate type.
    pub aggregate_type: &'static str,
    /// The aggregate instance.
    pub aggregate_id: String,
    /// The stream's version after the command.
    pub version: u64,
    /// The ids of the decided events.
    pub event_ids: Vec<String>,
    /// The types of the decided events.
    pub event_types: Vec<&'static str>,
    /// The global position of the last event stored; `None` when nothing was decided, and inside
    /// a reaction, where nothing is stored until the attempt commits.
    pub position: Option<u64>,
}

/// What a command sent in a reaction answered: the events it decided, or its typed
/// rejection. Failures are the `Err` of the call.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer<R> {
    /// The aggregate decided these events; they are stored when the attempt commits.
    Decided(Decided),
    /// The command rejected with one of its codes; nothing was decided.
    Rejected(R),
}

impl<R> Answer<R> {
    /// The rejection, if the command rejected.
    pub fn rejection(&self) -> Option<&R> {
        match self {
            Answer::Decided(_) => None,
            Answer::Rejected(rejection) => Some(rejection),
        }
    }

    /// The decided events, if the command decided.
    pub fn decided(&self) -> Option<&Decided> {
        match self {
            Answer::Decided(decided) => Some(decided),
            Answer::Rejected(_) => None,
        }
    }
}

/// What a command sent with a delay answered: when it will run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scheduled {
    /// The aggregate type.
    pub aggregate_type: &'static str,
    /// The aggregate instance.
    pub aggregate_id: String,
    /// When it runs.
    pub execute_at: Instant,
}
