//! A check before a deploy: every stored event and every open instance read through this
//! build, and every scheduler entry matched with what runs it. It reports what would fail,
//! without changing anything. Events are read a page at a time and instances one at a time, so
//! memory stays bounded however large the store is.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::app::App;
use crate::app::policy_run::{POLICY_RUN, PolicyRunPayload};
use crate::app::processes::rearm::{LostMoment, RezonedDeadline};
use crate::app::processes::step::PROCESS_DEADLINE;
use crate::app::{Drift, Rearm, UnreadableState};
use crate::store::ScheduledEntry;
use crate::store::instances::DeadlinePayload;
use crate::store::retry_requests::LETTER_RETRY;
use crate::{Error, RecordedEvent};

/// Events read per page.
const PAGE: usize = 1_000;

/// What [`App::preflight`] found: the store as this build would read it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Preflight {
    /// The events read.
    pub events: u64,
    /// The process instances read.
    pub instances: u64,
    /// Event types whose stored events this build does not read: each with how many, the
    /// first, and why.
    pub unreadable_events: Vec<EventProblem>,
    /// Aggregates with stored events that no command of this build decides on: their events
    /// are not read here. Not a failure, since an app may leave an aggregate to another.
    pub unknown_aggregates: Vec<String>,
    /// Open instances whose stored state does not read, or drops stored fields.
    pub unreadable_states: Vec<UnreadableState>,
    /// Moments stored in state fields this build does not read: a runner refuses to start
    /// while any is left.
    pub lost_moments: Vec<LostMoment>,
    /// Pending deadlines set in a zone whose rules this build's zone database changed: each
    /// fires at the instant it holds, not where the new rules put its wall-clock reading,
    /// until a handler sets it again. Not a failure: reported so an operator knows which
    /// reminders will read an hour off.
    pub rezoned_deadlines: Vec<RezonedDeadline>,
    /// The release of the zone database this build bundles (`2026f`), which
    /// `rezoned_deadlines` were read with.
    pub zone_database: &'static str,
    /// Scheduler entries that disagree with their instance's state (what they carry, or when
    /// they run): until re-armed, their deadlines do not run when the state says. `rearm` re-arms
    /// them, and so does a runner when it starts.
    pub drifted_entries: Vec<Drift>,
    /// Scheduler entries that nothing in this build runs: a command, policy or process it no
    /// longer has. Each would become a dead letter when it comes due.
    pub orphan_entries: Vec<OrphanEntries>,
    /// Scheduler entries whose stored row does not read (a payload or context that is not
    /// JSON, a due moment that does not parse): each runs nothing, and becomes a dead letter
    /// keeping what is stored when it is claimed; one whose moment does not parse may never be.
    pub unreadable_entries: Vec<UnreadableEntry>,
}

impl Preflight {
    /// Whether nothing would fail: no event, state or entry this build cannot handle, and no
    /// entry that disagrees with its state (a deadline that would not run when the state says
    /// until it is re-armed).
    pub fn passes(&self) -> bool {
        self.problems() == 0
    }

    /// How many problems [`passes`](Preflight::passes) counts.
    pub fn problems(&self) -> usize {
        self.unreadable_events.len()
            + self.unreadable_states.len()
            + self.lost_moments.len()
            + self.orphan_entries.len()
            + self.unreadable_entries.len()
            + self.drifted_entries.len()
    }
}

/// Stored events of one type that this build does not read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventProblem {
    /// The aggregate type.
    pub aggregate: String,
    /// The event type, as stored.
    pub event_type: String,
    /// How many such events do not read.
    pub count: u64,
    /// The first of them.
    pub first_event: String,
    /// Its stream, `Aggregate:id`.
    pub stream: String,
    /// Why the first does not read.
    pub reason: String,
}

/// Scheduler entries of one kind that nothing in this build runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OrphanEntries {
    /// The command, policy or process they are for.
    pub runs: String,
    /// How many.
    pub count: u64,
    /// What is missing.
    pub reason: String,
}

/// A scheduler entry whose stored row does not read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UnreadableEntry {
    /// Its key.
    pub key: String,
    /// What it runs, as stored.
    pub command_type: String,
    /// Which column does not read, why, and its text as stored.
    pub reason: String,
}

impl App {
    /// Reads every stored event and every open process instance through this build, and
    /// matches every scheduler entry with what runs it: what a deploy of this build would meet.
    /// Changes nothing. Run it on a copy of production before a deploy; the operator command
    /// `check` prints it.
    pub async fn preflight(&self) -> Result<Preflight, Error> {
        let mut report = Preflight::default();
        self.check_events(&mut report).await?;
        let survey = if self.processes().next().is_some() {
            self.survey(Rearm::All).await?
        } else {
            Default::default()
        };
        report.instances = survey.instances;
        report.unreadable_states = survey.states;
        report.lost_moments = survey.lost;
        report.rezoned_deadlines = survey.rezoned;
        report.zone_database = crate::calendar::ZONE_DATABASE;
        report.drifted_entries = survey.drifts;
        self.check_entries(&mut report).await?;
        Ok(report)
    }

