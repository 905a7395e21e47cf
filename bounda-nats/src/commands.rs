//! Commands from a JetStream stream: a durable consumer whose every message is decided once by
//! the app's ingress, acknowledged only after its commit.

use std::time::Duration;

use async_nats::jetstream::{self, AckKind, consumer};
use bounda::App;
use bounda::ingress::{Arrival, Behind, Refusal, Source};
use bounda::relay::Wire;
use bounda::store::PauseTarget;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use tokio::sync::OnceCell;

/// How long a message waits before it is delivered again when the store could not take it.
const REDELIVER_AFTER: Duration = Duration::from_secs(1);

/// How long the consumer waits before it tries again to reach the server or its stream.
const RECONNECT_AFTER: Duration = Duration::from_secs(2);

/// How often the consumer looks whether an operator paused it.
const PAUSE_CHECK: Duration = Duration::from_secs(1);

/// A durable JetStream consumer feeding the app's ingress: each message a CloudEvent carrying a
/// command, decided once for its key. Give it to the app (`AppBuilder::consume`), which runs it
/// beside its workers; `lag` says what waits at it, and `pause ingress nats:<stream>/<durable>`
/// leaves its messages at the broker until resumed.
#[derive(Debug, Clone)]
pub struct CommandConsumer {
    url: String,
    stream: String,
    durable: String,
    filter: Option<String>,
    context: std::sync::Arc<OnceCell<jetstream::Context>>,
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
            context: std::sync::Arc::new(OnceCell::new()),
        }
    }

    /// Takes only the messages on subjects matching `filter` (`payments.commands.>`).
    pub fn subjects(mut self, filter: &str) -> CommandConsumer {
        self.filter = Some(filter.to_owned());
        self
    }

    /// Connects and takes messages until the connection or the stream fails, or an operator
    /// pauses the source (then the messages wait at the broker).
    async fn consume(&self, app: &App) -> anyhow::Result<()> {
        let consumer = self.consumer().await?;
        let mut messages = consumer.messages().await?;
        let mut pauses = tokio::time::interval(PAUSE_CHECK);
        loop {
            tokio::select! {
                _ = pauses.tick() => {
                    if self.paused(app).await {
                        return Ok(());
                    }
                }
                next = messages.next() => match next {
                    Some(message) => self.take(app, message?).await?,
                    None => return Ok(()),
                },
            }
        }
    }

    /// The durable consumer, made if missing.
    async fn consumer(&self) -> anyhow::Result<consumer::Consumer<consumer::pull::Config>> {
        let stream = self.stream().await?;
        let config = consumer::pull::Config {
            durable_name: Some(self.durable.clone()),
            ack_policy: consumer::AckPolicy::Explicit,
            filter_subject: self.filter.clone().unwrap_or_default(),
            ..consumer::pull::Config::default()
        };
        stream
            .get_or_create_consumer(&self.durable, config)
            .await
            .map_err(|error| {
                anyhow::anyhow!("cannot find or make consumer `{}`: {error}", self.durable)
            })
    }

    /// The stream, on a connection made at the first call and mended in the background.
    async fn stream(&self) -> anyhow::Result<jetstream::stream::Stream> {
        let context = self
            .context
            .get_or_try_init(|| async {
                async_nats::connect(self.url.as_str())
                    .await
                    .map(jetstream::new)
                    .map_err(|error| {
                        anyhow::anyhow!("cannot connect to NATS at `{}`: {error}", self.url)
                    })
            })
            .await?;
        context.get_stream(&self.stream).await.map_err(|error| {
            anyhow::anyhow!("cannot find JetStream stream `{}`: {error}", self.stream)
        })
    }

    /// Whether an operator paused this source; a store that cannot say is logged, not obeyed.
    async fn paused(&self, app: &App) -> bool {
        match app.pauses().await {
            Ok(pauses) => pauses
                .iter()
                .any(|pause| pause.target == PauseTarget::Ingress { name: self.name() }),
            Err(error) => {
                tracing::warn!(
                    consumer = %self.name(),
                    "cannot read whether this source is paused; taking commands meanwhile: {error}"
                );
                false
            }
        }
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
        if let Err(error) = app.ingress_permit(&self.name()).await {
            tracing::warn!(
                consumer = %self.name(),
                "the limit's permits cannot be counted; the message is delivered again in \
                 {REDELIVER_AFTER:?}: {error}"
            );
            return nak(&message).await;
        }
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

#[async_trait::async_trait]
impl Source for CommandConsumer {
    /// `nats:<stream>/<durable>`.
    fn name(&self) -> String {
        format!("nats:{}/{}", self.stream, self.durable)
    }

    async fn run(&self, app: &App, stop: BoxFuture<'static, ()>) {
        let mut stop = stop;
        loop {
            if self.paused(app).await {
                tokio::select! {
                    () = &mut stop => return,
                    () = tokio::time::sleep(PAUSE_CHECK) => continue,
                }
            }
            tokio::select! {
                () = &mut stop => return,
                ended = self.consume(app) => {
                    if let Err(error) = ended {
                        tracing::warn!(
                            consumer = %self.name(),
                            "taking commands from NATS stopped; trying again in \
                             {RECONNECT_AFTER:?}: {error:#}"
                        );
                        tokio::select! {
                            () = &mut stop => return,
                            () = tokio::time::sleep(RECONNECT_AFTER) => {}
                        }
                    }
                }
            }
        }
    }

    /// The consumer's pending and unacknowledged messages, and when the first of them was
    /// stored.
    async fn behind(&self) -> anyhow::Result<Behind> {
        let mut consumer = self.consumer().await?;
        let info = consumer.info().await?;
        let messages = info.num_pending + info.num_ack_pending as u64;
        let oldest = match messages {
            0 => None,
            _ => {
                // The first after the floor may be gone (a retention policy) or another
                // subject's: then when the oldest was sent is unknown.
                let stream = self.stream().await?;
                let first = stream
                    .get_raw_message(info.ack_floor.stream_sequence + 1)
                    .await
                    .ok()
                    .filter(|message| match &self.filter {
                        Some(filter) => subject_matches(filter, message.subject.as_str()),
                        None => true,
                    });
                first.and_then(|first| {
                    let millis = first.time.unix_timestamp_nanos() / 1_000_000;
                    i64::try_from(millis)
                        .ok()
                        .and_then(bounda::Instant::from_millis)
                })
            }
        };
        Ok(Behind { messages, oldest })
    }
}

/// Whether NATS subject `subject` matches `filter` (`*` one token, `>` the rest).
fn subject_matches(filter: &str, subject: &str) -> bool {
    let (mut wanted, mut tokens) = (filter.split('.'), subject.split('.'));
    loop {
        match (wanted.next(), tokens.next()) {
            (Some(">"), Some(_)) => return true,
            (Some("*"), Some(_)) => {}
            (Some(want), Some(token)) if want == token => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

/// Asks for `message` again after a pause.
async fn nak(message: &jetstream::Message) -> anyhow::Result<()> {
    message
        .ack_with(AckKind::Nak(Some(REDELIVER_AFTER)))
        .await
        .map_err(|error| anyhow::anyhow!("cannot ask for a message again: {error}"))
}
