//! Retrying a process's letter: the failed step again, then what was parked behind it, in
//! order, then `ProcessResumed` (spec 113–121, 168). Each step is its own transaction, fenced on
//! the letter still being `failed`, so a retry cut short goes on from the last step written when
//! the letter is retried again, and a discard stops it (spec 114, 120, 170).

use serde_json::Value;

use crate::app::App;
use crate::app::engine::Failure;
use crate::app::letters::Retried;
use crate::app::processes::ProcessRunner;
use crate::app::processes::instance::{Instance, Lifecycle, Status};
use crate::app::processes::step::{Route, StepWrites, entry_key, lifecycle_append};
use crate::app::processes::writes::{deadline_letter, process_letter, step_writes};
use crate::ids::derived_id;
use crate::process::TIMEOUT;
use crate::process::plan::DueDeadline;
use crate::store::{CommitError, DeadLetter, LetterSettle, LetterStatus, Metadata, WriteSet};
use crate::{Error, RecordedEvent};

/// What failed: an event step or a deadline.
#[derive(Clone, Copy)]
enum Failed<'a> {
    Event(&'a RecordedEvent),
    Deadline(DueDeadline),
}

/// How a retry step's commit ended.
enum Committed {
    Done,
    /// The instance moved meanwhile (an event parked during the retry): look again (spec 89,
    /// 115).
    Moved,
}

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
            Some(writes) => retry_writes(writes, |set| set.settle_letter = Some(settle)),
            None => WriteSet {
                settle_letter: Some(settle),
                ..WriteSet::default()
            },
        };
        match self.commit_letter(letter, set)? {
            Committed::Done => Ok(Retried::Done),
            Committed::Moved => Err(Error::RetryFailed {
                id: letter.id.clone(),
                message: "the instance moved during the retry; retry again".to_owned(),
            }),
        }
    }

    /// §11: the failed step, then the parked events, then `ProcessResumed`.
    async fn retry_failed_instance(
        &self,
        process: &dyn ProcessRunner,
        id: &str,
        letter: &DeadLetter,
    ) -> Result<Retried, Error> {
        let races = self
            .config()
            .for_aggregate(process.aggregate())
            .concurrency_retries;
        let mut moved = 0;
        loop {
            if moved > races {
                return Err(Error::RetryFailed {
                    id: letter.id.clone(),
                    message: "the instance kept moving during the retry; retry again".to_owned(),
                });
            }
            let Some(instance) = self.load_instance(process, id)? else {
                return Ok(Retried::Done);
            };
            let outcome = match instance.status {
                // Completed or timed out during the retry: what is parked after is dropped
                // (spec 118–119).
                Status::Completed | Status::TimedOut => {
                    self.commit_letter(
                        letter,
                        WriteSet {
                            settle_letter: Some(settle_retried(letter)),
                            unschedule: vec![entry_key(process.name(), id)],
                            ..WriteSet::default()
                        },
                    )?;
                    return Ok(Retried::Done);
                }
                Status::Started => return Ok(Retried::Done),
                // (1) The failed step, with a new key (spec 113, 138).
                Status::Failed if !instance.failed_step_done => {
                    self.rerun_failed_step(process, id, &instance, letter)
                        .await?
                }
                // (2) Parked events in arrival order, with their own keys; a deadline due before
                // a parked event's arrival runs first (spec 113).
                Status::Failed if !instance.parked.is_empty() => {
                    self.drain_next(process, id, &instance, letter).await?
                }
                // (3) Resumed: running again, deadlines rescheduled, past ones due at once; the
                // letter is `retried` once what was parked is drained (spec 113, 121, 168).
                Status::Failed => {
                    let append =
                        self.lifecycle_at(process, id, &instance, Lifecycle::Resumed {}, None)?;
                    let mut running = instance.clone();
                    running.status = Status::Started;
                    let (schedule, unschedule) = process.arm(id, &running)?;
                    let set = WriteSet {
                        appends: vec![append],
                        schedule: schedule.into_iter().collect(),
                        unschedule: unschedule.into_iter().collect(),
                        settle_letter: Some(settle_retried(letter)),
                        ..WriteSet::default()
                    };
                    match self.commit_letter(letter, set)? {
                        Committed::Done => return Ok(Retried::Done),
                        Committed::Moved => Committed::Moved,
                    }
                }
            };
            if let Committed::Moved = outcome {
                moved += 1;
            }
        }
    }

    /// Runs the failed step again under a new key.
    async fn rerun_failed_step(
        &self,
        process: &dyn ProcessRunner,
        id: &str,
        instance: &Instance,
        letter: &DeadLetter,
    ) -> Result<Committed, Error> {
        let new_key = |subject: &str| {
            derived_id(&["process", process.name(), subject, "retry", &self.next_id()])
        };
        if let Some(event_id) = &instance.failed_event {
            let event = self
                .store()
                .read_event(event_id)?
                .ok_or_else(|| Error::NotFound {
                    what: format!("event `{event_id}`"),
                })?;
            return self
                .event_in_retry(process, id, instance, letter, &event, new_key(&event.id))
                .await;
        }
        let field = letter
            .event_type
            .as_deref()
            .and_then(|subject| subject.strip_prefix("deadline:"))
            .and_then(|field| process.field(field));
        let (Some(field), Some(at)) = (field, instance.failed_at) else {
            return Err(Error::LetterNotRetriable {
                id: letter.id.clone(),
                reason: "its failed step cannot be told from its history".to_owned(),
            });
        };
        let due = DueDeadline { at, field };
        let key = new_key(&format!("{id}:deadline:{field}:{}", at.as_millis()));
        self.deadline_in_retry(process, id, instance, letter, due, Some(key))
            .await
    }

    /// The first parked event, or a deadline due before its arrival.
    async fn drain_next(
        &self,
        process: &dyn ProcessRunner,
        id: &str,
        instance: &Instance,
        letter: &DeadLetter,
    ) -> Result<Committed, Error> {
        let Some(parked) = instance.parked.first() else {
            return Ok(Committed::Done);
        };
        let mut running = instance.clone();
        running.status = Status::Started;
        if let Some(due) = process.due(&running, parked.parked_at)? {
            return self
                .deadline_in_retry(process, id, instance, letter, due, None)
                .await;
        }
        let event = self
            .store()
            .read_event(&parked.event_id)?
            .ok_or_else(|| Error::NotFound {
                what: format!("parked event `{}`", parked.event_id),
            })?;
        let key = derived_id(&["process", process.name(), &event.id]);
        self.event_in_retry(process, id, instance, letter, &event, key)
            .await
    }

    /// An event step during a retry: a handler a deploy removed lets the event through
    /// (spec 117); one that fails is the new failure at once (spec 116).
    async fn event_in_retry(
        &self,
        process: &dyn ProcessRunner,
        id: &str,
        instance: &Instance,
        letter: &DeadLetter,
        event: &RecordedEvent,
        key: String,
    ) -> Result<Committed, Error> {
        let route = process.route_as_started(instance, event);
        if matches!(route, Route::Skip | Route::Park) {
            let handled = Lifecycle::Handled {
                event_id: event.id.clone(),
                event_type: event.event_type.clone(),
                aggregate_type: event.aggregate_type.clone(),
                aggregate_id: event.aggregate_id.clone(),
                state: instance.state.clone(),
            };
            let append = self.lifecycle_at(process, id, instance, handled, Some(event))?;
            return self.commit_letter(
                letter,
                WriteSet {
                    appends: vec![append],
                    ..WriteSet::default()
                },
            );
        }
        match process
            .event_step(self, id, Some(instance), route, event, key)
            .await
        {
            Ok(writes) => self.commit_letter(letter, retry_writes(writes, |_| {})),
            Err(failure) => {
                self.fail_again(
                    process,
                    id,
                    instance,
                    letter,
                    Failed::Event(event),
                    &failure,
                )?;
                Err(retry_failed(letter, failure))
            }
        }
    }

    /// A deadline during a retry; the timeout ends the instance as timed out (spec 119).
    async fn deadline_in_retry(
        &self,
        process: &dyn ProcessRunner,
        id: &str,
        instance: &Instance,
        letter: &DeadLetter,
        due: DueDeadline,
        key: Option<String>,
    ) -> Result<Committed, Error> {
        let mut running = instance.clone();
        running.status = Status::Started;
        match process.deadline_step(self, id, &running, due, key).await {
            Ok(writes) => {
                let mut set = retry_writes(writes, |_| {});
                if due.field != TIMEOUT {
                    // Still failed until resumed: no entry meanwhile (spec 111).
                    set.schedule
                        .retain(|entry| entry.dedupe_key != entry_key(process.name(), id));
                    set.unschedule = vec![entry_key(process.name(), id)];
                }
                self.commit_letter(letter, set)
            }
            Err(failure) => {
                self.fail_again(
                    process,
                    id,
                    instance,
                    letter,
                    Failed::Deadline(due),
                    &failure,
                )?;
                Err(retry_failed(letter, failure))
            }
        }
    }

    /// A new failure during a retry: `ProcessFailed` with a letter of its own; the old one is
    /// settled, its step having run (spec 116). The failed step failing again changes nothing.
    fn fail_again(
        &self,
        process: &dyn ProcessRunner,
        id: &str,
        instance: &Instance,
        letter: &DeadLetter,
        failed: Failed<'_>,
        failure: &Failure,
    ) -> Result<(), Error> {
        if !instance.failed_step_done {
            return Ok(());
        }
        let now = self.clock().now();
        let (new_letter, lifecycle, cause) = match failed {
            Failed::Event(event) => {
                let new_letter = process_letter(process.name(), id, event, failure, 1, now);
                let lifecycle = Lifecycle::Failed {
                    letter_id: new_letter.id.clone(),
                    at: None,
                    event_id: Some(event.id.clone()),
                };
                (new_letter, lifecycle, Some(event))
            }
            Failed::Deadline(due) => {
                let new_letter = deadline_letter(process, id, due, failure, 1, now);
                let lifecycle = Lifecycle::Failed {
                    letter_id: new_letter.id.clone(),
                    at: Some(due.at),
                    event_id: None,
                };
                (new_letter, lifecycle, None)
            }
        };
        let append = self.lifecycle_at(process, id, instance, lifecycle, cause)?;
        self.commit_letter(
            letter,
            WriteSet {
                appends: vec![append],
                dead_letters: vec![new_letter],
                settle_letter: Some(settle_retried(letter)),
                ..WriteSet::default()
            },
        )
        .map(|_| ())
    }

    /// One lifecycle event appended to the instance, pointing at the event it concerns, or at
    /// the instance (spec 91, 144).
    fn lifecycle_at(
        &self,
        process: &dyn ProcessRunner,
        id: &str,
        instance: &Instance,
        lifecycle: Lifecycle,
        cause: Option<&RecordedEvent>,
    ) -> Result<crate::store::Append, Error> {
        let stream = format!("process:{}:{id}", process.name());
        let metadata = match cause {
            Some(event) => Metadata {
                correlation_id: event.metadata.correlation_id.clone(),
                causation_id: event.id.clone(),
                depth: event.metadata.depth,
                schema_version: 1,
                system: true,
            },
            None => Metadata {
                correlation_id: stream.clone(),
                causation_id: stream,
                depth: 0,
                schema_version: 1,
                system: true,
            },
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
    fn letter_event(&self, letter: &DeadLetter) -> Result<RecordedEvent, Error> {
        let event_id = letter.event_id.as_deref().unwrap_or_default();
        self.store()
            .read_event(event_id)?
            .ok_or_else(|| Error::NotFound {
                what: format!("event `{event_id}`"),
            })
    }

    /// Commits one retry step, fenced on the letter still being `failed`.
    fn commit_letter(&self, letter: &DeadLetter, mut set: WriteSet) -> Result<Committed, Error> {
        if set.settle_letter.is_none() {
            set.require_letter = Some(letter.id.clone());
        }
        match self.commit(&set) {
            Ok(_) => Ok(Committed::Done),
            Err(CommitError::StreamMoved { .. }) => Ok(Committed::Moved),
            Err(CommitError::LetterSettled { .. }) => Err(Error::LetterSettled {
                id: letter.id.clone(),
            }),
            Err(CommitError::Store(error)) => Err(error.into()),
            Err(other) => Err(Error::RetryFailed {
                id: letter.id.clone(),
                message: other.to_string(),
            }),
        }
    }
}

/// A retry step's write set. Its steps run on the instance as if it were running, so they keep
/// no snapshot: the next load folds them from the stream.
fn retry_writes(writes: StepWrites, settle: impl FnOnce(&mut WriteSet)) -> WriteSet {
    let mut set = step_writes(writes, settle);
    set.snapshots.clear();
    set
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
