//! Processes: state that follows one aggregate instance, reacts to events and to time.
//!
//! `#[process(..)]` on the state struct implements [`ProcessState`] and generates the patch
//! types; `#[process]` on the `impl` block that holds the handlers implements [`Process`]. The
//! runtime only calls what these traits expose: the dispatch tables, the merge, and the plan
//! ([`plan`]), all pure functions of the state.

mod context;
mod patch;
pub mod plan;
mod routing;
pub(crate) mod sender;
pub(crate) mod state_shape;
pub mod step;

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use context::{At, Context, On};
pub use patch::{IntoDeadline, IntoPatch};
pub use plan::{DueDeadline, Reached, TIMEOUT};
pub use routing::instance_of;

use crate::aggregate::{Aggregate, EventKey};
use crate::{Deadline, Duration, RecordedEvent};

/// The future a handler dispatch returns: the patch to merge over the state.
pub type HandlerFuture<'a, P> =
    Pin<Box<dyn Future<Output = anyhow::Result<<P as ProcessState>::Patch>> + Send + 'a>>;

/// A process's state and declaration, implemented by `#[process(..)]` on the state struct.
///
/// Do not implement it by hand: the macro checks the declaration while generating it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a process state",
    label = "not a process",
    note = "declare it with `#[process(on = .., started_by = [..])]` on a struct"
)]
pub trait ProcessState:
    Clone + Debug + Serialize + DeserializeOwned + Send + Sync + 'static
{
    /// The process type (`OrderPayment`); its instances live in `process:<NAME>` streams.
    const NAME: &'static str;
    /// The events that start an instance.
    const STARTED_BY: &'static [EventKey];
    /// The events that complete an instance, after their handler.
    const COMPLETED_BY: &'static [EventKey];
    /// The `timeout` argument, or `None` to use the configured default.
    const TIMEOUT: Option<Duration>;
    /// Every field of the state, in declaration order.
    const FIELDS: &'static [&'static str];
    /// The deadline fields, sorted by name.
    const DEADLINES: &'static [DeadlineField<Self>];

    /// The ports its handlers read (`ports = [..]`): an app without one of them is refused
    /// when it is built, and a handler reading another fails, naming it.
    const PORTS: &'static [crate::port::PortDecl] = &[];

    /// The aggregate whose instances the process follows, one process instance each.
    type Aggregate: Aggregate;
    /// `<Name>Patch`: every field optional; what a handler changes.
    type Patch: Default + Debug + Send + 'static;

    /// Merges `patch` over the state: a set field replaces the old value whole, an unset one
    /// keeps it.
    fn merge(&mut self, patch: Self::Patch);

    /// The state a new instance starts from, and what fields added since a state was stored
    /// read as: the state type's `Default`, which the macro requires.
    fn initial() -> Self;

    /// The shapes of the aggregates whose events start or complete the process: an event of
    /// another aggregate reaches it brought up to today's name and shape.
    const DECLARED_SHAPES: &'static [&'static [crate::event::EventShape]] = &[];

    /// The version of the state's shape this build writes, from 1:
    /// `#[process(version = 2, migrate = [FlowV1])]`.
    const VERSION: u32 = 1;

    /// Reads a state stored at `version`: today's shape as it is, an older one as its shape and
    /// then through each `From` up to today's. `#[process(..)]` writes it.
    fn migrate(version: u32, state: &serde_json::Value) -> Result<Self, crate::Error> {
        match version {
            1 => state_shape::read_state_shape(Self::NAME, version, state),
            stored => Err(crate::Error::NewerState {
                process: Self::NAME.to_owned(),
                stored,
                known: Self::VERSION,
            }),
        }
    }

    /// The fields of a state stored at `version` that the shape of that version does not read.
    fn dropped(version: u32, state: &serde_json::Value) -> Vec<String> {
        let _ = version;
        state_shape::dropped_fields::<Self>(state)
    }
}

/// A deadline field: its name and how to read it from the state.
pub struct DeadlineField<P> {
    /// The field's name, as in `at_<name>`.
    pub name: &'static str,
    /// The key the field is serialised under, after `#[serde(rename..)]`.
    pub key: &'static str,
    /// Reads the field.
    pub get: fn(&P) -> &Deadline,
}

impl<P> Debug for DeadlineField<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("DeadlineField").field(&self.name).finish()
    }
}

/// A process's handlers, implemented by `#[process]` on the `impl` block that holds them.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no `#[process]` impl with its handlers",
    label = "its handlers are not declared",
    note = "add `#[process] impl {Self} {{ .. }}` with its `on_<event>` and `at_<deadline>` handlers, even if it has none"
)]
pub trait Process: ProcessState {
    /// The events that have an `on_<event>` handler.
    const ON: &'static [EventKey];
    /// The deadlines that have an `at_<field>` handler, `timeout` included when `at_timeout`
    /// exists.
    const AT: &'static [&'static str];
    /// The events whose handler has a `#[correlate(..)]` function.
    const CORRELATED: &'static [EventKey];
    /// The shapes of the aggregates whose events the handlers take.
    const HANDLED_SHAPES: &'static [&'static [crate::event::EventShape]] = &[];

    /// Runs the `on_<event>` handler for `event`, or `None` if the process has none.
    fn on_event<'a>(
        cx: Context<'a, Self>,
        event: &'a RecordedEvent,
    ) -> Option<HandlerFuture<'a, Self>>;

    /// Runs the `at_<field>` handler for the deadline `field` (the `cx` trigger is the moment
    /// that came due), or `None` if the process has none (only possible for `timeout`).
    fn at_deadline<'a>(cx: Context<'a, Self>, field: &str) -> Option<HandlerFuture<'a, Self>>;

    /// Runs the handler's `#[correlate(..)]` function for `event`: `None` when the event has no
    /// correlator, so it is routed by convention.
    fn correlate(event: &RecordedEvent) -> Option<anyhow::Result<Option<String>>>;
}
