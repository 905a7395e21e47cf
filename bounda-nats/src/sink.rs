//! The sink: a JetStream stream a relay publishes to, each message once per id.

use std::time::Duration;

use async_nats::jetstream::{self, context::PublishErrorKind, stream};
use bounda::relay::{Message, Sink, SinkError};
use tokio::sync::OnceCell;

/// How long a publish waits for JetStream's acknowledgement before it counts as unavailable.
const ACK_TIMEOUT: Duration = Duration::from_secs(10);

/// A JetStream stream as a relay's sink. It connects when it first publishes, so an app builds
/// whether or not the server answers then; publishes wait for the connection, retried by the
/// relay while it is out of reach.
#[derive(Debug, Clone)]
pub struct JetStream {
    url: String,
    connection: std::sync::Arc<OnceCell<jetstream::Context>>,
    stream: String,
    prefix: String,
    ack_timeout: Duration,
    /// Set once the stream is known to exist.
    made: std::sync::Arc<OnceCell<()>>,
}

impl JetStream {
    /// A sink on the server at `url` (`nats://host:4222`), publishing to stream `stream` under
    /// subjects `prefix.<type>`.
    pub fn new(url: &str, stream: &str, prefix: &str) -> JetStream {
        JetStream {
            url: url.to_owned(),
            connection: std::sync::Arc::new(OnceCell::new()),
            stream: stream.to_owned(),
            prefix: prefix.to_owned(),
            ack_timeout: ACK_TIMEOUT,
            made: std::sync::Arc::new(OnceCell::new()),
        }
    }

    /// Waits `timeout` (10 s unless told) for a publish to be acknowledged before it counts as
    /// unavailable, to be published again.
    pub fn ack_timeout(mut self, timeout: Duration) -> JetStream {
        self.ack_timeout = timeout;
        self
    }

    /// The JetStream context, connected at the first call; the connection then mends itself in
    /// the background.
    async fn context(&self) -> Result<&jetstream::Context, SinkError> {
        self.connection
            .get_or_try_init(|| async {
                let client = async_nats::ConnectOptions::new()
                    .retry_on_initial_connect()
                    .connect(self.url.as_str())
                    .await
                    .map_err(|error| {
                        SinkError::Unavailable(anyhow::anyhow!(
                            "cannot connect to NATS at `{}`: {error}",
                            self.url
                        ))
                    })?;
                Ok(jetstream::ContextBuilder::new()
                    .ack_timeout(self.ack_timeout)
                    .timeout(self.ack_timeout)
                    .build(client))
            })
            .await
    }

    /// The subject `message` is published on.
    pub fn subject(&self, message: &Message) -> String {
        let token: String = message
            .ty()
            .chars()
            .map(|c| match c {
                ' ' | '\t' | '\r' | '\n' | '*' | '>' => '_',
                c => c,
            })
            .collect();
        format!("{}.{token}", self.prefix)
    }

    /// Makes the stream unless it exists.
    async fn ensure_stream(&self) -> Result<(), SinkError> {
        self.made
            .get_or_try_init(|| async {
                let config = stream::Config {
                    name: self.stream.clone(),
                    subjects: vec![format!("{}.>", self.prefix)],
                    ..stream::Config::default()
                };
                self.context()
                    .await?
                    .get_or_create_stream(config)
                    .await
                    .map(drop)
                    .map_err(|error| {
                        SinkError::Unavailable(anyhow::anyhow!(
                            "cannot find or make JetStream stream `{}`: {error}",
                            self.stream
                        ))
                    })
            })
            .await
            .map(drop)
    }
}

#[async_trait::async_trait]
impl Sink for JetStream {
    fn describe(&self) -> String {
        format!("NATS JetStream stream `{}`", self.stream)
    }

    async fn publish(&self, message: &Message) -> Result<(), SinkError> {
        // Whatever the client waits for (a connection, a permit, the acknowledgement), a
        // publish that has not gone through in time is tried again later.
        match tokio::time::timeout(self.ack_timeout, self.publish_once(message)).await {
            Ok(published) => published,
            Err(_) => Err(SinkError::Unavailable(anyhow::anyhow!(
                "JetStream did not acknowledge the message within {:?}",
                self.ack_timeout
            ))),
        }
    }
}

impl JetStream {
    /// Publishes `message` and waits for its acknowledgement.
    async fn publish_once(&self, message: &Message) -> Result<(), SinkError> {
        self.ensure_stream().await?;
        let wire = message.wire().map_err(SinkError::Refused)?;
        let mut headers = async_nats::HeaderMap::new();
        for (name, value) in &wire.headers {
            headers.insert(name.as_str(), value.as_str());
        }
        let publish = jetstream::message::PublishMessage::build()
            .headers(headers)
            .message_id(message.id())
            .payload(wire.body.into());
        let failed = |error: &dyn std::fmt::Display, kind: Option<PublishErrorKind>| {
            let error = anyhow::anyhow!("{error}");
            match kind {
                Some(PublishErrorKind::MaxPayloadExceeded) => SinkError::Refused(error),
                _ => SinkError::Unavailable(error),
            }
        };
        let ack = self
            .context()
            .await?
            .send_publish(self.subject(message), publish)
            .await
            .map_err(|error| failed(&error, Some(error.kind())))?;
        ack.await
            .map_err(|error| failed(&error, Some(error.kind())))?;
        Ok(())
    }
}
