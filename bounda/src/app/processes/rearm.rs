//! The scheduler re-derived from state. An instance's one scheduler entry must be armed at its
//! earliest pending deadline (or its timeout), as `process::plan::next` computes it from the
//! stored state. A deploy can break that. For example, a build that renamed a deadline field
//! re-armed an entry at the timeout, and the build after it brought the field back. Here the
//! instances are compared with their entries, and an entry that disagrees is written again from
//! its state. One mechanism serves the worker's start, the operator's command, `check`, and
//! the reads that show an entry as disagreeing.

use std::collections::HashMap;
use std::sync::Arc;

use crate::app::App;
use crate::app::processes::ProcessRunner;
use crate::app::processes::instance::{self, Instance, Status, stream_type};
use crate::app::processes::step::entry_key;
use crate::app::processes::writes::armed;
use crate::process::plan::DueDeadline;
use crate::store::instances::DeadlinePayload;
use crate::store::{CommitError, ScheduledEntry};
use crate::{Error, Instant};

/// Instances whose ids are read per page.
const PAGE: usize = 500;

/// How long `lag` reuses the count of the last survey of every instance.
const DRIFT_COUNT_KEPT: std::time::Duration = std::time::Duration::from_secs(60);

/// Which instances to compare with their entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rearm<'a> {
    /// Every instance of every process of the app.
    All,
    /// Every instance of one process, by name.
    Process(&'a str),
    /// One instance: process name and instance id.
    Instance(&'a str, &'a str),
}

/// A running instance whose scheduler entry is not the one its stored state says.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Drift {
    /// The process.
    pub process: &'static str,
    /// The instance.
    pub instance: String,
    /// The moment its entry is armed at, or `None` when it has no entry.
    pub entry_at: Option<Instant>,
    /// When the scheduler will run the entry, when that is not the moment it is armed at (a
    /// hand edit of its due moment): it runs then, whatever it carries.
    pub runs_at: Option<Instant>,
    /// What its state says is next: the deadline (or `timeout`) and its moment, or `None` when
    /// nothing is pending.
    pub state_next: Option<DueDeadline>,
}

impl std::fmt::Display for Drift {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let entry = match (self.entry_at, self.runs_at) {
            (Some(at), Some(runs)) => {
                format!("its scheduler entry is armed at {at} but runs at {runs}")
            }
            (Some(at), None) => format!("its scheduler entry is armed at {at}"),
            (None, _) => "it has no scheduler entry".to_owned(),
        };
        match self.state_next {
            Some(DueDeadline { field, at }) => write!(
                f,
                "{entry}, but its state's next deadline is `{field}` at {at}: nothing of it runs before the entry, until the entry is re-armed from the state"
            ),
            None => write!(f, "{entry}, but its state has nothing pending"),
        }
    }
}

/// A moment an instance's stored state holds in a field this build's state does not read: a
/// deadline renamed without an alias, or removed, whose moment would be lost at the next step.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LostMoment {
    /// The process.
    pub process: &'static str,
    /// The instance.
    pub instance: String,
    /// The stored field.
    pub field: String,
    /// The moment it holds.
    pub at: Instant,
}

/// A pending deadline set in a zone whose rules changed since, in this build's zone database:
/// it keeps the instant it holds until a handler sets it again.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RezonedDeadline {
    /// The process.
    pub process: &'static str,
    /// The instance.
    pub instance: String,
    /// The deadline field.
    pub field: &'static str,
    /// The wall-clock reading it was set at, with the offset and zone of then:
    /// `2026-07-01T09:00:00+01:00[Europe/Paris]`.
    pub local: String,
    /// The instant it holds, and fires at.
    pub at: Instant,
    /// Where this build's rules for the zone put the reading.
    pub resolved: Instant,
}

/// What a look over the instances found.
#[derive(Debug, Default)]
pub(crate) struct Survey {
    /// The instances whose entry disagrees with their state.
    pub(crate) drifts: Vec<Drift>,
    /// The moments stored in fields this build does not read.
    pub(crate) lost: Vec<LostMoment>,
    /// The deadlines set in a zone whose rules changed since.
    pub(crate) rezoned: Vec<RezonedDeadline>,
    /// The open instances whose stored state this build does not read whole.
    pub(crate) states: Vec<crate::app::UnreadableState>,
    /// How many instances were read.
    pub(crate) instances: u64,
}

impl App {
    /// The running instances in `scope` whose scheduler entry disagrees with their stored
    /// state, with what each holds and what it should. Changes nothing. An instance whose
    /// state does not read is left out; [`unreadable_states`](App::unreadable_states) names it.
    pub async fn drifted(&self, scope: Rearm<'_>) -> Result<Vec<Drift>, Error> {
        let drifts = self.survey(scope).await?.drifts;
        if scope == Rearm::All {
            self.note_drifted(drifts.len() as u64);
        }
        Ok(drifts)
    }

