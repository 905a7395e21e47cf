//! One attempt of one reaction: the commands it sends are decided on the spot and staged; the
//! attempt commits them together with its claim, or not at all.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tracing::Instrument;

use crate::aggregate::{Aggregate, Command, Rejection};
use crate::answer::{Answer, Decided, Scheduled};
use crate::app::cause::Cause;
use crate::app::decide::{names_an_instance, new_events};
use crate::app::failure::Failure;
use crate::app::ports::Declared;
use crate::app::schedule::scheduled_entry;
use crate::app::telemetry::{self, CommandOutcome};
use crate::app::{App, RejectionRecord};
use crate::ids::derived_id;
use crate::process::sender::{Port, Sender, Sends};
use crate::store::{Append, NewEvent, ScheduledEntry};
use crate::{Duration, Error, Instant, RecordedEvent};

/// One stream the attempt decided on.
struct Stream {
    aggregate_type: &'static str,
    aggregate_id: String,
    loaded_version: u64,
    events: Vec<NewEvent>,
    /// The aggregate's state with the staged events applied, so a later command sees them.
    state: Box<dyn Any + Send>,
}

#[derive(Default)]
struct Staged {
    streams: Vec<Stream>,
    scheduled: Vec<ScheduledEntry>,
    /// Commands sent so far, by type: the counter in each command's derived id.
    sent: HashMap<&'static str, u32>,
    /// A command that failed fails the run, even if the handler caught it.
    failure: Option<Failure>,
    rejections: Vec<RejectionRecord>,
}

impl Staged {
    /// The index of the stream of `aggregate_type:aggregate_id` staged so far.
    fn position(&self, aggregate_type: &str, aggregate_id: &str) -> Option<usize> {
        self.streams
            .iter()
            .position(|s| s.aggregate_type == aggregate_type && s.aggregate_id == aggregate_id)
    }
}

/// One attempt of one reaction.
pub(crate) struct Attempt {
    app: App,
    key: String,
    cause: Cause,
    staged: Mutex<Staged>,
    /// The ports its handler may read.
    declared: Declared,
}

/// What a finished attempt writes.
pub(crate) struct Staging {
    pub(crate) appends: Vec<Append>,
    pub(crate) scheduled: Vec<ScheduledEntry>,
    pub(crate) rejections: Vec<RejectionRecord>,
    pub(crate) failure: Option<Failure>,
}

impl Attempt {
    /// The attempt of a handler that may read the ports `declared` names, and no other.
    pub(crate) fn new(app: &App, key: String, cause: Cause, declared: Declared) -> Attempt {
        Attempt {
            app: app.clone(),
            key,
            cause,
            staged: Mutex::new(Staged::default()),
            declared,
        }
    }

