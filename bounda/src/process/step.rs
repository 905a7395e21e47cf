//! One step of one instance, without a runtime: run a handler and merge what it returns.
//!
//! The runtime runs these same functions, wrapped in an attempt (claim, transaction, lifecycle
//! event); a test can call them directly to check a process's handlers on their own.

use crate::process::plan::{DueDeadline, TIMEOUT};
use crate::process::sender::Sender;
use crate::process::{Context, Process};
use crate::{Error, Instant, RecordedEvent};

/// Runs `P`'s `on_<event>` handler for `event` on instance `id` and merges its patch into
/// `state`. Returns whether the process has a handler for the event; on error `state` is left as
/// it was.
pub async fn handle_event<P: Process>(
    state: &mut P,
    id: &str,
    event: &RecordedEvent,
    now: Instant,
) -> anyhow::Result<bool> {
    handle_event_in(state, id, event, now, None).await
}

/// [`handle_event`], the handler sending its commands through `sender`: what the runtime
/// calls.
pub(crate) async fn handle_event_in<P: Process>(
    state: &mut P,
    id: &str,
    event: &RecordedEvent,
    now: Instant,
    sender: Option<&dyn Sender>,
) -> anyhow::Result<bool> {
    let cx = sending_through(Context::new(state, id, event.timestamp, now), sender);
    let patch = match P::on_event(cx, event) {
        Some(handler) => handler.await?,
        None => return Ok(false),
    };
    state.merge(patch);
    Ok(true)
}

/// Runs `P`'s `at_<field>` handler for the deadline `due` on instance `id` and merges its patch
/// into `state`; the reserved `timeout` without an `at_timeout` merges nothing.
///
/// A handler that sets its deadline back to the moment that came due fails with
/// [`Error::DeadlineNotAdvanced`], and so does one that sets an earlier moment: it
/// would come due again at once, and again, without end. On error `state` is left as it was.
pub async fn run_deadline<P: Process>(
    state: &mut P,
    id: &str,
    due: DueDeadline,
    now: Instant,
) -> anyhow::Result<()> {
    run_deadline_in(state, id, due, now, None).await
}

/// [`run_deadline`], the handler sending its commands through `sender`: what the runtime
/// calls.
pub(crate) async fn run_deadline_in<P: Process>(
    state: &mut P,
    id: &str,
    due: DueDeadline,
    now: Instant,
    sender: Option<&dyn Sender>,
) -> anyhow::Result<()> {
    let cx = sending_through(Context::new(state, id, due.at, now), sender);
    let patch = match P::at_deadline(cx, due.field) {
        Some(handler) => handler.await?,
        None if due.field == TIMEOUT => return Ok(()),
        None => anyhow::bail!("process `{}` has no handler `at_{}`", P::NAME, due.field),
    };
    let mut next = state.clone();
    next.merge(patch);
    let again = super::plan::deadline_of(&next, due.field)
        .and_then(crate::Deadline::moment)
        .is_some_and(|moment| moment <= due.at);
    if again {
        return Err(Error::DeadlineNotAdvanced {
            field: due.field.to_owned(),
            at: due.at,
        }
        .into());
    }
    *state = next;
    Ok(())
}

/// `cx`, sending its commands through `sender` if there is one.
fn sending_through<'a, P: Process>(
    cx: Context<'a, P>,
    sender: Option<&'a dyn Sender>,
) -> Context<'a, P> {
    match sender {
        Some(sender) => cx.sending_through(sender),
        None => cx,
    }
}
