//! Retrying a process's letter: the failed step again, then what was parked behind it, in
//! order, then `ProcessResumed`. Each step is a run of the engine fenced on
//! the letter still being `failed` and held by the retry's claim, which the steps renew, so a
//! retry cut short goes on from the last step written when the letter is retried again, and a
//! discard, or another retry that took the letter over, stops it.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use crate::app::App;
use crate::app::engine::{Done, Outcome, Work};
use crate::app::failure::Failure;
use crate::app::letters::{LetterRetry, Retried};
use crate::app::processes::ProcessRunner;
use crate::app::processes::instance::{Instance, Lifecycle, Status};
use crate::app::processes::step::{Route, StepWrites, entry_key};
use crate::app::processes::writes::{
    LetterPayload, armed, deadline_letter, lifecycle_at, process_letter, step_writes,
};
use crate::ids::derived_id;
use crate::process::TIMEOUT;
use crate::process::plan::DueDeadline;
use crate::store::{DeadLetter, LetterSettle, LetterStatus, WriteSet};
use crate::{Error, Instant, RecordedEvent};

impl App {
    /// Retries process letter `letter` under the retry's claim on it, `held`.
    pub(crate) async fn retry_process_letter(
        &self,
        letter: &DeadLetter,
        held: &mut LetterRetry,
    ) -> Result<Retried, Error> {
        let not_retriable = |reason: &str| Error::LetterNotRetriable {
            id: letter.id.clone(),
            reason: reason.to_owned(),
        };
        let process = self
            .processes()
            .find(|p| p.name() == letter.handler)
            .cloned()
            .ok_or_else(|| not_retriable("its process is no longer in the app"))?;
        let payload = LetterPayload::of(letter)
            .filter(|payload| !payload.instance.is_empty())
            .ok_or_else(|| not_retriable("its event named no instance"))?;
        let id = payload.instance.clone();
        let instance = self
            .load_instance(&*process, &id)
            .await?
            .ok_or_else(|| not_retriable("its instance has no history"))?;
        match instance.status {
            // Running: a step that failed before it could read the instance wrote no
            // `ProcessFailed`; the retry re-arms its deadlines and settles the letter.
            Status::Started => {
                self.retry_failed_instance(process, &id, letter, payload, held)
                    .await
            }
            Status::Failed if instance.letter_id.as_deref() == Some(letter.id.as_str()) => {
                self.retry_failed_instance(process, &id, letter, payload, held)
                    .await
            }
            // A follow-up's handler runs again and nothing else; the process stays timed out
            // (spec 104).
            Status::TimedOut => {
                let step = FollowUpRetry {
                    process,
                    id: id.clone(),
                    event: self.letter_event(letter).await?,
                };
                self.run_letter(held, Box::new(step), id.clone(), true)
                    .await?;
                Ok(Retried::Done)
            }
            // The instance failed on another step, whose letter comes first (spec 171).
            _ => Err(not_retriable(
                "its instance failed on another step, whose letter comes first",
            )),
        }
    }

    /// The steps of a failed instance's retry, each committed before the next is chosen, until
    /// the instance runs again or has ended.
    async fn retry_failed_instance(
        &self,
        process: Arc<dyn ProcessRunner>,
        id: &str,
        letter: &DeadLetter,
        payload: LetterPayload,
        held: &mut LetterRetry,
    ) -> Result<Retried, Error> {
        let parked_before = self
            .load_instance(&*process, id)
            .await?
            .map_or(0, |instance| instance.parked.len());
        let mut version = None;
        loop {
            let step = RetryStep {
                process: Arc::clone(&process),
                id: id.to_owned(),
                letter: letter.clone(),
                deadline: payload.deadline.clone(),
                failed: None,
            };
            let step = self.run_letter(held, Box::new(step), id.to_owned(), false);
            if let Err(error) = step.await {
                // A later step failed once the failed one had run: the letter is settled and
                // the new failure is the instance's new letter; the answer says so.
                return match self
                    .failed_again(&*process, id, letter, parked_before)
                    .await?
                {
                    Some(again) => Ok(again),
                    None => Err(error),
                };
            }
            let settled = self
                .store()
                .dead_letter(&letter.id)
                .await?
                .is_none_or(|now| now.status != LetterStatus::Failed);
            if settled {
                return Ok(Retried::Done);
            }
            // Each step writes to the instance; one that did not would loop for ever.
            let now = self.load_instance(&*process, id).await?.map(|i| i.version);
            if version == Some(now) {
                return Err(Error::RetryFailed {
                    id: letter.id.clone(),
                    message: "a retry step wrote nothing to the instance; retry again".to_owned(),
                });
            }
            version = Some(now);
        }
    }

