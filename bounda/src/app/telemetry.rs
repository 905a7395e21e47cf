//! What the runtime tells `tracing`: a span per command, per subscriber pass that
//! read events, per policy run, process step and scheduled run. Counters go to the `metrics`
//! facade through [`crate::metrics`].
//!
//! Span names are static in `tracing`, so each span also carries `otel.name` with the name the
//! original gives it (`bounda.policy Order.notify_on_order_placed`), which `tracing-opentelemetry`
//! uses as the exported name. A failed run sets `otel.status_code = "ERROR"` and `error`.

use tracing::Span;
use tracing::field::Empty;

/// The span of one command: `bounda.command <Type>`.
pub(crate) fn command_span(
    command_type: &str,
    aggregate: &str,
    id: &str,
    correlation_id: &str,
    causation_id: &str,
) -> Span {
    tracing::info_span!(
        "bounda.command",
        otel.name = %format_args!("bounda.command {command_type}"),
        bounda.command.r#type = command_type,
        bounda.aggregate.r#type = aggregate,
        bounda.aggregate.id = id,
        bounda.correlation_id = correlation_id,
        bounda.causation_id = causation_id,
        bounda.outcome = Empty,
        bounda.event.count = Empty,
        otel.status_code = Empty,
        error = Empty,
    )
}

/// What became of a command: its span's outcome and event count, a rejection's event and log
/// line, and the `bounda.commands` counter.
pub(crate) fn command_outcome(
    span: &Span,
    command_type: &str,
    outcome: CommandOutcome<'_>,
    events: usize,
) {
    let name = match outcome {
        CommandOutcome::Stored => "stored",
        CommandOutcome::Scheduled => "scheduled",
        CommandOutcome::Rejected { .. } => "rejected",
        CommandOutcome::Failed(_) => "failed",
    };
    span.record("bounda.outcome", name);
    span.record("bounda.event.count", events);
    span.in_scope(|| match outcome {
        CommandOutcome::Rejected { code, message } => {
            // The rejection is an answer, not an error: the span's status stays unset.
            tracing::event!(
                name: "bounda.command.rejected",
                tracing::Level::INFO,
                bounda.command.r#type = command_type,
                bounda.rejected = code,
                "command rejected: {message}"
            );
        }
        CommandOutcome::Failed(message) => failed(span, message),
        CommandOutcome::Stored | CommandOutcome::Scheduled => {}
    });
    crate::metrics::command(command_type, name);
}

/// A command that rejected with `rejection`.
pub(crate) fn command_rejected(
    span: &Span,
    command_type: &str,
    rejection: &impl crate::aggregate::Rejection,
) {
    let message = rejection.message();
    let outcome = CommandOutcome::Rejected {
        code: rejection.code(),
        message: &message,
    };
    command_outcome(span, command_type, outcome, 0);
}

/// A command that could not run (outcome `failed`).
pub(crate) fn command_failed(span: &Span, command_type: &str, error: &crate::Error) {
    let message = crate::error::chain(error);
    command_outcome(span, command_type, CommandOutcome::Failed(&message), 0);
}

/// What became of a command.
#[derive(Debug, Clone, Copy)]
pub(crate) enum CommandOutcome<'a> {
    Stored,
    Scheduled,
    Rejected { code: &'a str, message: &'a str },
    Failed(&'a str),
}

/// The span of one subscriber pass that read events: `bounda.subscriber <name>`.
pub(crate) fn subscriber_span(name: &str, kind: &str, after: u64, events: usize) -> Span {
    tracing::info_span!(
        "bounda.subscriber",
        otel.name = %format_args!("bounda.subscriber {name}"),
        bounda.subscriber = name,
        bounda.subscriber.kind = kind,
        bounda.position.after = after,
        bounda.event.count = events,
        bounda.outcome = Empty,
        otel.status_code = Empty,
        error = Empty,
    )
}

