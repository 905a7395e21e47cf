//! A relay's message: a CloudEvent 1.0 made of a stored event, and its bytes on the wire in
//! binary mode (`ce-` headers, the data as the body) or structured mode (the whole event as a
//! JSON body), as the CloudEvents SDK writes them.

use cloudevents::event::SpecVersion;
use cloudevents::message::{
    BinaryDeserializer, BinarySerializer, MessageAttributeValue, Result as WireResult,
};
use cloudevents::{EventBuilder, EventBuilderV10};

use crate::RecordedEvent;

/// How a message goes on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// The data as the body, the attributes as `ce-` headers (`content-type` for the data's).
    #[default]
    Binary,
    /// The whole CloudEvent as a JSON body, `content-type: application/cloudevents+json`.
    Structured,
}

/// One event as a relay publishes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// The CloudEvent: `id` the event's id, `source` the relay's, `type` the published
    /// contract's (or `Aggregate.Event.vN`), `subject` the aggregate id, `time` when it was
    /// stored, `data` the contract (or the event) as JSON.
    pub event: cloudevents::Event,
    /// The stream it belongs to: its aggregate type.
    pub aggregate_type: String,
    /// And its aggregate id.
    pub aggregate_id: String,
    /// Its event's version in the stream.
    pub version: u64,
    /// How it goes on the wire.
    pub mode: Mode,
}

/// A message's bytes: headers and body.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Wire {
    /// The headers, in the order written (`ce-specversion`, `ce-id`, .., `content-type`).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Message {
    /// The message of `event`, published from `source` as `ty` with `data`.
    pub(crate) fn new(
        event: &RecordedEvent,
        source: &str,
        ty: String,
        data: serde_json::Value,
        mode: Mode,
    ) -> anyhow::Result<Message> {
        let cloud_event = EventBuilderV10::new()
            .id(event.id.clone())
            .source(source)
            .ty(ty)
            .subject(event.aggregate_id.clone())
            .time(event.timestamp.to_chrono())
            .data("application/json", data)
            .build()?;
        Ok(Message {
            event: cloud_event,
            aggregate_type: event.aggregate_type.clone(),
            aggregate_id: event.aggregate_id.clone(),
            version: event.version,
            mode,
        })
    }

    /// Its id: its event's.
    pub fn id(&self) -> &str {
        cloudevents::AttributesReader::id(&self.event)
    }

    /// Its CloudEvents `type`.
    pub fn ty(&self) -> &str {
        cloudevents::AttributesReader::ty(&self.event)
    }

    /// Its headers and body in its mode.
    pub fn wire(&self) -> anyhow::Result<Wire> {
        match self.mode {
            Mode::Binary => Ok(self.event.clone().deserialize_binary(Wire::default())?),
            Mode::Structured => Ok(Wire {
                headers: vec![(
                    "content-type".to_owned(),
                    "application/cloudevents+json".to_owned(),
                )],
                body: serde_json::to_vec(&self.event)?,
            }),
        }
    }
}

/// The binary mode's writer: each attribute a `ce-` header, the data's content type as
/// `content-type`.
impl BinarySerializer<Wire> for Wire {
    fn set_spec_version(mut self, spec_version: SpecVersion) -> WireResult<Self> {
        self.headers
            .push(("ce-specversion".to_owned(), spec_version.to_string()));
        Ok(self)
    }

    fn set_attribute(mut self, name: &str, value: MessageAttributeValue) -> WireResult<Self> {
        let header = match name {
            "datacontenttype" => "content-type".to_owned(),
            name => format!("ce-{name}"),
        };
        self.headers.push((header, value.to_string()));
        Ok(self)
    }

    fn set_extension(mut self, name: &str, value: MessageAttributeValue) -> WireResult<Self> {
        self.headers.push((format!("ce-{name}"), value.to_string()));
        Ok(self)
    }

    fn end_with_data(mut self, bytes: Vec<u8>) -> WireResult<Wire> {
        self.body = bytes;
        Ok(self)
    }

    fn end(self) -> WireResult<Wire> {
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored() -> RecordedEvent {
        RecordedEvent {
            id: "e-1".to_owned(),
            aggregate_type: "Order".to_owned(),
            aggregate_id: "o-1".to_owned(),
            event_type: "OrderPlaced".to_owned(),
            version: 2,
            position: 7,
            timestamp: crate::Instant::parse("2026-03-30T07:00:00Z")
                .unwrap_or_else(|error| panic!("{error}")),
            payload: serde_json::json!({ "orderId": "o-1", "total": 5 }),
            metadata: crate::store::Metadata {
                schema_version: 1,
                ..crate::store::Metadata::unread()
            },
            unreadable: None,
        }
    }

    #[test]
    fn binary_mode_writes_the_attributes_as_headers_and_the_data_as_the_body() {
        let message = Message::new(
            &stored(),
            "/shop",
            "Order.OrderPlaced.v1".to_owned(),
            serde_json::json!({ "orderId": "o-1" }),
            Mode::Binary,
        )
        .unwrap_or_else(|error| panic!("{error}"));
        let wire = message.wire().unwrap_or_else(|error| panic!("{error}"));
        let header = |name: &str| {
            wire.headers
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.as_str())
        };
        assert_eq!(header("ce-specversion"), Some("1.0"));
        assert_eq!(header("ce-id"), Some("e-1"));
        assert_eq!(header("ce-source"), Some("/shop"));
        assert_eq!(header("ce-type"), Some("Order.OrderPlaced.v1"));
        assert_eq!(header("ce-subject"), Some("o-1"));
        assert_eq!(header("ce-time"), Some("2026-03-30T07:00:00+00:00"));
        assert_eq!(header("content-type"), Some("application/json"));
        assert_eq!(wire.body, br#"{"orderId":"o-1"}"#);
    }

    #[test]
    fn structured_mode_writes_the_whole_event_as_json() {
        let message = Message::new(
            &stored(),
            "/shop",
            "com.example.order.placed.v1".to_owned(),
            serde_json::json!({ "order": "o-1" }),
            Mode::Structured,
        )
        .unwrap_or_else(|error| panic!("{error}"));
        let wire = message.wire().unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(
            wire.headers,
            [(
                "content-type".to_owned(),
                "application/cloudevents+json".to_owned()
            )]
        );
        let body: serde_json::Value =
            serde_json::from_slice(&wire.body).unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(body["specversion"], "1.0");
        assert_eq!(body["id"], "e-1");
        assert_eq!(body["type"], "com.example.order.placed.v1");
        assert_eq!(body["subject"], "o-1");
        assert_eq!(body["data"], serde_json::json!({ "order": "o-1" }));
    }
}
