//! Commands from a JetStream stream: a durable consumer whose every message is decided once by
//! the app's ingress, acknowledged only after its commit.

use std::future::Future;
use std::time::Duration;

use async_nats::jetstream::{self, AckKind, consumer};
use bounda::App;
use bounda::ingress::{Arrival, Refusal};
use bounda::relay::Wire;
use futures_util::StreamExt;

/// How long a message waits before it is delivered again when the store could not take it.
const REDELIVER_AFTER: Duration = Duration::from_secs(1);

/// How long the consumer waits before it tries again to reach the server or its stream.
const RECONNECT_AFTER: Duration = Duration::from_secs(2);

/// A durable JetStream consumer feeding the app's ingress: each message a CloudEvent carrying a
/// command, decided once for its key.
#[derive(Debug, Clone)]
pub struct CommandConsumer {
    url: String,
    stream: String,
    durable: String,
    filter: Option<String>,
}

impl CommandConsumer {
    /// A consumer named `durable` (it keeps its place in the stream across restarts and
    /// runners) on stream `stream` of the server at `url`.
    pub fn new(url: &str, stream: &str, durable: &str) -> CommandConsumer {
        CommandConsumer {
            url: url.to_owned(),
            stream: stream.to_owned(),
            durable: durable.to_owned(),
            filter: None,
        }
    }

    /// Takes only the messages on subjects matching `filter` (`payments.commands.>`).
    pub fn subjects(mut self, filter: &str) -> CommandConsumer {
        self.filter = Some(filter.to_owned());
        self
    }

    /// What its letters and logs name it: `nats:<stream>/<durable>`.
    pub fn name(&self) -> String {
        format!("nats:{}/{}", self.stream, self.durable)
    }

    /// Takes the stream's messages into `app` until `stop` completes. A server or stream out of
    /// reach is waited for, said in a warning with its cause; a message that is no command the
    /// app takes is a dead letter keeping its bytes, acknowledged; one the store could not take
    /// now is delivered again a second later.
    pub async fn run(&self, app: &App, stop: impl Future<Output = ()>) {
        let mut stop = std::pin::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => return,
                ended = self.consume(app) => {
                    if let Err(error) = ended {
                        tracing::warn!(
                            consumer = %self.name(),
                            "taking commands from NATS stopped; trying again in {RECONNECT_AFTER:?}: \
                             {error:#}"
                        );
                    }
                }
            }
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep(RECONNECT_AFTER) => {}
            }
        }
    }

    /// Connects and takes messages until the connection or the stream fails.
    async fn consume(&self, app: &App) -> anyhow::Result<()> {
        let client = async_nats::connect(self.url.as_str())
            .await
            .map_err(|error| {
                anyhow::anyhow!("cannot connect to NATS at `{}`: {error}", self.url)
            })?;
        let context = jetstream::new(client);
        let stream = context.get_stream(&self.stream).await.map_err(|error| {
            anyhow::anyhow!("cannot find JetStream stream `{}`: {error}", self.stream)
        })?;
        let config = consumer::pull::Config {
            durable_name: Some(self.durable.clone()),
            ack_policy: consumer::AckPolicy::Explicit,
            filter_subject: self.filter.clone().unwrap_or_default(),
            ..consumer::pull::Config::default()
        };
        let consumer = stream
            .get_or_create_consumer(&self.durable, config)
            .await
            .map_err(|error| {
                anyhow::anyhow!("cannot find or make consumer `{}`: {error}", self.durable)
            })?;
        let mut messages = consumer.messages().await?;
        while let Some(message) = messages.next().await {
            self.take(app, message?).await?;
        }
        Ok(())
    }

    /// Decides one message, then acknowledges it: after its commit, or after its letter.
    async fn take(&self, app: &App, message: jetstream::Message) -> anyhow::Result<()> {
        let raw = Wire {
            headers: message
                .headers
                .iter()
                .flat_map(|headers| headers.iter())
                .flat_map(|(name, values)| {
                    values
                        .iter()
                        .map(move |value| (name.to_string(), value.as_str().to_owned()))
                })
                .collect(),
            body: message.payload.to_vec(),
        };
        let header = |name: &str| {
            raw.headers
                .iter()
                .find(|(key, _)| key.eq_ignore_ascii_case(name))
                .map(|(_, value)| value.as_str())
        };
        let refused = match Arrival::of_cloud_event(header, &raw.body) {
            Err(why) => Some(why),
            Ok(arrival) => match app.ingest(&arrival).await {
                Ok(_) => None,
                Err(Refusal::Failed(error)) => {
                    tracing::warn!(
                        consumer = %self.name(),
                        key = %arrival.key,
                        "a command could not be decided now; it is delivered again in \
                         {REDELIVER_AFTER:?}: {error}"
                    );
                    return nak(&message).await;
                }
                Err(refusal) => Some(refusal.to_string()),
            },
        };
        if let Some(why) = refused
            && let Err(error) = app.file_arrival_letter(&self.name(), &raw, &why).await
        {
            tracing::warn!(
                consumer = %self.name(),
                "a message that is no command could not be filed as a dead letter; it is \
                 delivered again in {REDELIVER_AFTER:?}: {error}"
            );
            return nak(&message).await;
        }
        message
            .double_ack()
            .await
            .map_err(|error| anyhow::anyhow!("cannot acknowledge a message: {error}"))
    }
}

/// Asks for `message` again after a pause.
async fn nak(message: &jetstream::Message) -> anyhow::Result<()> {
    message
        .ack_with(AckKind::Nak(Some(REDELIVER_AFTER)))
        .await
        .map_err(|error| anyhow::anyhow!("cannot ask for a message again: {error}"))
}
