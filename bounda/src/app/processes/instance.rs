//! A process instance: its lifecycle events, and what is folded from them.

use std::collections::HashMap;

use serde::de::value::MapDeserializer;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::app::engine::read_ahead;
use crate::process::Reached;
use crate::store::{Snapshot, Store, StreamTail};
use crate::{Error, Instant, RecordedEvent};

/// Instance `id` of process `name`, whose deadline fields are `fields` (name, serialised key):
/// its snapshot and the lifecycle events after it, or its whole stream when the snapshot is
/// missing or does not read. Read ahead with its run's wave when it was.
pub(crate) async fn load(
    store: &dyn Store,
    name: &str,
    fields: &[(&str, &str)],
    id: &str,
) -> Result<Option<Instance>, Error> {
    match read_ahead::take(&stream_type(name), id) {
        Some(tail) => from_tail(store, name, fields, tail).await,
        None => read(store, name, fields, id).await,
    }
}

/// Instance `id` of process `name`, as [`load`] reads it from the store.
async fn read(
    store: &dyn Store,
    name: &str,
    fields: &[(&str, &str)],
    id: &str,
) -> Result<Option<Instance>, Error> {
    let stream = stream_type(name);
    let base = store.snapshot(&stream, id).await?.and_then(base);
    let events = match &base {
        Some(base) => store.read_stream_after(&stream, id, base.version).await?,
        None => store.read_stream(&stream, id).await?,
    };
    Instance::fold(base, &events, fields)
}

/// Instances `ids` of process `name`, as [`load`] reads each, in the order of `ids`: their
/// snapshots and the events after them in one read of the store, and the whole stream of one
/// whose snapshot does not read. Each instance's fold is its own result, so one whose history
/// does not read fails alone.
#[allow(
    clippy::type_complexity,
    reason = "a page of loads, each its own result"
)]
pub(crate) async fn load_page(
    store: &dyn Store,
    name: &str,
    fields: &[(&str, &str)],
    ids: &[String],
) -> Result<Vec<(String, Result<Option<Instance>, Error>)>, Error> {
    let stream = stream_type(name);
    let mut instances = Vec::with_capacity(ids.len());
    for tail in store.read_tails(&stream, ids).await? {
        let id = tail.aggregate_id.clone();
        instances.push((id, from_tail(store, name, fields, tail).await));
    }
    Ok(instances)
}

/// The instance a stream read with its snapshot holds; its whole stream read again when the
/// snapshot does not read.
async fn from_tail(
    store: &dyn Store,
    name: &str,
    fields: &[(&str, &str)],
    tail: StreamTail,
) -> Result<Option<Instance>, Error> {
    match tail.snapshot {
        Some(snapshot) => match base(snapshot) {
            Some(base) => Instance::fold(Some(base), &tail.events, fields),
            None => read(store, name, fields, &tail.aggregate_id).await,
        },
        None => Instance::fold(None, &tail.events, fields),
    }
}

/// The instance a snapshot holds, when it reads as one at the snapshot's version.
fn base(snapshot: Snapshot) -> Option<Instance> {
    serde_json::from_value::<Instance>(snapshot.state)
        .ok()
        .filter(|instance| instance.version == snapshot.version)
        .map(|instance| Instance {
            snapshot_version: snapshot.version,
            ..instance
        })
}

/// How many lifecycle events an instance's stream may hold past its snapshot before a step
/// writes a new one. A snapshot only shortens the fold a load makes, so a step that writes one
/// every time pays a row and an encoding of the whole instance for a fold of one event saved;
/// most instances live a handful of steps, and never get one.
const SNAPSHOT_EVERY: u64 = 4;

/// Whether a step that leaves `after` should write its snapshot: when the events since the
/// snapshot it was read from reach [`SNAPSHOT_EVERY`].
pub(crate) fn snapshot_due(after: &Instance) -> bool {
    after.version.saturating_sub(after.snapshot_version) >= SNAPSHOT_EVERY
}

/// The snapshot of instance `id` of process `name`.
pub(crate) fn snapshot(name: &str, id: &str, instance: &Instance) -> Result<Snapshot, Error> {
    Ok(Snapshot {
        aggregate_type: stream_type(name),
        aggregate_id: id.to_owned(),
        version: instance.version,
        state: serde_json::to_value(instance).map_err(|source| Error::Encode {
            type_name: "process instance".to_owned(),
            source,
        })?,
    })
}

