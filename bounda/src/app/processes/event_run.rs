//! An event's step in one process instance, as the engine runs it: route, run the handler,
//! record it.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tracing::Instrument;

use crate::app::engine::{Done, Outcome, Work};
use crate::app::failure::Failure;
use crate::app::processes::ProcessRunner;
use crate::app::processes::instance::{Lifecycle, stream_type};
use crate::app::processes::step::{Route, entry_key};
use crate::app::processes::writes::{lifecycle_at, process_letter, step_writes};
use crate::app::{App, telemetry};
use crate::ids::derived_id;
use crate::store::{LetterStatus, WriteSet};
use crate::{Error, Instant, RecordedEvent};

/// One event delivered to one process.
pub(crate) struct EventRun {
    process: Arc<dyn ProcessRunner>,
    event: RecordedEvent,
    /// The instance the event names, routed once; a correlator that failed is a terminal
    /// failure for this process only.
    routed: Result<Option<String>, Failure>,
    /// What the last try found: the instance, its version, and the event's route.
    found: Option<Found>,
    span: tracing::Span,
}

struct Found {
    id: String,
    /// The instance's version and the event's route, once the instance was read.
    read: Option<(u64, Route)>,
}

impl EventRun {
    /// The step of `event` for `process`, which routed it to `routed`.
    pub(crate) fn new(
        process: Arc<dyn ProcessRunner>,
        event: RecordedEvent,
        routed: anyhow::Result<Option<String>>,
    ) -> EventRun {
        EventRun {
            process,
            event,
            routed: routed.map_err(|error| Failure::terminal("CORRELATION_FAILED", &error)),
            found: None,
            span: tracing::Span::none(),
        }
    }

    async fn run(&mut self, app: &App, attempt: u32) -> Result<Outcome, Error> {
        let process = Arc::clone(&self.process);
        let event = &self.event;
        self.found = None;
        let id = match &self.routed {
            Ok(Some(id)) => id.clone(),
            Ok(None) => return Ok(Outcome::nothing()),
            Err(failure) => return Ok(Outcome::Failed(failure.clone())),
        };
        // The letter names the instance even if it cannot be read.
        self.found = Some(Found {
            id: id.clone(),
            read: None,
        });
        let instance = app.load_instance(&*process, &id).await?;
        let mut route = process.route(instance.as_ref(), event);
        // A failure whose letter was discarded gives the instance up: later events are
        // dropped, not parked (spec 120).
        if route == Route::Park
            && let Some(letter_id) = instance.as_ref().and_then(|i| i.letter_id.as_deref())
            && app
                .store()
                .dead_letter(letter_id)
                .await?
                .is_some_and(|letter| letter.status == LetterStatus::Discarded)
        {
            route = Route::Skip;
        }
        if route == Route::Skip {
            return Ok(Outcome::nothing());
        }
        self.found = Some(Found {
            id: id.clone(),
            read: Some((instance.as_ref().map_or(0, |i| i.version), route)),
        });
        self.span = telemetry::process_span(
            process.aggregate(),
            process.name(),
            &id,
            None,
            &event.metadata.correlation_id,
            attempt,
        );
        let key = derived_id(&["process", process.name(), &event.id]);
        let step = process
            .event_step(app, &id, instance.as_ref(), route, event, key)
            .instrument(self.span.clone())
            .await;
        Ok(match step {
            Ok(writes) => {
                let rejections = writes.staging.rejections.clone();
                Outcome::Commit(Done {
                    writes: step_writes(writes),
                    rejections,
                    after: None,
                })
            }
            Err(failure) => {
                self.mark_failed(&failure.message);
                Outcome::Failed(failure)
            }
        })
    }
}

impl Work for EventRun {
    fn execute<'a>(&'a mut self, app: &'a App, attempt: u32) -> BoxFuture<'a, Outcome> {
        Box::pin(async move { Outcome::of(self.run(app, attempt).await) })
    }

    fn aggregate(&self) -> &'static str {
        self.process.aggregate()
    }

    /// The instance the event is routed to, which the step reads first.
    fn streams(&self) -> Vec<(String, String)> {
        match &self.routed {
            Ok(Some(id)) => vec![(stream_type(self.process.name()), id.clone())],
            _ => Vec::new(),
        }
    }

    /// The instance's scheduler entry, which the step reads to arm its next moment.
    fn entries(&self) -> Vec<String> {
        match &self.routed {
            Ok(Some(id)) => vec![entry_key(self.process.name(), id)],
            _ => Vec::new(),
        }
    }

    fn handler(&self) -> Option<(&'static str, String)> {
        Some(("process", self.process.name().to_owned()))
    }

    fn subject(&self) -> String {
        let instance = match (&self.found, &self.routed) {
            (Some(found), _) => format!(" of instance `{}`", found.id),
            (None, Ok(Some(id))) => format!(" of instance `{id}`"),
            (None, _) => String::new(),
        };
        format!(
            "process `{}` on `{}` `{}`{instance}",
            self.process.name(),
            self.event.event_type,
            self.event.id
        )
    }

    fn process_step(&self) -> bool {
        true
    }

    /// The letter, and `ProcessFailed` on the instance, whose later events are parked. A
    /// follow-up that fails for good is a letter, but the process has ended already: it does
    /// not fail. A starting event that fails fails the instance it would have
    /// started, so its letter can be retried.
    fn give_up(
        &self,
        app: &App,
        failure: &Failure,
        attempts: u32,
        now: Instant,
    ) -> Result<WriteSet, Error> {
        let process = &*self.process;
        let id = self.found.as_ref().map_or("", |found| found.id.as_str());
        let letter = process_letter(process.name(), id, &self.event, failure, attempts, now);
        let mut writes = WriteSet::default();
        if let Some(found) = &self.found
            && let Some((version, route)) = found.read
            && route != Route::FollowUp
        {
            let failed = Lifecycle::Failed {
                letter_id: letter.id.clone(),
                at: None,
                event_id: Some(self.event.id.clone()),
            };
            writes.appends.push(lifecycle_at(
                app,
                process,
                &found.id,
                version,
                failed,
                Some(&self.event),
            )?);
            writes.unschedule.push(entry_key(process.name(), &found.id));
        }
        writes.dead_letters.push(letter);
        Ok(writes)
    }

    fn mark_failed(&self, message: &str) {
        telemetry::failed(&self.span, message);
    }
}
