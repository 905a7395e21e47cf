//! How a store fails: a write set refused on a precondition ([`CommitError`]), and the store
//! itself failing ([`StoreError`]).

/// Why a write set was not committed. Nothing of it was written.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// A stream moved since the decision was made.
    #[error(
        "stream `{aggregate_type}:{aggregate_id}` is at version {actual_version}, not {expected_version}"
    )]
    StreamMoved {
        /// The aggregate type.
        aggregate_type: String,
        /// The aggregate instance.
        aggregate_id: String,
        /// The version the decision saw.
        expected_version: u64,
        /// The version found.
        actual_version: u64,
    },
    /// An inbox claim was taken over by another runner after its lease.
    #[error("the claim on `{key}` was lost to another runner")]
    ClaimLost {
        /// The inbox `handler:event`.
        key: String,
    },
    /// A scheduler entry's claim was taken over by another runner after its lease.
    #[error("the claim on scheduled entry `{key}` was lost to another runner")]
    ScheduledClaimLost {
        /// The scheduler key.
        key: String,
    },
    /// The dead letter is no longer `failed`, or another retry holds it.
    #[error("dead letter `{id}` is already settled, or another retry holds it")]
    LetterSettled {
        /// The letter.
        id: String,
    },
    /// The idempotency key of an arrived command was decided under already, by another
    /// delivery of it.
    #[error("idempotency key `{key}` was decided under already")]
    KeyTaken {
        /// The key.
        key: String,
    },
    /// The store itself failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl CommitError {
    /// The stable code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            CommitError::StreamMoved { .. } => "CONCURRENCY_CONFLICT",
            CommitError::ClaimLost { .. } => "CLAIM_LOST",
            CommitError::ScheduledClaimLost { .. } => "SCHEDULED_CLAIM_LOST",
            CommitError::LetterSettled { .. } => "DEAD_LETTER_SETTLED",
            CommitError::KeyTaken { .. } => "IDEMPOTENCY_KEY_TAKEN",
            CommitError::Store(error) => error.code(),
        }
    }

    /// Whether the attempt may be run again: a moved stream is rerun on the new state, a store
    /// failure is retried; a lost claim or a settled letter is someone else's to finish.
    pub fn is_retriable(&self) -> bool {
        matches!(
            self,
            CommitError::StreamMoved { .. } | CommitError::Store(_)
        )
    }

    /// Whether the store could not be reached (see [`StoreError::is_unavailable`]).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, CommitError::Store(error) if error.is_unavailable())
    }
}

/// The store failed: I/O, a corrupt row, a database it cannot use.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct StoreError {
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
    /// The database is out of reach (a server restarting, a failover, a network blip): waiting
    /// mends it, so the runtime waits it out instead of stopping.
    unavailable: bool,
}

impl StoreError {
    /// The stable code of a store failure.
    pub fn code(&self) -> &'static str {
        "STORE_FAILED"
    }

    /// Store failures are retried: the disk may come back.
    pub fn is_retriable(&self) -> bool {
        true
    }

    /// An error with a message only.
    pub fn new(message: impl Into<String>) -> StoreError {
        StoreError {
            message: message.into(),
            source: None,
            unavailable: false,
        }
    }

    /// The same error, marked as the database being out of reach when `unavailable`: a store
    /// marks the failures that waiting mends (a refused or dropped connection, a server shutting
    /// down), never those it cannot (a read-only or full database, a schema it refuses).
    pub fn unavailable_if(mut self, unavailable: bool) -> StoreError {
        self.unavailable |= unavailable;
        self
    }

    /// Whether the database was out of reach: the runtime keeps trying, with its back-off, for
    /// as long as that lasts.
    pub fn is_unavailable(&self) -> bool {
        self.unavailable
    }

    /// A copy to hand to several callers (each write set of a failed group commit): the
    /// message with its causes on one line (`cannot commit: disk I/O error`), as the source
    /// itself cannot be copied.
    pub fn flattened(&self) -> StoreError {
        StoreError::new(chain(self)).unavailable_if(self.unavailable)
    }

    /// An error caused by `source`.
    pub fn with_source(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> StoreError {
        StoreError {
            message: message.into(),
            source: Some(Box::new(source)),
            unavailable: false,
        }
    }
}

/// An error and its causes on one line, `context: cause: cause`, for letters and logs: an
/// operator reading "cannot begin a write" needs the "database is locked" under it.
pub(crate) fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
