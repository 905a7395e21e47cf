//! Ingress: commands that arrive from other services, decided once each.
//!
//! An app says which of its commands other services may send, and under which names
//! ([`Ingress`], registered with [`AppBuilder::ingress`](crate::AppBuilder::ingress)): only
//! those are taken, so a command meant for the app's own code is not reachable from outside.
//! Each arrival carries an idempotency key (an HTTP request's `Idempotency-Key`, a
//! CloudEvent's `source` and `id`). [`App::ingest`](crate::App::ingest) decides it and stores
//! the key, with the answer it got, in the same transaction as the command's events: a message
//! a broker delivers again, or a request a client sends again after a timeout, decides nothing
//! new and is given the first answer, marked as replayed. The same key with another command or
//! payload is refused, not answered with another request's answer.
//!
//! `bounda::ingress::router` (feature `ingress`) takes commands over HTTP; the `bounda-nats`
//! crate takes them from a JetStream consumer.
//!
//! ```
//! # use bounda::prelude::*;
//! # use bounda::ingress::Ingress;
//! # #[derive(Debug, Clone, Serialize, Deserialize, Event)]
//! # #[event(aggregate = Stock)]
//! # pub struct StockReserved { pub sku: String }
//! # #[derive(Debug, Clone, Serialize, Deserialize, Events)]
//! # pub enum StockEvent { Reserved(StockReserved) }
//! # #[derive(Debug, Default)]
//! # pub struct Stock;
//! # impl Aggregate for Stock {
//! #     const NAME: &'static str = "Stock";
//! #     const ID_FIELD: &'static str = "sku";
//! #     type Event = StockEvent;
//! #     fn apply(&mut self, _: &StockEvent) {}
//! # }
//! # #[derive(Debug, Clone, Serialize, Deserialize)]
//! # pub struct ReserveStock { pub sku: String }
//! # #[command]
//! # impl Command for ReserveStock {
//! #     const NAME: &'static str = "ReserveStock";
//! #     type Aggregate = Stock;
//! #     type Rejection = NoRejection;
//! #     fn aggregate_id(&self) -> &str { &self.sku }
//! #     fn decide(&self, _: &Stock) -> Decision<Self> {
//! #         Ok(vec![StockReserved { sku: self.sku.clone() }.into()])
//! #     }
//! # }
//! let ingress = Ingress::new()
//!     // Taken as `ReserveStock`, its own name, and as the type another service publishes.
//!     .command::<ReserveStock>()
//!     .command_as::<ReserveStock>("com.example.stock.reserve.v1");
//! ```

#[cfg(feature = "ingress")]
mod http;

#[cfg(feature = "ingress")]
pub use http::{Guard, router};

pub(crate) mod behind;
pub use behind::Behind;
// Defined beside the app, which holds them: re-exported here, where they are used.
pub use crate::app::{Ingress, Source};

use serde::{Deserialize, Serialize};

/// One source's lag, as `lag` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceLag {
    /// The source's name.
    pub source: String,
    /// What waits there, or why it could not be told.
    pub behind: Result<Behind, String>,
}

/// A command as it arrived: its name, its idempotency key and its payload's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    /// The name it arrived under (a command's `NAME`, or a CloudEvents type).
    pub name: String,
    /// Its idempotency key, unique per command among everything that reaches this app: two
    /// arrivals under one key are one command.
    pub key: String,
    /// The command as JSON.
    pub payload: Vec<u8>,
    /// The correlation its events join, if the sender gave one.
    pub correlation_id: Option<String>,
}

