//! What handlers return, and what a deadline field accepts.

use crate::process::ProcessState;
use crate::{Deadline, Instant};

/// A handler's return value as a patch of the state: `()` keeps the state as it is,
/// `<Name>Patch` and the `At<Field>` types change what they set.
#[diagnostic::on_unimplemented(
    message = "a handler of `{P}` cannot return `{Self}`",
    label = "not a patch of `{P}`",
    note = "return the generated patch of `{P}` (`<Name>Patch::default().field(..)`), an `At<Field>` from a deadline handler, or `()`"
)]
pub trait IntoPatch<P: ProcessState> {
    /// The patch to merge over the state.
    fn into_patch(self) -> P::Patch;
}

impl<P: ProcessState> IntoPatch<P> for () {
    fn into_patch(self) -> P::Patch {
        P::Patch::default()
    }
}

/// A value a deadline field can be set to: a [`Deadline`] (or a reference to one), an
/// [`Instant`] or an `Option<Instant>`.
#[diagnostic::on_unimplemented(
    message = "a deadline is set to a moment, not to `{Self}`",
    label = "not a moment",
    note = "use `cx.after(hours(24))`, `Deadline::at(instant)` or `Deadline::none()`; parse text with `Instant::parse`"
)]
pub trait IntoDeadline {
    /// The deadline.
    fn into_deadline(self) -> Deadline;
}

impl IntoDeadline for Deadline {
    fn into_deadline(self) -> Deadline {
        self
    }
}

impl IntoDeadline for &Deadline {
    fn into_deadline(self) -> Deadline {
        self.clone()
    }
}

impl IntoDeadline for Instant {
    fn into_deadline(self) -> Deadline {
        Deadline::at(self)
    }
}

impl IntoDeadline for Option<Instant> {
    fn into_deadline(self) -> Deadline {
        Deadline::from(self)
    }
}
