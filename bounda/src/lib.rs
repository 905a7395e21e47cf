#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

#[allow(
    unused_extern_crates,
    reason = "generated code names `::bounda`, also in this crate's own tests"
)]
extern crate self as bounda;

pub mod aggregate;
mod answer;
mod app;
pub mod calendar;
/// The operator's command-line interface; with the `cli` feature.
#[cfg(feature = "cli")]
pub mod cli;
pub mod clock;
pub mod config;
mod deadline;
mod decode;
mod duration;
mod error;
mod event;
pub mod guides;
pub mod hash;
pub mod ids;
pub mod ingress;
mod instant;
/// The operator page; with the `page` feature.
#[cfg(feature = "page")]
pub mod page;
mod port;
pub mod preview;
pub mod process;
pub mod read_model;
mod registered;
pub mod relay;
pub mod store;
pub mod testing;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use aggregate::{
    Aggregate, Command, Decision, Event, EventKey, EventSet, NoRejection, Rejection,
};
/// Declares a process: `#[process(..)]` on its state struct, `#[process]` on the `impl` block
/// that holds its handlers.
///
/// # On the state struct
///
/// | argument | meaning |
/// | --- | --- |
/// | `on = Order` | the aggregate the process follows: one instance per `Order` instance |
/// | `started_by = [OrderPlaced, ..]` | the events that start an instance (required, at least one) |
/// | `completed_by = [OrderCancelled, ..]` | the events that complete it, after their handler runs |
/// | `timeout = "30d"` | how long an instance may stay open; checked while compiling; default from configuration (`7d`) |
/// | `version = 2` | the version of the state's shape, from 1; states stored at older versions are read through `migrate` |
/// | `migrate = [FlowV1, ..]` | the shape each older version was stored in, from version 1, each brought up to the next with `From` |
///
/// The struct holds the whole state (`Default`, `Clone`, `Debug`, serde). Fields marked
/// `#[deadline]` have type [`Deadline`]: setting one schedules its handler, changing it moves it,
/// `Deadline::none()` cancels it. The macro generates, next to the struct:
///
/// - `<Name>Patch`: every field optional, with a builder method per field; what handlers return.
/// - `At<Field>` for each deadline: what `at_<field>` returns; `At<Field>::new(next)` requires the
///   deadline's next value, so a handler cannot leave it out.
/// - the [`ProcessState`] impl: declaration, merge, deadline table.
///
/// The state is stored with each step, and read back by the next. So that a deploy can change
/// it while instances are live, the macro puts `#[serde(default)]` on the struct (unless it has
/// one): a field added later reads as the struct's `Default` has it. Give a renamed field
/// `#[serde(alias = "old_name")]`; for a change an alias cannot express, raise `version` and
/// keep the old shape for `migrate`. A runner refuses to start while a running instance holds a
/// moment in a field the state no longer reads (a deadline renamed without an alias), and
/// re-arms each instance whose scheduler entry disagrees with its (migrated) state. An instance
/// whose stored state still does not read fails alone, with a dead letter naming the field.
/// Check a copy of production before a deploy with [`App::preflight`] (the operator's `check`).
/// The process registers itself: every app built in the binary runs it (see
/// [`AppBuilder::only_listed`]).
///
/// # On the handlers
///
/// - `async fn on_<event>(cx: On<'_, Self, Event>) -> Result<Patch>`: runs for each event of that
///   type that reaches the instance; its name ends with the event's name in snake case. An event
///   of another aggregate reaches the instance through its payload field named after the main
///   aggregate's id (`order_id`), or through `#[correlate(Self::some_fn)]` on the handler, a
///   function from `&Event` to `Option<String>`.
/// - `async fn at_<field>(cx: At<'_, Self>) -> Result<At<Field>>`: runs when deadline `field`
///   comes due.
/// - `async fn at_timeout(cx: At<'_, Self>) -> Result<Patch>` (optional): runs when the process
///   lifetime runs out, which ends the instance.
///
/// A handler returns `Result<()>` to change nothing. The macro implements [`Process`].
///
/// # Checked while compiling
///
/// Every deadline has its handler and every `at_` handler its deadline; no deadline is named
/// `timeout`; deadline fields are `Deadline`s; one handler per event and per deadline; every
/// handled, starting or completing event can reach the instance and is in its aggregate's events
/// enum; an `at_` handler returns its own `At<Field>`; the `timeout` is a duration.
/// Each mistake is one error at the field or handler, saying how to fix it
/// (`ui-tests/tests/ui/` has one case per rule).
///
/// ```
/// use bounda::prelude::*;
/// # #[derive(Debug, Clone, Serialize, Deserialize, Event)]
/// # #[event(aggregate = Order)]
/// # pub struct OrderPlaced { pub order_id: String }
/// # #[derive(Debug, Clone, Serialize, Deserialize, Events)]
/// # pub enum OrderEvent { Placed(OrderPlaced) }
/// # #[derive(Debug, Default)]
/// # pub struct Order;
/// # impl Aggregate for Order {
/// #     const NAME: &'static str = "Order";
/// #     const ID_FIELD: &'static str = "order_id";
/// #     type Event = OrderEvent;
/// #     fn apply(&mut self, _: &OrderEvent) {}
/// # }
///
/// #[process(on = Order, started_by = [OrderPlaced], timeout = "7d")]
/// #[derive(Debug, Default, Clone, Serialize, Deserialize)]
/// pub struct Chaser {
///     #[deadline]
///     nudge: Deadline,
/// }
///
/// #[process]
/// impl Chaser {
///     async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<ChaserPatch> {
///         Ok(ChaserPatch::default().nudge(cx.after(hours(1))))
///     }
///
///     async fn at_nudge(cx: At<'_, Self>) -> Result<AtNudge> {
///         Ok(AtNudge::new(cx.after(hours(24))))
///     }
/// }
///
/// assert_eq!(<Chaser as ProcessState>::TIMEOUT, Some(days(7)));
/// ```
pub use bounda_macros::process;

