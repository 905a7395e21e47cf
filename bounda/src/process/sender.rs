//! The door a process handler's commands and ports go through: the runtime's attempt of the
//! step, which decides a command on the spot and stages its events for the step's commit. The
//! process model names the door and the runtime implements it (for every command and every
//! port type at once), so the model imports nothing of the runtime.

use std::any::Any;

use futures_util::future::BoxFuture;

use crate::aggregate::Command;
use crate::answer::{Answer, Scheduled};
use crate::{Error, Instant};

/// What a handler's context sends through: the runtime's attempt of the step.
pub(crate) trait Sender: Send + Sync {
    /// The run's idempotency key.
    fn key(&self) -> &str;

    /// Itself, for the runtime to find its attempt behind the door.
    fn as_any(&self) -> &dyn Any;
}

/// A command sent through a [`Sender`]: every command is one.
pub(crate) trait Sends: Command {
    /// Decides the command now, staging its events: the decided events or the typed rejection.
    fn send_through<'a>(
        &'a self,
        sender: &'a dyn Sender,
    ) -> BoxFuture<'a, Result<Answer<Self::Rejection>, Error>>;

    /// Stages the command to run at `at`.
    fn schedule_through(&self, sender: &dyn Sender, at: Instant) -> Result<Scheduled, Error>;
}

/// A port read through a [`Sender`]: every port type is one.
pub(crate) trait Port: Send + Sync + 'static {
    /// The app's port of this type, if the handler declares it.
    fn read_through(sender: &dyn Sender) -> Result<&Self, Error>;
}