impl Arrival {
    /// The command a CloudEvent carries, from its message's headers (`header(name)`, names in
    /// lower case) and body: in binary mode (`ce-type`, `ce-id` and `ce-source` headers, the
    /// command as the body) or structured (`content-type: application/cloudevents+json`, the
    /// command as its `data`). Its `type` names the command; its `source` and `id` are the key.
    pub fn of_cloud_event<'h>(
        header: impl Fn(&str) -> Option<&'h str>,
        body: &[u8],
    ) -> Result<Arrival, String> {
        let structured =
            header("content-type").is_some_and(|ty| ty.starts_with("application/cloudevents+json"));
        if structured {
            use cloudevents::AttributesReader;
            let event: cloudevents::Event = serde_json::from_slice(body)
                .map_err(|error| format!("the body is not a CloudEvent: {error}"))?;
            let payload = match event.data() {
                Some(cloudevents::Data::Json(value)) => value.to_string().into_bytes(),
                Some(cloudevents::Data::String(text)) => text.clone().into_bytes(),
                Some(cloudevents::Data::Binary(bytes)) => bytes.clone(),
                None => {
                    return Err("the CloudEvent has no `data`: the command goes there".to_owned());
                }
            };
            return Ok(Arrival {
                name: event.ty().to_owned(),
                key: cloud_event_key(&event.source().to_string(), event.id()),
                payload,
                correlation_id: None,
            });
        }
        let missing = |name: &str| {
            format!(
                "no `{name}` header: send a CloudEvent, in binary mode (`ce-` headers, the \
                 command as the body) or structured (an `application/cloudevents+json` body)"
            )
        };
        let name = header("ce-type").ok_or_else(|| missing("ce-type"))?;
        let id = header("ce-id").ok_or_else(|| missing("ce-id"))?;
        let source = header("ce-source").ok_or_else(|| missing("ce-source"))?;
        Ok(Arrival {
            name: name.to_owned(),
            key: cloud_event_key(source, id),
            payload: body.to_vec(),
            correlation_id: None,
        })
    }
}

/// What deciding an arrived command gave, the first time and every time its key comes again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "outcome",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum Answer {
    /// Its events are stored.
    Decided {
        /// The aggregate type.
        aggregate_type: String,
        /// The aggregate instance.
        aggregate_id: String,
        /// The stream's version after the command.
        version: u64,
        /// The ids of the events decided, in order.
        event_ids: Vec<String>,
        /// Their types.
        event_types: Vec<String>,
    },
    /// The command rejected with one of its codes; nothing else was stored.
    Rejected {
        /// The command's `NAME`.
        command: String,
        /// The rejection's code.
        code: String,
        /// Its message.
        message: String,
    },
}

/// An arrived command's answer, and whether it is the first delivery's, given again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ingested {
    /// The answer.
    pub answer: Answer,
    /// Whether the key was decided under before: nothing new was decided now.
    pub replayed: bool,
}

/// Why an arrived command was not decided. Nothing was stored, so a sender may mend it and
/// send it again under the same key.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The app takes no command under this name.
    #[error("this app takes no command named `{name}` from outside (it takes: {accepted})")]
    Unknown {
        /// The name it arrived under.
        name: String,
        /// The names the app takes, comma-separated.
        accepted: String,
    },
    /// The payload is not JSON, or a field does not read as the command's.
    #[error("{}", unparsed(field, message))]
    Unparsed {
        /// The field's path (`customer.email`); empty for the whole payload.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// The key was decided under before for another command or payload.
    #[error(
        "idempotency key `{key}` was used for another request: a key names one command; send \
         this one under a new key"
    )]
    KeyReused {
        /// The key.
        key: String,
    },
    /// The command could not be decided now (the store out of reach, its stream moving): a
    /// later delivery may succeed.
    #[error("{0}")]
    Failed(#[from] crate::Error),
}

/// The idempotency key of a CloudEvent: its `source` and `id`, written so that no other pair
/// gives the same key (a source holds colons: `https://…`, `urn:…`).
fn cloud_event_key(source: &str, id: &str) -> String {
    format!("ce:{}", serde_json::json!([source, id]))
}

fn unparsed(field: &str, message: &str) -> String {
    match field {
        "" => format!("the command does not parse: {message}"),
        field => format!("field `{field}` does not parse: {message}"),
    }
}
