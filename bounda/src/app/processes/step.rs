//! One step of one instance, as the runtime runs it: the handler in an attempt, the lifecycle
//! events that record it, and the instance's one scheduler entry.

use serde_json::Value;

use crate::aggregate::{Aggregate, EventKey};
use crate::app::App;
use crate::app::cause::Cause;
use crate::app::engine::read_ahead;
use crate::app::failure::Failure;
use crate::app::processes::instance::{self, Instance, Lifecycle, Status, stream_type};
use crate::app::reaction::{Attempt, Staging};
use crate::ids::derived_id;
use crate::process::Reached;
use crate::process::plan::{self, DueDeadline, TIMEOUT};
use crate::process::{self, Process, ProcessState};
use crate::store::instances::DeadlinePayload;
use crate::store::{Append, Metadata, NewEvent, ScheduledEntry, Snapshot};
use crate::{Duration, Error, Instant, RecordedEvent};

/// The scheduler's command type for process deadlines.
pub(crate) use crate::store::instances::{PROCESS_DEADLINE, entry_key};

/// What an event means to an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// Nothing: no instance, an ended one, or nothing to do.
    Skip,
    /// Start the instance, running the handler if there is one.
    Start,
    /// Run the handler, then complete if it completes.
    Handle,
    /// Complete without a handler.
    Complete,
    /// A follow-up of the timeout: run the handler on the ended instance.
    FollowUp,
    /// The instance failed: park the event.
    Park,
}

/// Where `event` goes for `instance` of `P`.
pub(crate) fn route<P: Process>(instance: Option<&Instance>, event: &RecordedEvent) -> Route {
    let has = |keys: &[EventKey]| keys.iter().any(|k| event.has_key(*k));
    let (starts, completes, handles) = (has(P::STARTED_BY), has(P::COMPLETED_BY), has(P::ON));
    let Some(instance) = instance else {
        return if starts { Route::Start } else { Route::Skip };
    };
    if instance.seen.contains(&event.id) {
        return Route::Skip;
    }
    match instance.status {
        Status::Completed => Route::Skip,
        Status::TimedOut if handles && instance.follow_ups.contains(&event.id) => Route::FollowUp,
        Status::TimedOut => Route::Skip,
        Status::Failed if handles || completes => Route::Park,
        Status::Failed => Route::Skip,
        Status::Started if handles => Route::Handle,
        Status::Started if completes => Route::Complete,
        Status::Started => Route::Skip,
    }
}

/// What a step writes, ready for a write set.
pub(crate) struct StepWrites {
    pub(crate) lifecycle: Append,
    pub(crate) staging: Staging,
    pub(crate) schedule: Option<ScheduledEntry>,
    pub(crate) unschedule: Option<String>,
    /// The instance once the step is written, for the next step to start from.
    pub(crate) snapshot: Option<Snapshot>,
}

/// The snapshot of instance `id` once `append` is written: `instance` with `lifecycle` (the
/// events of `append`, before encoding) applied; none while the stream is short enough past the
/// snapshot it was read from ([`instance::snapshot_due`]).
fn snapshot_after<P: ProcessState>(
    id: &str,
    instance: Option<&Instance>,
    lifecycle: Vec<Lifecycle>,
    append: &Append,
) -> Result<Option<Snapshot>, Error> {
    if lifecycle.is_empty() {
        return Ok(None);
    }
    let mut after = instance.cloned().unwrap_or_else(Instance::empty);
    let fields = deadline_fields::<P>();
    for (offset, (lifecycle, event)) in lifecycle.into_iter().zip(&append.events).enumerate() {
        let version = append.expected_version + offset as u64 + 1;
        let correlation = &event.metadata.correlation_id;
        let stored = instance::Stored {
            id: &event.id,
            version,
            correlation,
            state_version: event.metadata.schema_version,
        };
        after.apply(lifecycle, &stored, &fields);
    }
    if !instance::snapshot_due(&after) {
        return Ok(None);
    }
    Ok(Some(instance::snapshot(P::NAME, id, &after)?))
}