/// Declares a read model: `#[read_model(name = "..")]` on its row struct, `#[read_model]` on
/// the `impl` block of its projections.
///
/// On the struct, each field becomes a column of the read model's table (`read_<name>` in the
/// store's database, under its schema or prefix): a `String`, an integer, `f64`, `bool`,
/// [`Instant`], `serde_json::Value`, [`Json<T>`](read_model::Json) for anything serde can
/// write, or an `Option` of one (a column that may be `NULL`). Exactly one field is `#[key]`,
/// the primary key; `#[index]` indexes a column, `#[unique]` makes its values unique. Each
/// field gets a constant naming its column (`OrderSummary::CUSTOMER_ID`) to filter and order
/// by. A struct with no key, or two, does not compile.
///
/// On the impl block, each function is a projection, `async fn on_<event>(event:
/// Projected<'_, Event>, table: &mut Table<'_, Self>) -> Result<()>`, of one event type of any
/// aggregate. A projection writes idempotently (`upsert`, `insert`, `update`, `delete`) and reads
/// its table (`get`, `find`, `count`); it calls no port, since a batch that rolls back runs
/// again and a rebuild replays the whole log. Put queries in another `impl` block. The read
/// model registers itself: every app built in the binary keeps it.
///
/// ```
/// use bounda::prelude::*;
/// use bounda::read_model::Select;
///
/// # #[derive(Debug, Default)]
/// # pub struct Order;
/// # impl Aggregate for Order {
/// #     const NAME: &'static str = "Order";
/// #     const ID_FIELD: &'static str = "order_id";
/// #     type Event = OrderEvent;
/// #     fn apply(&mut self, _: &OrderEvent) {}
/// # }
/// # #[derive(Debug, Clone, Events)]
/// # pub enum OrderEvent { Placed(OrderPlaced) }
/// #[derive(Debug, Clone, Serialize, Deserialize, Event)]
/// #[event(aggregate = Order)]
/// pub struct OrderPlaced {
///     pub order_id: String,
///     pub customer_id: String,
///     pub total: u64,
/// }
///
/// #[read_model(name = "order-summary")]
/// #[derive(Debug, Clone, PartialEq)]
/// pub struct OrderSummary {
///     #[key]
///     pub order_id: String,
///     #[index]
///     pub customer_id: String,
///     pub total: u64,
///     pub placed_at: Instant,
/// }
///
/// #[read_model]
/// impl OrderSummary {
///     async fn on_order_placed(
///         event: Projected<'_, OrderPlaced>,
///         table: &mut Table<'_, Self>,
///     ) -> Result<()> {
///         table
///             .upsert(&OrderSummary {
///                 order_id: event.order_id.clone(),
///                 customer_id: event.customer_id.clone(),
///                 total: event.total,
///                 placed_at: event.at(),
///             })
///             .await?;
///         Ok(())
///     }
/// }
///
/// /// A customer's orders, newest first.
/// async fn orders_of(app: &App, customer: &str) -> Result<Vec<OrderSummary>> {
///     let select = Select::filter(OrderSummary::CUSTOMER_ID.eq(customer))
///         .order(OrderSummary::PLACED_AT.desc());
///     Ok(app.read::<OrderSummary>().find(select).await?)
/// }
/// ```
pub use bounda_macros::read_model;

