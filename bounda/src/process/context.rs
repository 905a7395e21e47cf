//! What a handler receives: the state, the instance, the trigger moment and the current time.

use crate::aggregate::Command;
use crate::answer::{Answer, Scheduled};
use crate::calendar::{BusinessDays, CalendarError, LocalTime, Recurrence, Zone};
use crate::process::ProcessState;
use crate::process::sender::{Port, Sender, Sends};
use crate::{Deadline, Duration, Error, Instant, RecordedEvent};

/// The part of a handler's context common to events and deadlines, built by the runtime.
pub struct Context<'a, P> {
    state: &'a P,
    id: &'a str,
    trigger: Instant,
    now: Instant,
    sender: Option<&'a dyn Sender>,
}

impl<P: std::fmt::Debug> std::fmt::Debug for Context<'_, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("state", self.state)
            .field("id", &self.id)
            .field("trigger", &self.trigger)
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
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
            sender: None,
        }
    }

    /// The same context, sending its commands through `sender`.
    pub(crate) fn sending_through(mut self, sender: &'a dyn Sender) -> Context<'a, P> {
        self.sender = Some(sender);
        self
    }

    fn sender(&self) -> Result<&'a dyn Sender, Error> {
        self.sender.ok_or(Error::NoRuntime)
    }

    /// The app's port of type `T`, which the process declares (`#[process(ports = [T])]`);
    /// outside the runtime, undeclared or missing, an error.
    pub fn port<T: Send + Sync + 'static>(&self) -> Result<&'a T, Error> {
        T::read_through(self.sender()?)
    }

    /// A key derived from the run's key and `name`: the id of an aggregate the run creates, or a
    /// per-call key for a provider. Outside the runtime, an error.
    pub fn key_for(&self, name: &str) -> Result<String, Error> {
        let key = self.sender()?.key();
        Ok(crate::ids::idempotency_key_for(key, name))
    }

    /// The run's idempotency key, or `None` outside the runtime.
    pub fn idempotency_key(&self) -> Option<&'a str> {
        self.sender.map(|sender| sender.key())
    }

    /// Sends `command`: decided now, stored when the step commits. Answers the decided events
    /// or the typed rejection; a failure fails the step.
    pub async fn send<C: Command>(&self, command: C) -> Result<Answer<C::Rejection>, Error> {
        command.send_through(self.sender()?).await
    }

    /// Sends `command` to run `delay` from now; its events are never follow-ups.
    pub async fn send_after<C: Command>(
        &self,
        command: C,
        delay: Duration,
    ) -> Result<Scheduled, Error> {
        command.schedule_through(self.sender()?, self.now + delay)
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
    /// late run sets the same moment and a daily reminder does not drift.
    pub fn after(&self, duration: Duration) -> Deadline {
        Deadline::at(self.trigger + duration)
    }

    /// The deadline at the next `time` on `zone`'s wall clock after the trigger (`09:00` in
    /// `Europe/Paris`): the same on a retry, and at that local time on either side of a clock
    /// change. Like every deadline set on the calendar, it keeps its zone, so operators read it
    /// in local time.
    pub fn next_local(&self, zone: &Zone, time: LocalTime) -> Result<Deadline, CalendarError> {
        Deadline::in_zone(zone.next(self.trigger, time)?, zone)
    }

    /// The deadline at `time` on the day `days` days after the trigger's day in `zone`: `1`
    /// for "09:00 their time the day after".
    pub fn days_later(
        &self,
        days: u32,
        time: LocalTime,
        zone: &Zone,
    ) -> Result<Deadline, CalendarError> {
        Deadline::in_zone(zone.days_after(self.trigger, days, time)?, zone)
    }

    /// The deadline at `time` on the last day of the trigger's month in `zone`, or of the next
    /// month once that has passed.
    pub fn end_of_month(&self, time: LocalTime, zone: &Zone) -> Result<Deadline, CalendarError> {
        Deadline::in_zone(zone.end_of_month(self.trigger, time)?, zone)
    }

    /// The deadline `days` business days after the trigger's day in `zone`, at `time` there.
    pub fn business_days(
        &self,
        days: u32,
        calendar: &BusinessDays,
        time: LocalTime,
        zone: &Zone,
    ) -> Result<Deadline, CalendarError> {
        Deadline::in_zone(calendar.after(self.trigger, days, time, zone)?, zone)
    }

    /// The deadline at `rule`'s first occurrence after `from` on `zone`'s calendar.
    fn occurrence_after(
        from: Instant,
        rule: &Recurrence,
        zone: &Zone,
    ) -> Result<Deadline, CalendarError> {
        Deadline::recurring(rule.next(from, zone)?, zone, rule)
    }
}

