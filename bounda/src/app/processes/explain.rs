//! The story of one process instance, for a person or a page: each step of its stream with what
//! caused it and what it changed, then what is pending, parked and lettered now.

use serde::Serialize;
use serde_json::Value;

use crate::app::App;
use crate::process::Process;
use crate::store::LetterStatus;
use crate::{Error, Instant, RecordedEvent};

use super::deadline_run::Unhandled;
use super::instance::{Instance, Lifecycle, Status, stream_type};

/// One instance's history and present, as [`App::explain`] reads it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explained {
    /// The process.
    pub process: String,
    /// The instance.
    pub instance: String,
    /// Where it stands.
    pub status: Status,
    /// When its lifetime runs out, while it runs.
    pub timeout_at: Option<Instant>,
    /// Every step, oldest first.
    pub steps: Vec<Step>,
    /// The deadlines pending now, soonest first.
    pub pending: Vec<PendingNow>,
    /// How its scheduler entry disagrees with its state, when it does: its deadlines run at the
    /// entry's moment, not the state's, until the entry is re-armed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<super::Drift>,
    /// Why the pending deadlines are unknown: the stored state does not read as this build's
    /// state type (the steps are told all the same).
    pub unreadable: Option<String>,
    /// Events parked behind a failure, in arrival order.
    pub parked: Vec<ParkedEvent>,
    /// The dead letters of its failed steps, oldest first.
    pub letters: Vec<LetterNow>,
    /// The pause that holds it, its own or its process's: nothing of it runs until resumed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused: Option<crate::store::Pause>,
    /// Where the relays published its aggregate's events.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub published: Vec<crate::app::PublishedTo>,
}

/// One lifecycle step.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// Where it is in the global log.
    pub position: u64,
    /// When it was stored.
    pub at: Instant,
    /// What happened.
    pub what: StepKind,
    /// The event behind it, for a step an event caused (read back from the log).
    pub cause: Option<StepCause>,
    /// The correlation the step ran in.
    pub correlation_id: String,
    /// The state's fields it changed (deadlines apart), by path: `reminders`, `address.city`.
    pub changes: Vec<FieldChange>,
    /// The deadlines it set, moved or cleared.
    pub deadlines: Vec<DeadlineChange>,
    /// When the state before it was stored by an older version of the state's shape: how this
    /// build's migration read it. The step's own changes are told against the migrated state,
    /// so a field the migration renamed is not told as the step's.
    pub migrated: Option<Migrated>,
}

/// A state read through a migration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Migrated {
    /// The version the state was stored at.
    pub from: u32,
    /// The version the step wrote.
    pub to: u32,
    /// What the migration changed, field by field (a renamed field is one gone, one added).
    pub changes: Vec<FieldChange>,
}

/// What a step was.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum StepKind {
    /// Started by an event.
    Started,
    /// An event handled.
    Handled,
    /// A deadline reached.
    #[serde(rename_all = "camelCase")]
    DeadlineReached {
        /// The deadline field.
        field: String,
        /// The moment it was set for.
        due: Instant,
        /// For a deadline set on the calendar, that moment in its zone:
        /// `2026-03-30 09:00 Europe/Paris (07:00Z)`.
        #[serde(skip_serializing_if = "Option::is_none")]
        local: Option<String>,
    },
    /// Ended by a completing event.
    Completed,
    /// Ended by its lifetime running out.
    #[serde(rename_all = "camelCase")]
    TimedOut {
        /// The moment the lifetime ran out.
        due: Instant,
    },
    /// A step failed for good, filing a letter.
    #[serde(rename_all = "camelCase")]
    Failed {
        /// The letter.
        letter_id: String,
        /// The deadline moment that failed, when a deadline did.
        deadline: Option<Instant>,
    },
    /// An event arrived while it was failed, and waits.
    Parked,
    /// Running again after its letter's retry.
    Resumed,
}

/// The event behind a step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepCause {
    /// Its id.
    pub event_id: String,
    /// Its type, if it is still in the log.
    pub event_type: Option<String>,
    /// Its stream, `aggregate:id`, if it is still in the log.
    pub stream: Option<String>,
    /// The correlation it belongs to, if it is still in the log.
    pub correlation_id: Option<String>,
}

