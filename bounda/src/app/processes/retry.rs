//! Retrying a process's letter: the failed step again, then what was parked behind it, in
//! order, then `ProcessResumed` (spec 113–121, 168). Each step is its own transaction, so a
//! retry cut short goes on from the last step written when the letter is retried again.

use serde_json::Value;

use crate::app::App;
use crate::app::letters::Retried;
use crate::app::processes::ProcessRunner;
use crate::app::processes::instance::{Instance, Lifecycle, Status};
use crate::app::processes::pass::step_writes;
use crate::app::processes::step::{Route, entry_key, lifecycle_append};
use crate::app::run::Failure;
use crate::ids::derived_id;
use crate::process::TIMEOUT;
use crate::process::plan::DueDeadline;
use crate::store::{DeadLetter, LetterSettle, LetterStatus, Metadata, WriteSet};
use crate::{Error, Instant};

impl App {
    /// Retries process letter `letter` (spec 113).
    pub(crate) async fn retry_process_letter(&self, letter: &DeadLetter) -> Result<Retried, Error> {
        let not_retriable = |reason: &str| Error::LetterNotRetriable {
            id: letter.id.clone(),
            reason: reason.to_owned(),
        };
        let process = self
            .processes()
            .find(|p| p.name() == letter.handler)
            .cloned()
            .ok_or_else(|| not_retriable("its process is no longer in the app"))?;
        let id = letter
            .payload
            .as_ref()
            .and_then(|payload| payload.get("instance"))
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .ok_or_else(|| not_retriable("its event named no instance"))?
            .to_owned();
        let instance = self
            .load_instance(&*process, &id)?
            .ok_or_else(|| not_retriable("its instance has no history"))?;
        match instance.status {
            Status::Failed if instance.letter_id.as_deref() == Some(letter.id.as_str()) => {
                self.retry_failed_instance(&*process, &id, letter).await
            }
            Status::TimedOut => {
                self.retry_follow_up(&*process, &id, &instance, letter)
                    .await
            }
            // The instance failed on another step, whose letter comes first (spec 171).
            _ => Err(not_retriable(
                "its instance failed on another step, whose letter comes first",
            )),
        }
    }

    /// Runs a follow-up's handler again and nothing else; the process stays timed out (spec 104).
    async fn retry_follow_up(
        &self,
        process: &dyn ProcessRunner,
        id: &str,
        instance: &Instance,
        letter: &DeadLetter,
    ) -> Result<Retried, Error> {
        let event = self.letter_event(letter)?;
        let route = process.route(Some(instance), &event);
        let key = derived_id(&[
            "process",
            process.name(),
            &event.id,
            "retry",
            &self.next_id(),
        ]);
        let writes = match route {
            Route::FollowUp => Some(
                process
                    .event_step(self, id, Some(instance), route, &event, key)
                    .await
                    .map_err(|failure| retry_failed(letter, failure))?,
            ),
            // A handler a deploy removed lets the event through (spec 104).
            _ => None,
        };
        let settle = settle_retried(letter);
        let set = match writes {
            Some(writes) => step_writes(writes, |set| set.settle_letter = Some(settle)),
            None => WriteSet {
                settle_letter: Some(settle),
                ..WriteSet::default()
            },
        };
        self.commit_letter(letter, &set)?;
        Ok(Retried::Done)
    }

