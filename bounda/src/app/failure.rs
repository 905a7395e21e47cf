//! A run that failed, and the one guard every handler runs under: its time limit, and a panic
//! caught with its message.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;

use crate::clock::Clock;
use crate::store::{DeadLetter, LetterKind, LetterStatus};
use crate::{Duration, Error, Instant};

/// A run that failed: its code, whether it is retried, and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) code: &'static str,
    pub(crate) retriable: bool,
    pub(crate) message: String,
    pub(crate) stack: String,
    /// The store was out of reach: no fault of the run's, which waits for it unspent.
    pub(crate) unavailable: bool,
}

impl Failure {
    /// Classifies an error: bounda's own errors by their code, anything else a
    /// handler returned is retried.
    pub(crate) fn of(error: &anyhow::Error) -> Failure {
        let (code, retriable, unavailable) = match error.downcast_ref::<Error>() {
            Some(error) => (error.code(), error.is_retriable(), error.is_unavailable()),
            None => ("HANDLER_FAILED", true, false),
        };
        Failure {
            code,
            retriable,
            message: crate::error::chain(error.as_ref()),
            stack: format!("{error:?}"),
            unavailable,
        }
    }

    /// A failure of bounda's own.
    pub(crate) fn of_error(error: &Error) -> Failure {
        Failure {
            code: error.code(),
            retriable: error.is_retriable(),
            message: crate::error::chain(error),
            stack: format!("{error:?}"),
            unavailable: error.is_unavailable(),
        }
    }

    /// A failure that is never retried, with its own code.
    pub(crate) fn terminal(code: &'static str, error: &anyhow::Error) -> Failure {
        Failure {
            code,
            retriable: false,
            message: crate::error::chain(error.as_ref()),
            stack: format!("{error:?}"),
            unavailable: false,
        }
    }

    /// This failure's letter of `handler` on stored event `event`: the event, its type and its
    /// stream named.
    pub(crate) fn letter_on(
        &self,
        id: String,
        kind: LetterKind,
        handler: &str,
        event: &crate::RecordedEvent,
        (attempts, now): (u32, Instant),
    ) -> DeadLetter {
        DeadLetter {
            event_id: Some(event.id.clone()),
            event_type: Some(event.event_type.clone()),
            aggregate_type: Some(event.aggregate_type.clone()),
            aggregate_id: Some(event.aggregate_id.clone()),
            ..self.letter(id, kind, handler, attempts, now)
        }
    }

    /// The dead letter of this failure, filed at `now` after `attempts` runs; the caller adds
    /// what it concerns (event, aggregate, payload).
    pub(crate) fn letter(
        &self,
        id: String,
        kind: LetterKind,
        handler: &str,
        attempts: u32,
        now: Instant,
    ) -> DeadLetter {
        DeadLetter {
            id,
            kind,
            handler: handler.to_owned(),
            event_id: None,
            event_type: None,
            aggregate_type: None,
            aggregate_id: None,
            error_type: self.error_type().to_owned(),
            error_message: self.message.clone(),
            error_stack: Some(self.stack.clone()),
            attempts,
            first_failed_at: now,
            last_failed_at: now,
            status: LetterStatus::Failed,
            payload: None,
        }
    }

    /// `terminal` or `retriable_exhausted`.
    pub(crate) fn error_type(&self) -> &'static str {
        if self.retriable {
            "retriable_exhausted"
        } else {
            "terminal"
        }
    }
}

/// Runs `handler`'s future within `limit` on `clock` (real time, or a test's simulated time);
/// an error, a panic (with its message) or running past the limit is the run's failure.
pub(crate) async fn guarded<T>(
    clock: &dyn Clock,
    handler: &str,
    limit: Duration,
    run: impl Future<Output = anyhow::Result<T>>,
) -> Result<T, Failure> {
    let caught = AssertUnwindSafe(run).catch_unwind();
    let error: anyhow::Error = tokio::select! {
        biased;
        outcome = caught => match outcome {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(error)) => error,
            Err(panic) => Error::Panicked {
                handler: handler.to_owned(),
                message: crate::error::panic_message(panic.as_ref()),
            }
            .into(),
        },
        () = clock.sleep(limit) => Error::HandlerTimeout {
            handler: handler.to_owned(),
            limit,
        }
        .into(),
    };
    Err(Failure::of(&error))
}
