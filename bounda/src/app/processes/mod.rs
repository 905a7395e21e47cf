//! Processes at run time: instances, their steps, and their deadlines.

pub(crate) mod deadline_run;
mod event_run;
pub(crate) mod explain;
pub(crate) mod instance;
pub(crate) mod pass;
pub(crate) mod rearm;
mod retry;
pub(crate) mod step;
mod view;
pub(crate) mod writes;

use std::marker::PhantomData;

use futures_util::future::BoxFuture;

use crate::aggregate::Aggregate;
use crate::app::App;
use crate::app::failure::Failure;
use crate::process::plan::{self, DueDeadline};
use crate::process::{Process, instance_of};
use crate::store::ScheduledEntry;
use crate::{Error, Instant, RecordedEvent};
use instance::{Instance, Status};
use step::{Route, StepWrites};

pub use instance::Status as ProcessStatus;
pub use rearm::{Drift, LostMoment, Rearm, RezonedDeadline};
pub use view::{ProcessInstance, StateProblem, UnreadableState};

/// The subscriber all processes share.
pub const PROCESSES: &str = "processes";

/// A registered process, its type erased.
pub(crate) trait ProcessRunner: Send + Sync {
    fn name(&self) -> &'static str;
    fn aggregate(&self) -> &'static str;
    /// Whether the process starts on, completes on or handles `event`.
    fn takes(&self, event: &RecordedEvent) -> bool {
        self.takes_key(&event.aggregate_type, &event.event_type)
    }
    /// Whether the process takes events of `event_type` of `aggregate_type`.
    fn takes_key(&self, aggregate_type: &str, event_type: &str) -> bool;
    fn instance_of(&self, event: &RecordedEvent) -> anyhow::Result<Option<String>>;
    /// The deadline fields: name and serialised key.
    fn deadline_fields(&self) -> Vec<(&'static str, &'static str)>;
    fn route(&self, instance: Option<&Instance>, event: &RecordedEvent) -> Route;
    /// The route of a parked or failed event, as if the instance were running.
    fn route_as_started(&self, instance: &Instance, event: &RecordedEvent) -> Route;
    /// The static name of deadline `field`, `timeout` included.
    fn field(&self, field: &str) -> Option<&'static str>;
    /// The ports it declares.
    fn declared(&self) -> crate::app::ports::Declared;
    fn event_step<'a>(
        &'a self,
        app: &'a App,
        id: &'a str,
        instance: Option<&'a Instance>,
        route: Route,
        event: &'a RecordedEvent,
        key: String,
    ) -> BoxFuture<'a, Result<StepWrites, Failure>>;
    /// The deadline due at `now`, if any.
    fn due(&self, instance: &Instance, now: Instant) -> Result<Option<DueDeadline>, Error>;
    /// Every pending deadline, soonest first, with its local time when it was set on the
    /// calendar.
    fn pending(&self, instance: &Instance) -> Result<Vec<plan::Described>, Error>;
    /// The pending deadlines set on the calendar that this build's zone rules would place
    /// elsewhere; none when the state does not read (reported as such elsewhere).
    fn rezoned(&self, instance: &Instance) -> Vec<plan::Rezoned>;
    /// Whether the instance's stored state reads as the process's state type: the stored
    /// fields it drops, or why it does not read.
    fn check_state(&self, instance: &Instance) -> Result<Vec<String>, Error>;
    /// `state`, stored at `version`, as this build reads it, stored again: what a migration
    /// makes of it.
    fn migrated(&self, version: u32, state: &serde_json::Value)
    -> Result<serde_json::Value, Error>;
    /// The instance's entry as its state says, or its removal.
    fn arm(
        &self,
        id: &str,
        instance: &Instance,
    ) -> Result<(Option<ScheduledEntry>, Option<String>), Error>;
    fn deadline_step<'a>(
        &'a self,
        app: &'a App,
        id: &'a str,
        instance: &'a Instance,
        due: DueDeadline,
        key: Option<String>,
    ) -> BoxFuture<'a, Result<StepWrites, Failure>>;
}

pub(crate) struct ProcessEntry<P>(PhantomData<fn() -> P>);

impl<P> ProcessEntry<P> {
    pub(crate) fn new() -> ProcessEntry<P> {
        ProcessEntry(PhantomData)
    }
}