    /// How many entries disagree with their state, from a survey at most a minute old: what
    /// `lag` reports without surveying every instance on each read.
    pub(crate) async fn drifted_count(&self) -> Result<u64, Error> {
        let recent = *self
            .inner
            .drifted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match recent {
            Some((at, count)) if at.elapsed() < DRIFT_COUNT_KEPT => Ok(count),
            _ => Ok(self.drifted(Rearm::All).await?.len() as u64),
        }
    }

    /// Keeps `count`, the entries a survey of every instance found disagreeing (less those it
    /// re-armed).
    pub(crate) fn note_drifted(&self, count: u64) {
        *self
            .inner
            .drifted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some((std::time::Instant::now(), count));
    }

    /// Re-arms the scheduler entry of each running instance in `scope` whose entry disagrees
    /// with its stored state, from that state: what a worker does when it starts, and what an
    /// operator asks for after a deploy. Returns what it changed. An entry a runner holds now
    /// is left to that runner, which re-derives it from the state when its run ends. An
    /// instance that steps meanwhile keeps the entry its step wrote.
    pub async fn rearm(&self, scope: Rearm<'_>) -> Result<Vec<Drift>, Error> {
        let drifts = self.survey(scope).await?.drifts;
        let found = drifts.len();
        let rearmed = self.rearm_drifted(drifts).await?;
        if scope == Rearm::All {
            self.note_drifted((found - rearmed.len()) as u64);
        } else if let Some((_, count)) = self
            .inner
            .drifted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_mut()
        {
            *count = count.saturating_sub(rearmed.len() as u64);
        }
        Ok(rearmed)
    }

    /// Re-arms each of `drifts` that still disagrees when it is read again; returns those it
    /// wrote.
    pub(crate) async fn rearm_drifted(&self, drifts: Vec<Drift>) -> Result<Vec<Drift>, Error> {
        let mut rearmed = Vec::new();
        for drift in drifts {
            let Some(process) = self.processes().find(|p| p.name() == drift.process) else {
                continue;
            };
            let entry = self
                .store()
                .scheduled(&entry_key(process.name(), &drift.instance))
                .await?;
            if let Some(drift) = self
                .rearm_one(process.as_ref(), &drift.instance, entry)
                .await?
            {
                rearmed.push(drift);
            }
        }
        Ok(rearmed)
    }

    /// Looks over the instances of `scope`: their entries against their states, and the
    /// moments their states hold in fields this build does not read.
    pub(crate) async fn survey(&self, scope: Rearm<'_>) -> Result<Survey, Error> {
        let processes: Vec<&Arc<dyn ProcessRunner>> = match scope {
            Rearm::All => self.processes().collect(),
            Rearm::Process(name) | Rearm::Instance(name, _) => {
                vec![self.processes().find(|p| p.name() == name).ok_or_else(|| {
                    Error::NotFound {
                        what: format!("process `{name}` in this app"),
                    }
                })?]
            }
        };
        let mut survey = Survey::default();
        for process in processes {
            let process: &dyn ProcessRunner = process.as_ref();
            if let Rearm::Instance(name, id) = scope {
                self.look(process, &[id.to_owned()], &mut survey).await?;
                if survey.instances == 0 {
                    return Err(Error::NotFound {
                        what: format!("instance `{id}` of process `{name}`"),
                    });
                }
                continue;
            }
            let stream = stream_type(process.name());
            let mut after: Option<String> = None;
            loop {
                let ids = self
                    .store()
                    .stream_ids(&stream, after.as_deref(), PAGE)
                    .await?;
                let Some(last) = ids.last() else { break };
                after = Some(last.clone());
                self.look(process, &ids, &mut survey).await?;
            }
        }
        Ok(survey)
    }