/// The stream type of process `name`'s instances.
pub(crate) fn stream_type(name: &str) -> String {
    format!("process:{name}")
}

/// A lifecycle event: what happened to an instance, with the state where it changed.
/// Stored with `system: true`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "payload")]
pub(crate) enum Lifecycle {
    /// The first starting event: the state after its handler, and the lifetime's end.
    #[serde(rename = "ProcessStarted", rename_all = "camelCase")]
    Started {
        state: Value,
        event_id: String,
        timeout_at: Option<Instant>,
    },
    /// An event handled.
    #[serde(rename = "ProcessHandled", rename_all = "camelCase")]
    Handled {
        event_id: String,
        event_type: String,
        aggregate_type: String,
        aggregate_id: String,
        state: Value,
    },
    /// A deadline ran.
    #[serde(rename = "ProcessDeadlineReached", rename_all = "camelCase")]
    DeadlineReached {
        field: String,
        at: Instant,
        state: Value,
        /// The zone the deadline was set in, for one set on the calendar: what `explain` and
        /// `preview` read its moment in. Absent from events older builds wrote.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        zone: Option<String>,
    },
    /// A completing event was handled.
    #[serde(rename = "ProcessCompleted", rename_all = "camelCase")]
    Completed { event_id: String },
    /// The lifetime ran out; `follow_ups` may still reach the instance.
    #[serde(rename = "ProcessTimedOut", rename_all = "camelCase")]
    TimedOut {
        at: Instant,
        state: Value,
        follow_ups: Vec<String>,
    },
    /// A step failed for good.
    #[serde(rename = "ProcessFailed", rename_all = "camelCase")]
    Failed {
        letter_id: String,
        at: Option<Instant>,
        event_id: Option<String>,
    },
    /// An event that arrived while the instance was failed.
    #[serde(rename = "ProcessEventParked", rename_all = "camelCase")]
    EventParked {
        event_id: String,
        event_type: String,
        aggregate_type: String,
        aggregate_id: String,
        /// When the parked event was stored: a deadline due before it runs first on retry.
        at: Instant,
    },
    /// A failed instance resumed.
    #[serde(rename = "ProcessResumed")]
    Resumed {},
}

impl Lifecycle {
    /// `at` in `zone`, as a person there reads it, when a deadline that came due was set in a
    /// zone this build knows.
    pub(crate) fn local(zone: Option<&str>, at: Instant) -> Option<String> {
        let zone = crate::calendar::Zone::named(zone?).ok()?;
        Some(zone.describe(at))
    }

    /// `ProcessHandled` of `event`, with the state the step left.
    pub(crate) fn handled(event: &RecordedEvent, state: Value) -> Lifecycle {
        Lifecycle::Handled {
            event_id: event.id.clone(),
            event_type: event.event_type.clone(),
            aggregate_type: event.aggregate_type.clone(),
            aggregate_id: event.aggregate_id.clone(),
            state,
        }
    }

    /// The stored event type and payload.
    pub(crate) fn encode(&self) -> Result<(String, Value), Error> {
        let encode = |source| Error::Encode {
            type_name: "process lifecycle event".to_owned(),
            source,
        };
        let mut tagged = match serde_json::to_value(self).map_err(encode)? {
            Value::Object(tagged) => tagged,
            other => {
                let shape =
                    format!("a lifecycle event encoded as {other}, not as its tag and payload");
                return Err(encode(serde::ser::Error::custom(shape)));
            }
        };
        let event_type = match tagged.remove("type") {
            Some(Value::String(event_type)) => event_type,
            _ => {
                return Err(encode(serde::ser::Error::custom(
                    "a lifecycle event encoded with no type",
                )));
            }
        };
        let payload = tagged.remove("payload").unwrap_or(Value::Null);
        Ok((event_type, payload))
    }

