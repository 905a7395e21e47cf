//! The framework's errors, each with a stable code and whether the runtime retries it.

use crate::DurationError;
use crate::event::EventKey;
pub(crate) use crate::store::chain;

/// What bounda itself can fail with.
///
/// Handlers return `anyhow::Error` so any error can be propagated with `?`; the runtime looks for
/// an `Error` inside it to classify the failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A stored payload that does not deserialise into its event type, or into the older shape
    /// of the version it was stored at.
    #[error(
        "event `{aggregate}.{event_type}` ({event_id}) has a version {version} payload its type cannot read (a renamed field reads with `#[serde(alias = \"old_name\")]`, a changed shape with `#[event(version = .., upcast(..))]`): {source}"
    )]
    InvalidPayload {
        /// The aggregate type.
        aggregate: String,
        /// The event type.
        event_type: String,
        /// The event's id.
        event_id: String,
        /// The version of its shape it was stored at.
        version: u32,
        /// What serde said.
        #[source]
        source: serde_json::Error,
    },
    /// A command's stored payload (a scheduled command, its letter) that does not deserialise
    /// into the command's type.
    #[error(
        "command `{command}` has a stored payload its type cannot read (a renamed field reads with `#[serde(alias = \"old_name\")]`): {source}"
    )]
    InvalidCommand {
        /// The command type.
        command: String,
        /// What serde said.
        #[source]
        source: serde_json::Error,
    },
    /// A process state written by a newer build, at a version this build does not know.
    #[error(
        "process `{process}` has a state written at version {stored}, and this build reads up to version {known}: a newer build wrote it, so run that build (or a later one) here"
    )]
    NewerState {
        /// The process.
        process: String,
        /// The version it was written at.
        stored: u32,
        /// The newest version this build reads.
        known: u32,
    },
    /// An event written by a newer build, at a version of its shape this build does not know.
    #[error(
        "event `{aggregate}.{event_type}` ({event_id}) in stream `{aggregate}:{aggregate_id}` was written at version {stored} of its shape, and this build reads up to version {known}: a newer build wrote it, so run that build (or a later one) here"
    )]
    NewerEvent {
        /// The aggregate type.
        aggregate: String,
        /// The aggregate instance: the stream holding the event.
        aggregate_id: String,
        /// The event type.
        event_type: String,
        /// The event's id.
        event_id: String,
        /// The version it was written at.
        stored: u32,
        /// The newest version this build reads.
        known: u32,
    },
    /// A process instance's stored state that its type no longer reads: a field changed type,
    /// or was renamed without an alias.
    #[error(
        "process `{process}` cannot read its stored state (version {version}){} (a renamed field reads with `#[serde(alias = \"old_name\")]`, a changed shape with `#[process(version = .., migrate = [..])]`): {source}",
        at_path(path)
    )]
    UnreadableState {
        /// The process.
        process: String,
        /// Where in the state it failed (`reminders`, `shipping.address`), `.` for the whole.
        path: String,
        /// The version of the state's shape it was stored at.
        version: u32,
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
    /// A duration that does not parse.
    #[error(transparent)]
    InvalidDuration(#[from] DurationError),
    /// A command's stream kept moving: it was rerun `concurrencyRetries` times.
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
    /// A reaction dispatched a command past `maxChainDepth`.
    #[error(
        "command `{command}` would be {depth} reactions deep, past the limit of {max_depth}; two reactions may be answering each other"
    )]
    ChainDepthExceeded {
        /// The command type.
        command: String,
        /// The depth it would have.
        depth: u32,
        /// `policies.maxChainDepth`.
        max_depth: u32,
    },
    /// A command type the app cannot run later: the binary no longer has it (removed or
    /// renamed since it was scheduled), or the app was built `only_listed` without it.
    #[error(
        "command `{command}` is not in this app: it was removed or renamed since it was scheduled, or the app is `only_listed()`; add `.command::<{command}>()` to the app"
    )]
    UnknownCommand {
        /// The command type.
        command: String,
    },
    /// An operator's command lacks an argument it needs, and nothing stood in for it.
    #[error("missing argument `{argument}`: {why}")]
    MissingArgument {
        /// The argument, as typed.
        argument: String,
        /// What it says, and why nothing stood in for it.
        why: String,
    },
    /// The app's declaration or configuration is refused.
    #[error("invalid configuration: {message}")]
    Configuration {
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A handler panicked; the attempt failed.
    #[error("handler `{handler}` panicked: {message}")]
    Panicked {
        /// The handler.
        handler: String,
        /// The panic's message.
        message: String,
    },
    /// A handler ran past its time limit.
    #[error("handler `{handler}` ran past its limit of {limit}")]
    HandlerTimeout {
        /// The handler.
        handler: String,
        /// The limit.
        limit: crate::Duration,
    },
    /// A dead letter that is not `failed` any more.
    #[error("dead letter `{id}` is already settled, or being retried")]
    LetterSettled {
        /// The letter.
        id: String,
    },
    /// A dead letter that cannot be retried.
    #[error("dead letter `{id}` cannot be retried: {reason}")]
    LetterNotRetriable {
        /// The letter.
        id: String,
        /// Why.
        reason: String,
    },
    /// Retrying a dead letter ran its work, which failed again; the letter stays `failed`.
    #[error("retrying dead letter `{id}` failed: {message}")]
    RetryFailed {
        /// The letter.
        id: String,
        /// Why the run failed.
        message: String,
    },
    /// A handler asked for a port the app was not given.
    #[error("the app has no port `{port}`; give it one with `.port(..)` when building the app")]
    MissingPort {
        /// The port's type.
        port: String,
    },
    /// A handler read a port its process or policy does not declare.
    #[error(
        "{handler} reads port `{port}` without declaring it; add it to `ports = [..]` in its \
         attribute, so that an app built without it is refused when it is built"
    )]
    UndeclaredPort {
        /// The process or policy, as `process `Name``.
        handler: String,
        /// The port's type.
        port: String,
    },
    /// A command whose aggregate id is empty or blank: it names no instance to decide for.
    #[error(
        "command `{command}` has an empty aggregate id; every command names the instance it \
         decides for"
    )]
    EmptyAggregateId {
        /// The command type.
        command: String,
    },
    /// A handler sent a command outside the runtime (in `process::step`), where none can run.
    #[error("commands run in an app; this handler ran outside one (`process::step`)")]
    NoRuntime,
    /// A [`TestApp`](crate::testing::TestApp) call filed dead letters the test did not say it
    /// expects.
    #[error(
        "dead letters were filed: {}; if the test expects them, make the TestApp with `.expecting_letters()`",
        letters.join("; ")
    )]
    UnexpectedDeadLetters {
        /// Each letter filed: its handler, what it failed on, and why.
        letters: Vec<String>,
    },
    /// [`App::run`](crate::App::run) stopped: a subscriber kept failing, with the cause of its
    /// last failure.
    #[error(
        "stopped: `{subscriber}` failed {failures} times in a row without getting further; the last time: {cause}"
    )]
    Stalled {
        /// The subscriber (`policies`, `processes`, `scheduled`).
        subscriber: String,
        /// Its failures in a row, with nothing else moving.
        failures: u32,
        /// The last failure and its causes, on one line.
        cause: String,
    },
    /// A preview whose run was still moving when it had made as many passes as a run takes:
    /// its report would be partial.
    #[error("the preview did not finish: {reason}")]
    PreviewUnfinished {
        /// Where it stood, and why it may not settle.
        reason: String,
    },
    /// Something asked for does not exist.
    #[error("{what} does not exist")]
    NotFound {
        /// What was asked for.
        what: String,
    },
    /// A read model's projection failed on an event: the read model is held just before it and
    /// tried again with the dispatcher's back-off.
    #[error(
        "read model `{read_model}` failed to project {event_type} ({event_id}) at position {position}, and waits just before it: {message}"
    )]
    Projection {
        /// The read model.
        read_model: String,
        /// The event's type.
        event_type: String,
        /// The event's id.
        event_id: String,
        /// The event's position.
        position: u64,
        /// Why, with its causes.
        message: String,
    },
    /// A rebuild whose place another rebuild, of other code, has taken.
    #[error(
        "the rebuild of read model `{read_model}` was superseded by a newer one (of other code), which goes on in its place"
    )]
    RebuildSuperseded {
        /// The read model.
        read_model: String,
    },
    /// A row of a read model's table that its row type cannot read: a column changed under it.
    #[error("a row of read model `{read_model}` cannot be read: {message}")]
    UnreadableRow {
        /// The read model.
        read_model: String,
        /// What does not fit.
        message: String,
    },
    /// A stored row of the runtime's own (an event, a scheduler entry) with a column that does
    /// not read: the row fails alone, named, and everything else goes on.
    #[error("{row} cannot be read: {unreadable}")]
    UnreadableStored {
        /// The row: what it is, its key and position.
        row: String,
        /// The column that does not read, why, and its text as stored.
        unreadable: crate::store::Unreadable,
    },
    /// A deadline handler that set its deadline to the moment that came due, or an earlier one.
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
    /// The stable code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidPayload { .. }
            | Error::UnreadableState { .. }
            | Error::UnknownEventType { .. }
            | Error::WrongEventType { .. }
            | Error::InvalidDuration(_)
            | Error::Encode { .. }
            | Error::DeadlineNotAdvanced { .. }
            | Error::UnreadableRow { .. }
            | Error::UnreadableStored { .. }
            | Error::InvalidCommand { .. }
            | Error::EmptyAggregateId { .. } => "VALIDATION_FAILED",
            Error::Projection { .. } => "PROJECTION_FAILED",
            Error::RebuildSuperseded { .. } => "REBUILD_SUPERSEDED",
            Error::NewerEvent { .. } => "NEWER_EVENT_VERSION",
            Error::NewerState { .. } => "NEWER_STATE_VERSION",
            Error::Concurrency { .. } => "CONCURRENCY_CONFLICT",
            Error::Store(error) => error.code(),
            Error::ChainDepthExceeded { .. } => "CHAIN_DEPTH_EXCEEDED",
            Error::UnknownCommand { .. } | Error::Configuration { .. } => "INVALID_CONFIGURATION",
            Error::MissingArgument { .. } => "MISSING_ARGUMENT",
            Error::Panicked { .. } => "HANDLER_PANICKED",
            Error::HandlerTimeout { .. } => "HANDLER_TIMEOUT",
            Error::LetterSettled { .. } => "DEAD_LETTER_SETTLED",
            Error::LetterNotRetriable { .. } => "DEAD_LETTER_NOT_RETRIABLE",
            Error::NotFound { .. } => "NOT_FOUND",
            Error::RetryFailed { .. } => "RETRY_FAILED",
            Error::UnexpectedDeadLetters { .. } => "UNEXPECTED_DEAD_LETTERS",
            Error::Stalled { .. } => "STALLED",
            Error::PreviewUnfinished { .. } => "PREVIEW_UNFINISHED",
            Error::NoRuntime | Error::MissingPort { .. } | Error::UndeclaredPort { .. } => {
                "INVALID_CONFIGURATION"
            }
        }
    }

    /// Whether the store could not be reached, which waiting mends (see
    /// [`StoreError::is_unavailable`](crate::store::StoreError::is_unavailable)).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Error::Store(error) if error.is_unavailable())
    }

    /// Whether the runtime retries an attempt that failed with this error.
    pub fn is_retriable(&self) -> bool {
        match self {
            Error::InvalidPayload { .. }
            | Error::NewerEvent { .. }
            | Error::NewerState { .. }
            | Error::UnreadableState { .. }
            | Error::UnknownEventType { .. }
            | Error::WrongEventType { .. }
            | Error::InvalidDuration(_)
            | Error::Encode { .. }
            | Error::DeadlineNotAdvanced { .. }
            | Error::UnreadableRow { .. }
            | Error::UnreadableStored { .. }
            | Error::InvalidCommand { .. }
            | Error::EmptyAggregateId { .. } => false,
            Error::Concurrency { .. }
            | Error::Projection { .. }
            | Error::Store(_)
            | Error::Panicked { .. }
            | Error::HandlerTimeout { .. } => true,
            Error::ChainDepthExceeded { .. }
            | Error::UnknownCommand { .. }
            | Error::Configuration { .. }
            | Error::MissingArgument { .. }
            | Error::LetterSettled { .. }
            | Error::LetterNotRetriable { .. }
            | Error::NotFound { .. }
            | Error::RebuildSuperseded { .. }
            | Error::RetryFailed { .. }
            | Error::UnexpectedDeadLetters { .. }
            | Error::Stalled { .. }
            | Error::PreviewUnfinished { .. }
            | Error::NoRuntime
            | Error::MissingPort { .. }
            | Error::UndeclaredPort { .. } => false,
        }
    }
}

/// A column that does not read, from plain SQL (`SqlRow::get`): an unreadable row.
impl From<crate::read_model::value::ColumnError> for Error {
    fn from(error: crate::read_model::value::ColumnError) -> Error {
        Error::UnreadableRow {
            read_model: "plain SQL".into(),
            message: error.to_string(),
        }
    }
}

/// ` at `field`` for a path within a state, nothing for the state as a whole.
fn at_path(path: &str) -> String {
    if path == "." {
        String::new()
    } else {
        format!(" at `{path}`")
    }
}

/// A commit that failed, as the error its caller answers: the store's own error, or `what`
/// with the refusal (a claim lost, a stream moved) as its cause.
pub(crate) fn unwritten(what: &str, error: crate::store::CommitError) -> Error {
    match error {
        crate::store::CommitError::Store(error) => Error::Store(error),
        other => Error::Store(crate::store::StoreError::with_source(what, other)),
    }
}

/// The text of a panic's payload.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
    }
}