/// A state field a step changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldChange {
    /// Its path in the state: `reminders`, `address.city`.
    pub field: String,
    /// Before (`null` when it was not there).
    pub from: Value,
    /// After (`null` when it is gone).
    pub to: Value,
}

/// A deadline a step set, moved or cleared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeadlineChange {
    /// The deadline field.
    pub field: String,
    /// Its moment before, if it was set.
    pub from: Option<Instant>,
    /// Its moment after, if it is set.
    pub to: Option<Instant>,
}

impl Step {
    /// What happened, for a person: `started by OrderPlaced Order:o-1 (<event id>)`,
    /// `deadline reminder reached (due <moment>)`.
    pub fn describe(&self) -> String {
        let cause = self.cause.as_ref().map(|cause| {
            let what = cause
                .event_type
                .as_deref()
                .unwrap_or("an event no longer in the log");
            let stream = cause
                .stream
                .as_deref()
                .map(|s| format!(" {s}"))
                .unwrap_or_default();
            format!("{what}{stream} ({})", cause.event_id)
        });
        let cause = cause.as_deref().unwrap_or("-");
        match &self.what {
            StepKind::Started => format!("started by {cause}"),
            StepKind::Handled => format!("handled {cause}"),
            StepKind::DeadlineReached { field, due, local } => match local {
                Some(local) => format!("deadline {field} reached (due {local})"),
                None => format!("deadline {field} reached (due {due})"),
            },
            StepKind::Completed => format!("completed by {cause}"),
            StepKind::TimedOut { due } => format!("timed out (its lifetime ended {due})"),
            StepKind::Failed {
                letter_id,
                deadline,
            } => match deadline {
                Some(due) => format!("failed at the deadline due {due}: letter {letter_id}"),
                None => format!("failed on {cause}: letter {letter_id}"),
            },
            StepKind::Parked => format!("parked {cause}"),
            StepKind::Resumed => "resumed".to_owned(),
        }
    }

    /// What the step changed, a line each: its deadlines (`moment` shows each of their moments),
    /// then its state's fields (`reminders: 0 → 1`).
    pub fn details(&self, moment: impl Fn(Option<Instant>) -> String) -> Vec<String> {
        let migrated = self.migrated.iter().flat_map(|migrated| {
            migrated.changes.iter().map(|change| {
                format!(
                    "migrated from version {} to {}: {}: {} → {}",
                    migrated.from, migrated.to, change.field, change.from, change.to
                )
            })
        });
        migrated
            .chain(self.deadlines.iter().map(|change| match change.verb() {
                "set" => format!("{} set to {}", change.field, moment(change.to)),
                "moved" => format!(
                    "{} moved from {} to {}",
                    change.field,
                    moment(change.from),
                    moment(change.to)
                ),
                _ => format!("{} cleared (was {})", change.field, moment(change.from)),
            }))
            .chain(
                self.changes
                    .iter()
                    .map(|change| format!("{}: {} → {}", change.field, change.from, change.to)),
            )
            .collect()
    }
}

impl DeadlineChange {
    /// `set`, `moved` or `cleared`.
    pub fn verb(&self) -> &'static str {
        match (self.from, self.to) {
            (None, _) => "set",
            (Some(_), Some(_)) => "moved",
            (Some(_), None) => "cleared",
        }
    }
}

/// A deadline pending now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingNow {
    /// The deadline field, or `timeout`.
    pub field: String,
    /// When it comes due.
    pub at: Instant,
    /// For a deadline set on the calendar, its local time and zone:
    /// `2026-03-30 09:00 Europe/Paris (07:00Z)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local: Option<String>,
    /// Whether it came due and waits for the instance's events stored before it.
    pub waiting: bool,
    /// The letter whose failure holds it: nothing of the instance runs until it is retried.
    #[serde(rename = "heldBy", skip_serializing_if = "Option::is_none")]
    pub held_by: Option<String>,
}

/// An event parked behind a failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ParkedEvent {
    /// Its id.
    pub event_id: String,
    /// Its type.
    pub event_type: String,
    /// When it was stored.
    pub at: Instant,
}

/// A dead letter of one of its steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LetterNow {
    /// Its id.
    pub id: String,
    /// Where it stands.
    pub status: LetterStatus,
    /// What failed: the event's type, or `deadline:<field>`.
    pub failed: Option<String>,
    /// The error.
    pub error: String,
    /// Runs made before giving up.
    pub attempts: u32,
}

