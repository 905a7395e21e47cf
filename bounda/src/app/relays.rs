//! The relays' pass over their subscriber: each event to the relays that publish it, in its
//! stream's lane, so one stream is published in order whoever runs it.

use std::sync::Arc;

use crate::app::relay_run::RelayRun;
use crate::app::subscriber::Delivery;
use crate::app::{App, RejectionRecord};
use crate::relay::Relay;
use crate::{Error, Instant};

/// The subscriber all relays share.
pub const RELAYS: &str = "relays";

impl App {
    /// The app's relays.
    pub(crate) fn relays(&self) -> impl Iterator<Item = &Arc<Relay>> {
        self.inner.relays.iter()
    }

    /// Publishes `message` through `relay`'s sink, or, in a preview, records what would be
    /// published (the relay, the message's id, type and subject) with the other port calls.
    pub(crate) async fn publish(
        &self,
        relay: &Relay,
        message: &crate::relay::Message,
    ) -> Result<(), crate::relay::SinkError> {
        let Some(calls) = &self.inner.relays_recorded else {
            return relay.publish(message).await;
        };
        use cloudevents::AttributesReader;
        calls.record(
            &format!("relay {}", relay.name()),
            "publish",
            Some(message.id()),
            serde_json::json!({
                "sink": relay.sink(),
                "type": message.ty(),
                "subject": message.event.subject(),
            }),
        );
        Ok(())
    }

    /// One pass of the relays at `now`: whether anything moved.
    pub(crate) async fn relay_pass(
        &self,
        now: Instant,
        rejections: &mut Vec<RejectionRecord>,
    ) -> Result<bool, Error> {
        if self.inner.relays.is_empty() {
            return Ok(false);
        }
        self.subscriber_pass(RELAYS, "relay", now, rejections, |event| {
            self.relays()
                .filter(|relay| relay.takes(event))
                .map(|relay| Delivery {
                    handler: relay.name(),
                    // A stream's events in its version order: one lane per stream.
                    lane: format!("{}:{}", event.aggregate_type, event.aggregate_id),
                    work: Box::new(RelayRun::new(Arc::clone(relay), event.clone())),
                })
                .collect()
        })
        .await
    }
}
