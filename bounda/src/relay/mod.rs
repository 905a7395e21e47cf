//! Relays: the app's events published to another system, a broker or an HTTP endpoint, as
//! CloudEvents, at least once, each stream's events in version order.
//!
//! A relay is declared in Rust like the other handlers and registered with
//! [`AppBuilder::relay`](crate::AppBuilder::relay): which events it publishes (every event, an
//! aggregate's, or some event types), the public contract an event is published as where the
//! internal event should not leave the service, and the [`Sink`] that publishes. The runtime
//! delivers each event to it as it delivers events to policies: one run per event, retried with
//! back-off while the sink is out of reach, holding the later events of its stream so a stream
//! is never published out of order, by one runner or several. A run is done only once the sink
//! acknowledged its message; a message the sink refuses for good is a dead letter naming the
//! event. The message id is the event's id, so a sink that drops repeated ids (NATS JetStream's
//! duplicate window) keeps one copy of each event even when a run is repeated after a crash.
//!
//! ```
//! # use bounda::prelude::*;
//! # use bounda::relay::{Message, Relay, Sink, SinkError};
//! /// A sink that prints what it publishes.
//! struct Printer;
//!
//! #[bounda::relay::async_trait]
//! impl Sink for Printer {
//!     fn describe(&self) -> String {
//!         "standard output".to_owned()
//!     }
//!
//!     async fn publish(&self, message: &Message) -> Result<(), SinkError> {
//!         let wire = message.wire().map_err(SinkError::Refused)?;
//!         println!("{} {:?}", message.id(), wire.headers);
//!         Ok(())
//!     }
//! }
//!
//! let relay = Relay::new("everything", Printer).source("https://shop.example/orders");
//! ```

mod memory;
mod message;

use std::sync::Arc;

pub use async_trait::async_trait;
pub use cloudevents;
pub use memory::MemorySink;
pub use message::{Message, Mode, Wire};

use crate::RecordedEvent;
use crate::aggregate::{Aggregate, Event, EventKey};

/// Where a relay's messages go: a broker, an HTTP endpoint, a test's memory.
#[async_trait::async_trait]
pub trait Sink: Send + Sync + 'static {
    /// What it publishes to, for logs and letters (`NATS JetStream stream STOREFRONT`).
    fn describe(&self) -> String;

    /// Publishes `message`, answering once the sink has stored it (the broker acknowledged
    /// it). The same message may be published again after a crash or a lost acknowledgement;
    /// its id, [`Message::id`], is the event's, for a sink that drops repeated ids.
    async fn publish(&self, message: &Message) -> Result<(), SinkError>;
}

/// Why a sink did not publish a message.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// Not now: the sink is out of reach, busy or slow. The message is published again after a
    /// back-off, its stream's later events waiting behind it.
    #[error("{0:#}")]
    Unavailable(anyhow::Error),
    /// Never: the sink refuses the message itself (too large, forbidden, malformed). Its event
    /// becomes a dead letter, retried by an operator once the cause is mended; the stream's
    /// later events go on.
    #[error("{0:#}")]
    Refused(anyhow::Error),
}

/// A public contract an event is published as: what leaves the service, with a name and
/// version of its own, instead of the internal event.
pub trait Contract: serde::Serialize + Send + 'static {
    /// The CloudEvents `type` it is published under, its version included
    /// (`com.example.order.placed.v1`).
    const TYPE: &'static str;
}

/// Which events a relay publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Selection {
    /// Every event of the aggregate.
    Aggregate(&'static str),
    /// One event type.
    Event(EventKey),
}

/// The data of a contract made of a stored event.
type ContractData = Box<dyn Fn(&RecordedEvent) -> anyhow::Result<serde_json::Value> + Send + Sync>;

/// How an event of one type is published as a contract: its `type` and its data.
struct Mapping {
    key: EventKey,
    ty: &'static str,
    data: ContractData,
}

