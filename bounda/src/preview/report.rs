//! What a preview reports, read back from what the run stored: the log after the copy's head
//! and the letters filed since. Every figure is a stored fact, not a count the runtime kept on
//! the side, so a step that rolled back and ran again counts once.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::app::processes::instance::Lifecycle;
use crate::app::{App, RejectionRecord};
use crate::store::{DeadLetter, LetterFilter};
use crate::{Error, Instant};

use super::PAGE;

/// What running this build on a copy for a horizon did, per process and in total. A report
/// another build wrote reads with what it has: a field it lacks is empty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Where the simulated clock started: the moment the copy was taken.
    pub from: Instant,
    /// Where it stopped.
    pub until: Instant,
    /// The copy as this build reads it before the run (what `check` reports).
    #[serde(default)]
    pub check: CheckSummary,
    /// The totals.
    #[serde(default)]
    pub total: Totals,
    /// Per process, by name.
    #[serde(default)]
    pub processes: BTreeMap<String, ProcessSummary>,
    /// Each deadline that ran, in the order it ran.
    #[serde(default)]
    pub fired: Vec<Fired>,
    /// Each instance that ended, in order.
    #[serde(default)]
    pub ended: Vec<Ended>,
    /// Each command that decided events, in order.
    #[serde(default)]
    pub commands: Vec<Sent>,
    /// Each command that was rejected, in order.
    #[serde(default)]
    pub rejected: Vec<Rejected>,
    /// Events written by commands, by `Aggregate.EventType`.
    #[serde(default)]
    pub events: BTreeMap<String, u64>,
    /// Each dead letter filed.
    #[serde(default)]
    pub letters: Vec<Letter>,
    /// Each call the port doubles recorded, in order (see [`PortCalls`](super::PortCalls)).
    #[serde(default)]
    pub calls: Vec<super::PortCall>,
}

impl Report {
    /// A report of nothing yet, of a run from `from` to `until` on a copy `check` describes.
    pub(crate) fn empty(from: Instant, until: Instant, check: CheckSummary) -> Report {
        Report {
            from,
            until,
            check,
            total: Totals::default(),
            processes: BTreeMap::new(),
            fired: Vec::new(),
            ended: Vec::new(),
            commands: Vec::new(),
            rejected: Vec::new(),
            events: BTreeMap::new(),
            letters: Vec::new(),
            calls: Vec::new(),
        }
    }

    /// Whether the run filed no letter and the copy reads through this build.
    pub fn passes(&self) -> bool {
        self.letters.is_empty() && self.check.passes()
    }
}

/// What the check before the run found, counted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CheckSummary {
    /// Stored events that do not read through this build.
    pub unreadable_events: u64,
    /// Open instances whose state does not read or migrate.
    pub unreadable_states: u64,
    /// Instances holding moments in fields this build lost.
    pub lost_moments: u64,
    /// Scheduler entries that disagreed with their state (re-armed before the run).
    pub drifted_entries: u64,
    /// Scheduler entries nothing in this build runs.
    pub orphan_entries: u64,
}

impl CheckSummary {
    /// Whether nothing would fail.
    pub fn passes(&self) -> bool {
        self.unreadable_events == 0
            && self.unreadable_states == 0
            && self.lost_moments == 0
            && self.orphan_entries == 0
    }
}

/// The totals of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Totals {
    /// Deadlines that ran (timeouts included).
    pub deadlines_fired: u64,
    /// Commands that decided events.
    pub commands: u64,
    /// Commands rejected.
    pub rejected: u64,
    /// Events written by commands.
    pub events: u64,
    /// Dead letters filed.
    pub letters: u64,
    /// Instances that completed or timed out.
    pub instances_ended: u64,
    /// Instances that failed and wait for an operator.
    pub instances_failed: u64,
    /// Calls the port doubles recorded.
    pub port_calls: u64,
}

/// What one process did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProcessSummary {
    /// Deadlines that ran, by field.
    pub fired: BTreeMap<String, u64>,
    /// Instances started.
    pub started: u64,
    /// Instances that completed.
    pub completed: u64,
    /// Instances that timed out.
    pub timed_out: u64,
    /// Instances that failed.
    pub failed: u64,
    /// Commands its deadlines sent that decided events.
    pub commands: u64,
}

/// A deadline that ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fired {
    /// The process.
    pub process: String,
    /// The instance.
    pub instance: String,
    /// The deadline field (`timeout` for the lifetime).
    pub field: String,
    /// The moment it was due.
    pub due: Instant,
    /// For a deadline set on the calendar, that moment in its zone:
    /// `2026-03-30 09:00 Europe/Paris (07:00Z)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<String>,
    /// When it ran.
    pub ran: Instant,
}

/// How an instance ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Ending {
    /// A completing event was handled.
    Completed,
    /// Its lifetime ran out.
    TimedOut,
    /// A step failed for good: it waits for an operator.
    Failed,
}

/// An instance that ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ended {
    /// The process.
    pub process: String,
    /// The instance.
    pub instance: String,
    /// How.
    pub how: Ending,
    /// When.
    pub at: Instant,
}

/// A command that decided events: the events one cause appended to one aggregate instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sent {
    /// The aggregate type.
    pub aggregate: String,
    /// The aggregate instance.
    pub id: String,
    /// The event types it decided, in order.
    pub events: Vec<String>,
    /// When.
    pub at: Instant,
    /// What sent it: `Process.field` for a deadline, `event Aggregate.Type` for a reaction,
    /// `outside` for a command from outside the app.
    pub cause: String,
}