    /// Reads a stored lifecycle event: its type and payload read as the tag and content they
    /// were written from, the payload read where the event holds it rather than copied into a
    /// tagged value.
    pub(crate) fn decode(event: &RecordedEvent) -> Result<Lifecycle, Error> {
        event.readable()?;
        let tag = Value::String(event.event_type.clone());
        let tagged = [("type", &tag), ("payload", &event.payload)];
        let fields = MapDeserializer::<_, serde_json::Error>::new(tagged.into_iter());
        Lifecycle::deserialize(fields).map_err(|source| Error::InvalidPayload {
            aggregate: event.aggregate_type.clone(),
            event_type: event.event_type.clone(),
            event_id: event.id.clone(),
            version: event.metadata.schema_version,
            source,
        })
    }
}

/// Where a lifecycle event was stored: its id, its version in the instance's stream, its
/// correlation, and the version of the state's shape it carries.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stored<'a> {
    pub(crate) id: &'a str,
    pub(crate) version: u64,
    pub(crate) correlation: &'a str,
    pub(crate) state_version: u32,
}

/// The state version of a snapshot written before states had versions.
fn first_version() -> u32 {
    1
}

/// Where an instance stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    /// Running.
    Started,
    /// A completing event was handled.
    Completed,
    /// A step failed for good; its events are parked.
    Failed,
    /// Its lifetime ran out.
    TimedOut,
}

/// An event parked behind a failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Parked {
    pub(crate) event_id: String,
    /// When the parked event was stored: a deadline due before it runs first.
    pub(crate) parked_at: Instant,
}

/// What the instance's history says; kept as its stream's snapshot (serde, so a snapshot this
/// build cannot read is folded again from the stream).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Instance {
    pub(crate) status: Status,
    /// The state, as last written.
    pub(crate) state: Value,
    /// The version of the state's shape it was written at (`ProcessState::VERSION` of the
    /// build that wrote it); a snapshot from before versions is at 1.
    #[serde(default = "first_version")]
    pub(crate) state_version: u32,
    pub(crate) timeout_at: Option<Instant>,
    /// The stream's version: where the next lifecycle event goes.
    pub(crate) version: u64,
    /// The moments each deadline came due, in epoch milliseconds: a (field, moment) pair runs
    /// once.
    pub(crate) reached: Reached,
    /// Whether `ProcessStarted` was written (a starting event may fail before it is).
    pub(crate) started: bool,
    /// The lifecycle event whose step set each deadline's moment: its id and correlation.
    pub(crate) set_by: HashMap<String, (String, String)>,
    /// The lifecycle event whose step last changed the state: its id and correlation. What
    /// caused a deadline no step set under its name (a migration renamed or added it); absent
    /// from snapshots of older builds.
    #[serde(default)]
    pub(crate) changed_by: Option<(String, String)>,
    /// Events decided by `at_timeout`'s commands that may still reach the ended instance.
    pub(crate) follow_ups: Vec<String>,
    /// Events handled or parked, by id: a redelivery finds them done.
    pub(crate) seen: Vec<String>,
    /// The failure's letter, while failed.
    pub(crate) letter_id: Option<String>,
    /// What failed: the event's id, or the deadline's moment.
    pub(crate) failed_event: Option<String>,
    pub(crate) failed_at: Option<Instant>,
    /// Whether the failed step has since been run again successfully.
    pub(crate) failed_step_done: bool,
    /// Events parked behind the failure, in arrival order.
    pub(crate) parked: Vec<Parked>,
    /// The id of the last lifecycle event.
    pub(crate) last_id: Option<String>,
    /// The version of the snapshot it was read from, 0 when folded from the stream's start:
    /// how long the fold is that a load of it makes.
    #[serde(skip)]
    pub(crate) snapshot_version: u64,
}

impl Instance {
    /// The lifecycle event that caused deadline `field`'s moment, and its correlation: the step
    /// that set it; for a deadline no step set under its name (a state migration renamed or
    /// added it), the step that last changed the state, else the start. `None` only for an
    /// instance with no history.
    pub(crate) fn cause_of(&self, field: &str) -> Option<&(String, String)> {
        self.set_by
            .get(field)
            .or(self.changed_by.as_ref())
            .or_else(|| self.set_by.get(crate::process::TIMEOUT))
    }