/// A relay: which events go to which [`Sink`], and as what. Named, as a policy is: its runs,
/// letters and lag are named by it.
pub struct Relay {
    name: &'static str,
    sink: Arc<dyn Sink>,
    selection: Vec<Selection>,
    mappings: Vec<Mapping>,
    source: String,
    mode: Mode,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("name", &self.name)
            .field("sink", &self.sink.describe())
            .field("selection", &self.selection)
            .field("source", &self.source)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl Relay {
    /// A relay named `name` (unique among the app's policies and relays) publishing every
    /// event the app's commands store from the moment it is added to `sink` (the runtime's own,
    /// a process's lifecycle, stay in), in binary mode, with source `/name`.
    pub fn new(name: &'static str, sink: impl Sink) -> Relay {
        Relay {
            name,
            sink: Arc::new(sink),
            selection: Vec::new(),
            mappings: Vec::new(),
            source: format!("/{name}"),
            mode: Mode::Binary,
        }
    }

    /// Publishes the events of aggregate `A`; with [`event`](Relay::event) and other
    /// aggregates, the relay publishes what any of them selects, and nothing else.
    pub fn aggregate<A: Aggregate>(mut self) -> Relay {
        self.selection.push(Selection::Aggregate(A::NAME));
        self
    }

    /// Publishes events of type `E`; see [`aggregate`](Relay::aggregate).
    pub fn event<E: Event>(mut self) -> Relay {
        self.selection.push(Selection::Event(E::key()));
        self
    }

    /// Publishes each event of type `E` as the contract `map` makes of it: its `type` is the
    /// contract's, its data the contract as JSON. Selects nothing by itself.
    pub fn contract<E: Event, C: Contract>(mut self, map: fn(E) -> C) -> Relay {
        self.mappings.push(Mapping {
            key: E::key(),
            ty: C::TYPE,
            data: Box::new(move |event| {
                let payload = event.decode::<E>()?;
                Ok(serde_json::to_value(map(payload))?)
            }),
        });
        self
    }

    /// The CloudEvents `source` of its messages: a URI reference naming this service
    /// (`https://shop.example/orders`).
    pub fn source(mut self, source: impl Into<String>) -> Relay {
        self.source = source.into();
        self
    }

    /// Sends whole CloudEvents as JSON bodies (structured mode) instead of the data alone with
    /// `ce-` headers (binary mode).
    pub fn structured(mut self) -> Relay {
        self.mode = Mode::Structured;
        self
    }

    /// Its name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// What its sink publishes to.
    pub fn sink(&self) -> String {
        self.sink.describe()
    }

    /// Whether it publishes `event`: one it selects, never the runtime's own (a process's
    /// lifecycle).
    pub(crate) fn takes(&self, event: &RecordedEvent) -> bool {
        let selected = self.selection.is_empty()
            || self.selection.iter().any(|selection| match selection {
                Selection::Aggregate(aggregate) => event.aggregate_type == *aggregate,
                Selection::Event(key) => event.has_key(*key),
            });
        selected && !event.metadata.system
    }

    /// The message `event` is published as: what a sink is given for it.
    pub fn message_of(&self, event: &RecordedEvent) -> anyhow::Result<Message> {
        let mapping = self
            .mappings
            .iter()
            .find(|mapping| event.has_key(mapping.key));
        let (ty, data) = match mapping {
            Some(mapping) => (mapping.ty.to_owned(), (mapping.data)(event)?),
            None => (
                format!(
                    "{}.{}.v{}",
                    event.aggregate_type, event.event_type, event.metadata.schema_version
                ),
                event.payload.clone(),
            ),
        };
        Message::new(event, &self.source, ty, data, self.mode)
    }

    /// Publishes `message` through its sink.
    pub(crate) async fn publish(&self, message: &Message) -> Result<(), SinkError> {
        self.sink.publish(message).await
    }
}
