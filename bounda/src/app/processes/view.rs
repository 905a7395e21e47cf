//! Reading one process instance from outside: what a test, an operator or a page asks of it.

use crate::app::App;
use crate::process::Process;
use crate::{Error, Instant};

use super::instance::{Status, load};
use super::step::{deadline_fields, read_state};

/// One process instance, as its history has it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessInstance<P> {
    /// The state its last step wrote.
    pub state: P,
    /// Where it stands.
    pub status: Status,
    /// When its lifetime runs out, while it runs.
    pub timeout_at: Option<Instant>,
    /// How many events a failure holds parked behind it.
    pub parked: usize,
}

impl App {
    /// Instance `id` of process `P`, folded from its stream; `None` if it never started.
    pub async fn process_instance<P: Process>(
        &self,
        id: &str,
    ) -> Result<Option<ProcessInstance<P>>, Error> {
        let fields = deadline_fields::<P>();
        let Some(instance) = load(self.store(), P::NAME, &fields, id).await? else {
            return Ok(None);
        };
        Ok(Some(ProcessInstance {
            state: read_state::<P>(Some(&instance))?,
            status: instance.status,
            timeout_at: instance
                .timeout_at
                .filter(|_| instance.status == Status::Started),
            parked: instance.parked_behind(),
        }))
    }

    /// The open instances (running or failed) whose stored state this build's state type does
    /// not read whole, with what is wrong: a state that does not decode (naming the field),
    /// stored fields it drops (a field renamed without `#[serde(alias = "..")]`, or removed), or
    /// a process this app does not have. Run it in a test on a copy of a production file
    /// before deploying a changed state: `assert_eq!(app.unreadable_states().await?, vec![])`. Ended
    /// instances are left out: no step reads them again. It reads the whole log; an app
    /// without processes is an error, since it would check nothing.
    pub async fn unreadable_states(&self) -> Result<Vec<UnreadableState>, Error> {
        if self.processes().next().is_none() {
            return Err(Error::Configuration {
                message: "the app has no processes, so no state would be checked: is the crate that declares them linked (refer to it from the binary), or the app `only_listed` without them?".to_owned(),
            });
        }
        let mut instances = std::collections::BTreeSet::new();
        let mut after = 0;
        loop {
            let events = self.store().read_all(after, PAGE).await?;
            let Some(last) = events.last() else { break };
            after = last.position;
            for event in &events {
                if let Some(name) = event.aggregate_type.strip_prefix(STREAM_PREFIX) {
                    instances.insert((name.to_owned(), event.aggregate_id.clone()));
                }
            }
        }
        let mut unreadable = Vec::new();
        for (name, id) in instances {
            let process = self.processes().find(|process| process.name() == name);
            let fields = process.map(|process| process.deadline_fields());
            let instance =
                match load(self.store(), &name, fields.as_deref().unwrap_or(&[]), &id).await {
                    Ok(Some(instance)) => instance,
                    Ok(None) => continue,
                    Err(error) => {
                        unreadable.push(UnreadableState {
                            process: name,
                            instance: id,
                            problem: StateProblem::of_load(error)?,
                        });
                        continue;
                    }
                };
            if matches!(instance.status, Status::Completed | Status::TimedOut) {
                continue;
            }
            let problem = match process.map(|process| process.check_state(&instance)) {
                None => StateProblem::UnknownProcess,
                Some(Err(error)) => StateProblem::Unreadable(error.to_string()),
                Some(Ok(dropped)) if !dropped.is_empty() => StateProblem::Dropped(dropped),
                Some(Ok(_)) => continue,
            };
            unreadable.push(UnreadableState {
                process: name,
                instance: id,
                problem,
            });
        }
        Ok(unreadable)
    }
}

/// Events read per page while looking for instances.
const PAGE: usize = 1_000;

/// How a process instance's stream type begins: `process:<Name>`.
const STREAM_PREFIX: &str = "process:";

/// An open process instance whose stored state this build does not read whole.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UnreadableState {
    /// The process.
    pub process: String,
    /// The instance.
    pub instance: String,
    /// What is wrong.
    pub problem: StateProblem,
}

/// What is wrong with a stored state.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum StateProblem {
    /// It does not decode: the instance fails on its next step. The error names the field.
    Unreadable(String),
    /// It decodes, but these stored fields are not read: renamed without
    /// `#[serde(alias = "..")]` (their values are lost at the next step), or removed on purpose.
    Dropped(Vec<String>),
    /// No process of this app has its name: removed or renamed; its deadlines become letters.
    UnknownProcess,
}

impl StateProblem {
    /// `error`, met loading an instance, as the problem of its state when the instance's
    /// stored history does not read (a row that does not decode, a lifecycle event of another
    /// shape): a reader names that instance and reads on. Any other error (the store's) is
    /// returned, failing the read.
    pub(crate) fn of_load(error: Error) -> Result<StateProblem, Error> {
        match error {
            Error::UnreadableStored { .. } | Error::InvalidPayload { .. } => {
                Ok(StateProblem::Unreadable(error.to_string()))
            }
            other => Err(other),
        }
    }
}

impl std::fmt::Display for StateProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateProblem::Unreadable(error) => write!(f, "its state cannot be read: {error}"),
            StateProblem::Dropped(fields) => {
                write!(f, "its state drops stored fields: {}", fields.join(", "))
            }
            StateProblem::UnknownProcess => f.write_str("no process of this app has its name"),
        }
    }
}