/// The context of an `on_<event>` handler: the event and everything in [`Context`].
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

    /// The deadline `duration` after the event's time.
    pub fn after(&self, duration: Duration) -> Deadline {
        self.cx.after(duration)
    }

    /// See [`Context::next_local`]: after the event's time.
    pub fn next_local(&self, zone: &Zone, time: LocalTime) -> Result<Deadline, CalendarError> {
        self.cx.next_local(zone, time)
    }

    /// See [`Context::days_later`]: after the event's day.
    pub fn days_later(
        &self,
        days: u32,
        time: LocalTime,
        zone: &Zone,
    ) -> Result<Deadline, CalendarError> {
        self.cx.days_later(days, time, zone)
    }

    /// See [`Context::end_of_month`]: of the event's day's month.
    pub fn end_of_month(&self, time: LocalTime, zone: &Zone) -> Result<Deadline, CalendarError> {
        self.cx.end_of_month(time, zone)
    }

    /// See [`Context::business_days`]: after the event's day.
    pub fn business_days(
        &self,
        days: u32,
        calendar: &BusinessDays,
        time: LocalTime,
        zone: &Zone,
    ) -> Result<Deadline, CalendarError> {
        self.cx.business_days(days, calendar, time, zone)
    }

    /// The deadline at `rule`'s first occurrence after the event's time on `zone`'s calendar:
    /// a recurring deadline's first value.
    pub fn next_occurrence(
        &self,
        rule: &Recurrence,
        zone: &Zone,
    ) -> Result<Deadline, CalendarError> {
        Context::<P>::occurrence_after(self.cx.trigger, rule, zone)
    }

    /// See [`Context::send`].
    pub async fn send<C: Command>(&self, command: C) -> Result<Answer<C::Rejection>, Error> {
        self.cx.send(command).await
    }

    /// See [`Context::send_after`].
    pub async fn send_after<C: Command>(
        &self,
        command: C,
        delay: Duration,
    ) -> Result<Scheduled, Error> {
        self.cx.send_after(command, delay).await
    }

    /// See [`Context::idempotency_key`].
    pub fn idempotency_key(&self) -> Option<&'a str> {
        self.cx.idempotency_key()
    }

    /// See [`Context::port`].
    pub fn port<T: Send + Sync + 'static>(&self) -> Result<&'a T, Error> {
        self.cx.port::<T>()
    }

    /// See [`Context::key_for`].
    pub fn key_for(&self, name: &str) -> Result<String, Error> {
        self.cx.key_for(name)
    }
}

