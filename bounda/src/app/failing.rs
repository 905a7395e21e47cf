//! The run a subscriber is held by while its retry waits: which handler failed on which event,
//! why, and when it runs again. What `lag` shows of a policy, a process runner or a relay.

use crate::app::App;
use crate::{Error, Instant};

/// A subscriber held by a failing run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failing {
    /// The handler that failed.
    pub handler: String,
    /// The event's position.
    pub position: u64,
    /// The event's id.
    pub event_id: String,
    /// The event's type.
    pub event_type: String,
    /// The last error.
    pub message: String,
    /// Runs so far.
    pub attempts: u32,
    /// When the next run is due.
    pub retry_at: Instant,
}

impl App {
    /// The run of `handlers` whose retry comes first, with its event.
    pub(crate) async fn failing(&self, handlers: &[&str]) -> Result<Option<Failing>, Error> {
        let mut first: Option<crate::store::InboxFailure> = None;
        for handler in handlers {
            if let Some(failure) = self.store().inbox_failures(handler, 1).await?.pop()
                && first.as_ref().is_none_or(|f| failure.retry_at < f.retry_at)
            {
                first = Some(failure);
            }
        }
        let Some(failure) = first else {
            return Ok(None);
        };
        let event = self.read_event(&failure.event_id).await?;
        Ok(Some(Failing {
            handler: failure.handler,
            position: event.as_ref().map_or(0, |e| e.position),
            event_type: event.map_or_else(String::new, |e| e.event_type),
            event_id: failure.event_id,
            message: failure.last_error.unwrap_or_default(),
            attempts: failure.attempts,
            retry_at: failure.retry_at,
        }))
    }
}