/// Declares a policy: one event in, commands out, no memory.
///
/// On an `async fn <action>_on_<event>(cx: Reaction<'_, Event>) -> Result<()>`, it generates a
/// unit struct named after the function (`notify_on_order_placed` → `NotifyOnOrderPlaced`) that
/// implements [`Policy`]. The policy registers itself: every app built in the binary runs it
/// (see [`AppBuilder::only_listed`] to choose). The policy's key is the function's name.
/// On a hand-written `impl Policy for ..` it registers that policy. `#[policy(delay = "1m")]` runs it a minute after the event's time,
/// the literal checked while compiling; `delay = env("WELCOME_DELAY", "1m")` reads
/// the variable when the app is built and refuses the app if it is not a duration.
///
/// ```
/// # use bounda::prelude::*;
/// # #[derive(Debug, Clone, Serialize, Deserialize, Event)]
/// # #[event(aggregate = Order)]
/// # pub struct OrderPlaced { pub order_id: String }
/// # #[derive(Debug, Clone, Serialize, Deserialize, Events)]
/// # pub enum OrderEvent { Placed(OrderPlaced) }
/// # #[derive(Debug, Default)]
/// # pub struct Order;
/// # impl Aggregate for Order {
/// #     const NAME: &'static str = "Order";
/// #     const ID_FIELD: &'static str = "order_id";
/// #     type Event = OrderEvent;
/// #     fn apply(&mut self, _: &OrderEvent) {}
/// # }
/// /// Welcomes the customer a minute after the order.
/// #[policy(delay = "1m")]
/// async fn welcome_on_order_placed(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
///     println!("welcome, {}", cx.event().order_id);
///     Ok(())
/// }
///
/// assert_eq!(<WelcomeOnOrderPlaced as Policy>::NAME, "welcome_on_order_placed");
/// assert_eq!(<WelcomeOnOrderPlaced as Policy>::delay(), Ok(Some(minutes(1))));
/// ```
pub use bounda_macros::policy;

/// Registers a command: put it above `impl Command for YourCommand`. Every app built in the
/// binary can then run the command when a reaction or `dispatch_with` schedules it for later,
/// including after a restart. A command without it does not compile. A generic command has no
/// one type to register: list each of its types with
/// [`AppBuilder::command`](crate::AppBuilder::command).
///
/// ```
/// # use bounda::prelude::*;
/// # #[derive(Debug, Clone, Serialize, Deserialize, Event)]
/// # #[event(aggregate = Order)]
/// # pub struct OrderCancelled { pub order_id: String }
/// # #[derive(Debug, Clone, Serialize, Deserialize, Events)]
/// # pub enum OrderEvent { Cancelled(OrderCancelled) }
/// # #[derive(Debug, Default)]
/// # pub struct Order;
/// # impl Aggregate for Order {
/// #     const NAME: &'static str = "Order";
/// #     const ID_FIELD: &'static str = "order_id";
/// #     type Event = OrderEvent;
/// #     fn apply(&mut self, _: &OrderEvent) {}
/// # }
/// #[derive(Debug, Serialize, Deserialize)]
/// pub struct CancelOrder { pub order_id: String }
///
/// #[command]
/// impl Command for CancelOrder {
///     const NAME: &'static str = "CancelOrder";
///     type Aggregate = Order;
///     type Rejection = NoRejection;
///     fn aggregate_id(&self) -> &str { &self.order_id }
///     fn decide(&self, _: &Order) -> Decision<Self> {
///         Ok(vec![OrderCancelled { order_id: self.order_id.clone() }.into()])
///     }
/// }
/// ```
pub use bounda_macros::command;

/// Marks a deadline field of a `#[process(..)]` state; see [`process`](macro@process). It is
/// read and removed by `#[process]`; used on anything else it is an error.
pub use bounda_macros::deadline;

/// A time zone of the IANA database bundled in the build, its name checked while compiling:
/// `zone!("Europe/Paris")` is a [`calendar::Zone`], and a name the database does not hold is a
/// compile error that says which zone it may have meant. A name that arrives at run time (a
/// customer's zone in a command) is read with [`calendar::Zone::named`].
///
/// ```
/// let paris = bounda::zone!("Europe/Paris");
/// assert_eq!(paris.name(), "Europe/Paris");
/// ```
pub use bounda_macros::zone;