    /// The answer of a retry whose later step failed after the letter was settled: the new
    /// letter and what is parked behind it; `None` if the letter was not settled (the failed
    /// step itself failed again).
    async fn failed_again(
        &self,
        process: &dyn ProcessRunner,
        id: &str,
        letter: &DeadLetter,
        parked_before: usize,
    ) -> Result<Option<Retried>, Error> {
        let settled = self
            .store()
            .dead_letter(&letter.id)
            .await?
            .is_some_and(|now| now.status == LetterStatus::Retried);
        let Some(instance) = self.load_instance(process, id).await? else {
            return Ok(None);
        };
        let Some(new) = instance
            .letter_id
            .as_ref()
            .filter(|new| settled && **new != letter.id)
        else {
            return Ok(None);
        };
        let parked = instance.parked_behind();
        Ok(Some(Retried::FailedAgain {
            letter: new.clone(),
            drained: parked_before.saturating_sub(instance.parked.len()),
            parked,
        }))
    }

    /// The event a letter names.
    async fn letter_event(&self, letter: &DeadLetter) -> Result<RecordedEvent, Error> {
        let event_id = letter.event_id.as_deref().unwrap_or_default();
        self.read_event(event_id)
            .await?
            .ok_or_else(|| Error::NotFound {
                what: format!("event `{event_id}`"),
            })
    }
}

/// What a retry step failed on: an event, or a deadline.
enum Failed {
    Event(RecordedEvent),
    Deadline(DueDeadline),
}

/// The next step of a failed instance's retry, chosen from the instance as it stands: the
/// failed step, the first parked event (or a deadline due before its arrival), or the resume.
struct RetryStep {
    process: Arc<dyn ProcessRunner>,
    id: String,
    letter: DeadLetter,
    /// The deadline a deadline's letter failed on.
    deadline: Option<String>,
    /// What this try failed on, with the instance it ran on.
    failed: Option<(Instance, Failed)>,
}

impl RetryStep {
    async fn run(&mut self, app: &App) -> Result<Outcome, Error> {
        self.failed = None;
        let Some(instance) = app.load_instance(&*self.process, &self.id).await? else {
            return Err(Error::LetterNotRetriable {
                id: self.letter.id.clone(),
                reason: "its instance has no history".to_owned(),
            });
        };
        Ok(match instance.status {
            // Completed or timed out during the retry: what is parked after is dropped
            // (spec 118–119).
            // Completed or timed out during the retry: what is parked after is dropped
            // (spec 118–119), and nothing is armed. Running: the letter's step failed before it
            // could read the instance, or ran since; its deadlines are armed again as its state
            // says. Either way, the letter is settled.
            Status::Completed | Status::TimedOut | Status::Started => {
                Outcome::Commit(Done::writes(WriteSet {
                    settle_letter: Some(settle_retried(&self.letter)),
                    ..armed(&*self.process, &self.id, &instance)?
                }))
            }
            // (1) The failed step, with a new key (spec 113, 138).
            Status::Failed if !instance.failed_step_done => {
                self.rerun_failed_step(app, instance).await?
            }
            // (2) Parked events in arrival order, with their own keys; a deadline due before a
            // parked event's arrival runs first (spec 113).
            Status::Failed if !instance.parked.is_empty() => self.drain_next(app, instance).await?,
            // (3) Resumed: running again, deadlines rescheduled, past ones due at once; the
            // letter is `retried` once what was parked is drained (spec 113, 121, 168).
            Status::Failed => {
                let append = lifecycle_at(
                    app,
                    &*self.process,
                    &self.id,
                    instance.version,
                    Lifecycle::Resumed {},
                    None,
                )?;
                let mut running = instance.clone();
                running.status = Status::Started;
                let (schedule, unschedule) = self.process.arm(&self.id, &running)?;
                Outcome::Commit(Done::writes(WriteSet {
                    appends: vec![append],
                    schedule: schedule.into_iter().collect(),
                    unschedule: unschedule.into_iter().collect(),
                    settle_letter: Some(settle_retried(&self.letter)),
                    ..WriteSet::default()
                }))
            }
        })
    }

