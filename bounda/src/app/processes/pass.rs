//! The `processes` subscriber's pass, and how it loads an instance.

use std::sync::Arc;

use crate::app::App;
use crate::app::RejectionRecord;
use crate::app::processes::event_run::EventRun;
use crate::app::processes::instance::{self, Instance};
use crate::app::processes::{PROCESSES, ProcessRunner};
use crate::app::subscriber::Delivery;
use crate::{Error, Instant};

impl App {
    /// One pass of the `processes` subscriber at `now`. Returns whether anything ran or moved.
    pub(crate) async fn process_pass(
        &self,
        now: Instant,
        rejections: &mut Vec<RejectionRecord>,
    ) -> Result<bool, Error> {
        if self.inner.processes.is_empty() {
            return Ok(false);
        }
        self.subscriber_pass(PROCESSES, "process", now, rejections, |event| {
            self.processes()
                .filter(|process| process.takes(event))
                .map(|process| {
                    let routed = process.instance_of(event);
                    Delivery {
                        handler: process.name(),
                        // An instance's steps run in order; an event that names none runs alone.
                        lane: match &routed {
                            Ok(Some(id)) => id.clone(),
                            _ => event.aggregate_id.clone(),
                        },
                        work: Box::new(EventRun::new(Arc::clone(process), event.clone(), routed)),
                    }
                })
                .collect()
        })
        .await
    }

    /// The instance `id` of `process`: its snapshot and the lifecycle events after it.
    pub(crate) async fn load_instance(
        &self,
        process: &dyn ProcessRunner,
        id: &str,
    ) -> Result<Option<Instance>, Error> {
        let fields = process.deadline_fields();
        instance::load(self.store(), process.name(), &fields, id).await
    }
}
