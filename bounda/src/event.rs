//! `RecordedEvent`: an event as stored, the envelope every reaction receives, with its metadata
//! and routing key; and the shapes an event type was stored in over time, which every read
//! brings up to today's.

use serde_json::Value;

use serde::{Deserialize, Serialize};

use crate::Instant;
use crate::store::unreadable::Unreadable;

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
    /// Whether this event has the routing key `key`.
    pub fn has_key(&self, key: EventKey) -> bool {
        self.aggregate_type == key.aggregate && self.event_type == key.event
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

/// Reads `payload` as `T`, the shape of `version`: what a derived
/// [`Event::read`](crate::Event::read) does at each version it knows.
pub fn read_shape<T: serde::de::DeserializeOwned>(
    version: u32,
    payload: Value,
) -> Result<T, ShapeError> {
    serde_json::from_value(payload).map_err(|source| ShapeError::Unreadable { version, source })
}

/// An event's metadata: how it came to be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// The request this event belongs to: the first command's id unless one was passed in.
    pub correlation_id: String,
    /// What caused it: the command's id, or the event a reaction handled.
    pub causation_id: String,
    /// How many reactions deep in its chain.
    pub depth: u32,
    /// The version of the payload's shape it was written at, from 1 (`Event::VERSION`); a
    /// read brings an older one up through the event's upcasts.
    pub schema_version: u32,
    /// Whether the runtime wrote it (process lifecycle events).
    pub system: bool,
}

impl Metadata {
    /// What an event whose stored metadata does not read carries instead: no correlation, no
    /// cause, version 1. Such an event is marked unreadable, so nothing decides on it.
    pub fn unread() -> Metadata {
        Metadata {
            correlation_id: String::new(),
            causation_id: String::new(),
            depth: 0,
            schema_version: 1,
            system: false,
        }
    }

    /// Metadata as a store holds it, JSON text, read straight into its fields; or why it does
    /// not read: not JSON, or JSON of another shape. A key written twice (a hand edit; bounda
    /// writes none) reads as its last value, as a JSON value keeps it. For stores' row decoders.
    pub fn from_stored(text: &[u8]) -> Result<Metadata, String> {
        match serde_json::from_slice(text) {
            Ok(metadata) => Ok(metadata),
            Err(error) if error.is_data() => serde_json::from_slice::<Value>(text)
                .and_then(serde_json::from_value)
                .map_err(|error| format!("not event metadata: {error}")),
            Err(error) => Err(format!("not JSON: {error}")),
        }
    }

    /// The metadata of an event decided by a command from outside, with id `command_id`: its own
    /// correlation and cause, depth 0.
    pub fn of_command(command_id: &str) -> Metadata {
        Metadata {
            correlation_id: command_id.to_owned(),
            causation_id: command_id.to_owned(),
            depth: 0,
            schema_version: 1,
            system: false,
        }
    }
}

/// An event type as the runtime routes it: aggregate type and event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventKey {
    /// The aggregate type (`Order`).
    pub aggregate: &'static str,
    /// The event type within it (`OrderPlaced`).
    pub event: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 43 and 47: stored metadata is read straight into its fields, and what does not read
    // says why.
    #[test]
    fn stored_metadata_reads_into_its_fields_or_says_why_not() {
        let written =
            r#"{"correlationId":"c","causationId":"d","depth":2,"schemaVersion":3,"system":true}"#;
        assert_eq!(
            Metadata::from_stored(written.as_bytes()).expect("reads"),
            Metadata {
                correlation_id: "c".into(),
                causation_id: "d".into(),
                depth: 2,
                schema_version: 3,
                system: true,
            },
            "every field as written"
        );
        let twice = r#"{"correlationId":"a","causationId":"d","depth":0,"schemaVersion":1,"system":false,"correlationId":"b"}"#;
        assert_eq!(
            Metadata::from_stored(twice.as_bytes())
                .expect("a key written twice reads")
                .correlation_id,
            "b",
            "its last value, as a JSON value keeps it"
        );
        let shape = Metadata::from_stored(br#"{"correlationId":5}"#).expect_err("another shape");
        assert!(shape.starts_with("not event metadata: "), "{shape}");
        let text = Metadata::from_stored(b"{correlationId").expect_err("not JSON");
        assert!(text.starts_with("not JSON: "), "{text}");
    }
}
