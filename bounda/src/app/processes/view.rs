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
}
