//! Reading one process instance from outside: what a test, an operator or a page asks of it.

use crate::app::App;
use crate::process::Process;
use crate::{Error, Instant};

use super::instance::{Status, load, stream_type};
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
    pub fn process_instance<P: Process>(
        &self,
        id: &str,
    ) -> Result<Option<ProcessInstance<P>>, Error> {
        let fields = deadline_fields::<P>();
        let Some(instance) = load(self.store(), P::NAME, &fields, id)? else {
            return Ok(None);
        };
        Ok(Some(ProcessInstance {
            state: read_state::<P>(Some(&instance))?,
            status: instance.status,
            timeout_at: instance
                .timeout_at
                .filter(|_| instance.status == Status::Started),
            parked: instance.parked.len(),
        }))
    }

    /// Every instance of this app's processes whose stored state its state type no longer
    /// reads, with the error naming the field: run it in a test on a copy of a production file
    /// before deploying a changed state, `assert_eq!(app.unreadable_states()?, vec![])`. It
    /// reads the whole log.
    pub fn unreadable_states(&self) -> Result<Vec<UnreadableState>, Error> {
        let streams: Vec<(String, &'static str)> = self
            .processes()
            .map(|process| (stream_type(process.name()), process.name()))
            .collect();
        let mut instances = std::collections::BTreeSet::new();
        let mut after = 0;
        loop {
            let events = self.store().read_all(after, PAGE)?;
            let Some(last) = events.last() else { break };
            after = last.position;
            for event in &events {
                if let Some((_, name)) = streams
                    .iter()
                    .find(|(stream, _)| *stream == event.aggregate_type)
                {
                    instances.insert((*name, event.aggregate_id.clone()));
                }
            }
        }
        let mut unreadable = Vec::new();
        for (name, id) in instances {
            let Some(process) = self.processes().find(|process| process.name() == name) else {
                continue;
            };
            let Some(instance) = self.load_instance(&**process, &id)? else {
                continue;
            };
            if let Err(error) = process.check_state(&instance) {
                unreadable.push(UnreadableState {
                    process: name,
                    instance: id,
                    error: error.to_string(),
                });
            }
        }
        Ok(unreadable)
    }
}

/// Events read per page while looking for instances.
const PAGE: usize = 1_000;

/// A process instance whose stored state its state type no longer reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadableState {
    /// The process.
    pub process: &'static str,
    /// The instance.
    pub instance: String,
    /// Why, naming the field that did not read.
    pub error: String,
}