    /// The port of type `T`, if its handler declares it (see [`Declared::read`]).
    pub(crate) fn port<T: Send + Sync + 'static>(&self) -> Result<&T, Error> {
        self.declared.read::<T>(self.app.ports())
    }

    fn staged(&self) -> MutexGuard<'_, Staged> {
        // Staging is only pushed to; a panic cannot leave it half-written.
        self.staged.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The idempotency key of the run.
    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// The derived id of the next command of type `C`.
    fn command_id(&self, staged: &mut Staged, command_type: &'static str) -> String {
        let count = staged.sent.entry(command_type).or_default();
        let id = derived_id(&[&self.key, "command", command_type, &count.to_string()]);
        *count += 1;
        id
    }

    /// Refuses a command past `maxChainDepth`; a refusal fails the run.
    fn check_depth(&self, command: &'static str, aggregate: &str) -> Result<(), Error> {
        let max_depth = self.app.config().for_aggregate(aggregate).max_chain_depth;
        let depth = self.cause.depth;
        if depth > max_depth {
            let error = Error::ChainDepthExceeded {
                command: command.to_owned(),
                depth,
                max_depth,
            };
            self.fail(&error);
            return Err(error);
        }
        Ok(())
    }

    fn fail(&self, error: &Error) {
        let failure = Failure::of_error(error);
        self.staged().failure.get_or_insert(failure);
    }

    /// Decides `command` now, on its instance's state with this attempt's staged decisions
    /// applied; the events are staged, not stored.
    pub(crate) async fn send<C: Command>(
        &self,
        command: &C,
    ) -> Result<Answer<C::Rejection>, Error> {
        let span = self.command_span::<C>(command);
        let answer = self.send_in_span(command).instrument(span.clone()).await;
        match &answer {
            Ok(Answer::Decided(decided)) => telemetry::command_outcome(
                &span,
                C::NAME,
                CommandOutcome::Stored,
                decided.event_ids.len(),
            ),
            Ok(Answer::Rejected(rejection)) => {
                telemetry::command_rejected(&span, C::NAME, rejection);
            }
            Err(error) => telemetry::command_failed(&span, C::NAME, error),
        }
        answer
    }

    /// Reads and folds instance `id` of `A` before a handler runs, so that a stream the handler
    /// would send to and that does not read fails the step before the handler has done
    /// anything outside (a message sent, a card charged). The fold is not kept: a command the
    /// handler sends reads the stream again when it is sent, so the handler's own time does not
    /// widen the window in which another command can move the stream.
    pub(crate) async fn preload<A: Aggregate>(&self, id: &str) -> Result<(), Error> {
        self.app
            .load::<A>(id)
            .await
            .map(|_| ())
            .inspect_err(|error| self.fail(error))
    }

    /// Whether a command of this attempt was sent to instance `aggregate_id` of `aggregate_type`.
    pub(crate) fn sent_to(&self, aggregate_type: &str, aggregate_id: &str) -> bool {
        self.staged()
            .position(aggregate_type, aggregate_id)
            .is_some()
    }

    /// The place of instance `id` of `A` among the streams this attempt stages, loaded and
    /// folded the first time it is asked for.
    async fn stage<A: Aggregate>(&self, id: &str) -> Result<usize, Error> {
        let aggregate = A::NAME;
        if let Some(index) = self.staged().position(aggregate, id) {
            return Ok(index);
        }
        // The guard is not held across the read: the attempt's future stays `Send`.
        let loaded = self
            .app
            .load::<A>(id)
            .await
            .inspect_err(|error| self.fail(error))?;
        let mut staged = self.staged();
        if let Some(index) = staged.position(aggregate, id) {
            return Ok(index);
        }
        staged.streams.push(Stream {
            aggregate_type: aggregate,
            aggregate_id: id.to_owned(),
            loaded_version: loaded.version,
            events: Vec::new(),
            state: Box::new(loaded.state),
        });
        Ok(staged.streams.len() - 1)
    }

    /// The span of a command this attempt sends, in the attempt's correlation.
    fn command_span<C: Command>(&self, command: &C) -> tracing::Span {
        telemetry::command_span(
            C::NAME,
            <C::Aggregate as Aggregate>::NAME,
            command.aggregate_id(),
            &self.cause.correlation_id,
            &self.cause.causation_id,
        )
    }

    async fn send_in_span<C: Command>(&self, command: &C) -> Result<Answer<C::Rejection>, Error> {
        let aggregate = <C::Aggregate as Aggregate>::NAME;
        self.check_depth(C::NAME, aggregate)?;
        names_an_instance(command).inspect_err(|error| self.fail(error))?;
        let id = command.aggregate_id().to_owned();
        {
            let mut staged = self.staged();
            self.command_id(&mut staged, C::NAME);
        }
        let index = self.stage::<C::Aggregate>(&id).await?;
        let mut staged = self.staged();
        let stream = &mut staged.streams[index];
        let Some(state) = stream.state.downcast_mut::<C::Aggregate>() else {
            return Err(Error::NotFound {
                what: format!("the staged state of `{aggregate}:{id}`"),
            });
        };
        let events = match command.decide(state) {
            Ok(events) => events,
            Err(rejection) => {
                staged.rejections.push(RejectionRecord {
                    command_type: C::NAME,
                    rejected: rejection.code(),
                    message: rejection.message(),
                    aggregate_type: aggregate,
                    aggregate_id: id,
                });
                return Ok(Answer::Rejected(rejection));
            }
        };
        for event in &events {
            state.apply(event);
        }
        let new = match new_events(&self.app, &events, &self.cause.metadata()) {
            Ok(new) => new,
            Err(error) => {
                drop(staged);
                self.fail(&error);
                return Err(error);
            }
        };
        let stream = &mut staged.streams[index];
        stream.events.extend(new.iter().cloned());
        Ok(Answer::Decided(Decided {
            aggregate_type: aggregate,
            aggregate_id: id,
            version: stream.loaded_version + stream.events.len() as u64,
            event_ids: new.into_iter().map(|event| event.id).collect(),
            event_types: events
                .iter()
                .map(crate::aggregate::EventSet::type_name)
                .collect(),
            position: None,
        }))
    }

    /// Stages `command` to run at `execute_at`: stored only if the attempt commits,
    /// keyed by its derived id so a retried run schedules it once.
    pub(crate) fn schedule<C: Command>(
        &self,
        command: &C,
        execute_at: Instant,
    ) -> Result<Scheduled, Error> {
        let span = self.command_span::<C>(command);
        let scheduled = span.in_scope(|| self.schedule_in_span(command, execute_at));
        match &scheduled {
            Ok(_) => telemetry::command_outcome(&span, C::NAME, CommandOutcome::Scheduled, 0),
            Err(error) => telemetry::command_failed(&span, C::NAME, error),
        }
        scheduled
    }

    fn schedule_in_span<C: Command>(
        &self,
        command: &C,
        execute_at: Instant,
    ) -> Result<Scheduled, Error> {
        let aggregate = <C::Aggregate as Aggregate>::NAME;
        self.check_depth(C::NAME, aggregate)?;
        names_an_instance(command).inspect_err(|error| self.fail(error))?;
        let command_id = self.command_id(&mut self.staged(), C::NAME);
        // Built with the staging unlocked: a refusal records the run's failure in it.
        let entry = scheduled_entry(
            &self.app,
            command,
            command_id,
            self.cause.clone(),
            execute_at,
        )
        .inspect_err(|e| self.fail(e))?;
        self.staged().scheduled.push(entry);
        Ok(Scheduled {
            aggregate_type: aggregate,
            aggregate_id: command.aggregate_id().to_owned(),
            execute_at,
        })
    }

    /// What the attempt writes if it commits.
    pub(crate) fn finish(self) -> Staging {
        let staged = self
            .staged
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        Staging {
            appends: staged
                .streams
                .into_iter()
                .filter(|stream| !stream.events.is_empty())
                .map(|stream| Append {
                    aggregate_type: stream.aggregate_type.to_owned(),
                    aggregate_id: stream.aggregate_id,
                    expected_version: stream.loaded_version,
                    events: stream.events,
                })
                .collect(),
            scheduled: staged.scheduled,
            rejections: staged.rejections,
            failure: staged.failure,
        }
    }
}

