//! The `processes` subscriber's pass, and the runs of process deadlines.

use std::collections::HashSet;

use serde_json::Value;

use crate::app::processes::instance::{Instance, Lifecycle, Status, stream_type};
use crate::app::processes::step::{Route, StepWrites, lifecycle_append};
use crate::app::processes::{PROCESSES, ProcessRunner};
use crate::app::reaction::RejectionRecord;
use crate::app::run::Failure;
use crate::app::{App, telemetry};
use crate::ids::derived_id;
use crate::process::plan::DueDeadline;
use crate::store::{
    CommitError, DeadLetter, InboxClaim, InboxMark, InboxOutcome, LetterKind, LetterStatus,
    Metadata, ScheduledEntry, ScheduledOutcome, ScheduledRelease, WriteSet,
};
use crate::{Error, Instant, RecordedEvent};
use tracing::Instrument;

/// What delivering one event to one process came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    Done,
    /// Claimed elsewhere, or waiting for a retry: the process's later events wait (spec 109).
    Held,
}

/// The write set of a step, with how it settles its claim.
pub(crate) fn step_writes(writes: StepWrites, settle: impl FnOnce(&mut WriteSet)) -> WriteSet {
    let mut set = WriteSet {
        appends: Vec::new(),
        schedule: writes.staging.scheduled,
        unschedule: writes.unschedule.into_iter().collect(),
        ..WriteSet::default()
    };
    if !writes.lifecycle.events.is_empty() {
        set.appends.push(writes.lifecycle);
    }
    set.appends.extend(writes.staging.appends);
    set.schedule.extend(writes.schedule);
    settle(&mut set);
    set
}

impl App {
    /// One pass of the `processes` subscriber at `now`. Returns whether anything ran or moved.
    pub(crate) async fn process_pass(
        &self,
        now: Instant,
        rejections: &mut Vec<RejectionRecord>,
    ) -> Result<bool, Error> {
        if self.inner.processes.is_empty() {
            return Ok(false);
        }
        let store = self.store();
        let Some(from) = store.checkpoint(PROCESSES)? else {
            return Ok(false);
        };
        let events = store.read_all(from, self.config().dispatcher.batch_size)?;
        let Some(last) = events.last().map(|event| event.position) else {
            return Ok(false);
        };
        let span = telemetry::subscriber_span(PROCESSES, "process", from, events.len());
        let pass = async {
            let mut held: HashSet<&'static str> = HashSet::new();
            let mut stop: Option<u64> = None;
            let mut ran = false;
            for event in &events {
                if self.stopping() {
                    stop.get_or_insert(event.position - 1);
                    break;
                }
                for process in self.inner.processes.iter().filter(|p| p.takes(event)) {
                    // While a step waits for its back-off, the process gets none of its later
                    // events, for any instance (spec 109).
                    if held.contains(process.name()) {
                        continue;
                    }
                    let delivery = self
                        .deliver_to_process(&**process, event, now, rejections, &mut ran)
                        .await?;
                    if delivery == Delivery::Held {
                        held.insert(process.name());
                        stop.get_or_insert(event.position - 1);
                    }
                }
            }
            self.close_pass(PROCESSES, from, stop.unwrap_or(last), ran)
        };
        telemetry::pass_outcome(&span, pass.instrument(span.clone()).await)
    }