impl App {
    /// The story of instance `id` of process `P`: see [`explain_named`](App::explain_named).
    pub async fn explain<P: Process>(&self, id: &str) -> Result<Option<Explained>, Error> {
        self.explain_named(P::NAME, id).await
    }

    /// The story of instance `id` of the process named `process`: each step with its time, the
    /// event or deadline behind it, the state's fields it changed and the deadlines it set,
    /// moved or cleared; then the deadlines pending now, the events parked and the letters.
    /// `None` if the instance never started; an error naming the app's processes if it has
    /// none of that name.
    pub async fn explain_named(&self, process: &str, id: &str) -> Result<Option<Explained>, Error> {
        let Some(runner) = self.processes().find(|p| p.name() == process) else {
            let known: Vec<&str> = self.processes().map(|p| p.name()).collect();
            return Err(Error::NotFound {
                what: format!(
                    "process `{process}` (this app's processes: {})",
                    known.join(", ")
                ),
            });
        };
        let fields = runner.deadline_fields();
        let stream = self.store().read_stream(&stream_type(process), id).await?;
        if stream.is_empty() {
            return Ok(None);
        }
        let mut instance = Instance::empty();
        let mut steps: Vec<Step> = Vec::with_capacity(stream.len());
        let mut parked_types = Vec::new();
        let mut letter_ids: Vec<String> = Vec::new();
        // The start, until its handler's step: the runtime stores a start as `ProcessStarted`
        // then `ProcessHandled` of the same event, which a person reads as one step.
        let mut starting: Option<(String, Value)> = None;
        for event in &stream {
            let lifecycle = Lifecycle::decode(event)?;
            let mut before = instance.state.clone();
            let before_version = instance.state_version;
            let (what, cause_id) = describe(&lifecycle);
            let handles_start = matches!(
                (&lifecycle, &starting),
                (Lifecycle::Handled { event_id, .. }, Some((started, _))) if event_id == started
            );
            if let Lifecycle::Failed { letter_id, .. } = &lifecycle
                && !letter_ids.contains(letter_id)
            {
                letter_ids.push(letter_id.clone());
            }
            if let Lifecycle::EventParked {
                event_id,
                event_type,
                ..
            } = &lifecycle
            {
                parked_types.push((event_id.clone(), event_type.clone()));
            }
            let correlation = &event.metadata.correlation_id;
            let stored = super::instance::Stored {
                id: &event.id,
                version: event.version,
                correlation,
                state_version: event.metadata.schema_version,
            };
            instance.apply(lifecycle, &stored, &fields);
            if handles_start
                && let (Some((_, start_state)), Some(start)) = (starting.take(), steps.last_mut())
            {
                let merged = step(
                    event,
                    StepKind::Started,
                    None,
                    &start_state,
                    &instance.state,
                    &fields,
                );
                start.changes = merged.changes;
                start.deadlines = merged.deadlines;
                continue;
            }
            starting = match (&what, &cause_id) {
                (StepKind::Started, Some(event_id)) => Some((event_id.clone(), before.clone())),
                _ => None,
            };
            let cause = match cause_id {
                Some(cause_id) => Some(self.cause(cause_id).await?),
                None => None,
            };
            // A state stored by an older shape is told as this build's migration reads it, and
            // the step's changes against that.
            let mut migrated = None;
            if instance.state_version != before_version
                && !before.is_null()
                && let Ok(read) = runner.migrated(before_version, &before)
            {
                let mut changes = Vec::new();
                diff("", &before, &read, &mut changes, &|_: &str| false);
                migrated = Some(Migrated {
                    from: before_version,
                    to: instance.state_version,
                    changes,
                });
                before = read;
            }
            let mut told = step(event, what, cause, &before, &instance.state, &fields);
            told.migrated = migrated;
            steps.push(told);
        }
        // A state this build does not read still has a story: its pending deadlines are what is
        // unknown, and say why.
        let unhandled = Unhandled::read(self).await?;
        let (pending, unreadable) =
            match self.pending_of(runner.as_ref(), id, &instance, &unhandled) {
                Ok(pending) => (pending, None),
                Err(error) => (Vec::new(), Some(error.to_string())),
            };
        let parked = instance
            .parked
            .iter()
            .map(|parked| ParkedEvent {
                event_id: parked.event_id.clone(),
                event_type: parked_types
                    .iter()
                    .find(|(event_id, _)| *event_id == parked.event_id)
                    .map(|(_, event_type)| event_type.clone())
                    .unwrap_or_default(),
                at: parked.parked_at,
            })
            .collect();
        let letters = self.letters_of(letter_ids).await?;
        let entry = self
            .store()
            .scheduled(&super::step::entry_key(runner.name(), id))
            .await?;
        let drift = super::rearm::drift_of(runner.as_ref(), id, &instance, entry.as_ref());
        Ok(Some(Explained {
            process: process.to_owned(),
            instance: id.to_owned(),
            status: instance.status,
            timeout_at: instance
                .timeout_at
                .filter(|_| instance.status == Status::Started),
            steps,
            pending,
            drift,
            unreadable,
            parked,
            letters,
            paused: self.paused().await?.instance(process, id).cloned(),
            published: self.published_of(runner.aggregate(), id).await?,
        }))
    }

