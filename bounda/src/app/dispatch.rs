//! Commands from outside the runtime: decided now, or stored to run later, in the caller's
//! correlation or a new one.

use tracing::Instrument;

use crate::aggregate::{Aggregate, Command};
use crate::answer::Scheduled;
use crate::app::cause::Cause;
use crate::app::schedule::scheduled_entry;
use crate::app::{App, Decided, DispatchError, decide, telemetry};
use crate::store::{CommitError, Metadata, WriteSet};
use crate::{Duration, Error};

/// How [`App::dispatch_with`] runs a command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DispatchOptions {
    /// Run it this long from now instead of at once: it is stored, and decided then on the
    /// state then. Its type is found by name when it runs: a `#[command]`, or listed with
    /// `.command::<C>()` in an app built `only_listed`.
    pub delay: Option<Duration>,
    /// Join this correlation (a request id from the caller) instead of starting one; the
    /// command's events and everything downstream carry it.
    pub correlation_id: Option<String>,
}

impl DispatchOptions {
    /// Runs the command `delay` from now.
    pub fn delay(mut self, delay: Duration) -> DispatchOptions {
        self.delay = Some(delay);
        self
    }

    /// Joins correlation `id`.
    pub fn correlation_id(mut self, id: impl Into<String>) -> DispatchOptions {
        self.correlation_id = Some(id.into());
        self
    }
}

/// What [`App::dispatch_with`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dispatched {
    /// Decided now: its events are stored.
    Decided(Decided),
    /// Stored to run at its moment.
    Scheduled(Scheduled),
}

impl App {
    /// Runs `command` from outside the runtime: a new command id, its own correlation, depth 0.
    /// Decides on the instance's current state and appends at the version it saw; if
    /// the stream moved meanwhile, loads it again and decides again, up to
    /// `commands.concurrencyRetries` times. A rejection stores nothing and is returned
    /// typed.
    pub async fn dispatch<C: Command>(
        &self,
        command: C,
    ) -> Result<Decided, DispatchError<C::Rejection>> {
        self.dispatch_in(command, None).await
    }

    /// Runs `command` from outside as [`dispatch`](Self::dispatch) does, or later: with
    /// `options.delay` it is stored and decided when it comes due, on the state then, answered
    /// with its moment; with `options.correlation_id` its events, and everything they cause,
    /// join the caller's correlation.
    pub async fn dispatch_with<C: Command>(
        &self,
        command: C,
        options: DispatchOptions,
    ) -> Result<Dispatched, DispatchError<C::Rejection>> {
        match options.delay {
            None => {
                let decided = self.dispatch_in(command, options.correlation_id).await?;
                Ok(Dispatched::Decided(decided))
            }
            Some(delay) => {
                let scheduled = self
                    .schedule(&command, delay, options.correlation_id)
                    .await?;
                Ok(Dispatched::Scheduled(scheduled))
            }
        }
    }

    /// Stores `command` to run `delay` from now, in `correlation` or a new one.
    async fn schedule<C: Command>(
        &self,
        command: &C,
        delay: Duration,
        correlation: Option<String>,
    ) -> Result<Scheduled, Error> {
        decide::names_an_instance(command)?;
        let command_id = self.next_id();
        let cause = Cause {
            correlation_id: correlation.unwrap_or_else(|| command_id.clone()),
            causation_id: command_id.clone(),
            depth: 0,
        };
        let execute_at = self.clock().now() + delay;
        let entry = scheduled_entry(self, command, command_id, cause, execute_at)?;
        let writes = WriteSet {
            schedule: vec![entry],
            ..WriteSet::default()
        };
        match self.commit(&writes).await {
            Ok(_) => {}
            Err(CommitError::Store(error)) => return Err(error.into()),
            Err(other) => {
                return Err(Error::Store(crate::store::StoreError::with_source(
                    "a scheduled command was refused",
                    other,
                )));
            }
        }
        Ok(Scheduled {
            aggregate_type: <C::Aggregate as Aggregate>::NAME,
            aggregate_id: command.aggregate_id().to_owned(),
            execute_at,
        })
    }

    /// [`dispatch`](Self::dispatch) in `correlation`, or a new one.
    async fn dispatch_in<C: Command>(
        &self,
        command: C,
        correlation: Option<String>,
    ) -> Result<Decided, DispatchError<C::Rejection>> {
        let command_id = self.next_id();
        let mut metadata = Metadata::of_command(&command_id);
        if let Some(correlation) = correlation {
            metadata.correlation_id = correlation;
        }
        let aggregate = <C::Aggregate as Aggregate>::NAME;
        let span = telemetry::command_span(
            C::NAME,
            aggregate,
            command.aggregate_id(),
            &metadata.correlation_id,
            &metadata.causation_id,
        );
        let result = self
            .dispatch_in_span(&command, &metadata)
            .instrument(span.clone())
            .await;
        match &result {
            Ok(decided) => telemetry::command_outcome(
                &span,
                C::NAME,
                telemetry::CommandOutcome::Stored,
                decided.event_ids.len(),
            ),
            Err(DispatchError::Rejected(rejection)) => {
                telemetry::command_rejected(&span, C::NAME, rejection);
            }
            Err(DispatchError::Failed(error)) => telemetry::command_failed(&span, C::NAME, error),
        }
        result
    }

    /// The body of [`dispatch`](Self::dispatch): decide, append, rerun on a moved stream.
    async fn dispatch_in_span<C: Command>(
        &self,
        command: &C,
        metadata: &Metadata,
    ) -> Result<Decided, DispatchError<C::Rejection>> {
        let aggregate = <C::Aggregate as Aggregate>::NAME;
        let retries = self.config().for_aggregate(aggregate).concurrency_retries;
        let mut run = 0;
        loop {
            let decision = decide::decide(self, command, metadata)
                .await?
                .map_err(DispatchError::Rejected)?;
            let Some(append) = decision.append else {
                return Ok(decision.decided);
            };
            let writes = WriteSet {
                appends: vec![append],
                ..WriteSet::default()
            };
            match self.commit(&writes).await {
                Ok(committed) => {
                    let mut decided = decision.decided;
                    // A store that places events after the commit and could not say where: unknown.
                    decided.position = committed
                        .events
                        .last()
                        .map(|event| event.position)
                        .filter(|position| *position > 0);
                    return Ok(decided);
                }
                Err(CommitError::StreamMoved {
                    expected_version,
                    actual_version,
                    ..
                }) if run >= retries => {
                    return Err(DispatchError::Failed(Error::Concurrency {
                        aggregate_type: aggregate.to_owned(),
                        aggregate_id: command.aggregate_id().to_owned(),
                        expected_version,
                        actual_version,
                    }));
                }
                Err(CommitError::StreamMoved { .. }) => run += 1,
                Err(CommitError::Store(error)) => return Err(error.into()),
                Err(other) => {
                    return Err(Error::Store(crate::store::StoreError::with_source(
                        "a command's write set was refused",
                        other,
                    ))
                    .into());
                }
            }
        }
    }
}
