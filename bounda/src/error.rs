//! The framework's errors, each with a stable code and whether the runtime retries it
//! (spec 213–221).

use crate::DurationError;
use crate::aggregate::EventKey;

/// What bounda itself can fail with.
///
/// Handlers return `anyhow::Error` so any error can be propagated with `?`; the runtime looks for
/// an `Error` inside it to classify the failure (spec 154).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A stored payload that does not deserialise into its event type.
    #[error(
        "event `{aggregate}.{event_type}` ({event_id}) has a payload its type cannot read: {source}"
    )]
    InvalidPayload {
        /// The aggregate type.
        aggregate: String,
        /// The event type.
        event_type: String,
        /// The event's id.
        event_id: String,
        /// What serde said.
        #[source]
        source: serde_json::Error,
    },
    /// An event type the aggregate does not declare.
    #[error("aggregate `{aggregate}` has no event type `{event_type}`; its types are {known:?}")]
    UnknownEventType {
        /// The aggregate type.
        aggregate: String,
        /// The event type found.
        event_type: String,
        /// The event types it declares.
        known: &'static [&'static str],
    },
    /// An event read as a type it is not.
    #[error("event `{aggregate}.{event_type}` was read as `{}.{}`", expected.aggregate, expected.event)]
    WrongEventType {
        /// The type it was read as.
        expected: EventKey,
        /// Its aggregate type.
        aggregate: String,
        /// Its event type.
        event_type: String,
    },
    /// A duration that does not parse (spec 211).
    #[error(transparent)]
    InvalidDuration(#[from] DurationError),
    /// A command's stream kept moving: it was rerun `concurrencyRetries` times (spec 7).
    #[error(
        "stream `{aggregate_type}:{aggregate_id}` moved while the command was deciding: \
         expected version {expected_version}, found {actual_version}"
    )]
    Concurrency {
        /// The aggregate type.
        aggregate_type: String,
        /// The aggregate instance.
        aggregate_id: String,
        /// The version the last run saw.
        expected_version: u64,
        /// The version found.
        actual_version: u64,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// A payload that cannot be written as JSON.
    #[error("`{type_name}` cannot be written as JSON: {source}")]
    Encode {
        /// The event or command type.
        type_name: String,
        /// What serde said.
        #[source]
        source: serde_json::Error,
    },
    /// A deadline handler that set its deadline to the moment that came due, or an earlier one
    /// (spec 84).
    #[error(
        "`at_{field}` left `{field}` at or before {at}, the moment that came due; \
         set a later moment or `Deadline::none()`"
    )]
    DeadlineNotAdvanced {
        /// The deadline field.
        field: String,
        /// The moment that came due.
        at: crate::Instant,
    },
}

impl Error {
    /// The stable code of this error (spec 213–221).
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidPayload { .. }
            | Error::UnknownEventType { .. }
            | Error::WrongEventType { .. }
            | Error::InvalidDuration(_)
            | Error::Encode { .. }
            | Error::DeadlineNotAdvanced { .. } => "VALIDATION_FAILED",
            Error::Concurrency { .. } => "CONCURRENCY_CONFLICT",
            Error::Store(error) => error.code(),
        }
    }

    /// Whether the runtime retries an attempt that failed with this error (spec 154).
    pub fn is_retriable(&self) -> bool {
        match self {
            Error::InvalidPayload { .. }
            | Error::UnknownEventType { .. }
            | Error::WrongEventType { .. }
            | Error::InvalidDuration(_)
            | Error::Encode { .. }
            | Error::DeadlineNotAdvanced { .. } => false,
            Error::Concurrency { .. } | Error::Store(_) => true,
        }
    }
}