/// A time of day on a 24-hour clock, read while compiling: `time!("09:00")` is a
/// [`calendar::LocalTime`], and `time!("25:00")` does not compile, saying why.
///
/// ```
/// assert_eq!(bounda::time!("17:30").to_string(), "17:30");
/// ```
pub use bounda_macros::time;

/// A recurring rule, read while compiling: `rule!("FREQ=WEEKLY;BYDAY=MO;BYHOUR=8")` is a
/// [`calendar::Recurrence`], and a rule outside the subset bounda reads does not compile,
/// saying which part and how to write it.
///
/// ```
/// let mondays = bounda::rule!("FREQ=WEEKLY;BYDAY=MO;BYHOUR=8");
/// assert_eq!(mondays.rule(), "FREQ=WEEKLY;BYDAY=MO;BYHOUR=8");
/// ```
pub use bounda_macros::rule;

/// Implements [`Event`](trait@Event) for an event payload struct:
/// `#[event(aggregate = Order)]`, and optionally `#[event(name = "..")]` for the stored type name
/// (the struct's name by default). Field names follow `#[serde(rename..)]`, so routing by the
/// main aggregate's id field sees them as stored.
///
/// An event whose shape changed says so: `#[event(version = 2, upcast(1 = OrderPlacedV1))]`
/// reads events stored at version 1 as `OrderPlacedV1` and brings them up with
/// `From<OrderPlacedV1>`; `#[event(renamed_from("OrderTaken"))]` reads events stored under an
/// old name. See the guide [`changing_events`](crate::guides::changing_events).
pub use bounda_macros::Event;

/// Implements [`EventSet`] for the enum of one aggregate's events, each variant wrapping one
/// event struct (`Placed(OrderPlaced)`), with `From<OrderPlaced>` for the enum.
pub use bounda_macros::Events;

/// The story of one process instance, as [`App::explain`] tells it: its steps, what caused
/// each, what each changed, and what is pending, parked and lettered now.
pub mod explain {
    pub use crate::app::processes::explain::{
        DeadlineChange, Explained, FieldChange, LetterNow, Migrated, ParkedEvent, PendingNow, Step,
        StepCause, StepKind,
    };
}

pub use app::{
    Ahead, Answer, App, AppBuilder, BulkOutcome, BulkReport, CaughtUp, Cause, DeadLetters, Decided,
    DispatchError, DispatchOptions, Dispatched, Drift, EventProblem, Failing, HeldEvents,
    InstancePage, Lag, Limited, Loaded, LostMoment, OrphanEntries, POLICIES, PROCESSES, Pace,
    PendingDeadline, Policy, PortDecl, Preflight, ProcessInstance, ProcessStatus, PublishedTo,
    REBUILD_SLICE, RELAYS, Reaction, Rearm, RebuildProgress, RejectionRecord, RelayLag, Retried,
    RezonedDeadline, Scheduled, StateProblem, SubscriberLag, UnreadableEntry, UnreadableState,
    fold, metrics, shutdown_signal,
};
/// Implements [`Rejection`](trait@Rejection) for a command's rejection enum: the code is the
/// variant's name, the message `#[rejection("..")]` (which may name the variant's fields), or
/// the code when there is none.
pub use bounda_macros::Rejection;
pub use deadline::Deadline;
pub use duration::{
    Duration, DurationError, DurationErrorKind, days, env_duration, hours, millis, minutes, seconds,
};
pub use error::Error;
pub use event::{EventShape, RecordedEvent, ShapeError};
pub use instant::{Instant, InstantError};
pub use process::{At, On, Process, ProcessState};

/// A handler's result: any error converts into it with `?`, and the runtime classifies it by the
/// [`Error`] inside, if any.
pub type Result<T, E = anyhow::Error> = std::result::Result<T, E>;

/// Everything a process, an aggregate or a test needs, in one import.
pub mod prelude {
    pub use crate::aggregate::{Aggregate, Command, Decision, EventSet, NoRejection};
    pub use crate::process::{At, On, Process, ProcessState};
    pub use crate::read_model::{Projected, Table};
    pub use crate::testing::TestApp;
    pub use crate::{Answer, App, Policy, Reaction, command, policy};
    pub use crate::{
        Deadline, Duration, Event, Events, Instant, Rejection, Result, days, deadline, hours,
        millis, minutes, process, seconds,
    };
    pub use crate::{DurationError, env_duration, read_model};
    pub use serde::{Deserialize, Serialize};
}