    /// Runs the failed step again under a new key.
    async fn rerun_failed_step(&mut self, app: &App, instance: Instance) -> Result<Outcome, Error> {
        let process = Arc::clone(&self.process);
        let new_key = |subject: &str| {
            derived_id(&["process", process.name(), subject, "retry", &app.next_id()])
        };
        if let Some(event_id) = &instance.failed_event {
            let event = app
                .read_event(event_id)
                .await?
                .ok_or_else(|| Error::NotFound {
                    what: format!("event `{event_id}`"),
                })?;
            let key = new_key(&event.id);
            return self.event(app, instance, event, key).await;
        }
        let field = self
            .deadline
            .as_deref()
            .and_then(|field| process.field(field));
        let (Some(field), Some(at)) = (field, instance.failed_at) else {
            return Err(Error::LetterNotRetriable {
                id: self.letter.id.clone(),
                reason: "its failed step cannot be told from its history".to_owned(),
            });
        };
        let due = DueDeadline { at, field };
        let key = new_key(&format!("{}:deadline:{field}:{}", self.id, at.as_millis()));
        self.deadline(app, instance, due, Some(key)).await
    }

    /// The first parked event, or a deadline due before its arrival.
    async fn drain_next(&mut self, app: &App, instance: Instance) -> Result<Outcome, Error> {
        let Some(parked) = instance.parked.first() else {
            return Ok(Outcome::nothing());
        };
        let mut running = instance.clone();
        running.status = Status::Started;
        if let Some(due) = self.process.due(&running, parked.parked_at)? {
            return self.deadline(app, instance, due, None).await;
        }
        let event = app
            .read_event(&parked.event_id)
            .await?
            .ok_or_else(|| Error::NotFound {
                what: format!("parked event `{}`", parked.event_id),
            })?;
        let key = derived_id(&["process", self.process.name(), &event.id]);
        self.event(app, instance, event, key).await
    }

    /// An event step during a retry: a handler a deploy removed lets the event through;
    /// one that fails is the new failure at once.
    async fn event(
        &mut self,
        app: &App,
        instance: Instance,
        event: RecordedEvent,
        key: String,
    ) -> Result<Outcome, Error> {
        let process = Arc::clone(&self.process);
        let route = process.route_as_started(&instance, &event);
        if matches!(route, Route::Skip | Route::Park) {
            let handled = Lifecycle::handled(&event, instance.state.clone());
            let mut append = lifecycle_at(
                app,
                &*process,
                &self.id,
                instance.version,
                handled,
                Some(&event),
            )?;
            // The state is carried over as stored, so it keeps the version it was written at.
            for lifecycle in &mut append.events {
                lifecycle.metadata.schema_version = instance.state_version;
            }
            return Ok(Outcome::Commit(Done::writes(WriteSet {
                appends: vec![append],
                ..WriteSet::default()
            })));
        }
        let step = process
            .event_step(app, &self.id, Some(&instance), route, &event, key)
            .await;
        Ok(match step {
            Ok(writes) => Outcome::Commit(Done::writes(retry_writes(writes))),
            Err(failure) => {
                self.failed = Some((instance, Failed::Event(event)));
                Outcome::Failed(failure)
            }
        })
    }

    /// A deadline during a retry; the timeout ends the instance as timed out.
    async fn deadline(
        &mut self,
        app: &App,
        instance: Instance,
        due: DueDeadline,
        key: Option<String>,
    ) -> Result<Outcome, Error> {
        let process = Arc::clone(&self.process);
        let mut running = instance.clone();
        running.status = Status::Started;
        let step = process
            .deadline_step(app, &self.id, &running, due, key)
            .await;
        Ok(match step {
            Ok(writes) => {
                let mut set = retry_writes(writes);
                if due.field != TIMEOUT {
                    // Still failed until resumed: no entry meanwhile (spec 111).
                    let own = entry_key(process.name(), &self.id);
                    set.schedule.retain(|entry| entry.dedupe_key != own);
                    set.unschedule = vec![own];
                }
                Outcome::Commit(Done::writes(set))
            }
            Err(failure) => {
                self.failed = Some((instance, Failed::Deadline(due)));
                Outcome::Failed(failure)
            }
        })
    }
}