    /// §11: the failed step, then the parked events, then `ProcessResumed`.
    async fn retry_failed_instance(
        &self,
        process: &dyn ProcessRunner,
        id: &str,
        letter: &DeadLetter,
    ) -> Result<Retried, Error> {
        loop {
            let Some(instance) = self.load_instance(process, id)? else {
                return Ok(Retried::Done);
            };
            if instance.status == Status::Completed || instance.status == Status::TimedOut {
                // Completed or timed out during the retry: what is parked after is dropped
                // (spec 118–119).
                self.commit_letter(
                    letter,
                    &WriteSet {
                        settle_letter: Some(settle_retried(letter)),
                        unschedule: vec![entry_key(process.name(), id)],
                        ..WriteSet::default()
                    },
                )?;
                return Ok(Retried::Done);
            }
            if instance.status != Status::Failed {
                return Ok(Retried::Done);
            }
            // (1) The failed step, with a new key (spec 113, 138).
            if !instance.failed_step_done {
                let done = self
                    .rerun_failed_step(process, id, &instance, letter)
                    .await?;
                if done {
                    continue;
                }
            }
            // (2) Parked events in arrival order, with their own keys; a deadline due before a
            // parked event's arrival runs first (spec 113).
            if let Some(parked) = instance.parked.first().cloned() {
                if let Some(due) = self.due_before(process, &instance, parked.parked_at)? {
                    self.retry_step_deadline(process, id, &instance, letter, due)
                        .await?;
                    continue;
                }
                let event =
                    self.store()
                        .read_event(&parked.event_id)?
                        .ok_or_else(|| Error::NotFound {
                            what: format!("parked event `{}`", parked.event_id),
                        })?;
                let route = process.route_as_started(&instance, &event);
                let key = derived_id(&["process", process.name(), &event.id]);
                let writes = match route {
                    Route::Skip | Route::Park => None,
                    route => Some(
                        process
                            .event_step(self, id, Some(&instance), route, &event, key)
                            .await,
                    ),
                };
                match writes {
                    // A parked event whose handler a deploy removed is let through (spec 117).
                    None => {
                        let handled = Lifecycle::Handled {
                            event_id: event.id.clone(),
                            event_type: event.event_type.clone(),
                            aggregate_type: event.aggregate_type.clone(),
                            aggregate_id: event.aggregate_id.clone(),
                            state: instance.state.clone(),
                        };
                        let append = self.lifecycle_at(process, id, &instance, handled)?;
                        self.commit_letter(
                            letter,
                            &WriteSet {
                                appends: vec![append],
                                ..WriteSet::default()
                            },
                        )?;
                    }
                    Some(Ok(writes)) => {
                        self.commit_letter(letter, &step_writes(writes, |_| {}))?;
                    }
                    // A parked event that fails again is the new failure at once (spec 116).
                    Some(Err(failure)) => {
                        self.fail_again(
                            process,
                            id,
                            &instance,
                            letter,
                            Some(&event.id),
                            None,
                            &failure,
                        )?;
                        return Err(retry_failed(letter, failure));
                    }
                }
                continue;
            }
            // (3) Resumed: running again, deadlines rescheduled, past ones due at once; the
            // letter is `retried` once what was parked is drained (spec 113, 121, 168).
            let append = self.lifecycle_at(process, id, &instance, Lifecycle::Resumed {})?;
            let mut running = instance.clone();
            running.status = Status::Started;
            let (schedule, unschedule) = process.arm(id, &running)?;
            self.commit_letter(
                letter,
                &WriteSet {
                    appends: vec![append],
                    schedule: schedule.into_iter().collect(),
                    unschedule: unschedule.into_iter().collect(),
                    settle_letter: Some(settle_retried(letter)),
                    ..WriteSet::default()
                },
            )?;
            return Ok(Retried::Done);
        }
    }

    /// Runs the failed step again; whether it is done now.
    async fn rerun_failed_step(
        &self,
        process: &dyn ProcessRunner,
        id: &str,
        instance: &Instance,
        letter: &DeadLetter,
    ) -> Result<bool, Error> {
        if let Some(event_id) = &instance.failed_event {
            let event = self
                .store()
                .read_event(event_id)?
                .ok_or_else(|| Error::NotFound {
                    what: format!("event `{event_id}`"),
                })?;
            let route = process.route_as_started(instance, &event);
            if matches!(route, Route::Skip | Route::Park) {
                // A failure whose handler a deploy removed is let through (spec 117).
                let handled = Lifecycle::Handled {
                    event_id: event.id.clone(),
                    event_type: event.event_type.clone(),
                    aggregate_type: event.aggregate_type.clone(),
                    aggregate_id: event.aggregate_id.clone(),
                    state: instance.state.clone(),
                };
                let append = self.lifecycle_at(process, id, instance, handled)?;
                self.commit_letter(
                    letter,
                    &WriteSet {
                        appends: vec![append],
                        ..WriteSet::default()
                    },
                )?;
                return Ok(true);
            }
            let key = derived_id(&[
                "process",
                process.name(),
                &event.id,
                "retry",
                &self.next_id(),
            ]);
            let writes = process
                .event_step(self, id, Some(instance), route, &event, key)
                .await
                .map_err(|failure| retry_failed(letter, failure))?;
            self.commit_letter(letter, &step_writes(writes, |_| {}))?;
            return Ok(true);
        }
        let field = letter
            .event_type
            .as_deref()
            .and_then(|subject| subject.strip_prefix("deadline:"))
            .and_then(|field| process.field(field));
        let at = instance.failed_at;
        let (Some(field), Some(at)) = (field, at) else {
            return Err(Error::LetterNotRetriable {
                id: letter.id.clone(),
                reason: "its failed step cannot be told from its history".to_owned(),
            });
        };
        self.retry_step_deadline(process, id, instance, letter, DueDeadline { at, field })
            .await?;
        Ok(true)
    }