/// Records how a subscriber pass ended on its span (`advanced`, `held`, `moved` by another
/// runner, or `failed`), and returns whether it moved anything.
pub(crate) fn pass_outcome(
    span: &Span,
    result: Result<(bool, &'static str), crate::Error>,
) -> Result<bool, crate::Error> {
    match result {
        Ok((moved, outcome)) => {
            span.record("bounda.outcome", outcome);
            Ok(moved)
        }
        Err(error) => {
            span.record("bounda.outcome", "failed");
            failed(span, &crate::error::chain(&error));
            Err(error)
        }
    }
}

/// The span of one policy run: `bounda.policy <aggregate>.<policy>`.
pub(crate) fn policy_span(
    aggregate: &str,
    policy: &str,
    event_id: &str,
    correlation_id: &str,
    attempt: u32,
) -> Span {
    tracing::info_span!(
        "bounda.policy",
        otel.name = %format_args!("bounda.policy {aggregate}.{policy}"),
        bounda.policy = %format_args!("{aggregate}.{policy}"),
        bounda.event.id = event_id,
        bounda.correlation_id = correlation_id,
        bounda.attempt = attempt,
        otel.status_code = Empty,
        error = Empty,
    )
}

/// The span of one process step: `bounda.process <aggregate>.<process>`, with ` at <field>`
/// for a deadline.
pub(crate) fn process_span(
    aggregate: &str,
    process: &str,
    id: &str,
    deadline: Option<&str>,
    correlation_id: &str,
    attempt: u32,
) -> Span {
    // Formatted only when a subscriber takes the span: nothing allocated on the hot path.
    let at = if deadline.is_some() { " at " } else { "" };
    let field = deadline.unwrap_or_default();
    tracing::info_span!(
        "bounda.process",
        otel.name = %format_args!("bounda.process {aggregate}.{process}{at}{field}"),
        bounda.process = %format_args!("{aggregate}.{process}"),
        bounda.process.id = id,
        bounda.deadline = deadline,
        bounda.correlation_id = correlation_id,
        bounda.attempt = attempt,
        otel.status_code = Empty,
        error = Empty,
    )
}

/// The span of one scheduled run: `bounda.scheduled <Type>`, `bounda.ProcessDeadline` for a
/// deadline. A delayed policy run or a deadline learns its correlation once its
/// event or instance is read, and records it then.
pub(crate) fn scheduled_span(command_type: &str, correlation_id: &str, attempt: u32) -> Span {
    let span = tracing::info_span!(
        "bounda.scheduled",
        otel.name = %format_args!("bounda.scheduled {command_type}"),
        bounda.command.r#type = command_type,
        bounda.correlation_id = Empty,
        bounda.attempt = attempt,
        otel.status_code = Empty,
        error = Empty,
    );
    if !correlation_id.is_empty() {
        span.record("bounda.correlation_id", correlation_id);
    }
    span
}

/// Marks `span` as failed with `message`.
pub(crate) fn failed(span: &Span, message: &str) {
    span.record("otel.status_code", "ERROR");
    span.record("error", message);
}

/// Logs a dead letter once it is stored, with what it is for and how to retry it, and counts it.
pub(crate) fn dead_lettered(letter: &crate::store::DeadLetter) {
    let on = match (&letter.event_type, &letter.aggregate_id) {
        (Some(event), Some(id)) => format!(" on `{event}` of `{id}`"),
        (Some(event), None) => format!(" on `{event}`"),
        (None, Some(id)) => format!(" for `{id}`"),
        (None, None) => String::new(),
    };
    tracing::error!(
        bounda.dead_letter = %letter.id,
        bounda.handler.kind = letter.kind.as_str(),
        bounda.handler = %letter.handler,
        bounda.attempts = letter.attempts,
        "dead letter `{id}` filed: {kind} `{handler}`{on} gave up after {attempts} attempt(s) \
         ({error_type}): {error}; once the cause is fixed, retry it with `dead-letters retry {id}`",
        id = letter.id,
        kind = letter.kind.as_str(),
        handler = letter.handler,
        attempts = letter.attempts,
        error_type = letter.error_type,
        error = letter.error_message,
    );
    crate::metrics::letter_filed(letter);
}

/// Logs a run that failed and is tried again at `at`: what it is, which attempt failed, and the
/// error with its causes; a held `group`'s later runs wait for it.
pub(crate) fn run_retried(
    subject: &str,
    group: Option<&str>,
    attempt: u32,
    at: crate::Instant,
    failure: &crate::app::failure::Failure,
) {
    let held = match group {
        Some(group) => format!("; `{group}`'s later events wait for it"),
        None => String::new(),
    };
    tracing::warn!(
        code = failure.code,
        bounda.attempt = attempt,
        bounda.retry_at = %at,
        "{subject} failed (attempt {attempt}), trying again at {at}{held}: {message}",
        message = failure.message,
    );
}