/// A rejected command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rejected {
    /// The command type.
    pub command: String,
    /// The rejection's code.
    pub code: String,
    /// The aggregate type.
    pub aggregate: String,
    /// The aggregate instance.
    pub id: String,
}

/// A dead letter the run filed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Letter {
    /// Its id.
    pub id: String,
    /// The handler or command type.
    pub handler: String,
    /// The aggregate instance concerned, if any.
    pub aggregate_id: Option<String>,
    /// Why.
    pub error: String,
}

/// Builds a report from the events after `head` and the letters not in `letters_before`.
pub(crate) async fn read(
    app: &App,
    head: u64,
    letters_before: &HashSet<String>,
    rejections: &[RejectionRecord],
    mut report: Report,
) -> Result<Report, Error> {
    // Lifecycle event ids of deadline steps, with the process and field: what their commands'
    // events name as their cause.
    let mut deadline_steps: HashMap<String, String> = HashMap::new();
    let mut positions = head;
    let mut sent: Vec<(String, Sent)> = Vec::new();
    loop {
        let events = app.store().read_all(positions, PAGE).await?;
        let Some(last) = events.last() else { break };
        positions = last.position;
        for event in events {
            if let Some(process) = event.aggregate_type.strip_prefix("process:") {
                let Ok(lifecycle) = Lifecycle::decode(&event) else {
                    continue;
                };
                let summary = report.processes.entry(process.to_owned()).or_default();
                let mut fired = |field: &str, due: Instant, zone: Option<&str>| {
                    *summary.fired.entry(field.to_owned()).or_default() += 1;
                    report.fired.push(Fired {
                        process: process.to_owned(),
                        instance: event.aggregate_id.clone(),
                        field: field.to_owned(),
                        due,
                        local: Lifecycle::local(zone, due),
                        ran: event.timestamp,
                    });
                    deadline_steps.insert(event.id.clone(), format!("{process}.{field}"));
                };
                let ending = match lifecycle {
                    Lifecycle::Started { .. } => {
                        summary.started += 1;
                        None
                    }
                    Lifecycle::DeadlineReached {
                        field, at, zone, ..
                    } => {
                        fired(&field, at, zone.as_deref());
                        None
                    }
                    Lifecycle::TimedOut { at, .. } => {
                        fired(crate::process::plan::TIMEOUT, at, None);
                        summary.timed_out += 1;
                        Some(Ending::TimedOut)
                    }
                    Lifecycle::Completed { .. } => {
                        summary.completed += 1;
                        Some(Ending::Completed)
                    }
                    Lifecycle::Failed { .. } => {
                        summary.failed += 1;
                        Some(Ending::Failed)
                    }
                    Lifecycle::Handled { .. }
                    | Lifecycle::EventParked { .. }
                    | Lifecycle::Resumed {} => None,
                };
                if let Some(how) = ending {
                    report.ended.push(Ended {
                        process: process.to_owned(),
                        instance: event.aggregate_id.clone(),
                        how,
                        at: event.timestamp,
                    });
                }
                continue;
            }
            if event.metadata.system {
                continue;
            }
            *report
                .events
                .entry(format!("{}.{}", event.aggregate_type, event.event_type))
                .or_default() += 1;
            // One cause appending to one instance is one command.
            let cause = event.metadata.causation_id.clone();
            match sent.last_mut() {
                Some((last_cause, last))
                    if *last_cause == cause
                        && last.aggregate == event.aggregate_type
                        && last.id == event.aggregate_id =>
                {
                    last.events.push(event.event_type.clone());
                }
                _ => sent.push((
                    cause,
                    Sent {
                        aggregate: event.aggregate_type.clone(),
                        id: event.aggregate_id.clone(),
                        events: vec![event.event_type.clone()],
                        at: event.timestamp,
                        cause: String::new(),
                    },
                )),
            }
        }
    }
    for (cause, mut command) in sent {
        command.cause = match deadline_steps.get(&cause) {
            Some(step) => {
                if let Some((process, _)) = step.split_once('.')
                    && let Some(summary) = report.processes.get_mut(process)
                {
                    summary.commands += 1;
                }
                step.clone()
            }
            None => match app.store().read_event(&cause).await? {
                Some(event) => format!("event {}.{}", event.aggregate_type, event.event_type),
                None => "outside".to_owned(),
            },
        };
        report.commands.push(command);
    }
    report.rejected = rejections
        .iter()
        .map(|r| Rejected {
            command: r.command_type.to_owned(),
            code: r.rejected.to_owned(),
            aggregate: r.aggregate_type.to_owned(),
            id: r.aggregate_id.clone(),
        })
        .collect();
    report.letters = app
        .dead_letters()
        .list(&LetterFilter::default())
        .await?
        .into_iter()
        .filter(|letter| !letters_before.contains(&letter.id))
        .map(|letter: DeadLetter| Letter {
            id: letter.id,
            handler: letter.handler,
            aggregate_id: letter.aggregate_id,
            error: letter.error_message,
        })
        .collect();
    report.total = Totals {
        deadlines_fired: report.fired.len() as u64,
        commands: report.commands.len() as u64,
        rejected: report.rejected.len() as u64,
        events: report.events.values().sum(),
        letters: report.letters.len() as u64,
        instances_ended: report
            .ended
            .iter()
            .filter(|e| e.how != Ending::Failed)
            .count() as u64,
        instances_failed: report
            .ended
            .iter()
            .filter(|e| e.how == Ending::Failed)
            .count() as u64,
        port_calls: report.calls.len() as u64,
    };
    Ok(report)
}