/// The context of an `at_<field>` handler: the deadline that came due and everything in
/// [`Context`].
///
/// It has both the moment that came due and the current time, so a handler can tell a late run
/// after an outage from a punctual one ([`lateness`](Self::lateness)).
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

    /// The deadline `duration` after the moment that came due, so a chain does not drift.
    pub fn after(&self, duration: Duration) -> Deadline {
        self.cx.after(duration)
    }

    /// See [`Context::next_local`]: after the moment that came due.
    pub fn next_local(&self, zone: &Zone, time: LocalTime) -> Result<Deadline, CalendarError> {
        self.cx.next_local(zone, time)
    }

    /// See [`Context::days_later`]: after the day that came due.
    pub fn days_later(
        &self,
        days: u32,
        time: LocalTime,
        zone: &Zone,
    ) -> Result<Deadline, CalendarError> {
        self.cx.days_later(days, time, zone)
    }

    /// See [`Context::end_of_month`]: of the day that came due's month.
    pub fn end_of_month(&self, time: LocalTime, zone: &Zone) -> Result<Deadline, CalendarError> {
        self.cx.end_of_month(time, zone)
    }

    /// See [`Context::business_days`]: after the day that came due.
    pub fn business_days(
        &self,
        days: u32,
        calendar: &BusinessDays,
        time: LocalTime,
        zone: &Zone,
    ) -> Result<Deadline, CalendarError> {
        self.cx.business_days(days, calendar, time, zone)
    }

    /// A recurring deadline's next value: `rule`'s first occurrence after now on `zone`'s
    /// calendar, so a run late by days (an outage) runs once and goes on from now;
    /// [`missed_occurrences`](Self::missed_occurrences) says how many it covered.
    pub fn next_occurrence(
        &self,
        rule: &Recurrence,
        zone: &Zone,
    ) -> Result<Deadline, CalendarError> {
        Context::<P>::occurrence_after(self.now(), rule, zone)
    }

    /// The deadline that came due, as the state holds it: with its zone and rule when it was set
    /// on the calendar. `None` for `timeout`.
    pub fn deadline(&self) -> Option<&'a Deadline> {
        crate::process::plan::deadline_of(self.cx.state, self.field)
    }

    /// A recurring deadline's next value by its own rule and zone: the rule's first occurrence
    /// after now, as [`next_occurrence`](Self::next_occurrence) gives it. An error when the
    /// deadline that came due was not set by a rule.
    pub fn recur(&self) -> Result<Deadline, CalendarError> {
        let (rule, zone) = self.recurrence()?;
        self.next_occurrence(rule, zone)
    }

    /// How many later occurrences of the deadline's own rule were due by now besides the one
    /// that came due, as [`missed_occurrences`](Self::missed_occurrences) counts them. An error
    /// when the deadline that came due was not set by a rule.
    pub fn missed_recurrences(&self) -> Result<u32, CalendarError> {
        let (rule, zone) = self.recurrence()?;
        self.missed_occurrences(rule, zone)
    }

    /// The rule and zone of the recurring deadline that came due.
    fn recurrence(&self) -> Result<(&'a Recurrence, &'a Zone), CalendarError> {
        self.deadline()
            .and_then(Deadline::on_calendar)
            .and_then(|civil| Some((civil.rule()?, civil.zone())))
            .ok_or_else(|| CalendarError::not_recurring(self.field))
    }

    /// How many later occurrences of `rule` were due by now besides the one that came due: 0
    /// for a punctual run, 2 for a daily rule run two days late (counted up to 10,000).
    pub fn missed_occurrences(&self, rule: &Recurrence, zone: &Zone) -> Result<u32, CalendarError> {
        rule.between(self.due_at(), self.now(), zone, 10_000)
    }

    /// Of a chain whose links come due every `every` from this one, how many later links were
    /// due by now as well: 0 when the run is punctual (or late by less than `every`), 2 when a
    /// daily chain runs two days and an hour late, after an outage, a pause or a retry. A
    /// chain built on [`after`](Self::after) runs each of those links, one after another, as
    /// soon as this one is done; a handler that should act once for them reads this (to say
    /// how many it covers) and goes on with [`next_link`](Self::next_link). A zero `every`
    /// has no later links: 0.
    pub fn missed(&self, every: Duration) -> u64 {
        missed_links(self.due_at(), self.now(), every)
    }

    /// The next link of a chain whose links come due every `every` from this one, skipping
    /// those already past: `after(every)` when the run is punctual, and after an outage the
    /// first link after now, on the chain's own rhythm (a daily 9:00 chain stays at 9:00).
    /// A zero `every` is an error (the chain would never move on), as is a link beyond the
    /// last moment a deadline can hold.
    pub fn next_link(&self, every: Duration) -> Result<Deadline, Error> {
        next_link(self.due_at(), self.now(), every).map(Deadline::at)
    }

    /// See [`Context::send`]. Commands a deadline sends start a chain of their own at depth 0.
    pub async fn send<C: Command>(&self, command: C) -> Result<Answer<C::Rejection>, Error> {
        self.cx.send(command).await
    }

    /// See [`Context::send_after`].
    pub async fn send_after<C: Command>(
        &self,
        command: C,
        delay: Duration,
    ) -> Result<Scheduled, Error> {
        self.cx.send_after(command, delay).await
    }

    /// See [`Context::idempotency_key`].
    pub fn idempotency_key(&self) -> Option<&'a str> {
        self.cx.idempotency_key()
    }

    /// See [`Context::port`].
    pub fn port<T: Send + Sync + 'static>(&self) -> Result<&'a T, Error> {
        self.cx.port::<T>()
    }

    /// See [`Context::key_for`].
    pub fn key_for(&self, name: &str) -> Result<String, Error> {
        self.cx.key_for(name)
    }
}

