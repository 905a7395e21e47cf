//! `RecordedEvent`: an event as stored, the envelope every reaction receives; and the shapes an
//! event type was stored in over time, which every read brings up to today's.

use serde_json::Value;

use crate::aggregate::{Aggregate, Event, EventKey};
use crate::store::{Metadata, Unreadable};
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
    /// The first column of its row that does not read, if one does not: the event is then
    /// routed by its type and stream, and every read of its payload fails naming it.
    pub unreadable: Option<Box<Unreadable>>,
}

impl RecordedEvent {
    /// Whether this is an `E`, by aggregate and event type (today's name or one it was
    /// stored under before it was renamed).
    pub fn is<E: Event>(&self) -> bool {
        self.aggregate_type == <E::Aggregate as Aggregate>::NAME
            && (self.event_type == E::TYPE || E::RENAMED_FROM.contains(&self.event_type.as_str()))
    }

    /// Whether this event has the routing key `key`.
    pub fn has_key(&self, key: EventKey) -> bool {
        self.aggregate_type == key.aggregate && self.event_type == key.event
    }

    /// Reads the payload as an `E`, brought up from the version it was stored at through `E`'s
    /// upcasts. A payload that does not fit, or one stored by a newer build, is a typed error
    /// naming the event.
    pub fn decode<E: Event>(&self) -> Result<E, Error> {
        if !self.is::<E>() {
            return Err(Error::WrongEventType {
                expected: E::key(),
                aggregate: self.aggregate_type.clone(),
                event_type: self.event_type.clone(),
            });
        }
        self.readable()?;
        E::read(self.metadata.schema_version, self.payload.clone())
            .map_err(|error| self.shape_error(error))
    }

    /// `Ok` when every column of the event's row reads; else the error naming the event, its
    /// stream and position, and the column that does not.
    pub fn readable(&self) -> Result<(), Error> {
        match &self.unreadable {
            None => Ok(()),
            Some(unreadable) => Err(Error::UnreadableStored {
                row: format!(
                    "event `{}` at position {} (stream `{}:{}`, version {})",
                    self.id, self.position, self.aggregate_type, self.aggregate_id, self.version
                ),
                unreadable: (**unreadable).clone(),
            }),
        }
    }

    /// `error`, met reading this event, as the runtime's error naming the event and its stream.
    pub fn shape_error(&self, error: ShapeError) -> Error {
        match error {
            ShapeError::Newer { stored, known } => Error::NewerEvent {
                aggregate: self.aggregate_type.clone(),
                aggregate_id: self.aggregate_id.clone(),
                event_type: self.event_type.clone(),
                event_id: self.id.clone(),
                stored,
                known,
            },
            ShapeError::Unreadable { version, source } => Error::InvalidPayload {
                aggregate: self.aggregate_type.clone(),
                event_type: self.event_type.clone(),
                event_id: self.id.clone(),
                version,
                source,
            },
        }
    }
}

/// Why a stored payload does not read as its event type today.
#[derive(Debug, thiserror::Error)]
pub enum ShapeError {
    /// It was written at a version this build does not know: a newer build wrote it.
    #[error("it was written at version {stored}, and this build reads up to version {known}")]
    Newer {
        /// The version it was stored at.
        stored: u32,
        /// The newest version this build reads.
        known: u32,
    },
    /// It does not read as the shape of the version it was stored at.
    #[error("its version {version} payload does not read: {source}")]
    Unreadable {
        /// The version it was stored at.
        version: u32,
        /// What serde said.
        #[source]
        source: serde_json::Error,
    },
}

/// One event type as the runtime reads it without knowing its Rust type: its names, its version
/// and how a stored payload becomes today's. `#[derive(Events)]` lists one per variant.
#[derive(Debug, Clone, Copy)]
pub struct EventShape {
    /// The aggregate type whose streams hold it.
    pub aggregate: &'static str,
    /// The event type as stored today.
    pub name: &'static str,
    /// The names it was stored under before it was renamed.
    pub renamed_from: &'static [&'static str],
    /// The version it is written at.
    pub version: u32,
    /// A payload stored at a version, as today's payload.
    pub bring_up: fn(u32, Value) -> Result<Value, ShapeError>,
}

impl EventShape {
    /// The shape of `E`.
    pub const fn of<E: Event>() -> EventShape {
        EventShape {
            aggregate: <E::Aggregate as Aggregate>::NAME,
            name: E::TYPE,
            renamed_from: E::RENAMED_FROM,
            version: E::VERSION,
            bring_up: bring_up::<E>,
        }
    }
}

/// A payload of `E` stored at `version`, read, upcast and written again as today's.
fn bring_up<E: Event>(version: u32, payload: Value) -> Result<Value, ShapeError> {
    let event = E::read(version, payload)?;
    serde_json::to_value(event).map_err(|source| ShapeError::Unreadable {
        version: E::VERSION,
        source,
    })
}

/// Reads `payload` as `T`, the shape of `version`: what a derived [`Event::read`] does at each
/// version it knows.
pub fn read_shape<T: serde::de::DeserializeOwned>(
    version: u32,
    payload: Value,
) -> Result<T, ShapeError> {
    serde_json::from_value(payload).map_err(|source| ShapeError::Unreadable { version, source })
}