impl<P: Process> ProcessRunner for ProcessEntry<P> {
    fn name(&self) -> &'static str {
        P::NAME
    }

    fn aggregate(&self) -> &'static str {
        <P::Aggregate as Aggregate>::NAME
    }

    fn takes_key(&self, aggregate_type: &str, event_type: &str) -> bool {
        P::STARTED_BY
            .iter()
            .chain(P::COMPLETED_BY)
            .chain(P::ON)
            .any(|key| key.aggregate == aggregate_type && key.event == event_type)
    }

    fn instance_of(&self, event: &RecordedEvent) -> anyhow::Result<Option<String>> {
        instance_of::<P>(event)
    }

    fn deadline_fields(&self) -> Vec<(&'static str, &'static str)> {
        step::deadline_fields::<P>()
    }

    fn route(&self, instance: Option<&Instance>, event: &RecordedEvent) -> Route {
        step::route::<P>(instance, event)
    }

    fn route_as_started(&self, instance: &Instance, event: &RecordedEvent) -> Route {
        // Failed before `ProcessStarted` was written: the retry starts it.
        if !instance.started {
            return step::route::<P>(None, event);
        }
        let mut running = instance.clone();
        running.status = Status::Started;
        running.seen.retain(|seen| *seen != event.id);
        step::route::<P>(Some(&running), event)
    }

    fn declared(&self) -> crate::app::ports::Declared {
        declared::<P>()
    }

    fn field(&self, field: &str) -> Option<&'static str> {
        P::DEADLINES
            .iter()
            .map(|deadline| deadline.name)
            .chain([crate::process::TIMEOUT])
            .find(|name| *name == field)
    }

    fn event_step<'a>(
        &'a self,
        app: &'a App,
        id: &'a str,
        instance: Option<&'a Instance>,
        route: Route,
        event: &'a RecordedEvent,
        key: String,
    ) -> BoxFuture<'a, Result<StepWrites, Failure>> {
        Box::pin(step::event_step::<P>(app, id, instance, route, event, key))
    }

    fn due(&self, instance: &Instance, now: Instant) -> Result<Option<DueDeadline>, Error> {
        let state: P = step::read_state(Some(instance))?;
        Ok(plan::due(
            &state,
            instance.timeout_at,
            &instance.reached,
            now,
        ))
    }

    fn check_state(&self, instance: &Instance) -> Result<Vec<String>, Error> {
        step::read_state::<P>(Some(instance))?;
        Ok(step::dropped_fields::<P>(instance))
    }

    fn migrated(
        &self,
        version: u32,
        state: &serde_json::Value,
    ) -> Result<serde_json::Value, Error> {
        step::write_state(&P::migrate(version, state)?)
    }

    fn pending(&self, instance: &Instance) -> Result<Vec<plan::Described>, Error> {
        let state: P = step::read_state(Some(instance))?;
        Ok(plan::described(
            &state,
            instance.timeout_at,
            &instance.reached,
        ))
    }

    fn rezoned(&self, instance: &Instance) -> Vec<plan::Rezoned> {
        match step::read_state::<P>(Some(instance)) {
            Ok(state) => plan::rezoned(&state, instance.timeout_at, &instance.reached),
            Err(_) => Vec::new(),
        }
    }

    fn arm(
        &self,
        id: &str,
        instance: &Instance,
    ) -> Result<(Option<ScheduledEntry>, Option<String>), Error> {
        // An instance that does not run has nothing armed, whatever its state: an ended one's
        // state need not read to settle it.
        if instance.status != instance::Status::Started {
            return Ok((None, Some(step::entry_key(P::NAME, id))));
        }
        let state: P = step::read_state(Some(instance))?;
        Ok(step::arm(
            id,
            &state,
            instance.status,
            instance.timeout_at,
            &instance.reached,
            None,
        ))
    }

    fn deadline_step<'a>(
        &'a self,
        app: &'a App,
        id: &'a str,
        instance: &'a Instance,
        due: DueDeadline,
        key: Option<String>,
    ) -> BoxFuture<'a, Result<StepWrites, Failure>> {
        Box::pin(step::deadline_step::<P>(app, id, instance, due, key))
    }
}

/// A pending deadline of one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingDeadline {
    /// The process.
    pub process: &'static str,
    /// The instance.
    pub instance: String,
    /// The deadline field, or `timeout`.
    pub field: &'static str,
    /// When it comes due.
    pub at: Instant,
    /// For a deadline set on the calendar, its local time and zone:
    /// `2026-03-30 09:00 Europe/Paris (07:00Z)`.
    pub local: Option<String>,
    /// Whether it came due and waits for the events stored before it.
    pub waiting: bool,
    /// The letter whose failure holds it: its instance failed, and nothing of it runs until the
    /// letter is retried (or its events wait parked for ever, should it be discarded).
    pub held_by: Option<String>,
    /// How its instance's scheduler entry disagrees with its state, when it does: the worker
    /// runs the instance's deadlines at the entry's moment, not the state's, until the entry is
    /// re-armed ([`App::rearm`]).
    pub drift: Option<Drift>,
    /// Whether its process or instance is paused: it does not run, due or not, until resumed.
    pub paused: bool,
}

impl Status {
    /// Whether the instance has ended: nothing of it runs but follow-ups.
    pub fn has_ended(self) -> bool {
        matches!(self, Status::Completed | Status::TimedOut)
    }

    /// As a person reads it: `running`, `completed`, `failed` or `timed out`.
    pub fn as_text(self) -> &'static str {
        match self {
            Status::Started => "running",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::TimedOut => "timed out",
        }
    }
}

/// The ports process `P` declares.
pub(crate) fn declared<P: crate::process::ProcessState>() -> crate::app::ports::Declared {
    crate::app::ports::Declared {
        kind: "process",
        name: P::NAME,
        ports: P::PORTS,
    }
}
