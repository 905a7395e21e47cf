//! The keywords users type, spelled once.

/// `#[process(on = ..)]`: the main aggregate.
pub(crate) const ON: &str = "on";
/// `#[process(started_by = [..])]`.
pub(crate) const STARTED_BY: &str = "started_by";
/// `#[process(completed_by = [..])]`.
pub(crate) const COMPLETED_BY: &str = "completed_by";
/// `#[process(timeout = "..")]`.
pub(crate) const TIMEOUT: &str = "timeout";
/// `#[process(version = 2)]`: the state's version.
pub(crate) const VERSION: &str = "version";
/// `#[process(migrate = [FlowV1])]`: the state's older shapes.
pub(crate) const MIGRATE: &str = "migrate";
/// `#[process(ports = [..])]`, `#[policy(ports = [..])]`: the ports its handlers read.
pub(crate) const PORTS: &str = "ports";
/// Every `#[process(..)]` argument, in the order the docs list them.
pub(crate) const PROCESS_ARGS: &[&str] = &[
    ON,
    STARTED_BY,
    COMPLETED_BY,
    TIMEOUT,
    VERSION,
    MIGRATE,
    PORTS,
];

/// `#[deadline]` on a state field.
pub(crate) const DEADLINE: &str = "deadline";
/// `#[correlate(path)]` on an `on_<event>` handler.
pub(crate) const CORRELATE: &str = "correlate";
/// The prefix of event handlers.
pub(crate) const ON_PREFIX: &str = "on_";
/// The prefix of deadline handlers.
pub(crate) const AT_PREFIX: &str = "at_";
/// The reserved deadline that ends a process.
pub(crate) const RESERVED_DEADLINE: &str = "timeout";

/// `#[event(aggregate = ..)]`.
pub(crate) const EVENT: &str = "event";
/// `#[event(aggregate = ..)]`.
pub(crate) const AGGREGATE: &str = "aggregate";
/// `#[event(name = "..")]`.
pub(crate) const NAME: &str = "name";
/// `#[rejection("message")]`.
pub(crate) const REJECTION: &str = "rejection";
/// The context type of event handlers, `On<'_, Self, Event>`.
pub(crate) const ON_CONTEXT: &str = "On";
/// The prefix of the types deadline handlers return, `At<Field>`.
pub(crate) const AT_TYPE_PREFIX: &str = "At";
/// `#[serde(..)]`, read by `#[derive(Event)]` for renamed fields.
pub(crate) const SERDE: &str = "serde";
/// A field the patch cannot have when deadlines exist: `At<Field>::new` is taken.
pub(crate) const RESERVED_FIELD: &str = "new";
/// `#[policy(delay = ..)]`.
pub(crate) const DELAY: &str = "delay";
/// `delay = env("VAR", "1m")`.
pub(crate) const ENV: &str = "env";
/// The context type of policies, `Reaction<'_, Event>`.
pub(crate) const REACTION_CONTEXT: &str = "Reaction";
/// The context type of projections, `Projected<'_, Event>`.
pub(crate) const PROJECTED_CONTEXT: &str = "Projected";

/// The hidden function on a process state that serde fills missing fields from.
pub(crate) const INITIAL_FN: &str = "__bounda_initial";
