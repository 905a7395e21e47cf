//! A policy's run, as the engine runs it: live from the dispatcher, delayed from the scheduler,
//! or again from its letter.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tracing::Instrument;

use crate::app::cause::Cause;
use crate::app::engine::{Done, Outcome, Work};
use crate::app::failure::{Failure, guarded};
use crate::app::policy::PolicyRunner;
use crate::app::reaction::Attempt;
use crate::app::{App, telemetry};
use crate::ids::derived_id;
use crate::store::{LetterKind, ScheduledEntry, WriteSet};
use crate::{Error, Instant, RecordedEvent};

/// The command type of a delayed policy's run in the scheduler.
pub(crate) use crate::store::pauses::POLICY_RUN;

/// What a delayed policy run's scheduler entry holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PolicyRunPayload {
    pub(crate) policy: String,
    pub(crate) event_id: String,
}

/// The idempotency key of policy `name` for `event_id`.
pub(crate) fn policy_key(name: &str, event_id: &str) -> String {
    derived_id(&["policy", name, event_id])
}

/// The id of policy `name`'s letter on `event_id`: the same however often it is filed.
pub(crate) fn policy_letter_id(name: &str, event_id: &str) -> String {
    derived_id(&["policy", name, event_id, "dead-letter"])
}

/// One run of a policy on one event under one key.
pub(crate) struct PolicyRun {
    policy: Arc<dyn PolicyRunner>,
    event: RecordedEvent,
    key: String,
    span: tracing::Span,
    /// The scheduler's span of a delayed run, failed with it.
    outer: Option<tracing::Span>,
}

impl PolicyRun {
    /// A live or delayed run: the same key on every try.
    pub(crate) fn new(policy: Arc<dyn PolicyRunner>, event: RecordedEvent) -> PolicyRun {
        let key = policy_key(policy.name(), &event.id);
        PolicyRun::with_key(policy, event, key)
    }

    /// A run under `key`: an operator's retry passes a new one.
    pub(crate) fn with_key(
        policy: Arc<dyn PolicyRunner>,
        event: RecordedEvent,
        key: String,
    ) -> PolicyRun {
        PolicyRun {
            policy,
            event,
            key,
            span: tracing::Span::none(),
            outer: None,
        }
    }

    /// A delayed run, inside the scheduler's span `outer`.
    pub(crate) fn delayed(mut self, outer: tracing::Span) -> PolicyRun {
        // The scheduled run's span learns its correlation from the event.
        outer.record(
            "bounda.correlation_id",
            self.event.metadata.correlation_id.as_str(),
        );
        self.outer = Some(outer);
        self
    }

    async fn run(&mut self, app: &App, attempt: u32) -> Outcome {
        let policy = &*self.policy;
        self.span = telemetry::policy_span(
            policy.key().aggregate,
            policy.name(),
            &self.event.id,
            &self.event.metadata.correlation_id,
            attempt,
        );
        let reaction = Attempt::new(
            app,
            self.key.clone(),
            Cause::of_event(&self.event),
            policy.declared(),
        );
        let limit = app
            .config()
            .for_aggregate(policy.key().aggregate)
            .policies_timeout;
        let handler = policy
            .run(&reaction, &self.event)
            .instrument(self.span.clone());
        let result = guarded(app.clock(), policy.name(), limit, handler).await;
        let event = &self.event;
        policy
            .aim()
            .learn(reaction.sent_to(&event.aggregate_type, &event.aggregate_id));
        let staging = reaction.finish();
        // A command that failed fails the run, even if the handler went on (spec 34).
        match result.and_then(|()| staging.failure.clone().map_or(Ok(()), Err)) {
            Ok(()) => Outcome::Commit(Done {
                writes: WriteSet {
                    appends: staging.appends,
                    schedule: staging.scheduled,
                    ..WriteSet::default()
                },
                rejections: staging.rejections,
                after: None,
            }),
            Err(failure) => {
                self.mark_failed(&failure.message);
                Outcome::Failed(failure)
            }
        }
    }
}

impl Work for PolicyRun {
    fn execute<'a>(&'a mut self, app: &'a App, attempt: u32) -> BoxFuture<'a, Outcome> {
        let outer = self.outer.clone().unwrap_or_else(tracing::Span::none);
        Box::pin(self.run(app, attempt).instrument(outer))
    }

    fn aggregate(&self) -> &'static str {
        self.policy.key().aggregate
    }

    /// The instance whose event it handles, while the policy's runs send there.
    fn streams(&self) -> Vec<(String, String)> {
        match self.policy.aim().at_its_event() {
            true => vec![(
                self.event.aggregate_type.clone(),
                self.event.aggregate_id.clone(),
            )],
            false => Vec::new(),
        }
    }

    fn handler(&self) -> Option<(&'static str, String)> {
        Some(("policy", self.policy.name().to_owned()))
    }

    fn subject(&self) -> String {
        format!(
            "policy `{}` on `{}` `{}` of `{}`",
            self.policy.name(),
            self.event.event_type,
            self.event.id,
            self.event.aggregate_id
        )
    }

    /// The policy's letter; its id depends only on the policy and the event, so filing it again
    /// finds the first.
    fn give_up(
        &self,
        _app: &App,
        failure: &Failure,
        attempts: u32,
        now: Instant,
    ) -> Result<WriteSet, Error> {
        let (policy, event) = (self.policy.name(), &self.event);
        let id = policy_letter_id(policy, &event.id);
        let letter = failure.letter_on(id, LetterKind::Policy, policy, event, (attempts, now));
        Ok(WriteSet {
            dead_letters: vec![letter],
            ..WriteSet::default()
        })
    }

    fn mark_failed(&self, message: &str) {
        telemetry::failed(&self.span, message);
        if let Some(outer) = &self.outer {
            telemetry::failed(outer, message);
        }
    }
}

/// A delayed policy's delivery: its run is scheduled at the event's time plus the delay, not at
/// read time plus the delay.
pub(crate) struct SchedulePolicyRun {
    pub(crate) policy: &'static str,
    pub(crate) aggregate: &'static str,
    pub(crate) event: RecordedEvent,
    pub(crate) execute_at: Instant,
}

impl Work for SchedulePolicyRun {
    fn execute<'a>(&'a mut self, _app: &'a App, _attempt: u32) -> BoxFuture<'a, Outcome> {
        let payload = PolicyRunPayload {
            policy: self.policy.to_owned(),
            event_id: self.event.id.clone(),
        };
        let outcome = match serde_json::to_value(&payload) {
            Ok(payload) => Outcome::Commit(Done::writes(WriteSet {
                schedule: vec![ScheduledEntry::new(
                    derived_id(&["policy-run", self.policy, &self.event.id]),
                    POLICY_RUN,
                    self.event.aggregate_id.clone(),
                    payload,
                    self.execute_at,
                )],
                ..WriteSet::default()
            })),
            Err(source) => Outcome::Failed(Failure::of_error(&Error::Encode {
                type_name: POLICY_RUN.to_owned(),
                source,
            })),
        };
        Box::pin(std::future::ready(outcome))
    }

    fn aggregate(&self) -> &'static str {
        self.aggregate
    }

    fn handler(&self) -> Option<(&'static str, String)> {
        Some(("policy", self.policy.to_owned()))
    }

    /// Scheduling takes no permit: the delayed run does, when it runs.
    fn paced_as(&self) -> Option<(&'static str, String)> {
        None
    }

    fn subject(&self) -> String {
        format!(
            "scheduling policy `{}`'s delayed run on `{}` `{}`",
            self.policy, self.event.event_type, self.event.id
        )
    }
}