impl Work for RetryStep {
    fn execute<'a>(&'a mut self, app: &'a App, _attempt: u32) -> BoxFuture<'a, Outcome> {
        Box::pin(async move { Outcome::of(self.run(app).await) })
    }

    fn aggregate(&self) -> &'static str {
        self.process.aggregate()
    }

    fn handler(&self) -> Option<(&'static str, String)> {
        Some(("process", self.process.name().to_owned()))
    }

    fn subject(&self) -> String {
        format!(
            "process `{}`'s retry of letter `{}` on instance `{}`",
            self.process.name(),
            self.letter.id,
            self.id
        )
    }

    fn process_step(&self) -> bool {
        true
    }

    /// A new failure during a retry: `ProcessFailed` with a letter of its own; the old one is
    /// settled, its step having run. The failed step failing again changes nothing.
    fn operator_failure(
        &self,
        app: &App,
        failure: &Failure,
        now: Instant,
    ) -> Result<WriteSet, Error> {
        let Some((instance, failed)) = &self.failed else {
            return Ok(WriteSet::default());
        };
        if !instance.failed_step_done {
            return Ok(WriteSet::default());
        }
        let process = &*self.process;
        let (new_letter, lifecycle, cause) = match failed {
            Failed::Event(event) => {
                let new_letter = process_letter(process.name(), &self.id, event, failure, 1, now);
                let lifecycle = Lifecycle::Failed {
                    letter_id: new_letter.id.clone(),
                    at: None,
                    event_id: Some(event.id.clone()),
                };
                (new_letter, lifecycle, Some(event))
            }
            Failed::Deadline(due) => {
                let new_letter = deadline_letter(process, &self.id, *due, failure, 1, now);
                let lifecycle = Lifecycle::Failed {
                    letter_id: new_letter.id.clone(),
                    at: Some(due.at),
                    event_id: None,
                };
                (new_letter, lifecycle, None)
            }
        };
        let append = lifecycle_at(app, process, &self.id, instance.version, lifecycle, cause)?;
        Ok(WriteSet {
            appends: vec![append],
            dead_letters: vec![new_letter],
            settle_letter: Some(settle_retried(&self.letter)),
            ..WriteSet::default()
        })
    }
}

/// A follow-up's step again, on the timed-out instance.
struct FollowUpRetry {
    process: Arc<dyn ProcessRunner>,
    id: String,
    event: RecordedEvent,
}

impl FollowUpRetry {
    async fn run(&self, app: &App) -> Result<Outcome, Error> {
        let process = &*self.process;
        let Some(instance) = app.load_instance(process, &self.id).await? else {
            return Ok(Outcome::nothing());
        };
        let route = process.route(Some(&instance), &self.event);
        // A handler a deploy removed lets the event through (spec 104).
        if route != Route::FollowUp {
            return Ok(Outcome::nothing());
        }
        let key = derived_id(&[
            "process",
            process.name(),
            &self.event.id,
            "retry",
            &app.next_id(),
        ]);
        let step = process
            .event_step(app, &self.id, Some(&instance), route, &self.event, key)
            .await;
        Ok(match step {
            Ok(writes) => Outcome::Commit(Done::writes(retry_writes(writes))),
            Err(failure) => Outcome::Failed(failure),
        })
    }
}

impl Work for FollowUpRetry {
    fn execute<'a>(&'a mut self, app: &'a App, _attempt: u32) -> BoxFuture<'a, Outcome> {
        Box::pin(async move { Outcome::of(self.run(app).await) })
    }

    fn aggregate(&self) -> &'static str {
        self.process.aggregate()
    }

    fn handler(&self) -> Option<(&'static str, String)> {
        Some(("process", self.process.name().to_owned()))
    }

    fn subject(&self) -> String {
        format!(
            "process `{}` on parked `{}` `{}` of instance `{}`",
            self.process.name(),
            self.event.event_type,
            self.event.id,
            self.id
        )
    }

    fn process_step(&self) -> bool {
        true
    }
}

/// A retry step's write set. Its steps run on the instance as if it were running, so they keep
/// no snapshot: the next load folds them from the stream.
fn retry_writes(writes: StepWrites) -> WriteSet {
    let mut set = step_writes(writes);
    set.snapshots.clear();
    set
}

fn settle_retried(letter: &DeadLetter) -> LetterSettle {
    LetterSettle {
        id: letter.id.clone(),
        status: LetterStatus::Retried,
    }
}