    /// Delivers `event` to `process`: claim, route, step, commit (spec 55–64, 98, 108–110).
    async fn deliver_to_process(
        &self,
        process: &dyn ProcessRunner,
        event: &RecordedEvent,
        now: Instant,
        rejections: &mut Vec<RejectionRecord>,
        ran: &mut bool,
    ) -> Result<Delivery, Error> {
        let store = self.store();
        let claim_id = self.next_id();
        let attempt =
            match store.claim_inbox(process.name(), &event.id, &claim_id, now, self.lease())? {
                InboxClaim::Claimed { attempt } => attempt,
                InboxClaim::Succeeded | InboxClaim::DeadLettered => return Ok(Delivery::Done),
                InboxClaim::Held | InboxClaim::Waiting { .. } => return Ok(Delivery::Held),
            };
        *ran = true;
        let mark = |outcome| InboxMark {
            handler: process.name().to_owned(),
            event_id: event.id.clone(),
            claim_id: claim_id.clone(),
            outcome,
        };
        let id = match process.instance_of(event) {
            Ok(Some(id)) => id,
            Ok(None) => {
                return self.settle_process(self.commit(&WriteSet {
                    inbox: Some(mark(InboxOutcome::Succeeded)),
                    ..WriteSet::default()
                }));
            }
            // A correlator that fails dead-letters the event for this process only (spec 58).
            Err(error) => {
                let failure = Failure {
                    code: "CORRELATION_FAILED",
                    retriable: false,
                    message: format!("{error:#}"),
                    stack: format!("{error:?}"),
                };
                let letter = process_letter(process.name(), "", event, &failure, attempt, now);
                return self.settle_process(self.commit(&WriteSet {
                    inbox: Some(mark(InboxOutcome::DeadLettered {
                        error: failure.message,
                    })),
                    dead_letters: vec![letter],
                    ..WriteSet::default()
                }));
            }
        };
        let key = derived_id(&["process", process.name(), &event.id]);
        let settings = self.config().for_aggregate(process.aggregate());
        let mut reruns = 0;
        loop {
            let instance = self.load_instance(process, &id)?;
            let mut route = process.route(instance.as_ref(), event);
            // A failure whose letter was discarded gives the instance up: later events are
            // dropped, not parked (spec 120).
            if route == Route::Park
                && let Some(letter_id) = instance.as_ref().and_then(|i| i.letter_id.as_deref())
                && store
                    .dead_letter(letter_id)?
                    .is_some_and(|letter| letter.status == LetterStatus::Discarded)
            {
                route = Route::Skip;
            }
            if route == Route::Skip {
                return self.settle_process(self.commit(&WriteSet {
                    inbox: Some(mark(InboxOutcome::Succeeded)),
                    ..WriteSet::default()
                }));
            }
            let span = telemetry::process_span(
                process.aggregate(),
                process.name(),
                &id,
                None,
                &event.metadata.correlation_id,
                attempt,
            );
            let step = process
                .event_step(self, &id, instance.as_ref(), route, event, key.clone())
                .instrument(span.clone())
                .await;
            let failure = match step {
                Ok(writes) => {
                    let staged = writes.staging.rejections.clone();
                    let set = step_writes(writes, |set| {
                        set.inbox = Some(mark(InboxOutcome::Succeeded));
                    });
                    match self.commit(&set) {
                        Ok(_) => {
                            rejections.extend(staged);
                            return Ok(Delivery::Done);
                        }
                        // Losing a race with another write to the instance costs no attempt:
                        // the step reruns on the current instance (spec 89, 133).
                        Err(CommitError::StreamMoved { .. })
                            if reruns < settings.concurrency_retries =>
                        {
                            reruns += 1;
                            if !store.renew_inbox(
                                process.name(),
                                &event.id,
                                &claim_id,
                                self.clock().now(),
                            )? {
                                return Ok(Delivery::Held);
                            }
                            continue;
                        }
                        Err(CommitError::ClaimLost { .. }) => return Ok(Delivery::Held),
                        Err(error) => Failure::of(&anyhow::Error::new(error)),
                    }
                }
                Err(failure) => failure,
            };
            telemetry::failed(&span, &failure.message);
            let retry = settings.processes_retry.delay_before(attempt);
            if let Some(wait) = retry.filter(|_| failure.retriable) {
                store_commit(self.commit(&WriteSet {
                    inbox: Some(mark(InboxOutcome::Failed {
                        retry_at: now + wait,
                        error: failure.message.clone(),
                    })),
                    ..WriteSet::default()
                }))?;
                return Ok(Delivery::Held);
            }
            let letter = process_letter(process.name(), &id, event, &failure, attempt, now);
            let mut set = WriteSet {
                inbox: Some(mark(InboxOutcome::DeadLettered {
                    error: failure.message.clone(),
                })),
                ..WriteSet::default()
            };
            // A follow-up that fails for good is a letter, but the process has ended already:
            // it does not fail (spec 100). A starting event that fails fails the instance it
            // would have started, so its letter can be retried (spec 108).
            if route != Route::FollowUp {
                let failed = Lifecycle::Failed {
                    letter_id: letter.id.clone(),
                    at: None,
                    event_id: Some(event.id.clone()),
                };
                let version = instance.as_ref().map_or(0, |i| i.version);
                set.appends
                    .push(self.failure_append(process, &id, version, failed, event)?);
                set.unschedule
                    .push(crate::app::processes::step::entry_key(process.name(), &id));
            }
            set.dead_letters.push(letter);
            return match self.commit(&set) {
                // The instance moved while giving up: look again on the next pass.
                Err(CommitError::StreamMoved { .. }) => {
                    store_commit(self.commit(&WriteSet {
                        inbox: Some(mark(InboxOutcome::Failed {
                            retry_at: now,
                            error: failure.message.clone(),
                        })),
                        ..WriteSet::default()
                    }))?;
                    Ok(Delivery::Held)
                }
                result => self.settle_process(result),
            };
        }
    }