    /// Every stored event read as its type, a page at a time.
    async fn check_events(&self, report: &mut Preflight) -> Result<(), Error> {
        let mut problems: BTreeMap<(String, String), EventProblem> = BTreeMap::new();
        let mut unknown = std::collections::BTreeSet::new();
        let mut after = 0;
        loop {
            let events = self.store().read_all(after, PAGE).await?;
            let Some(last) = events.last() else { break };
            after = last.position;
            for event in events {
                report.events += 1;
                // The runtime's own lifecycle events are read by the instances' survey.
                if event.metadata.system {
                    continue;
                }
                let Some(reason) = self.why_unread(&event, &mut unknown) else {
                    continue;
                };
                problems
                    .entry((event.aggregate_type.clone(), event.event_type.clone()))
                    .and_modify(|problem| problem.count += 1)
                    .or_insert_with(|| EventProblem {
                        stream: format!("{}:{}", event.aggregate_type, event.aggregate_id),
                        aggregate: event.aggregate_type,
                        event_type: event.event_type,
                        count: 1,
                        first_event: event.id,
                        reason,
                    });
            }
        }
        report.unreadable_events = problems.into_values().collect();
        report.unknown_aggregates = unknown.into_iter().collect();
        Ok(())
    }

    /// Why `event` does not read as its type in this build, if it does not; an aggregate the
    /// build has no command for is noted in `unknown`.
    fn why_unread(
        &self,
        event: &RecordedEvent,
        unknown: &mut std::collections::BTreeSet<String>,
    ) -> Option<String> {
        if let Err(error) = event.readable() {
            return Some(error.to_string());
        }
        let shapes = &self.inner.shapes;
        let Some(shape) = shapes.of(&event.aggregate_type, &event.event_type) else {
            if shapes.has_aggregate(&event.aggregate_type) {
                return Some(format!(
                    "aggregate `{}` has no event type `{}` in this build",
                    event.aggregate_type, event.event_type
                ));
            }
            unknown.insert(event.aggregate_type.clone());
            return None;
        };
        let error = (shape.bring_up)(event.metadata.schema_version, event.payload.clone()).err()?;
        Some(event.shape_error(error).to_string())
    }

    /// Every scheduler entry, a page at a time: those whose row does not read, and those
    /// nothing in this build runs, by what they are for.
    async fn check_entries(&self, report: &mut Preflight) -> Result<(), Error> {
        let mut orphans: BTreeMap<String, OrphanEntries> = BTreeMap::new();
        for (command_type, _) in self.store().scheduled_types().await? {
            let runtime =
                [PROCESS_DEADLINE, POLICY_RUN, LETTER_RETRY].contains(&command_type.as_str());
            let missing = !runtime && self.command_runner(&command_type).is_none();
            let mut after: Option<String> = None;
            loop {
                let page = self
                    .store()
                    .scheduled_page(&command_type, after.as_deref(), PAGE)
                    .await?;
                let Some(last) = page.last() else { break };
                after = Some(last.dedupe_key.clone());
                for entry in page {
                    if let Some(unreadable) = &entry.unreadable {
                        report.unreadable_entries.push(UnreadableEntry {
                            key: entry.dedupe_key.clone(),
                            command_type: entry.command_type.clone(),
                            reason: unreadable.to_string(),
                        });
                    } else if missing {
                        note(
                            &mut orphans,
                            format!("command `{command_type}`"),
                            1,
                            "this build has no command of that name",
                        );
                    } else if let Some((runs, reason)) =
                        runtime.then(|| self.orphan_of(&entry)).flatten()
                    {
                        note(&mut orphans, runs, 1, reason);
                    }
                }
            }
        }
        report.orphan_entries = orphans.into_values().collect();
        Ok(())
    }

    /// What `entry`, a process deadline or a delayed policy run, is for, if this build has
    /// nothing that runs it, and why.
    fn orphan_of(&self, entry: &ScheduledEntry) -> Option<(String, &'static str)> {
        // A requested retry is run by any worker: it names a letter, not a handler.
        if entry.command_type == LETTER_RETRY {
            return None;
        }
        if entry.command_type == PROCESS_DEADLINE {
            let Some(payload) = DeadlinePayload::of(entry) else {
                return Some((
                    "a process deadline".to_owned(),
                    "its entry does not read as a deadline",
                ));
            };
            return (!self.processes().any(|p| p.name() == payload.process)).then(|| {
                (
                    format!("process `{}`", payload.process),
                    "this build has no process of that name",
                )
            });
        }
        match serde_json::from_value::<PolicyRunPayload>(entry.payload.clone()) {
            Ok(payload) if self.policies().any(|p| p.name() == payload.policy) => None,
            Ok(payload) => Some((
                format!("policy `{}`", payload.policy),
                "this build has no policy of that name",
            )),
            Err(_) => Some((
                "a delayed policy run".to_owned(),
                "its entry does not read as a policy run",
            )),
        }
    }
}

/// Adds `count` entries for `runs` to `orphans`.
fn note(orphans: &mut BTreeMap<String, OrphanEntries>, runs: String, count: u64, reason: &str) {
    orphans
        .entry(runs.clone())
        .and_modify(|orphan| orphan.count += count)
        .or_insert(OrphanEntries {
            runs,
            count,
            reason: reason.to_owned(),
        });
}
