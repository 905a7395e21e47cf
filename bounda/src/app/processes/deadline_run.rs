//! A process deadline's run, as the engine runs it: the instance's scheduler entry came due;
//! the state says what is due, and it runs once the instance's earlier events are handled.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use tracing::Instrument;

use crate::app::engine::{Done, Outcome, Work};
use crate::app::failure::Failure;
use crate::app::processes::instance::{Instance, Lifecycle, Status, stream_type};
use crate::app::processes::writes::{armed, deadline_letter, lifecycle_at, step_writes};
use crate::app::processes::{PROCESSES, ProcessRunner};
use crate::app::{App, telemetry};
use crate::process::plan::DueDeadline;
pub(crate) use crate::store::instances::DeadlinePayload;
use crate::store::{Bookmark, WriteSet};
use crate::{Error, Instant, RecordedEvent};

/// Worker rounds a due deadline waits for the process runner before it runs anyway.
pub(crate) const MAX_WAIT_ROUNDS: u32 = 10;

/// The field of a deadline letter whose instance's state could not be read.
const UNREADABLE_STATE: &str = "unreadable-state";

/// The events the process runner has not handled yet, as the worker saw them when it claimed a
/// batch: for each instance they reach, the time of the earliest.
#[derive(Debug, Default)]
pub(crate) struct Unhandled {
    /// Whether every unhandled event was read; if not, any due deadline waits.
    complete: bool,
    earliest: HashMap<(&'static str, String), Instant>,
    /// The processes and instances whose events the checkpoint passed while they were held
    /// (`store::bookmarks`): their due deadlines wait until the runner returns to them.
    passed: Vec<Bookmark>,
}

/// How many unhandled events the worker reads to tell which instances they reach.
const UNHANDLED_READ: usize = 1_000;

impl Unhandled {
    /// What is known when the unhandled events could not be read: any due deadline waits.
    pub(crate) fn unknown() -> Unhandled {
        Unhandled {
            complete: false,
            ..Unhandled::default()
        }
    }

    /// Reads the events after the `processes` checkpoint, and its bookmarks.
    pub(crate) async fn read(app: &App) -> Result<Unhandled, Error> {
        let Some(cursor) = app.store().cursor(PROCESSES).await? else {
            return Ok(Unhandled {
                complete: true,
                ..Unhandled::default()
            });
        };
        let events = app.read_all(cursor.checkpoint, UNHANDLED_READ).await?;
        let mut unhandled = Unhandled {
            complete: events.len() < UNHANDLED_READ,
            earliest: HashMap::new(),
            passed: cursor.bookmarks,
        };
        for event in &events {
            unhandled.add(app, event);
        }
        Ok(unhandled)
    }

    fn add(&mut self, app: &App, event: &RecordedEvent) {
        for process in app.processes().filter(|p| p.takes(event)) {
            // An event that names no instance, or whose correlator fails, holds none back.
            if let Ok(Some(id)) = process.instance_of(event) {
                let earliest = self
                    .earliest
                    .entry((process.name(), id))
                    .or_insert(event.timestamp);
                *earliest = (*earliest).min(event.timestamp);
            }
        }
    }

    /// Whether the deadline of instance `id` of `process` due at `at` waits at `now`: it is due,
    /// and an unhandled event of its instance stored at or before it holds it back. What the
    /// worker checks before it runs one, and what the operator's reads report.
    pub(crate) fn holds_due(
        &self,
        process: &'static str,
        id: &str,
        at: Instant,
        now: Instant,
    ) -> bool {
        at <= now && self.holds(process, id, at)
    }

    /// The instances the unhandled events read reach.
    pub(crate) fn instances(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.earliest
            .keys()
            .map(|(process, id)| (*process, id.as_str()))
    }

    /// Whether instance `id` of `process` has an unhandled event stored at or before `at`: or
    /// may have, its events passed while it was held.
    fn holds(&self, process: &'static str, id: &str, at: Instant) -> bool {
        let passed = |bookmark: &Bookmark| {
            bookmark.handler == process && bookmark.lane.as_deref().is_none_or(|lane| lane == id)
        };
        if !self.complete || self.passed.iter().any(passed) {
            return true;
        }
        self.earliest
            .get(&(process, id.to_owned()))
            .is_some_and(|earliest| *earliest <= at)
    }
}

/// One run of an instance's deadline entry.
pub(crate) struct DeadlineRun {
    process: Arc<dyn ProcessRunner>,
    id: String,
    /// The entry's key: its waiting rounds are counted by it.
    key: String,
    /// The moment the entry was armed at, for a letter when the state does not read.
    armed_at: Instant,
    unhandled: Arc<Unhandled>,
    /// What the last try ran: the instance and the deadline.
    ran: Option<(Instance, DueDeadline)>,
    span: tracing::Span,
    outer: tracing::Span,
}

impl DeadlineRun {
    pub(crate) fn new(
        process: Arc<dyn ProcessRunner>,
        payload: DeadlinePayload,
        key: &str,
        unhandled: Arc<Unhandled>,
        outer: tracing::Span,
    ) -> DeadlineRun {
        DeadlineRun {
            process,
            id: payload.instance,
            key: key.to_owned(),
            armed_at: Instant::from_millis(payload.at).unwrap_or_else(Instant::min_value),
            unhandled,
            ran: None,
            span: tracing::Span::none(),
            outer,
        }
    }