    /// The instance `id` of `process`, folded from its stream.
    pub(crate) fn load_instance(
        &self,
        process: &dyn ProcessRunner,
        id: &str,
    ) -> Result<Option<Instance>, Error> {
        let events = self.store().read_stream(&stream_type(process.name()), id)?;
        process.fold(&events)
    }

    /// `ProcessFailed` appended to the instance.
    pub(crate) fn failure_append(
        &self,
        process: &dyn ProcessRunner,
        id: &str,
        version: u64,
        failed: Lifecycle,
        event: &RecordedEvent,
    ) -> Result<crate::store::Append, Error> {
        let metadata = Metadata {
            correlation_id: event.metadata.correlation_id.clone(),
            causation_id: event.id.clone(),
            depth: event.metadata.depth,
            schema_version: 1,
            system: true,
        };
        Ok(lifecycle_append(self, process.name(), id, version, vec![failed], &metadata)?.0)
    }

    fn settle_process(
        &self,
        result: Result<crate::store::Committed, CommitError>,
    ) -> Result<Delivery, Error> {
        match result {
            Ok(_) => Ok(Delivery::Done),
            Err(CommitError::ClaimLost { .. }) | Err(CommitError::StreamMoved { .. }) => {
                Ok(Delivery::Held)
            }
            Err(CommitError::Store(error)) => Err(error.into()),
            Err(other) => Err(Error::Store(crate::store::StoreError::with_source(
                "a process step's write set was refused",
                other,
            ))),
        }
    }

    /// Runs the deadline entry of an instance: derives from the state what is due and runs it
    /// (spec 78–88, 95–97).
    pub(crate) async fn run_process_deadline(
        &self,
        entry: &ScheduledEntry,
        claim_id: &str,
        now: Instant,
        rejections: &mut Vec<RejectionRecord>,
    ) -> Result<bool, Error> {
        let result = self
            .run_process_deadline_inner(entry, claim_id, now, rejections)
            .await;
        // Whatever the outcome but a wait, the entry no longer waits (spec 175).
        if !matches!(result, Ok(Deadline::Waiting)) {
            self.waiting().remove(&entry.dedupe_key);
        }
        result.map(|outcome| outcome == Deadline::Progressed)
    }

