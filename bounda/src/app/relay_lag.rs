//! How far behind each relay is: the events it has yet to publish, the oldest one's moment, and
//! the publish that fails, if one does.

use crate::app::lag::Failing;
use crate::app::{App, RELAYS};
use crate::{Error, Instant};

/// The most events after the relays' checkpoint a survey reads.
const SURVEYED: usize = 1_000;

/// One relay's lag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayLag {
    /// The relay's name.
    pub relay: String,
    /// What its sink publishes to.
    pub sink: String,
    /// Events it has yet to publish, at most: those it takes after the relays' checkpoint (of
    /// the first thousand), which stops before the oldest one a relay has not published; other
    /// streams' events after it may be published already.
    pub behind: u64,
    /// When the oldest of them was stored (the failing one's, if one fails): how long its
    /// consumers have waited, at most.
    pub oldest: Option<Instant>,
    /// The publish that fails, held until its retry.
    pub failing: Option<Failing>,
}

impl App {
    /// Each relay's lag: what it has yet to publish and since when.
    pub async fn relay_lags(&self) -> Result<Vec<RelayLag>, Error> {
        if self.inner.relays.is_empty() {
            return Ok(Vec::new());
        }
        let from = match self.store().cursor(RELAYS).await? {
            Some(cursor) => cursor.handled_to(),
            // Not started: a relay starts at the head, so nothing is behind yet.
            None => return Ok(self.relays().map(|relay| idle(relay)).collect()),
        };
        let events = self.store().read_all(from, SURVEYED).await?;
        let mut lags = Vec::new();
        for relay in self.relays() {
            let mut lag = idle(relay);
            for event in events.iter().filter(|event| relay.takes(event)) {
                lag.behind += 1;
                lag.oldest = Some(
                    lag.oldest
                        .map_or(event.timestamp, |o| o.min(event.timestamp)),
                );
            }
            lag.failing = self.failing(&[relay.name()]).await?;
            if let Some(failing) = &lag.failing
                && let Some(event) = events.iter().find(|e| e.id == failing.event_id)
            {
                lag.oldest = Some(event.timestamp);
            }
            lags.push(lag);
        }
        Ok(lags)
    }
}

fn idle(relay: &crate::relay::Relay) -> RelayLag {
    RelayLag {
        relay: relay.name().to_owned(),
        sink: relay.sink(),
        behind: 0,
        oldest: None,
        failing: None,
    }
}
