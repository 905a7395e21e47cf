//! `RecordedEvent`: an event as stored, the envelope every reaction receives.

use serde_json::Value;

use crate::aggregate::{Aggregate, Event, EventKey};
use crate::store::Metadata;
use crate::{Error, Instant};

/// An event as the store holds it: its payload as JSON plus where and when it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedEvent {
    /// The event's id.
    pub id: String,
    /// The aggregate type (`Order`).
    pub aggregate_type: String,
    /// The aggregate instance (`o-1`).
    pub aggregate_id: String,
    /// The event type (`OrderPlaced`).
    pub event_type: String,
    /// The event's number within its aggregate instance, from 1.
    pub version: u64,
    /// The event's place in the global stream, from 1.
    pub position: u64,
    /// When it was stored.
    pub timestamp: Instant,
    /// The payload.
    pub payload: Value,
    /// How it came to be: correlation, causation, depth.
    pub metadata: Metadata,
}

impl RecordedEvent {
    /// Whether this is an `E`, by aggregate and event type.
    pub fn is<E: Event>(&self) -> bool {
        self.aggregate_type == <E::Aggregate as Aggregate>::NAME && self.event_type == E::TYPE
    }

    /// Whether this event has the routing key `key`.
    pub fn has_key(&self, key: EventKey) -> bool {
        self.aggregate_type == key.aggregate && self.event_type == key.event
    }

    /// Reads the payload as an `E`; a payload that does not fit is a typed error naming the event.
    pub fn decode<E: Event>(&self) -> Result<E, Error> {
        if !self.is::<E>() {
            return Err(Error::WrongEventType {
                expected: E::key(),
                aggregate: self.aggregate_type.clone(),
                event_type: self.event_type.clone(),
            });
        }
        serde_json::from_value(self.payload.clone()).map_err(|source| Error::InvalidPayload {
            aggregate: self.aggregate_type.clone(),
            event_type: self.event_type.clone(),
            event_id: self.id.clone(),
            source,
        })
    }
}