    async fn run_process_deadline_inner(
        &self,
        entry: &ScheduledEntry,
        claim_id: &str,
        now: Instant,
        rejections: &mut Vec<RejectionRecord>,
    ) -> Result<Deadline, Error> {
        let release = |outcome| ScheduledRelease {
            dedupe_key: entry.dedupe_key.clone(),
            claim_id: claim_id.to_owned(),
            outcome,
        };
        let name = entry
            .payload
            .get("process")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let id = entry
            .payload
            .get("instance")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(process) = self.inner.processes.iter().find(|p| p.name() == name) else {
            return self
                .release(self.commit(&WriteSet {
                    scheduled: Some(release(ScheduledOutcome::Complete)),
                    ..WriteSet::default()
                }))
                .map(|()| Deadline::Progressed);
        };
        let settings = self.config().for_aggregate(process.aggregate());
        let mut reruns = 0;
        loop {
            let instance = self.load_instance(&**process, id)?;
            // Nothing runs for an ended instance; a failed one's deadlines wait for its retry
            // (spec 87, 111).
            let Some(instance) = instance.filter(|i| i.status == Status::Started) else {
                return self
                    .release(self.commit(&WriteSet {
                        scheduled: Some(release(ScheduledOutcome::Complete)),
                        ..WriteSet::default()
                    }))
                    .map(|()| Deadline::Progressed);
            };
            // The runtime does not trust the entry: the state says what is due (spec 79). A
            // state that no longer reads fails the instance for good (spec 69).
            let due = match process.due(&instance, now) {
                Ok(due) => due,
                Err(error) => {
                    let failure = Failure::of(&anyhow::Error::new(error));
                    let due = DueDeadline {
                        at: entry.execute_at,
                        field: UNREADABLE_STATE,
                    };
                    return self
                        .deadline_failed(
                            &**process, id, &instance, entry, claim_id, due, &failure, now,
                        )
                        .map(|()| Deadline::Progressed);
                }
            };
            let Some(due) = due else {
                let (schedule, unschedule) = process.arm(id, &instance)?;
                return self
                    .release(self.commit(&WriteSet {
                        scheduled: Some(release(ScheduledOutcome::Complete)),
                        schedule: schedule.into_iter().collect(),
                        unschedule: unschedule.into_iter().collect(),
                        ..WriteSet::default()
                    }))
                    .map(|()| Deadline::Progressed);
            };
            // A due deadline waits until the process runner has handled the events stored
            // before it, ten worker rounds at most (spec 85–86).
            if self.deadline_waits(&entry.dedupe_key, due.at)? {
                return self
                    .release(self.commit(&WriteSet {
                        scheduled: Some(release(ScheduledOutcome::Defer)),
                        ..WriteSet::default()
                    }))
                    .map(|()| Deadline::Waiting);
            }
            let correlation = instance
                .set_by
                .get(due.field)
                .map_or("", |(_, c)| c.as_str());
            // The scheduled run's span learns its correlation from the instance.
            tracing::Span::current().record("bounda.correlation_id", correlation);
            let span = telemetry::process_span(
                process.aggregate(),
                process.name(),
                id,
                Some(due.field),
                correlation,
                entry.attempts + 1,
            );
            let step = process
                .deadline_step(self, id, &instance, due, None)
                .instrument(span.clone())
                .await;
            let failure = match step {
                Ok(writes) => {
                    let staged = writes.staging.rejections.clone();
                    let set = step_writes(writes, |set| {
                        set.scheduled = Some(release(ScheduledOutcome::Complete));
                    });
                    match self.commit(&set) {
                        Ok(_) => {
                            rejections.extend(staged);
                            return Ok(Deadline::Progressed);
                        }
                        Err(CommitError::StreamMoved { .. })
                            if reruns < settings.concurrency_retries =>
                        {
                            reruns += 1;
                            if !self.store().renew_scheduled(
                                &entry.dedupe_key,
                                claim_id,
                                self.clock().now(),
                            )? {
                                return Ok(Deadline::Progressed);
                            }
                            continue;
                        }
                        Err(CommitError::ClaimLost { .. }) => return Ok(Deadline::Progressed),
                        Err(error) => Failure::of(&anyhow::Error::new(error)),
                    }
                }
                Err(failure) => failure,
            };
            telemetry::failed(&span, &failure.message);
            telemetry::failed(&tracing::Span::current(), &failure.message);
            return self
                .deadline_failed(
                    &**process, id, &instance, entry, claim_id, due, &failure, now,
                )
                .map(|()| Deadline::Progressed);
        }
    }

    /// A failing deadline retries with the process's retry settings; when it fails for good
    /// the process fails with letter `deadline:<field>` (spec 88).
    #[allow(clippy::too_many_arguments, reason = "one step's whole context")]
    fn deadline_failed(
        &self,
        process: &dyn ProcessRunner,
        id: &str,
        instance: &Instance,
        entry: &ScheduledEntry,
        claim_id: &str,
        due: DueDeadline,
        failure: &Failure,
        now: Instant,
    ) -> Result<(), Error> {
        let release = |outcome| ScheduledRelease {
            dedupe_key: entry.dedupe_key.clone(),
            claim_id: claim_id.to_owned(),
            outcome,
        };
        let settings = self.config().for_aggregate(process.aggregate());
        let attempt = entry.attempts + 1;
        if let Some(wait) = settings
            .processes_retry
            .delay_before(attempt)
            .filter(|_| failure.retriable)
        {
            return self.release(self.commit(&WriteSet {
                scheduled: Some(release(ScheduledOutcome::Retry {
                    execute_at: now + wait,
                    error: failure.message.clone(),
                })),
                ..WriteSet::default()
            }));
        }
        let letter = deadline_letter(process, id, due, failure, attempt, now);
        // A failing deadline points at the instance (spec 91).
        let stream = format!("process:{}:{id}", process.name());
        let metadata = Metadata {
            correlation_id: stream.clone(),
            causation_id: stream,
            depth: 0,
            schema_version: 1,
            system: true,
        };
        let failed = Lifecycle::Failed {
            letter_id: letter.id.clone(),
            at: Some(due.at),
            event_id: None,
        };
        let (append, _) = lifecycle_append(
            self,
            process.name(),
            id,
            instance.version,
            vec![failed],
            &metadata,
        )?;
        match self.commit(&WriteSet {
            appends: vec![append],
            scheduled: Some(release(ScheduledOutcome::Complete)),
            dead_letters: vec![letter],
            ..WriteSet::default()
        }) {
            // The instance moved while giving up: look again on the next round.
            Err(CommitError::StreamMoved { .. }) => self.release(self.commit(&WriteSet {
                scheduled: Some(release(ScheduledOutcome::Defer)),
                ..WriteSet::default()
            })),
            result => self.release(result),
        }
    }

