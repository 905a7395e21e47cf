//! What a handler receives: the state, the instance, the trigger moment and the current time.

use crate::process::ProcessState;
use crate::{Deadline, Duration, Instant, RecordedEvent};

/// The part of a handler's context common to events and deadlines, built by the runtime.
#[derive(Debug)]
pub struct Context<'a, P> {
    state: &'a P,
    id: &'a str,
    trigger: Instant,
    now: Instant,
}

impl<P> Clone for Context<'_, P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P> Copy for Context<'_, P> {}

impl<'a, P: ProcessState> Context<'a, P> {
    /// A context for instance `id` with `state`: `trigger` is the event's time for an event, the
    /// moment that came due for a deadline; `now` is the clock's time.
    pub fn new(state: &'a P, id: &'a str, trigger: Instant, now: Instant) -> Context<'a, P> {
        Context {
            state,
            id,
            trigger,
            now,
        }
    }

    /// The state before this handler.
    pub fn state(&self) -> &'a P {
        self.state
    }

    /// The instance: the id of the main aggregate instance the process follows.
    pub fn id(&self) -> String {
        self.id.to_owned()
    }

    /// The current time, from the app's clock.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The moment that triggered the handler.
    pub fn trigger(&self) -> Instant {
        self.trigger
    }

    /// The deadline `duration` after the trigger, never after the wall clock, so a retry or a
    /// late run sets the same moment and a daily reminder does not drift (spec 76).
    pub fn after(&self, duration: Duration) -> Deadline {
        Deadline::at(self.trigger + duration)
    }
}

/// The context of an `on_<event>` handler: the event and everything in [`Context`].
#[derive(Debug)]
pub struct On<'a, P, E> {
    cx: Context<'a, P>,
    event: &'a E,
    recorded: &'a RecordedEvent,
}

impl<'a, P: ProcessState, E> On<'a, P, E> {
    /// Built by the runtime's dispatch.
    pub fn new(cx: Context<'a, P>, event: &'a E, recorded: &'a RecordedEvent) -> On<'a, P, E> {
        On {
            cx,
            event,
            recorded,
        }
    }

    /// The event's payload.
    pub fn event(&self) -> &'a E {
        self.event
    }

    /// The event as stored: id, aggregate, version, position.
    pub fn recorded(&self) -> &'a RecordedEvent {
        self.recorded
    }

    /// When the event was stored: the trigger [`after`](Self::after) counts from.
    pub fn event_time(&self) -> Instant {
        self.cx.trigger
    }

    /// The state before this handler.
    pub fn state(&self) -> &'a P {
        self.cx.state
    }

    /// The instance's id.
    pub fn id(&self) -> String {
        self.cx.id()
    }

    /// The current time.
    pub fn now(&self) -> Instant {
        self.cx.now
    }

    /// The deadline `duration` after the event's time (spec 76).
    pub fn after(&self, duration: Duration) -> Deadline {
        self.cx.after(duration)
    }
}

/// The context of an `at_<field>` handler: the deadline that came due and everything in
/// [`Context`].
///
/// It has both the moment that came due and the current time, so a handler can tell a late run
/// after an outage from a punctual one ([`lateness`](Self::lateness)).
#[derive(Debug)]
pub struct At<'a, P> {
    cx: Context<'a, P>,
    field: &'a str,
}

impl<'a, P: ProcessState> At<'a, P> {
    /// Built by the runtime's dispatch.
    pub fn new(cx: Context<'a, P>, field: &'a str) -> At<'a, P> {
        At { cx, field }
    }

    /// The deadline field that came due (`timeout` for the process lifetime).
    pub fn field(&self) -> &'a str {
        self.field
    }

    /// The moment that came due: the trigger [`after`](Self::after) counts from.
    pub fn due_at(&self) -> Instant {
        self.cx.trigger
    }

    /// How long after its moment the deadline runs: zero when punctual, days after an outage.
    pub fn lateness(&self) -> Duration {
        self.cx.now - self.cx.trigger
    }

    /// The state before this handler.
    pub fn state(&self) -> &'a P {
        self.cx.state
    }

    /// The instance's id.
    pub fn id(&self) -> String {
        self.cx.id()
    }

    /// The current time.
    pub fn now(&self) -> Instant {
        self.cx.now
    }

    /// The deadline `duration` after the moment that came due, so a chain does not drift
    /// (spec 76).
    pub fn after(&self, duration: Duration) -> Deadline {
        self.cx.after(duration)
    }
}