    /// The event `id` as a step's cause: what the log still says of it.
    async fn cause(&self, id: String) -> Result<StepCause, Error> {
        let event = self.read_event(&id).await?;
        Ok(StepCause {
            event_type: event.as_ref().map(|e| e.event_type.clone()),
            stream: event
                .as_ref()
                .map(|e| format!("{}:{}", e.aggregate_type, e.aggregate_id)),
            correlation_id: event.map(|e| e.metadata.correlation_id),
            event_id: id,
        })
    }

    /// The deadlines `instance` (instance `id` of `runner`) has pending, soonest first, the first
    /// marked waiting while it is due and an unhandled event of the instance holds it back.
    fn pending_of(
        &self,
        runner: &dyn super::ProcessRunner,
        id: &str,
        instance: &Instance,
        unhandled: &Unhandled,
    ) -> Result<Vec<PendingNow>, Error> {
        // A failed instance's deadlines are held by its letter: they run, as its state says,
        // once the letter is retried.
        let held_by = match instance.status {
            Status::Started => None,
            Status::Failed => instance.letter_id.clone(),
            Status::Completed | Status::TimedOut => return Ok(Vec::new()),
        };
        let now = self.clock().now();
        let mut dues = runner.pending(instance)?;
        dues.sort_by_key(|described| described.due.at);
        Ok(dues
            .into_iter()
            .enumerate()
            .map(
                |(index, crate::process::plan::Described { due, local })| PendingNow {
                    field: due.field.to_owned(),
                    at: due.at,
                    local,
                    waiting: held_by.is_none()
                        && index == 0
                        && unhandled.holds_due(runner.name(), id, due.at, now),
                    held_by: held_by.clone(),
                },
            )
            .collect())
    }

    /// The letters the instance's failed steps filed, in the order they were filed: read one by
    /// one, so the cost is the instance's own, however many letters the process has.
    async fn letters_of(&self, ids: Vec<String>) -> Result<Vec<LetterNow>, Error> {
        let mut letters = Vec::with_capacity(ids.len());
        for id in ids {
            let Some(letter) = self.dead_letters().get(&id).await? else {
                tracing::warn!(letter = %id, "a failed step's letter is no longer stored");
                continue;
            };
            letters.push(LetterNow {
                id: letter.id,
                status: letter.status,
                failed: letter.event_type,
                error: letter.error_message,
                attempts: letter.attempts,
            });
        }
        Ok(letters)
    }
}

/// What `lifecycle` was, and the id of the event behind it, if an event was.
fn describe(lifecycle: &Lifecycle) -> (StepKind, Option<String>) {
    match lifecycle {
        Lifecycle::Started { event_id, .. } => (StepKind::Started, Some(event_id.clone())),
        Lifecycle::Handled { event_id, .. } => (StepKind::Handled, Some(event_id.clone())),
        Lifecycle::DeadlineReached {
            field, at, zone, ..
        } => (
            StepKind::DeadlineReached {
                field: field.clone(),
                due: *at,
                local: Lifecycle::local(zone.as_deref(), *at),
            },
            None,
        ),
        Lifecycle::Completed { event_id } => (StepKind::Completed, Some(event_id.clone())),
        Lifecycle::TimedOut { at, .. } => (StepKind::TimedOut { due: *at }, None),
        Lifecycle::Failed {
            letter_id,
            at,
            event_id,
        } => (
            StepKind::Failed {
                letter_id: letter_id.clone(),
                deadline: *at,
            },
            event_id.clone(),
        ),
        Lifecycle::EventParked { event_id, .. } => (StepKind::Parked, Some(event_id.clone())),
        Lifecycle::Resumed {} => (StepKind::Resumed, None),
    }
}