    /// How many events wait parked behind the failure: the parked events, less the failed one
    /// itself when a parked event's step is what failed.
    pub(crate) fn parked_behind(&self) -> usize {
        let failed = self.failed_event.as_deref();
        self.parked
            .iter()
            .filter(|parked| Some(parked.event_id.as_str()) != failed)
            .count()
    }

    /// An instance with no history yet.
    pub(crate) fn empty() -> Instance {
        Instance {
            status: Status::Started,
            state: Value::Null,
            state_version: 1,
            timeout_at: None,
            version: 0,
            reached: Reached::default(),
            started: false,
            set_by: HashMap::new(),
            changed_by: None,
            follow_ups: Vec::new(),
            seen: Vec::new(),
            letter_id: None,
            failed_event: None,
            failed_at: None,
            failed_step_done: false,
            parked: Vec::new(),
            last_id: None,
            snapshot_version: 0,
        }
    }

    /// Folds an instance's stream onto `base` (its snapshot, or nothing); `None` when there is
    /// neither.
    pub(crate) fn fold(
        base: Option<Instance>,
        events: &[RecordedEvent],
        deadline_fields: &[(&str, &str)],
    ) -> Result<Option<Instance>, Error> {
        if base.is_none() && events.is_empty() {
            return Ok(None);
        }
        let mut instance = base.unwrap_or_else(Instance::empty);
        for event in events {
            let lifecycle = Lifecycle::decode(event)?;
            let (id, correlation) = (&event.id, &event.metadata.correlation_id);
            let stored = Stored {
                id,
                version: event.version,
                correlation,
                state_version: event.metadata.schema_version,
            };
            instance.apply(lifecycle, &stored, deadline_fields);
        }
        Ok(Some(instance))
    }

