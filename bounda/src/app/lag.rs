//! How far behind the subscribers are (spec 173–176).

use crate::app::App;
use crate::{Error, Instant};

/// One subscriber's progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriberLag {
    /// Its name (`policies`).
    pub subscriber: String,
    /// Its checkpoint.
    pub position: u64,
    /// Events stored after its checkpoint (spec 174).
    pub lag: u64,
}

/// How far behind the app is: zero means every consequence of every stored event has happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lag {
    /// Every subscriber, by name.
    pub subscribers: Vec<SubscriberLag>,
    /// The largest lag.
    pub max_lag: u64,
    /// Process deadlines held back behind unhandled events (spec 175); 0 until processes run.
    pub waiting_deadlines: u64,
}

impl App {
    /// The lag of every subscriber, read from the store (spec 173–174).
    pub fn lag(&self) -> Result<Lag, Error> {
        let head = self.store().head()?;
        let subscribers: Vec<SubscriberLag> = self
            .store()
            .checkpoints()?
            .into_iter()
            .map(|(subscriber, position)| SubscriberLag {
                subscriber,
                position,
                lag: head.saturating_sub(position),
            })
            .collect();
        let max_lag = subscribers.iter().map(|s| s.lag).max().unwrap_or(0);
        Ok(Lag {
            subscribers,
            max_lag,
            waiting_deadlines: 0,
        })
    }

    /// The earliest moment a scheduled command, delayed policy run or deadline becomes due
    /// (spec 176).
    pub fn next_due_at(&self) -> Result<Option<Instant>, Error> {
        Ok(self.store().next_due_at(self.lease())?)
    }

    /// The earliest pending retry of a policy or a scheduled entry.
    pub(crate) fn next_retry_at(&self) -> Result<Option<Instant>, Error> {
        let mut next = self.store().next_scheduled_retry()?;
        for policy in &self.inner.policies {
            let retry = self.store().next_inbox_retry(policy.name())?;
            next = next.into_iter().chain(retry).min();
        }
        Ok(next)
    }
}
