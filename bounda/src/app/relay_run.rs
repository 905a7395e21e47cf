//! One relay run: an event published through its relay's sink, done once the sink acknowledged
//! it.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use crate::app::App;
use crate::app::engine::{Done, Outcome, Work};
use crate::app::failure::{Failure, guarded};
use crate::config::{Retry, Strategy};
use crate::ids::derived_id;
use crate::relay::{Relay, SinkError};
use crate::store::{LetterKind, WriteSet};
use crate::{Error, Instant, RecordedEvent, minutes, seconds};

/// How a failing publish is retried: for as long as it fails, a second, then doubling up to a
/// minute apart, its stream's later events waiting behind it. A publish is never skipped for
/// failing; only a sink's refusal files a letter.
const RETRY: Retry = Retry {
    strategy: Strategy::Exponential,
    max_attempts: u32::MAX,
    base_delay: seconds(1),
    max_delay: minutes(1),
};

/// The id of relay `name`'s letter on `event_id`: the same however often it is filed.
pub(crate) fn relay_letter_id(name: &str, event_id: &str) -> String {
    derived_id(&["relay", name, event_id, "dead-letter"])
}

/// One event to publish through one relay.
pub(crate) struct RelayRun {
    relay: Arc<Relay>,
    event: RecordedEvent,
}

impl RelayRun {
    pub(crate) fn new(relay: Arc<Relay>, event: RecordedEvent) -> RelayRun {
        RelayRun { relay, event }
    }

    async fn run(&self, app: &App) -> Outcome {
        let message = match self.relay.message_of(&self.event) {
            Ok(message) => message,
            // What cannot be made a message never will be: its letter says why.
            Err(error) => return Outcome::Failed(Failure::of(&error)),
        };
        let limit = app.config().for_aggregate("").policies_timeout;
        let published = guarded(app.clock(), self.relay.name(), limit, async {
            match app.publish(&self.relay, &message).await {
                Ok(()) => Ok(Ok(())),
                Err(SinkError::Refused(error)) => Ok(Err(error)),
                Err(SinkError::Unavailable(error)) => {
                    Err(error.context(format!("cannot publish to {} now", self.relay.sink())))
                }
            }
        })
        .await;
        match published {
            Ok(Ok(())) => {
                let relay = self.relay.name();
                Outcome::Commit(Done {
                    after: Some(Box::new(move || crate::app::metrics::published(relay))),
                    ..Done::default()
                })
            }
            Ok(Err(refused)) => Outcome::Failed(Failure::terminal(
                "PUBLISH_REFUSED",
                &refused.context(format!("{} refused the message", self.relay.sink())),
            )),
            Err(failure) => Outcome::Failed(failure),
        }
    }
}

impl Work for RelayRun {
    fn execute<'a>(&'a mut self, app: &'a App, _attempt: u32) -> BoxFuture<'a, Outcome> {
        Box::pin(self.run(app))
    }

    /// A relay takes every aggregate's events: it follows the app's own settings.
    fn aggregate(&self) -> &'static str {
        ""
    }

    fn handler(&self) -> Option<(&'static str, String)> {
        Some(("relay", self.relay.name().to_owned()))
    }

    /// One stream's publish concerns no other's: a wave's publishes go out together.
    fn lanes_apart(&self) -> bool {
        true
    }

    fn retry(&self, _app: &App) -> Retry {
        RETRY
    }

    fn subject(&self) -> String {
        format!(
            "relay `{}` publishing `{}` `{}` of `{}` `{}`",
            self.relay.name(),
            self.event.event_type,
            self.event.id,
            self.event.aggregate_type,
            self.event.aggregate_id
        )
    }

    /// The relay's letter on the event, naming the sink.
    fn give_up(
        &self,
        _app: &App,
        failure: &Failure,
        attempts: u32,
        now: Instant,
    ) -> Result<WriteSet, Error> {
        let (relay, event) = (self.relay.name(), &self.event);
        let id = relay_letter_id(relay, &event.id);
        let letter = failure.letter_on(id, LetterKind::Relay, relay, event, (attempts, now));
        Ok(WriteSet {
            dead_letters: vec![letter],
            ..WriteSet::default()
        })
    }
}
