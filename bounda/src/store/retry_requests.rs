//! Retries an operator asked for: a request is a scheduler entry a worker takes, and a record of
//! who asked, when, and what the retry did, which the asker reads back.
//!
//! An operator's command runs in the operator's shell, whose environment is not production's: a
//! handler configured there (a duration, an address) would run with other settings than the
//! workers'. So the command and the page only ask; a worker, built and configured as production
//! is, runs the retry and records its outcome.

use serde::{Deserialize, Serialize};

use crate::Instant;

/// The scheduler entry kind of a requested retry: its payload is a [`RequestedRetry`].
pub(crate) const LETTER_RETRY: &str = "bounda.LetterRetry";

/// A retry of a dead letter an operator asked for, and, once a worker ran it, what it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryRequest {
    /// The request's id.
    pub id: String,
    /// The letter to retry.
    pub letter: String,
    /// Who asked.
    pub by: String,
    /// When.
    pub requested_at: Instant,
    /// When a worker finished it; `None` while it waits for one.
    pub finished_at: Option<Instant>,
    /// What the retry did, once finished.
    pub outcome: Option<RetryOutcome>,
}

impl RetryRequest {
    /// The id of the request whose entry is keyed `key`.
    pub(crate) fn id_of_key(key: &str) -> Option<&str> {
        key.strip_prefix(LETTER_RETRY)?.strip_prefix(':')
    }

    /// The scheduler entry a worker takes to run it, due at once.
    pub(crate) fn entry(&self) -> crate::store::ScheduledEntry {
        crate::store::ScheduledEntry::new(
            format!("{LETTER_RETRY}:{}", self.id),
            LETTER_RETRY,
            self.letter.clone(),
            serde_json::to_value(self).unwrap_or_default(),
            self.requested_at,
        )
    }
}

/// What a requested retry did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "outcome",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum RetryOutcome {
    /// The run committed; the letter is `retried`.
    Retried,
    /// The scheduled command was rejected; the letter is settled as `retried`.
    Rejected {
        /// The command type.
        command_type: String,
        /// The rejection's code.
        rejected: String,
        /// Its message.
        message: String,
    },
    /// A process letter's step ran, but a later step of the retry failed: `letter` is the new
    /// letter, with `parked` events behind it; `drained` parked events were handled first.
    FailedAgain {
        /// The new letter.
        letter: String,
        /// Parked events handled before the new failure.
        drained: usize,
        /// Events parked behind the new letter.
        parked: usize,
    },
    /// The retry did not go through (it ran and failed, or the letter could not be retried, or
    /// was settled meanwhile): the letter is as it was.
    Failed {
        /// The error's code (`DEAD_LETTER_SETTLED`, `HANDLER_FAILED`).
        code: String,
        /// The error with its causes.
        error: String,
    },
}

impl RetryOutcome {
    /// The stored text of an outcome: JSON.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// An outcome from its stored text; text this build does not read is told as it is.
    pub fn from_text(text: &str) -> RetryOutcome {
        serde_json::from_str(text).unwrap_or_else(|error| RetryOutcome::Failed {
            code: "UNREADABLE".to_owned(),
            error: format!("the stored outcome `{text}` does not read: {error}"),
        })
    }
}