    /// Instances `ids` of `process` against their entries, noted in `survey` in the order of
    /// `ids`. The instances are read in one read of the store and the open ones' entries in
    /// another, by their keys, so a store a round trip away answers a page at once and memory
    /// stays bounded however many entries the scheduler holds; an ended instance has none to
    /// read.
    async fn look(
        &self,
        process: &dyn ProcessRunner,
        ids: &[String],
        survey: &mut Survey,
    ) -> Result<(), Error> {
        let fields = process.deadline_fields();
        let mut instances = Vec::new();
        for (id, loaded) in instance::load_page(self.store(), process.name(), &fields, ids).await? {
            match loaded {
                Ok(instance) => instances.push((id, instance)),
                Err(error) => {
                    survey.instances += 1;
                    survey.states.push(crate::app::UnreadableState {
                        process: process.name().to_owned(),
                        instance: id,
                        problem: crate::app::StateProblem::of_load(error)?,
                    });
                }
            }
        }
        let open: Vec<(String, Instance)> = instances
            .into_iter()
            .filter_map(|(id, instance)| Some((id, instance?)))
            .inspect(|_| survey.instances += 1)
            .filter(|(_, instance)| !instance.status.has_ended())
            .collect();
        let keys: Vec<String> = open
            .iter()
            .map(|(id, _)| entry_key(process.name(), id))
            .collect();
        let mut entries: HashMap<String, ScheduledEntry> = self
            .store()
            .scheduled_many(&keys)
            .await?
            .into_iter()
            .map(|entry| (entry.dedupe_key.clone(), entry))
            .collect();
        for ((id, instance), key) in open.iter().zip(&keys) {
            survey.lost.extend(lost_moments(process, id, instance));
            survey
                .rezoned
                .extend(
                    process
                        .rezoned(instance)
                        .into_iter()
                        .map(|moved| RezonedDeadline {
                            process: process.name(),
                            instance: id.clone(),
                            field: moved.due.field,
                            local: moved.local,
                            at: moved.due.at,
                            resolved: moved.resolved,
                        }),
                );
            let problem = match process.check_state(instance) {
                Err(error) => Some(crate::app::StateProblem::Unreadable(error.to_string())),
                Ok(dropped) if !dropped.is_empty() => {
                    Some(crate::app::StateProblem::Dropped(dropped))
                }
                Ok(_) => None,
            };
            if let Some(problem) = problem {
                survey.states.push(crate::app::UnreadableState {
                    process: process.name().to_owned(),
                    instance: id.clone(),
                    problem,
                });
            }
            let entry = entries.remove(key);
            survey
                .drifts
                .extend(drift_of(process, id, instance, entry.as_ref()));
        }
        Ok(())
    }

    /// Writes instance `id`'s entry from its state if it still disagrees with `entry`: the
    /// drift written, or `None` when it agrees now, a runner holds the entry, or the instance
    /// stepped meanwhile.
    async fn rearm_one(
        &self,
        process: &dyn ProcessRunner,
        id: &str,
        entry: Option<ScheduledEntry>,
    ) -> Result<Option<Drift>, Error> {
        let fields = process.deadline_fields();
        let Some(instance) = instance::load(self.store(), process.name(), &fields, id).await?
        else {
            return Ok(None);
        };
        let Some(drift) = drift_of(process, id, &instance, entry.as_ref()) else {
            return Ok(None);
        };
        // An entry a runner holds is its to settle: the run re-derives it from the state.
        let now = self.clock().now();
        let held = entry.as_ref().is_some_and(|entry| {
            entry.claim_id.is_some()
                && entry
                    .claimed_at
                    .is_some_and(|claimed| claimed + self.lease() > now)
        });
        if held {
            return Ok(None);
        }
        let Ok(writes) = armed(process, id, &instance) else {
            return Ok(None);
        };
        match self.commit(&writes).await {
            Ok(_) => {
                tracing::info!(
                    process = drift.process,
                    instance = %drift.instance,
                    "re-armed a scheduler entry from its state: {drift}"
                );
                Ok(Some(drift))
            }
            Err(CommitError::StreamMoved { .. }) => Ok(None),
            Err(other) => Err(crate::error::unwritten(
                "cannot re-arm a scheduler entry",
                other,
            )),
        }
    }
}

/// The moments `instance`'s stored state holds in top-level fields the shape of its version
/// does not read.
fn lost_moments(process: &dyn ProcessRunner, id: &str, instance: &Instance) -> Vec<LostMoment> {
    let Ok(dropped) = process.check_state(instance) else {
        return Vec::new();
    };
    dropped
        .into_iter()
        .filter_map(|field| {
            let value = instance.state.get(&field)?;
            // A moment, or a deadline set on the calendar (its reading names its instant).
            let at = serde_json::from_value::<crate::Deadline>(value.clone())
                .ok()?
                .moment()?;
            Some(LostMoment {
                process: process.name(),
                instance: id.to_owned(),
                field,
                at,
            })
        })
        .collect()
}

/// How `instance`'s `entry` disagrees with its state, if it does.
pub(crate) fn drift_of(
    process: &dyn ProcessRunner,
    id: &str,
    instance: &Instance,
    entry: Option<&ScheduledEntry>,
) -> Option<Drift> {
    if instance.status != Status::Started {
        return None;
    }
    let next = process
        .pending(instance)
        .ok()?
        .into_iter()
        .next()
        .map(|described| described.due);
    let entry_at = entry
        .and_then(DeadlinePayload::of)
        .and_then(|payload| Instant::from_millis(payload.at));
    // When the scheduler runs the entry: its due moment, which only a retry's back-off may
    // move past the moment it carries; a claimed entry is its runner's to settle.
    let runs_at = entry
        .filter(|entry| entry.attempts == 0 && entry.claim_id.is_none())
        .map(|entry| entry.execute_at)
        .filter(|runs| Some(*runs) != entry_at);
    let agrees = match (entry, next) {
        (None, None) => true,
        (Some(_), Some(next)) => entry_at == Some(next.at) && runs_at.is_none(),
        _ => false,
    };
    (!agrees).then(|| Drift {
        process: process.name(),
        instance: id.to_owned(),
        entry_at,
        runs_at,
        state_next: next,
    })
}