/// How many links of a chain every `every` from `due` come due after it and by `now`.
fn missed_links(due: Instant, now: Instant, every: Duration) -> u64 {
    match every.as_millis() {
        0 => 0,
        every => now.saturating_since(due).as_millis() / every,
    }
}

/// The first link of a chain every `every` from `due` that comes after `now` (and after
/// `due`).
fn next_link(due: Instant, now: Instant, every: Duration) -> Result<Instant, Error> {
    if every.as_millis() == 0 {
        return Err(Error::Configuration {
            message: "a chain's links must be more than 0 ms apart: `next_link` was given 0 ms"
                .to_owned(),
        });
    }
    let links = missed_links(due, now, every) + 1;
    every
        .checked_mul(links)
        .and_then(|ahead| due.checked_add(ahead))
        .ok_or_else(|| Error::Configuration {
            message: format!(
                "the next link of a chain every {every} from {due} is beyond the last moment a \
                 deadline can hold"
            ),
        })
}

impl<P: std::fmt::Debug, E: std::fmt::Debug> std::fmt::Debug for On<'_, P, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("On")
            .field("cx", &self.cx)
            .field("event", self.event)
            .finish_non_exhaustive()
    }
}

impl<P: std::fmt::Debug> std::fmt::Debug for At<'_, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("At")
            .field("cx", &self.cx)
            .field("field", &self.field)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{days, hours, millis};

    fn at(text: &str) -> Instant {
        Instant::parse(text).expect("a moment")
    }

    #[test]
    fn a_punctual_link_misses_nothing_and_goes_on_a_period_later() {
        let due = at("2026-01-01T09:00:00Z");
        assert_eq!(missed_links(due, due, days(1)), 0);
        assert_eq!(next_link(due, due, days(1)).unwrap(), due + days(1));
        // Late by less than a period: the next link is still ahead.
        let late = due + hours(23);
        assert_eq!(missed_links(due, late, days(1)), 0);
        assert_eq!(next_link(due, late, days(1)).unwrap(), due + days(1));
    }

    #[test]
    fn a_late_link_counts_the_links_past_and_skips_to_the_first_ahead_on_its_rhythm() {
        let due = at("2026-01-01T09:00:00Z");
        let now = due + days(2) + hours(1);
        assert_eq!(missed_links(due, now, days(1)), 2);
        assert_eq!(
            next_link(due, now, days(1)).unwrap(),
            at("2026-01-04T09:00:00Z")
        );
        // A link due exactly now is past: it would run at once.
        let on_a_link = due + days(2);
        assert_eq!(missed_links(due, on_a_link, days(1)), 2);
        assert_eq!(next_link(due, on_a_link, days(1)).unwrap(), due + days(3));
    }

    #[test]
    fn a_zero_period_has_no_links_and_no_next_one() {
        let due = at("2026-01-01T09:00:00Z");
        assert_eq!(missed_links(due, due + days(3), millis(0)), 0);
        let error = next_link(due, due, millis(0)).unwrap_err();
        assert!(
            error.to_string().contains("more than 0 ms apart"),
            "{error}"
        );
        let end = next_link(
            Instant::max_value() - hours(1),
            Instant::max_value(),
            days(1),
        );
        assert!(end.is_err());
    }
}
