//! NATS JetStream for bounda: [`JetStream`], the sink a relay publishes the app's events to,
//! and [`CommandConsumer`], which takes the commands other services publish.
//!
//! **Publishing.** Each message goes to subject `<prefix>.<type>` (its CloudEvents type, each
//! character NATS does not take in a subject token replaced by `_`) of a JetStream stream the
//! sink creates if it is missing, taking `<prefix>.>`. The message carries its CloudEvent in
//! binary mode (`ce-` headers, the data as the body) or structured mode, as the relay says, and
//! its event's id as `Nats-Msg-Id`: the stream's duplicate window (two minutes unless the
//! stream says otherwise) drops a message published again after a crash or a lost
//! acknowledgement. A publish is done once JetStream acknowledged it. A server out of reach, a
//! timeout or a stream that cannot be made now are unavailable (the relay publishes again
//! after a back-off); a message larger than the server takes is refused (a dead letter).
//!
//! **Taking commands.** A durable consumer reads a stream's messages, each a CloudEvent whose
//! `type` names a command the app's ingress takes and whose `source` and `id` are its
//! idempotency key. Each is decided once for its key and acknowledged only after that commit,
//! so a message redelivered (its acknowledgement lost, the consumer restarted) decides nothing
//! new. A message that is no such command is a dead letter keeping its raw headers and body,
//! acknowledged so nothing behind it waits; one the store could not take now is redelivered.
//!
//! ```
//! use bounda::relay::Relay;
//! use bounda_nats::{CommandConsumer, JetStream};
//!
//! let sink = JetStream::new("nats://127.0.0.1:4222", "STOREFRONT", "storefront");
//! let relay = Relay::new("storefront-events", sink).source("https://shop.example");
//! let commands = CommandConsumer::new("nats://127.0.0.1:4222", "PAYMENTS", "storefront");
//! ```

#[cfg(feature = "testing")]
pub mod testing;

mod commands;
mod sink;

pub use async_nats;
pub use commands::CommandConsumer;
pub use sink::JetStream;
