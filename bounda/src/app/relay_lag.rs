//! How far behind each relay is (the events it has yet to publish, the oldest one's moment, and
//! the publish that fails, if one does), and where one stream's events were published.

use serde::Serialize;

use crate::app::failing::Failing;
use crate::app::{App, RELAYS};
use crate::store::{LetterFilter, LetterKind};
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

/// Where one relay published a stream's events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishedTo {
    /// The relay.
    pub relay: String,
    /// What its sink publishes to.
    pub sink: String,
    /// The stream's events it published.
    pub published: u64,
    /// Those it has yet to publish.
    pub waiting: u64,
    /// The letters of those its sink refused for good, by id.
    pub letters: Vec<String>,
}

impl App {
    /// Where each relay that takes any of stream `aggregate_type:aggregate_id`'s events
    /// published them: how many it published, how many wait, and the letters of those refused.
    pub async fn published_of(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
    ) -> Result<Vec<PublishedTo>, Error> {
        if self.inner.relays.is_empty() {
            return Ok(Vec::new());
        }
        let handled_to = match self.store().cursor(RELAYS).await? {
            Some(cursor) => cursor.handled_to(),
            None => 0,
        };
        let events = self
            .store()
            .read_stream(aggregate_type, aggregate_id)
            .await?;
        let mut told = Vec::new();
        for relay in self.relays() {
            let taken: Vec<_> = events.iter().filter(|event| relay.takes(event)).collect();
            if taken.is_empty() {
                continue;
            }
            let filter = LetterFilter {
                kind: Some(LetterKind::Relay),
                handler: Some(relay.name().to_owned()),
                ..LetterFilter::default()
            };
            let letters: Vec<_> = self
                .store()
                .dead_letters(&filter)
                .await?
                .into_iter()
                .filter(|letter| {
                    letter.status == crate::store::LetterStatus::Failed
                        && taken
                            .iter()
                            .any(|event| letter.event_id.as_deref() == Some(event.id.as_str()))
                })
                .map(|letter| letter.id)
                .collect();
            // Past the checkpoint, an event was published or lettered; after it, it may still
            // wait (another stream's waiting pair holds the checkpoint back).
            let passed = taken.iter().filter(|e| e.position <= handled_to).count() as u64;
            let published = passed.saturating_sub(letters.len() as u64);
            told.push(PublishedTo {
                relay: relay.name().to_owned(),
                sink: relay.sink(),
                published,
                waiting: taken.len() as u64 - passed,
                letters,
            });
        }
        Ok(told)
    }
}