    /// Applies one lifecycle event, stored as `stored` says.
    pub(crate) fn apply(
        &mut self,
        lifecycle: Lifecycle,
        stored: &Stored<'_>,
        deadline_fields: &[(&str, &str)],
    ) {
        let Stored {
            id,
            version,
            correlation,
            state_version,
        } = *stored;
        let instance = self;
        let mut new_state = None;
        match lifecycle {
            Lifecycle::Started {
                state,
                event_id,
                timeout_at,
            } => {
                instance.timeout_at = timeout_at;
                instance.started = true;
                if instance.failed_event.as_ref() == Some(&event_id) {
                    instance.failed_step_done = true;
                }
                instance.seen.push(event_id);
                instance.set_by.insert(
                    crate::process::TIMEOUT.to_owned(),
                    (id.to_owned(), correlation.to_owned()),
                );
                new_state = Some(state);
            }
            Lifecycle::Handled {
                event_id, state, ..
            } => {
                if instance.failed_event.as_ref() == Some(&event_id) {
                    instance.failed_step_done = true;
                }
                // A parked event handled during a retry is drained (spec 113–114).
                instance.parked.retain(|parked| parked.event_id != event_id);
                instance.seen.push(event_id);
                new_state = Some(state);
            }
            Lifecycle::DeadlineReached {
                field, at, state, ..
            } => {
                if instance.status == Status::Failed && instance.failed_at == Some(at) {
                    instance.failed_step_done = true;
                }
                instance.reached.insert(&field, at);
                new_state = Some(state);
            }
            Lifecycle::Completed { event_id } => {
                instance.seen.push(event_id);
                instance.status = Status::Completed;
            }
            Lifecycle::TimedOut {
                at,
                state,
                follow_ups,
            } => {
                instance.reached.insert(crate::process::TIMEOUT, at);
                instance.status = Status::TimedOut;
                instance.follow_ups = follow_ups;
                new_state = Some(state);
            }
            Lifecycle::Failed {
                letter_id,
                at,
                event_id,
            } => {
                instance.status = Status::Failed;
                instance.letter_id = Some(letter_id);
                instance.failed_event = event_id;
                instance.failed_at = at;
                instance.failed_step_done = false;
            }
            Lifecycle::EventParked { event_id, at, .. } => {
                instance.seen.push(event_id.clone());
                instance.parked.push(Parked {
                    event_id,
                    parked_at: at,
                });
            }
            Lifecycle::Resumed {} => {
                instance.status = Status::Started;
                instance.letter_id = None;
                instance.failed_event = None;
                instance.failed_at = None;
                instance.parked.clear();
            }
        }
        if let Some(state) = new_state {
            if state != instance.state {
                instance.changed_by = Some((id.to_owned(), correlation.to_owned()));
            }
            // A deadline whose moment this step changed was set by it (spec 91).
            for (field, key) in deadline_fields {
                if state.get(*key) != instance.state.get(*key) {
                    instance
                        .set_by
                        .insert((*field).to_owned(), (id.to_owned(), correlation.to_owned()));
                }
            }
            instance.state = state;
            instance.state_version = state_version;
        }
        instance.version = version;
        instance.last_id = Some(id.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::InstanceStatus;

    /// The status the instances index reads from a lifecycle event's type.
    fn indexed(status: Status) -> InstanceStatus {
        match status {
            Status::Started => InstanceStatus::Running,
            Status::Completed => InstanceStatus::Completed,
            Status::Failed => InstanceStatus::Failed,
            Status::TimedOut => InstanceStatus::TimedOut,
        }
    }

    /// One lifecycle event of each kind, both ways a deadline's can be stored.
    fn every_kind() -> Vec<Lifecycle> {
        let at = Instant::from_millis(0).expect("a moment");
        let state = serde_json::json!({ "order": "o-1", "lines": [1, 2], "paidAt": null });
        vec![
            Lifecycle::Started {
                state: state.clone(),
                event_id: "e".into(),
                timeout_at: Some(at),
            },
            Lifecycle::Handled {
                event_id: "e".into(),
                event_type: "T".into(),
                aggregate_type: "A".into(),
                aggregate_id: "a".into(),
                state: state.clone(),
            },
            Lifecycle::DeadlineReached {
                field: "f".into(),
                at,
                state: state.clone(),
                zone: None,
            },
            Lifecycle::DeadlineReached {
                field: "f".into(),
                at,
                state: state.clone(),
                zone: Some("Europe/Paris".into()),
            },
            Lifecycle::Completed {
                event_id: "e".into(),
            },
            Lifecycle::TimedOut {
                at,
                state: state.clone(),
                follow_ups: Vec::new(),
            },
            Lifecycle::Failed {
                letter_id: "l".into(),
                at: None,
                event_id: None,
            },
            Lifecycle::EventParked {
                event_id: "e".into(),
                event_type: "T".into(),
                aggregate_type: "A".into(),
                aggregate_id: "a".into(),
                at,
            },
            Lifecycle::Resumed {},
        ]
    }

    // Issue 47: a lifecycle event reads back as it was written, its payload read where the
    // stored event holds it.
    #[test]
    fn each_lifecycle_event_reads_back_as_written() {
        for lifecycle in every_kind() {
            let (event_type, payload) = lifecycle.encode().expect("encodes");
            let event = RecordedEvent {
                id: "x".into(),
                aggregate_type: "process:p".into(),
                aggregate_id: "i".into(),
                event_type,
                version: 1,
                position: 1,
                timestamp: Instant::from_millis(0).expect("a moment"),
                payload,
                metadata: crate::event::Metadata::of_command("c"),
                unreadable: None,
            };
            assert_eq!(Lifecycle::decode(&event).expect("reads"), lifecycle);
        }
    }

    // Issue 24: the instances index reads the status of an instance from its lifecycle events'
    // types alone, as the fold does from the events themselves.
    #[test]
    fn the_index_reads_each_lifecycle_event_as_the_fold_does() {
        let events = every_kind();
        for before in [
            Status::Started,
            Status::Failed,
            Status::Completed,
            Status::TimedOut,
        ] {
            for lifecycle in &events {
                let (event_type, _) = lifecycle.encode().expect("encodes");
                let mut instance = Instance {
                    status: before,
                    ..Instance::empty()
                };
                let stored = Stored {
                    id: "x",
                    version: 1,
                    correlation: "c",
                    state_version: 1,
                };
                instance.apply(lifecycle.clone(), &stored, &[]);
                assert_eq!(
                    InstanceStatus::after(&event_type).unwrap_or(indexed(before)),
                    indexed(instance.status),
                    "{event_type} after {before:?}"
                );
            }
        }
    }
}
