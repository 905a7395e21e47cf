//! What a command answers.

use std::fmt;

use crate::Error;
use crate::aggregate::Rejection;

/// A command that did not decide events: rejected with one of its codes, or failed.
#[derive(Debug)]
pub enum DispatchError<R> {
    /// The command rejected with a code it declares; nothing was stored.
    Rejected(R),
    /// The command could not run: its stream kept moving, a stored event could not be read, the
    /// store failed.
    Failed(Error),
}

impl<R> DispatchError<R> {
    /// The rejection, if the command rejected.
    pub fn rejection(&self) -> Option<&R> {
        match self {
            DispatchError::Rejected(rejection) => Some(rejection),
            DispatchError::Failed(_) => None,
        }
    }
}

impl<R: Rejection> DispatchError<R> {
    /// The stable code: `DOMAIN_ERROR` for a rejection, the error's own otherwise.
    pub fn code(&self) -> &'static str {
        match self {
            DispatchError::Rejected(_) => "DOMAIN_ERROR",
            DispatchError::Failed(error) => error.code(),
        }
    }
}

impl<R: Rejection> fmt::Display for DispatchError<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DispatchError::Rejected(rejection) => write!(
                f,
                "rejected with `{}`: {}",
                rejection.code(),
                rejection.message()
            ),
            DispatchError::Failed(error) => error.fmt(f),
        }
    }
}

impl<R: Rejection> std::error::Error for DispatchError<R> {
    /// A failure's causes: its own message is this error's, so it is not repeated.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DispatchError::Rejected(_) => None,
            DispatchError::Failed(error) => std::error::Error::source(error),
        }
    }
}

impl<R> From<Error> for DispatchError<R> {
    fn from(error: Error) -> DispatchError<R> {
        DispatchError::Failed(error)
    }
}

impl<R> From<crate::store::StoreError> for DispatchError<R> {
    fn from(error: crate::store::StoreError) -> DispatchError<R> {
        DispatchError::Failed(Error::Store(error))
    }
}

/// A rejection that happened in a reaction or in the scheduler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectionRecord {
    /// The command type (`MarkOrderPaid`).
    pub command_type: &'static str,
    /// The code (`NotOpen`).
    pub rejected: &'static str,
    /// The message.
    pub message: String,
    /// The aggregate type.
    pub aggregate_type: &'static str,
    /// The aggregate instance.
    pub aggregate_id: String,
}