    async fn run(&mut self, app: &App, attempt: u32) -> Result<Outcome, Error> {
        let process = Arc::clone(&self.process);
        let id = self.id.clone();
        self.ran = None;
        // Nothing runs for an ended instance; a failed one's deadlines wait for its retry
        // (spec 87, 111).
        let Some(instance) = app
            .load_instance(&*process, &id)
            .await?
            .filter(|i| i.status == Status::Started)
        else {
            return Ok(Outcome::nothing());
        };
        let now = app.clock().now();
        // The runtime does not trust the entry: the state says what is due (spec 79). A state
        // that no longer reads fails the instance for good (spec 69).
        let due = match process.due(&instance, now) {
            Ok(due) => due,
            Err(error) => {
                let due = DueDeadline {
                    at: self.armed_at,
                    field: UNREADABLE_STATE,
                };
                self.ran = Some((instance, due));
                return Ok(Outcome::Failed(Failure::of_error(&error)));
            }
        };
        let Some(due) = due else {
            return Ok(Outcome::Commit(Done::writes(armed(
                &*process, &id, &instance,
            )?)));
        };
        // A due deadline waits until the process runner has handled the instance's events
        // stored before it, ten worker rounds at most (spec 85–86).
        if self.waits(app, due) {
            return Ok(Outcome::Defer);
        }
        let correlation = instance.cause_of(due.field).map_or("", |(_, c)| c.as_str());
        // The scheduled run's span learns its correlation from the instance.
        self.outer.record("bounda.correlation_id", correlation);
        self.span = telemetry::process_span(
            process.aggregate(),
            process.name(),
            &id,
            Some(due.field),
            correlation,
            attempt,
        );
        let step = process
            .deadline_step(app, &id, &instance, due, None)
            .instrument(self.span.clone())
            .await;
        self.ran = Some((instance, due));
        Ok(match step {
            Ok(writes) => {
                let rejections = writes.staging.rejections.clone();
                Outcome::Commit(Done {
                    writes: step_writes(writes),
                    rejections,
                    after: None,
                })
            }
            Err(failure) => {
                self.mark_failed(&failure.message);
                Outcome::Failed(failure)
            }
        })
    }

    /// Whether the deadline due at `due.at` waits for the process runner, counting its rounds;
    /// it stays counted in `waiting_deadlines` while it waits.
    fn waits(&self, app: &App, due: DueDeadline) -> bool {
        let mut waiting = app.waiting();
        if !self.unhandled.holds(self.process.name(), &self.id, due.at) {
            waiting.remove(&self.key);
            return false;
        }
        let at = due.at.as_millis();
        let (moment, rounds) = waiting.entry(self.key.clone()).or_insert((at, 0));
        if *moment != at {
            (*moment, *rounds) = (at, 0);
        }
        *rounds += 1;
        if *rounds > MAX_WAIT_ROUNDS {
            waiting.remove(&self.key);
            return false;
        }
        true
    }
}

impl Work for DeadlineRun {
    fn execute<'a>(&'a mut self, app: &'a App, attempt: u32) -> BoxFuture<'a, Outcome> {
        let outer = self.outer.clone();
        Box::pin(
            async move {
                let outcome = Outcome::of(self.run(app, attempt).await);
                // Whatever the outcome but a wait, the entry no longer waits (spec 175).
                if !matches!(outcome, Outcome::Defer) {
                    app.waiting().remove(&self.key);
                }
                outcome
            }
            .instrument(outer),
        )
    }

    fn aggregate(&self) -> &'static str {
        self.process.aggregate()
    }

    /// The instance, and the aggregate instance it follows, which the step reads first.
    fn streams(&self) -> Vec<(String, String)> {
        vec![
            (stream_type(self.process.name()), self.id.clone()),
            (self.process.aggregate().to_owned(), self.id.clone()),
        ]
    }

    fn handler(&self) -> Option<(&'static str, String)> {
        Some(("process", self.process.name().to_owned()))
    }

    fn subject(&self) -> String {
        let deadline = match &self.ran {
            Some((_, due)) => format!("at `{}` ({})", due.field, due.at),
            None => format!("at its deadline of {}", self.armed_at),
        };
        format!(
            "process `{}` {deadline} of instance `{}`",
            self.process.name(),
            self.id
        )
    }

    fn process_step(&self) -> bool {
        true
    }

    /// The process fails with letter `deadline:<field>`, and `ProcessFailed` records the
    /// moment; a failing deadline points at the instance.
    fn give_up(
        &self,
        app: &App,
        failure: &Failure,
        attempts: u32,
        now: Instant,
    ) -> Result<WriteSet, Error> {
        let Some((instance, due)) = &self.ran else {
            // The instance could not be read: the letter says so, with the moment armed.
            let due = DueDeadline {
                at: self.armed_at,
                field: UNREADABLE_STATE,
            };
            let letter = deadline_letter(&*self.process, &self.id, due, failure, attempts, now);
            return Ok(WriteSet {
                dead_letters: vec![letter],
                ..WriteSet::default()
            });
        };
        let process = &*self.process;
        let letter = deadline_letter(process, &self.id, *due, failure, attempts, now);
        let failed = Lifecycle::Failed {
            letter_id: letter.id.clone(),
            at: Some(due.at),
            event_id: None,
        };
        // A failing deadline points at the instance.
        let append = lifecycle_at(app, process, &self.id, instance.version, failed, None)?;
        Ok(WriteSet {
            appends: vec![append],
            dead_letters: vec![letter],
            ..WriteSet::default()
        })
    }

    fn mark_failed(&self, message: &str) {
        telemetry::failed(&self.span, message);
        telemetry::failed(&self.outer, message);
    }
}