/// The instance's scheduler entry at its earliest pending deadline, or its removal.
/// An entry waiting for the retry of that same deadline is left as it is, so a step does not
/// undo its back-off.
pub(crate) fn arm<P: ProcessState>(
    id: &str,
    state: &P,
    status: Status,
    timeout_at: Option<Instant>,
    reached: &Reached,
    existing: Option<&ScheduledEntry>,
) -> (Option<ScheduledEntry>, Option<String>) {
    let key = entry_key(P::NAME, id);
    let next = (status == Status::Started)
        .then(|| plan::next(state, timeout_at, reached))
        .flatten();
    let Some(next) = next else {
        return (None, Some(key));
    };
    let at = next.at.as_millis();
    let armed_at = |entry: &ScheduledEntry| DeadlinePayload::of(entry).map(|payload| payload.at);
    if existing.is_some_and(|entry| entry.attempts > 0 && armed_at(entry) == Some(at)) {
        return (None, None);
    }
    let payload = DeadlinePayload {
        process: P::NAME.to_owned(),
        instance: id.to_owned(),
        at,
    };
    (
        Some(ScheduledEntry::new(
            key,
            PROCESS_DEADLINE,
            id,
            payload.to_json(),
            next.at,
        )),
        None,
    )
}

/// Lifecycle events as an append to the instance's stream.
pub(crate) fn lifecycle_append(
    app: &App,
    process: &str,
    id: &str,
    version: u64,
    events: Vec<Lifecycle>,
    metadata: &Metadata,
) -> Result<(Append, Vec<String>), Error> {
    let now = app.clock().now();
    let mut ids = Vec::new();
    let events = events
        .iter()
        .map(|lifecycle| {
            let (event_type, payload) = lifecycle.encode()?;
            let event_id = app.next_id();
            ids.push(event_id.clone());
            Ok(NewEvent {
                id: event_id,
                event_type,
                payload,
                timestamp: now,
                metadata: metadata.clone(),
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    Ok((
        Append {
            aggregate_type: stream_type(process),
            aggregate_id: id.to_owned(),
            expected_version: version,
            events,
        },
        ids,
    ))
}

/// `P`'s deadline fields: name and serialised key.
pub(crate) fn deadline_fields<P: ProcessState>() -> Vec<(&'static str, &'static str)> {
    P::DEADLINES
        .iter()
        .map(|field| (field.name, field.key))
        .collect()
}

/// The state stored in `instance`, read as `P`; a refused state fails for good, naming where
/// it failed. Fields added since it was stored read as the state's `Default` has them
/// (`#[process]` fills missing fields from [`ProcessState::initial`]).
pub(crate) fn read_state<P: ProcessState>(instance: Option<&Instance>) -> Result<P, Error> {
    match instance {
        None => Ok(P::initial()),
        // Failed before it started: nothing was stored yet.
        Some(instance) if instance.state.is_null() => Ok(P::initial()),
        Some(instance) => P::migrate(instance.state_version, &instance.state),
    }
}

/// The fields stored in `instance`'s state that the shape of its version does not read
/// (`shipping.adress`): renamed without an alias, or removed. Empty when the state does not
/// read at all.
pub(crate) fn dropped_fields<P: ProcessState>(instance: &Instance) -> Vec<String> {
    P::dropped(instance.state_version, &instance.state)
}

/// The state as stored.
pub(crate) fn write_state<P: ProcessState>(state: &P) -> Result<Value, Error> {
    serde_json::to_value(state).map_err(|source| Error::Encode {
        type_name: P::NAME.to_owned(),
        source,
    })
}

/// The process's lifetime: its own `timeout`, else the configuration's.
pub(crate) fn lifetime<P: ProcessState>(app: &App) -> Duration {
    P::TIMEOUT.unwrap_or_else(|| {
        app.config()
            .for_aggregate(<P::Aggregate as Aggregate>::NAME)
            .processes_timeout
    })
}

/// Runs a handler future within the process handler's time limit, a panic counted as a
/// failure with its message.
async fn guarded<P: ProcessState, T>(
    app: &App,
    handler: impl std::future::Future<Output = anyhow::Result<T>>,
) -> Result<T, Failure> {
    let limit = app
        .config()
        .for_aggregate(<P::Aggregate as Aggregate>::NAME)
        .processes_handler_timeout;
    crate::app::failure::guarded(app.clock(), P::NAME, limit, handler).await
}

/// An event step of `P`: what `event` does to instance `id`.
pub(crate) async fn event_step<P: Process>(
    app: &App,
    id: &str,
    instance: Option<&Instance>,
    route: Route,
    event: &RecordedEvent,
    key: String,
) -> Result<StepWrites, Failure> {
    let fail = |error: Error| Failure::of_error(&error);
    let mut state: P = read_state(instance).map_err(fail)?;
    let cause = Cause::of_event(event);
    let attempt = Attempt::new(app, key, cause, super::declared::<P>());
    let now = app.clock().now();
    // A start records the initial state, then what its handler made of it (spec 62–63).
    let initial = match route {
        Route::Start => Some(write_state(&state).map_err(fail)?),
        _ => None,
    };
    let mut has_handler = false;
    if matches!(route, Route::Start | Route::Handle | Route::FollowUp) {
        let handled = process::step::handle_event_in(&mut state, id, event, now, Some(&attempt));
        has_handler = guarded::<P, _>(app, handled).await?;
    }
    let staging = attempt.finish();
    if let Some(failure) = staging.failure.clone() {
        return Err(failure);
    }
    let stored = write_state(&state).map_err(fail)?;
    let completes = P::COMPLETED_BY.iter().any(|k| event.has_key(*k));
    let (mut lifecycle, status, timeout_at) = match route {
        Route::Start => {
            let timeout_at = Some(event.timestamp + lifetime::<P>(app));
            let mut events = vec![Lifecycle::Started {
                state: initial.unwrap_or_else(|| stored.clone()),
                event_id: event.id.clone(),
                timeout_at,
            }];
            if has_handler {
                events.push(Lifecycle::handled(event, stored));
            }
            if completes {
                events.push(Lifecycle::Completed {
                    event_id: event.id.clone(),
                });
            }
            let status = if completes {
                Status::Completed
            } else {
                Status::Started
            };
            (events, status, timeout_at)
        }
        Route::Handle | Route::FollowUp => {
            let handled = Lifecycle::handled(event, stored);
            let instance = instance.map(|i| (i.status, i.timeout_at));
            let (status, timeout_at) = instance.unwrap_or((Status::Started, None));
            // A follow-up never completes the process again (spec 100).
            if completes && route == Route::Handle {
                let events = vec![
                    handled,
                    Lifecycle::Completed {
                        event_id: event.id.clone(),
                    },
                ];
                (events, Status::Completed, timeout_at)
            } else {
                (vec![handled], status, timeout_at)
            }
        }
        Route::Complete => {
            let timeout_at = instance.and_then(|i| i.timeout_at);
            let events = vec![Lifecycle::Completed {
                event_id: event.id.clone(),
            }];
            (events, Status::Completed, timeout_at)
        }
        Route::Park => {
            let timeout_at = instance.and_then(|i| i.timeout_at);
            let events = vec![Lifecycle::EventParked {
                event_id: event.id.clone(),
                event_type: event.event_type.clone(),
                aggregate_type: event.aggregate_type.clone(),
                aggregate_id: event.aggregate_id.clone(),
                at: event.timestamp,
            }];
            (events, Status::Failed, timeout_at)
        }
        Route::Skip => (Vec::new(), Status::Started, None),
    };
    // Lifecycle events point straight at the event they handled (spec 144).
    let metadata = Metadata {
        correlation_id: event.metadata.correlation_id.clone(),
        causation_id: event.id.clone(),
        depth: event.metadata.depth,
        schema_version: P::VERSION,
        system: true,
    };
    let version = instance.map_or(0, |i| i.version);
    let lifecycle = std::mem::take(&mut lifecycle);
    let (append, _) =
        lifecycle_append(app, P::NAME, id, version, lifecycle.clone(), &metadata).map_err(fail)?;
    let snapshot = snapshot_after::<P>(id, instance, lifecycle, &append).map_err(fail)?;
    // A parked or followed-up instance keeps its entry as it is: failed deadlines wait, ended
    // ones never come due (spec 87, 101).
    let (schedule, unschedule) = match route {
        Route::Park | Route::FollowUp => (None, None),
        _ => {
            let key = entry_key(P::NAME, id);
            let existing = match read_ahead::take_entry(&key) {
                Some(entry) => entry,
                None => app
                    .store()
                    .scheduled(&key)
                    .await
                    .map_err(|e| fail(e.into()))?,
            };
            let reached = instance.map(|i| i.reached.clone()).unwrap_or_default();
            arm(id, &state, status, timeout_at, &reached, existing.as_ref())
        }
    };
    Ok(StepWrites {
        lifecycle: append,
        staging,
        schedule,
        unschedule,
        snapshot,
    })
}

/// A deadline step of `P`: the handler of `due`, and `ProcessDeadlineReached` or, for the
/// timeout, `ProcessTimedOut` with its follow-ups.
pub(crate) async fn deadline_step<P: Process>(
    app: &App,
    id: &str,
    instance: &Instance,
    due: DueDeadline,
    key: Option<String>,
) -> Result<StepWrites, Failure> {
    let fail = |error: Error| Failure::of_error(&error);
    let mut state: P = read_state(Some(instance)).map_err(fail)?;
    // Caused by the lifecycle event whose step set the moment, in its correlation (spec 91).
    let instance_stream = format!("process:{}:{id}", P::NAME);
    let (set_by, correlation) = instance
        .cause_of(due.field)
        .cloned()
        .unwrap_or_else(|| (instance_stream.clone(), instance_stream));
    let lifecycle_id = app.next_id();
    // The lifecycle event written now starts a chain at depth 0 (spec 90); the commands its
    // handler sends are caused by it, one hop deeper, as any reaction's are (spec 144).
    let cause = Cause {
        correlation_id: correlation.clone(),
        causation_id: lifecycle_id.clone(),
        depth: 1,
    };
    // The same key on every automatic retry; an operator's retry passes a new one (spec 137–138).
    let subject = format!("{id}:deadline:{}:{}", due.field, due.at.as_millis());
    let key = key.unwrap_or_else(|| derived_id(&["process", P::NAME, &subject]));
    let attempt = Attempt::new(app, key, cause, super::declared::<P>());
    // The followed instance is read before the handler runs: a stream that does not read (an
    // event from a newer build, a payload its type lost) fails the step before the handler has
    // sent a message or charged a card.
    attempt
        .preload::<P::Aggregate>(id)
        .await
        .map_err(|error| Failure::of_error(&error))?;
    // The zone the deadline was set in, before its handler sets the next.
    let zone = process::plan::deadline_of(&state, due.field)
        .and_then(crate::Deadline::on_calendar)
        .map(|civil| civil.zone().name().to_owned());
    let now = app.clock().now();
    let ran = process::step::run_deadline_in(&mut state, id, due, now, Some(&attempt));
    guarded::<P, _>(app, ran).await?;
    let staging = attempt.finish();
    if let Some(failure) = staging.failure.clone() {
        return Err(failure);
    }
    let stored = write_state(&state).map_err(fail)?;
    let (lifecycle, status) = if due.field == TIMEOUT {
        // Follow-ups: events decided now that a handler of the process takes, except those
        // that start it; delayed commands are not decided now, so never follow-ups (spec 98–99).
        let follow_ups = staging
            .appends
            .iter()
            .flat_map(|append| {
                append.events.iter().filter(move |event| {
                    let key = |k: &EventKey| {
                        k.aggregate == append.aggregate_type && k.event == event.event_type
                    };
                    P::ON.iter().any(key) && !P::STARTED_BY.iter().any(key)
                })
            })
            .map(|event| event.id.clone())
            .collect();
        let timed_out = Lifecycle::TimedOut {
            at: due.at,
            state: stored,
            follow_ups,
        };
        (timed_out, Status::TimedOut)
    } else {
        // A handler that left its deadline at or before the moment that came due failed in
        // `run_deadline` (spec 84).
        let reached = Lifecycle::DeadlineReached {
            field: due.field.to_owned(),
            at: due.at,
            state: stored,
            zone,
        };
        (reached, Status::Started)
    };
    let metadata = Metadata {
        correlation_id: correlation,
        causation_id: set_by,
        depth: 0,
        schema_version: P::VERSION,
        system: true,
    };
    let (mut append, _) = lifecycle_append(
        app,
        P::NAME,
        id,
        instance.version,
        vec![lifecycle.clone()],
        &metadata,
    )
    .map_err(fail)?;
    // The lifecycle event's id is the one the commands named as their cause.
    if let Some(event) = append.events.first_mut() {
        event.id = lifecycle_id;
    }
    let snapshot =
        snapshot_after::<P>(id, Some(instance), vec![lifecycle], &append).map_err(fail)?;
    // This step's own entry is released in the same write set: re-arm from scratch, the pair
    // that just came due counting as reached.
    let mut reached = instance.reached.clone();
    reached.insert(due.field, due.at);
    let (schedule, unschedule) = arm(id, &state, status, instance.timeout_at, &reached, None);
    Ok(StepWrites {
        lifecycle: append,
        staging,
        schedule,
        unschedule,
        snapshot,
    })
}
