#![doc = include_str!("../../README.md")]
#![warn(missing_docs)]

#[allow(
    unused_extern_crates,
    reason = "generated code names `::bounda`, also in this crate's own tests"
)]
extern crate self as bounda;

pub mod aggregate;
pub mod clock;
mod deadline;
mod duration;
mod error;
mod event;
pub mod ids;
mod instant;
pub mod process;
pub mod store;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use aggregate::{
    Aggregate, Command, Decision, Event, EventKey, EventSet, NoRejection, Rejection,
};
pub use bounda_macros::{Event, Events, Rejection, deadline, process};
pub use deadline::Deadline;
pub use duration::{
    Duration, DurationError, DurationErrorKind, days, hours, millis, minutes, seconds,
};
pub use error::Error;
pub use event::RecordedEvent;
pub use instant::{Instant, InstantError};
pub use process::{At, On, Process, ProcessState};

/// A handler's result: any error converts into it with `?`, and the runtime classifies it by the
/// [`Error`] inside, if any.
pub type Result<T, E = anyhow::Error> = std::result::Result<T, E>;

/// Everything a process, an aggregate or a test needs, in one import.
pub mod prelude {
    pub use crate::aggregate::{Aggregate, Command, Decision, EventSet, NoRejection};
    pub use crate::process::{At, On, Process, ProcessState};
    pub use crate::{
        Deadline, Duration, Event, Events, Instant, Rejection, Result, days, deadline, hours,
        millis, minutes, process, seconds,
    };
    pub use serde::{Deserialize, Serialize};
}