impl Sender for Attempt {
    fn key(&self) -> &str {
        &self.key
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The attempt behind a process handler's context: the one [`Sender`] there is.
fn attempt_of(sender: &dyn Sender) -> Result<&Attempt, Error> {
    sender
        .as_any()
        .downcast_ref::<Attempt>()
        .ok_or(Error::NoRuntime)
}

impl<C: Command> Sends for C {
    fn send_through<'a>(
        &'a self,
        sender: &'a dyn Sender,
    ) -> futures_util::future::BoxFuture<'a, Result<Answer<C::Rejection>, Error>> {
        Box::pin(async move { attempt_of(sender)?.send(self).await })
    }

    fn schedule_through(&self, sender: &dyn Sender, at: Instant) -> Result<Scheduled, Error> {
        attempt_of(sender)?.schedule(self, at)
    }
}

impl<T: Send + Sync + 'static> Port for T {
    fn read_through(sender: &dyn Sender) -> Result<&T, Error> {
        attempt_of(sender)?.port::<T>()
    }
}

/// The context of a policy handler: the event, and the commands it may send.
pub struct Reaction<'a, E> {
    attempt: &'a Attempt,
    event: &'a E,
    recorded: &'a RecordedEvent,
}

impl<E> std::fmt::Debug for Reaction<'_, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reaction")
            .field("event", &self.recorded)
            .field("idempotency_key", &self.attempt.key)
            .finish()
    }
}

impl<'a, E> Reaction<'a, E> {
    pub(crate) fn new(attempt: &'a Attempt, event: &'a E, recorded: &'a RecordedEvent) -> Self {
        Reaction {
            attempt,
            event,
            recorded,
        }
    }

    /// The event's payload.
    pub fn event(&self) -> &'a E {
        self.event
    }

    /// The event as stored.
    pub fn recorded(&self) -> &'a RecordedEvent {
        self.recorded
    }

    /// The run's idempotency key: the same on every automatic retry, new on each operator retry.
    /// Pass it to providers that accept one.
    pub fn idempotency_key(&self) -> &str {
        self.attempt.key()
    }

    /// A key derived from the run's key and `name`: the id of an aggregate the run creates, or a
    /// per-call key for a provider.
    pub fn key_for(&self, name: &str) -> String {
        crate::ids::idempotency_key_for(self.attempt.key(), name)
    }

    /// The current time.
    pub fn now(&self) -> Instant {
        self.attempt.app.clock().now()
    }

    /// The app's port of type `T`, which the policy declares (`#[policy(ports = [T])]`); an
    /// undeclared or missing one is a configuration error.
    pub fn port<T: Send + Sync + 'static>(&self) -> Result<&'a T, Error> {
        self.attempt.port::<T>()
    }

    /// Sends `command`: decided now, stored when the attempt commits. Answers the decided events
    /// or the typed rejection; a failure is the `Err`, and fails the run.
    pub async fn send<C: Command>(&self, command: C) -> Result<Answer<C::Rejection>, Error> {
        self.attempt.send(&command).await
    }

    /// Sends `command` to run `delay` from now. It is stored when the attempt commits,
    /// once however often the run is retried.
    pub async fn send_after<C: Command>(
        &self,
        command: C,
        delay: Duration,
    ) -> Result<Scheduled, Error> {
        let at = self.now() + delay;
        self.attempt.schedule(&command, at)
    }
}
