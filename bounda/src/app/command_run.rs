//! A scheduled command's run, as the engine runs it: decided on the state when it runs, under
//! the correlation and cause it was scheduled with, or again from its letter.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tracing::Instrument;

use crate::app::App;
use crate::app::engine::{Done, Outcome, Work};
use crate::app::failure::{Failure, guarded};
use crate::app::policy::CommandRunner;
use crate::app::telemetry::{self, CommandOutcome};
use crate::ids::derived_id;
use crate::store::{DeadLetter, LetterKind, Metadata, WriteSet};
use crate::{Error, Instant};

/// The id of the letter of scheduler entry `dedupe_key`: the same however often it is filed.
pub(crate) fn scheduled_letter_id(dedupe_key: &str) -> String {
    derived_id(&["scheduled", dedupe_key, "dead-letter"])
}

/// One run of a stored command.
pub(crate) struct CommandRun {
    command_type: String,
    runner: Option<Arc<dyn CommandRunner>>,
    aggregate_id: String,
    payload: serde_json::Value,
    /// Where the command came from; `None` when its stored context no longer reads.
    metadata: Option<Metadata>,
    /// The scheduler entry's key, naming its letter.
    dedupe_key: String,
    /// The command's span, as a command dispatched now.
    span: tracing::Span,
    /// The scheduler's span, if it runs from the scheduler.
    outer: tracing::Span,
}

impl CommandRun {
    /// A run of the stored command `command_type` with `payload`.
    pub(crate) fn new(
        app: &App,
        command_type: &str,
        aggregate_id: &str,
        payload: serde_json::Value,
        metadata: Option<Metadata>,
        dedupe_key: &str,
    ) -> CommandRun {
        let runner = app.command_runner(command_type).cloned();
        let span = telemetry::command_span(
            command_type,
            runner.as_ref().map_or("", |runner| runner.aggregate()),
            aggregate_id,
            metadata.as_ref().map_or("", |m| m.correlation_id.as_str()),
            metadata.as_ref().map_or("", |m| m.causation_id.as_str()),
        );
        CommandRun {
            command_type: command_type.to_owned(),
            runner,
            aggregate_id: aggregate_id.to_owned(),
            payload,
            metadata,
            dedupe_key: dedupe_key.to_owned(),
            span,
            outer: tracing::Span::none(),
        }
    }

    /// The same run inside the scheduler's span `outer`.
    pub(crate) fn scheduled(mut self, outer: tracing::Span) -> CommandRun {
        self.outer = outer;
        self
    }

    async fn run(&self, app: &App) -> Outcome {
        let (runner, metadata) = match (&self.runner, &self.metadata) {
            (Some(runner), Some(metadata)) => (runner, metadata),
            (None, _) => {
                return self.fail(&Error::UnknownCommand {
                    command: self.command_type.clone(),
                });
            }
            (Some(_), None) => {
                let error = anyhow::anyhow!(
                    "scheduled command `{}` has an unreadable context",
                    self.command_type
                );
                let failure = Failure::of(&error);
                self.mark_failed(&failure.message);
                return Outcome::Failed(failure);
            }
        };
        // The command's own code (its state's fold, its decision, its payload's decoding) runs
        // under the guard every handler runs under: a panic or an overrun is this run's failure,
        // retried then lettered, never the worker's crash.
        let limit = app
            .config()
            .for_aggregate(runner.aggregate())
            .commands_timeout;
        let decided = guarded(
            app.clock(),
            &self.command_type,
            limit,
            async {
                runner
                    .decide(app, &self.payload, metadata)
                    .await
                    .map_err(anyhow::Error::from)
            }
            .instrument(self.span.clone()),
        )
        .await;
        let span = self.span.clone();
        let command_type = self.command_type.clone();
        match decided {
            Ok(Ok(decision)) => {
                let count = decision.append.as_ref().map_or(0, |a| a.events.len());
                Outcome::Commit(Done {
                    writes: WriteSet {
                        appends: decision.append.into_iter().collect(),
                        ..WriteSet::default()
                    },
                    rejections: Vec::new(),
                    // Counted once it is on the file (spec 225).
                    after: Some(Box::new(move || {
                        let stored = CommandOutcome::Stored;
                        telemetry::command_outcome(&span, &command_type, stored, count);
                    })),
                })
            }
            // A rejection settles it (spec 25, 169).
            Ok(Err(rejection)) => {
                let (code, message) = (rejection.rejected, rejection.message.clone());
                Outcome::Commit(Done {
                    writes: WriteSet::default(),
                    rejections: vec![rejection],
                    after: Some(Box::new(move || {
                        let outcome = CommandOutcome::Rejected {
                            code,
                            message: &message,
                        };
                        telemetry::command_outcome(&span, &command_type, outcome, 0);
                    })),
                })
            }
            Err(failure) => {
                self.mark_failed(&failure.message);
                Outcome::Failed(failure)
            }
        }
    }

    fn fail(&self, error: &Error) -> Outcome {
        let failure = Failure::of_error(error);
        self.mark_failed(&failure.message);
        Outcome::Failed(failure)
    }
}

impl Work for CommandRun {
    fn execute<'a>(&'a mut self, app: &'a App, _attempt: u32) -> BoxFuture<'a, Outcome> {
        let outer = self.outer.clone();
        Box::pin(async move { self.run(app).await }.instrument(outer))
    }

    fn aggregate(&self) -> &'static str {
        self.runner.as_ref().map_or("", |runner| runner.aggregate())
    }

    fn handler(&self) -> Option<(&'static str, String)> {
        Some(("scheduled", self.command_type.clone()))
    }

    fn subject(&self) -> String {
        format!(
            "scheduled command `{}` for `{}` (entry `{}`)",
            self.command_type, self.aggregate_id, self.dedupe_key
        )
    }

    /// The letter of a scheduled command given up on, with its payload.
    fn give_up(
        &self,
        _app: &App,
        failure: &Failure,
        attempts: u32,
        now: Instant,
    ) -> Result<WriteSet, Error> {
        let aggregate = self.aggregate();
        let id = scheduled_letter_id(&self.dedupe_key);
        let letter = DeadLetter {
            aggregate_type: (!aggregate.is_empty()).then(|| aggregate.to_owned()),
            aggregate_id: Some(self.aggregate_id.clone()),
            payload: Some(self.payload.clone()),
            ..failure.letter(id, LetterKind::Scheduled, &self.command_type, attempts, now)
        };
        Ok(WriteSet {
            dead_letters: vec![letter],
            ..WriteSet::default()
        })
    }

    fn mark_failed(&self, message: &str) {
        telemetry::failed(&self.outer, message);
        let failed = CommandOutcome::Failed(message);
        telemetry::command_outcome(&self.span, &self.command_type, failed, 0);
    }
}