    /// Runs a deadline during a retry; the timeout ends the instance as timed out (spec 119).
    async fn retry_step_deadline(
        &self,
        process: &dyn ProcessRunner,
        id: &str,
        instance: &Instance,
        letter: &DeadLetter,
        due: DueDeadline,
    ) -> Result<(), Error> {
        let mut running = instance.clone();
        running.status = Status::Started;
        match process.deadline_step(self, id, &running, due).await {
            Ok(writes) => {
                let mut set = step_writes(writes, |_| {});
                if due.field != TIMEOUT {
                    // Still failed until resumed: no entry meanwhile (spec 111).
                    set.schedule.clear();
                    set.unschedule = vec![entry_key(process.name(), id)];
                }
                self.commit_letter(letter, &set)
            }
            Err(failure) => {
                self.fail_again(process, id, instance, letter, None, Some(due.at), &failure)?;
                Err(retry_failed(letter, failure))
            }
        }
    }

    /// The earliest deadline of the instance due at or before `moment`.
    fn due_before(
        &self,
        process: &dyn ProcessRunner,
        instance: &Instance,
        moment: Instant,
    ) -> Result<Option<DueDeadline>, Error> {
        let mut running = instance.clone();
        running.status = Status::Started;
        process.due(&running, moment)
    }

    /// A new failure during a retry: `ProcessFailed` with a new letter; the old one is settled,
    /// its step having run (spec 116).
    #[allow(clippy::too_many_arguments, reason = "one failure's whole context")]
    fn fail_again(
        &self,
        process: &dyn ProcessRunner,
        id: &str,
        instance: &Instance,
        letter: &DeadLetter,
        event_id: Option<&String>,
        at: Option<Instant>,
        failure: &Failure,
    ) -> Result<(), Error> {
        if !instance.failed_step_done {
            return Ok(());
        }
        let now = self.clock().now();
        let subject = event_id.cloned().unwrap_or_else(|| {
            format!("deadline:{}", at.map(|a| a.as_millis()).unwrap_or_default())
        });
        let new_letter = DeadLetter {
            id: derived_id(&["process", process.name(), id, &subject, "dead-letter"]),
            attempts: 1,
            error_type: failure.error_type().to_owned(),
            error_message: failure.message.clone(),
            error_stack: Some(failure.stack.clone()),
            event_id: event_id.cloned(),
            first_failed_at: now,
            last_failed_at: now,
            status: LetterStatus::Failed,
            ..letter.clone()
        };
        let failed = Lifecycle::Failed {
            letter_id: new_letter.id.clone(),
            at,
            event_id: event_id.cloned(),
        };
        let append = self.lifecycle_at(process, id, instance, failed)?;
        self.commit_letter(
            letter,
            &WriteSet {
                appends: vec![append],
                dead_letters: vec![new_letter],
                settle_letter: Some(settle_retried(letter)),
                ..WriteSet::default()
            },
        )
    }

    /// One lifecycle event appended to the instance, pointing at the instance (spec 91).
    fn lifecycle_at(
        &self,
        process: &dyn ProcessRunner,
        id: &str,
        instance: &Instance,
        lifecycle: Lifecycle,
    ) -> Result<crate::store::Append, Error> {
        let stream = format!("process:{}:{id}", process.name());
        let metadata = Metadata {
            correlation_id: stream.clone(),
            causation_id: stream,
            depth: 0,
            schema_version: 1,
            system: true,
        };
        Ok(lifecycle_append(
            self,
            process.name(),
            id,
            instance.version,
            vec![lifecycle],
            &metadata,
        )?
        .0)
    }

    /// The event a letter names.
    fn letter_event(&self, letter: &DeadLetter) -> Result<crate::RecordedEvent, Error> {
        let event_id = letter.event_id.as_deref().unwrap_or_default();
        self.store()
            .read_event(event_id)?
            .ok_or_else(|| Error::NotFound {
                what: format!("event `{event_id}`"),
            })
    }

    /// Commits one retry step, fenced on the letter's status where it settles it.
    fn commit_letter(&self, letter: &DeadLetter, set: &WriteSet) -> Result<(), Error> {
        match self.store().commit(set) {
            Ok(_) => Ok(()),
            Err(crate::store::CommitError::LetterSettled { .. }) => Err(Error::LetterSettled {
                id: letter.id.clone(),
            }),
            Err(crate::store::CommitError::Store(error)) => Err(error.into()),
            Err(other) => Err(Error::RetryFailed {
                id: letter.id.clone(),
                message: other.to_string(),
            }),
        }
    }
}

fn settle_retried(letter: &DeadLetter) -> LetterSettle {
    LetterSettle {
        id: letter.id.clone(),
        status: LetterStatus::Retried,
    }
}

fn retry_failed(letter: &DeadLetter, failure: Failure) -> Error {
    Error::RetryFailed {
        id: letter.id.clone(),
        message: failure.message,
    }
}
