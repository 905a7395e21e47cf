//! Reading a stored event as its Rust type: by its names today and before a rename, brought up
//! from the version it was stored at, or an error naming the event.

use serde_json::Value;

use crate::Error;
use crate::aggregate::{Aggregate, Event};
use crate::event::{EventShape, RecordedEvent, ShapeError};

impl RecordedEvent {
    /// Whether this is an `E`, by aggregate and event type (today's name or one it was
    /// stored under before it was renamed).
    pub fn is<E: Event>(&self) -> bool {
        self.aggregate_type == <E::Aggregate as Aggregate>::NAME
            && (self.event_type == E::TYPE || E::RENAMED_FROM.contains(&self.event_type.as_str()))
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
