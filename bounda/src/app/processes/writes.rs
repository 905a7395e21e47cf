//! What a process step writes besides its handler's commands: the step's write set, the
//! letters of a step given up on, and `ProcessFailed`.

use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::app::failure::Failure;
use crate::app::processes::ProcessRunner;
use crate::app::processes::instance::{Instance, Lifecycle, stream_type};
use crate::app::processes::step::{StepWrites, lifecycle_append};
use crate::ids::derived_id;
use crate::process::plan::DueDeadline;
use crate::store::{DeadLetter, LetterKind, Metadata, WriteSet};
use crate::{Error, Instant, RecordedEvent};

/// What a process letter keeps: the instance, and for a deadline's letter the deadline and the
/// moment that failed; what its retry reads back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LetterPayload {
    pub(crate) instance: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) deadline: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) at: Option<Instant>,
}

impl LetterPayload {
    /// The payload of `letter`, if it is a process letter's.
    pub(crate) fn of(letter: &DeadLetter) -> Option<LetterPayload> {
        serde_json::from_value(letter.payload.clone()?).ok()
    }

    fn to_json(&self) -> Option<serde_json::Value> {
        serde_json::to_value(self).ok()
    }
}

/// The write set of a step; the engine adds the settling of its claim.
pub(crate) fn step_writes(writes: StepWrites) -> WriteSet {
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
    set.snapshots.extend(writes.snapshot);
    set
}

/// The write that arms instance `id`'s deadline entry as its state says, when no lifecycle event
/// is written with it: fenced on the instance's version (an append of no events), so it is
/// written only while the instance has not stepped since it was read, and its row in the
/// instances index follows.
pub(crate) fn armed(
    process: &dyn ProcessRunner,
    id: &str,
    instance: &Instance,
) -> Result<WriteSet, Error> {
    let (schedule, unschedule) = process.arm(id, instance)?;
    Ok(WriteSet {
        appends: vec![crate::store::Append {
            aggregate_type: stream_type(process.name()),
            aggregate_id: id.to_owned(),
            expected_version: instance.version,
            events: Vec::new(),
        }],
        schedule: schedule.into_iter().collect(),
        unschedule: unschedule.into_iter().collect(),
        ..WriteSet::default()
    })
}

/// One lifecycle event appended to instance `id` at `version`, pointing at the event it
/// concerns, or at the instance.
pub(crate) fn lifecycle_at(
    app: &App,
    process: &dyn ProcessRunner,
    id: &str,
    version: u64,
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
    let (append, _) =
        lifecycle_append(app, process.name(), id, version, vec![lifecycle], &metadata)?;
    Ok(append)
}

/// The letter of deadline `due` of instance `id` failing for good: `deadline:<field>`.
pub(crate) fn deadline_letter(
    process: &dyn ProcessRunner,
    id: &str,
    due: DueDeadline,
    failure: &Failure,
    attempts: u32,
    now: Instant,
) -> DeadLetter {
    let subject = format!("deadline:{}", due.field);
    let letter_id = derived_id(&[
        "process",
        process.name(),
        id,
        &subject,
        &due.at.as_millis().to_string(),
        "dead-letter",
    ]);
    DeadLetter {
        event_type: Some(subject),
        aggregate_type: Some(process.aggregate().to_owned()),
        aggregate_id: Some(id.to_owned()),
        payload: LetterPayload {
            instance: id.to_owned(),
            deadline: Some(due.field.to_owned()),
            at: Some(due.at),
        }
        .to_json(),
        ..failure.letter(
            letter_id,
            LetterKind::Process,
            process.name(),
            attempts,
            now,
        )
    }
}

/// The letter of a process step on `event` that failed for good.
pub(crate) fn process_letter(
    process: &str,
    id: &str,
    event: &RecordedEvent,
    failure: &Failure,
    attempts: u32,
    now: Instant,
) -> DeadLetter {
    let letter_id = derived_id(&["process", process, id, &event.id, "dead-letter"]);
    DeadLetter {
        event_id: Some(event.id.clone()),
        event_type: Some(event.event_type.clone()),
        aggregate_type: Some(event.aggregate_type.clone()),
        aggregate_id: Some(event.aggregate_id.clone()),
        payload: LetterPayload {
            instance: id.to_owned(),
            deadline: None,
            at: None,
        }
        .to_json(),
        ..failure.letter(letter_id, LetterKind::Process, process, attempts, now)
    }
}