/// The step of lifecycle event `event`, whose state went from `before` to `after`.
fn step(
    event: &RecordedEvent,
    what: StepKind,
    cause: Option<StepCause>,
    before: &Value,
    after: &Value,
    fields: &[(&str, &str)],
) -> Step {
    // A deadline's stored value that does not read as a moment is told as a plain field, with
    // the values as stored, rather than as a deadline that is not set.
    let moment = |state: &Value, key: &str| match state.get(key) {
        None => Some(None),
        Some(value) => serde_json::from_value::<crate::Deadline>(value.clone())
            .ok()
            .map(|deadline| deadline.moment()),
    };
    let read: Vec<(&str, &str, Option<Instant>, Option<Instant>)> = fields
        .iter()
        .filter_map(|(field, key)| Some((*field, *key, moment(before, key)?, moment(after, key)?)))
        .collect();
    let mut changes = Vec::new();
    diff("", before, after, &mut changes, &|path: &str| {
        read.iter().any(|(_, key, ..)| *key == path)
    });
    let deadlines = read
        .iter()
        .filter(|(_, _, from, to)| from != to)
        .map(|(field, _, from, to)| DeadlineChange {
            field: (*field).to_owned(),
            from: *from,
            to: *to,
        })
        .collect();
    Step {
        position: event.position,
        at: event.timestamp,
        what,
        cause,
        correlation_id: event.metadata.correlation_id.clone(),
        changes,
        deadlines,
        migrated: None,
    }
}

/// The fields whose values differ between `before` and `after`, by path, objects compared
/// field by field; top-level fields `skip` names are left out.
fn diff(
    path: &str,
    before: &Value,
    after: &Value,
    changes: &mut Vec<FieldChange>,
    skip: &dyn Fn(&str) -> bool,
) {
    if before == after {
        return;
    }
    match (before, after) {
        (Value::Object(old), Value::Object(new)) => {
            let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let child = match path {
                    "" => key.clone(),
                    _ => format!("{path}.{key}"),
                };
                if path.is_empty() && skip(key) {
                    continue;
                }
                let null = Value::Null;
                diff(
                    &child,
                    old.get(key).unwrap_or(&null),
                    new.get(key).unwrap_or(&null),
                    changes,
                    skip,
                );
            }
        }
        // The first state, whole: each of its fields, from nothing.
        (Value::Null, Value::Object(_)) if path.is_empty() => {
            diff(
                path,
                &Value::Object(Default::default()),
                after,
                changes,
                skip,
            );
        }
        _ => changes.push(FieldChange {
            field: path.to_owned(),
            from: before.clone(),
            to: after.clone(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_diff_names_each_changed_field_by_path_and_leaves_deadlines_out() {
        let mut changes = Vec::new();
        diff(
            "",
            &json!({ "reminders": 1, "address": { "city": "Oslo", "zip": "1" }, "due": null }),
            &json!({ "reminders": 2, "address": { "city": "Bergen", "zip": "1" }, "due": "x", "new": true }),
            &mut changes,
            &|key| key == "due",
        );
        let fields: Vec<&str> = changes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["address.city", "new", "reminders"]);
        assert_eq!((&changes[2].from, &changes[2].to), (&json!(1), &json!(2)));
        let mut first = Vec::new();
        diff("", &Value::Null, &json!({ "a": 1 }), &mut first, &|_| false);
        assert_eq!(first[0].field, "a");
    }

    #[test]
    fn a_deadline_change_says_set_moved_or_cleared() {
        let at = Instant::from_millis(0);
        let change = |from, to| DeadlineChange {
            field: "f".into(),
            from,
            to,
        };
        assert_eq!(change(None, at).verb(), "set");
        assert_eq!(change(at, at).verb(), "moved");
        assert_eq!(change(at, None).verb(), "cleared");
    }
}
