//! Running one policy attempt, and what the runtime does with a failure.

use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;
use tracing::Instrument;

use crate::app::App;
use crate::app::policy::PolicyRunner;
use crate::app::reaction::{Attempt, Cause, Staging};
use crate::ids::derived_id;
use crate::store::{DeadLetter, LetterKind, LetterStatus};
use crate::{Error, Instant, RecordedEvent};

/// A run that failed: its code, whether it is retried, and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) code: &'static str,
    pub(crate) retriable: bool,
    pub(crate) message: String,
    pub(crate) stack: String,
}

impl Failure {
    /// Classifies an error: bounda's own errors by their code (spec 154), anything else a
    /// handler returned is retried.
    pub(crate) fn of(error: &anyhow::Error) -> Failure {
        let (code, retriable) = match error.downcast_ref::<Error>() {
            Some(error) => (error.code(), error.is_retriable()),
            None => ("HANDLER_FAILED", true),
        };
        Failure {
            code,
            retriable,
            message: format!("{error:#}"),
            stack: format!("{error:?}"),
        }
    }

    /// `terminal` or `retriable_exhausted` (spec 154).
    pub(crate) fn error_type(&self) -> &'static str {
        if self.retriable {
            "retriable_exhausted"
        } else {
            "terminal"
        }
    }
}

/// The idempotency key of policy `name` for `event_id` (spec 137).
pub(crate) fn policy_key(name: &str, event_id: &str) -> String {
    derived_id(&["policy", name, event_id])
}

/// The span of `policy`'s attempt `attempt` on `event`; the caller marks it failed if the
/// attempt's commit is refused.
pub(crate) fn policy_span(
    policy: &dyn PolicyRunner,
    event: &RecordedEvent,
    attempt: u32,
) -> tracing::Span {
    crate::app::telemetry::policy_span(
        policy.key().aggregate,
        policy.name(),
        &event.id,
        &event.metadata.correlation_id,
        attempt,
    )
}

/// Runs `policy` on `event` under `key` in `span`, within the policy timeout, a panic counted
/// as a failure. Returns what to commit, or the failure (marked on `span`); nothing is written
/// here.
pub(crate) async fn run_policy(
    app: &App,
    policy: &dyn PolicyRunner,
    event: &RecordedEvent,
    key: String,
    span: &tracing::Span,
) -> Result<Staging, Failure> {
    let cause = Cause::of_event(event);
    let attempt = Attempt::new(app, key, cause);
    let limit = app
        .config()
        .for_aggregate(policy.key().aggregate)
        .policies_timeout;
    let run = AssertUnwindSafe(policy.run(&attempt, event).instrument(span.clone())).catch_unwind();
    let error: anyhow::Error = match tokio::time::timeout(limit.into(), run).await {
        Ok(Ok(Ok(()))) => {
            let staging = attempt.finish();
            return match staging.failure.clone() {
                // A command that failed fails the run, even if the handler went on (spec 34).
                Some(failure) => {
                    crate::app::telemetry::failed(span, &failure.message);
                    Err(failure)
                }
                None => Ok(staging),
            };
        }
        Ok(Ok(Err(error))) => error,
        Ok(Err(panic)) => Error::Panicked {
            handler: policy.name().to_owned(),
            message: panic_message(panic.as_ref()),
        }
        .into(),
        Err(_elapsed) => Error::HandlerTimeout {
            handler: policy.name().to_owned(),
            limit,
        }
        .into(),
    };
    let failure = Failure::of(&error);
    crate::app::telemetry::failed(span, &failure.message);
    Err(failure)
}

/// The text of a panic's payload.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

/// The dead letter of `policy` failing for good on `event`; its id depends only on them, so
/// filing it again finds the first (spec 141).
pub(crate) fn policy_letter(
    policy: &str,
    event: &RecordedEvent,
    failure: &Failure,
    attempts: u32,
    now: Instant,
) -> DeadLetter {
    DeadLetter {
        id: derived_id(&["policy", policy, &event.id, "dead-letter"]),
        kind: LetterKind::Policy,
        handler: policy.to_owned(),
        event_id: Some(event.id.clone()),
        event_type: Some(event.event_type.clone()),
        aggregate_type: Some(event.aggregate_type.clone()),
        aggregate_id: Some(event.aggregate_id.clone()),
        error_type: failure.error_type().to_owned(),
        error_message: failure.message.clone(),
        error_stack: Some(failure.stack.clone()),
        attempts,
        first_failed_at: now,
        last_failed_at: now,
        status: LetterStatus::Failed,
        payload: None,
    }
}