    /// Whether the deadline due at `at` on entry `key` must wait for the process runner,
    /// counting its rounds (spec 85–86).
    fn deadline_waits(&self, key: &str, at: Instant) -> Result<bool, Error> {
        let behind = match self.store().checkpoint(PROCESSES)? {
            Some(position) => position < self.store().head()?,
            None => false,
        };
        let mut waiting = self.waiting();
        if !behind {
            waiting.remove(key);
            return Ok(false);
        }
        let (moment, rounds) = waiting.entry(key.to_owned()).or_insert((at.as_millis(), 0));
        if *moment != at.as_millis() {
            (*moment, *rounds) = (at.as_millis(), 0);
        }
        *rounds += 1;
        if *rounds > MAX_WAIT_ROUNDS {
            waiting.remove(key);
            return Ok(false);
        }
        Ok(true)
    }
}

/// The field of a deadline letter whose instance's state could not be read.
const UNREADABLE_STATE: &str = "unreadable-state";

/// The letter of deadline `due` of instance `id` failing for good: `deadline:<field>` (spec 88).
pub(crate) fn deadline_letter(
    process: &dyn ProcessRunner,
    id: &str,
    due: DueDeadline,
    failure: &Failure,
    attempts: u32,
    now: Instant,
) -> DeadLetter {
    let subject = format!("deadline:{}", due.field);
    DeadLetter {
        id: derived_id(&[
            "process",
            process.name(),
            id,
            &subject,
            &due.at.as_millis().to_string(),
            "dead-letter",
        ]),
        kind: LetterKind::Process,
        handler: process.name().to_owned(),
        event_id: None,
        event_type: Some(subject),
        aggregate_type: Some(process.aggregate().to_owned()),
        aggregate_id: Some(id.to_owned()),
        error_type: failure.error_type().to_owned(),
        error_message: failure.message.clone(),
        error_stack: Some(failure.stack.clone()),
        attempts,
        first_failed_at: now,
        last_failed_at: now,
        status: LetterStatus::Failed,
        payload: Some(serde_json::json!({ "instance": id, "at": due.at })),
    }
}

/// What running a deadline entry came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Deadline {
    /// Ran, failed, or found nothing to run: the entry moved on.
    Progressed,
    /// Held back for the process runner: no progress.
    Waiting,
}

/// Worker rounds a due deadline waits for the process runner before it runs anyway (spec 86).
const MAX_WAIT_ROUNDS: u32 = 10;

/// A commit whose refusal is reported as a store error.
fn store_commit(result: Result<crate::store::Committed, CommitError>) -> Result<(), Error> {
    match result {
        Ok(_) | Err(CommitError::ClaimLost { .. }) => Ok(()),
        Err(CommitError::Store(error)) => Err(error.into()),
        Err(other) => Err(Error::Store(crate::store::StoreError::with_source(
            "a process step's write set was refused",
            other,
        ))),
    }
}

/// The letter of a process step on `event` that failed for good (spec 108).
pub(crate) fn process_letter(
    process: &str,
    id: &str,
    event: &RecordedEvent,
    failure: &Failure,
    attempts: u32,
    now: Instant,
) -> DeadLetter {
    DeadLetter {
        id: derived_id(&["process", process, id, &event.id, "dead-letter"]),
        kind: LetterKind::Process,
        handler: process.to_owned(),
        event_id: Some(event.id.clone()),
        event_type: Some(event.event_type.clone()),
        aggregate_type: Some(event.aggregate_type.clone()),
        aggregate_id: Some(event.aggregate_id.clone()),
        error_type: failure.error_type().to_owned(),
        error_message: failure.message.clone(),
        error_stack: Some(failure.stack.clone()),
        attempts,
        first_failed_at: now,
        last_failed_at: now,
        status: LetterStatus::Failed,
        payload: Some(serde_json::json!({ "instance": id })),
    }
}
