//! The scheduled worker: claims due entries and runs them, each committing with the release of
//! its claim (spec 38–52, 135, 200–201).

use crate::app::App;
use crate::app::processes::step::PROCESS_DEADLINE;
use crate::app::reaction::{POLICY_RUN, RejectionRecord, ScheduledContext};
use crate::app::run::{Failure, policy_key, policy_letter, policy_span, run_policy};
use crate::app::telemetry::{self, CommandOutcome};
use crate::ids::derived_id;
use crate::store::{
    CommitError, DeadLetter, LetterKind, LetterStatus, ScheduledEntry, ScheduledOutcome,
    ScheduledRelease, WriteSet,
};
use crate::{Error, Instant};
use tracing::Instrument;

impl App {
    /// One worker pass at `now`: runs every entry due, in order. Returns whether any ran.
    pub(crate) async fn worker_pass(
        &self,
        now: Instant,
        rejections: &mut Vec<RejectionRecord>,
    ) -> Result<bool, Error> {
        let claim_id = self.next_id();
        let limit = self.config().dispatcher.batch_size;
        let entries = self
            .store()
            .claim_due(&claim_id, now, self.lease(), limit)?;
        // Whether anything moved on: a deadline held back for the process runner did not.
        let mut progressed = false;
        for entry in &entries {
            // Shutting down: give the rest back unrun, without counting an attempt (spec 46).
            if self.stopping() {
                let writes = WriteSet {
                    scheduled: Some(ScheduledRelease {
                        dedupe_key: entry.dedupe_key.clone(),
                        claim_id: claim_id.clone(),
                        outcome: ScheduledOutcome::Defer,
                    }),
                    ..WriteSet::default()
                };
                self.release(self.commit(&writes))?;
                continue;
            }
            let correlation = entry
                .context
                .pointer("/cause/correlationId")
                .and_then(|id| id.as_str())
                .unwrap_or_default();
            let span =
                telemetry::scheduled_span(&entry.command_type, correlation, entry.attempts + 1);
            if entry.command_type == POLICY_RUN {
                self.run_delayed_policy(entry, &claim_id, now, rejections)
                    .instrument(span)
                    .await?;
                progressed = true;
            } else if entry.command_type == PROCESS_DEADLINE {
                progressed |= self
                    .run_process_deadline(entry, &claim_id, now, rejections)
                    .instrument(span)
                    .await?;
            } else {
                span.in_scope(|| self.run_scheduled_command(entry, &claim_id, now, rejections))?;
                progressed = true;
            }
        }
        Ok(progressed)
    }

    /// A delayed policy's run: the event as stored, the same key as a live run (spec 38).
    async fn run_delayed_policy(
        &self,
        entry: &ScheduledEntry,
        claim_id: &str,
        now: Instant,
        rejections: &mut Vec<RejectionRecord>,
    ) -> Result<(), Error> {
        let release = |outcome| ScheduledRelease {
            dedupe_key: entry.dedupe_key.clone(),
            claim_id: claim_id.to_owned(),
            outcome,
        };
        let name = entry
            .payload
            .get("policy")
            .and_then(|v| v.as_str())
            .unwrap_or_default();
        let event_id = entry
            .payload
            .get("eventId")
            .and_then(|v| v.as_str())
            .unwrap_or_default();
        let policy = self
            .inner
            .policies
            .iter()
            .find(|policy| policy.name() == name);
        let event = self.store().read_event(event_id)?;
        let (Some(policy), Some(event)) = (policy, event) else {
            // A policy a deploy removed, or an event gone: nothing left to run.
            return self.release(self.commit(&WriteSet {
                scheduled: Some(release(ScheduledOutcome::Complete)),
                ..WriteSet::default()
            }));
        };
        let attempt = entry.attempts + 1;
        // The scheduled run's span learns its correlation from the event.
        tracing::Span::current().record(
            "bounda.correlation_id",
            event.metadata.correlation_id.as_str(),
        );
        let span = policy_span(&**policy, &event, attempt);
        let failure =
            match run_policy(self, &**policy, &event, policy_key(name, &event.id), &span).await {
                Ok(staging) => {
                    let writes = WriteSet {
                        appends: staging.appends,
                        schedule: staging.scheduled,
                        scheduled: Some(release(ScheduledOutcome::Complete)),
                        ..WriteSet::default()
                    };
                    match self.commit(&writes) {
                        Ok(_) => {
                            rejections.extend(staging.rejections);
                            return Ok(());
                        }
                        // Run again on a later pass, on the new state, without counting an attempt.
                        Err(CommitError::StreamMoved { .. }) => {
                            return self.release(self.commit(&WriteSet {
                                scheduled: Some(release(ScheduledOutcome::Defer)),
                                ..WriteSet::default()
                            }));
                        }
                        Err(CommitError::ClaimLost { .. }) => return Ok(()),
                        Err(error) => Failure::of(&anyhow::Error::new(error)),
                    }
                }
                Err(failure) => failure,
            };
        telemetry::failed(&span, &failure.message);
        telemetry::failed(&tracing::Span::current(), &failure.message);
        // Each delayed run retries on its own (spec 40) and ends as the policy's letter (spec 39).
        let retry = self
            .config()
            .for_aggregate(policy.key().aggregate)
            .policies_retry;
        let writes = match retry.delay_before(attempt).filter(|_| failure.retriable) {
            Some(wait) => WriteSet {
                scheduled: Some(release(ScheduledOutcome::Retry {
                    execute_at: now + wait,
                    error: failure.message.clone(),
                })),
                ..WriteSet::default()
            },
            None => WriteSet {
                scheduled: Some(release(ScheduledOutcome::Complete)),
                dead_letters: vec![policy_letter(name, &event, &failure, attempt, now)],
                ..WriteSet::default()
            },
        };
        self.release(self.commit(&writes))
    }

    /// A scheduled command: decided on the state when it runs, under the correlation and cause
    /// it was scheduled with (spec 8, 49). A rejection settles it (spec 25).
    fn run_scheduled_command(
        &self,
        entry: &ScheduledEntry,
        claim_id: &str,
        now: Instant,
        rejections: &mut Vec<RejectionRecord>,
    ) -> Result<(), Error> {
        let release = |outcome| ScheduledRelease {
            dedupe_key: entry.dedupe_key.clone(),
            claim_id: claim_id.to_owned(),
            outcome,
        };
        let context: Option<ScheduledContext> = serde_json::from_value(entry.context.clone()).ok();
        let runner = self.inner.commands.get(entry.command_type.as_str());
        let attempt = entry.attempts + 1;
        // The command itself, as a command dispatched now (spec 222, 225).
        let command_span = telemetry::command_span(
            &entry.command_type,
            runner.map_or("", |runner| runner.aggregate()),
            &entry.aggregate_id,
            context
                .as_ref()
                .map_or("", |c| c.cause.correlation_id.as_str()),
            context
                .as_ref()
                .map_or("", |c| c.cause.causation_id.as_str()),
        );
        let command_type = entry.command_type.as_str();
        let failure = match (runner, &context) {
            (Some(runner), Some(context)) => {
                let retries = self
                    .config()
                    .for_aggregate(runner.aggregate())
                    .concurrency_retries;
                let mut reruns = 0;
                loop {
                    let metadata = context.cause.metadata();
                    match command_span.in_scope(|| runner.decide(self, &entry.payload, &metadata)) {
                        Ok(Ok(decision)) => {
                            let count = decision.append.as_ref().map_or(0, |a| a.events.len());
                            let writes = WriteSet {
                                appends: decision.append.into_iter().collect(),
                                scheduled: Some(release(ScheduledOutcome::Complete)),
                                ..WriteSet::default()
                            };
                            match self.commit(&writes) {
                                Ok(_) => {
                                    let stored = CommandOutcome::Stored;
                                    telemetry::command_outcome(
                                        &command_span,
                                        command_type,
                                        stored,
                                        count,
                                    );
                                    return Ok(());
                                }
                                Err(CommitError::StreamMoved { .. }) if reruns < retries => {
                                    reruns += 1;
                                    if !self.store().renew_scheduled(
                                        &entry.dedupe_key,
                                        claim_id,
                                        self.clock().now(),
                                    )? {
                                        return Ok(());
                                    }
                                }
                                Err(CommitError::ClaimLost { .. }) => return Ok(()),
                                Err(error) => break Failure::of(&anyhow::Error::new(error)),
                            }
                        }
                        Ok(Err(rejection)) => {
                            let result = self.commit(&WriteSet {
                                scheduled: Some(release(ScheduledOutcome::Complete)),
                                ..WriteSet::default()
                            });
                            if result.is_ok() {
                                let outcome = CommandOutcome::Rejected {
                                    code: rejection.rejected,
                                    message: &rejection.message,
                                };
                                telemetry::command_outcome(&command_span, command_type, outcome, 0);
                                rejections.push(rejection);
                            }
                            return self.release(result);
                        }
                        Err(error) => break Failure::of(&anyhow::Error::new(error)),
                    }
                }
            }
            (None, _) => Failure::of(&anyhow::Error::new(Error::UnknownCommand {
                command: entry.command_type.clone(),
            })),
            (Some(_), None) => Failure::of(&anyhow::anyhow!(
                "scheduled command `{}` has an unreadable context",
                entry.command_type
            )),
        };
        telemetry::failed(&tracing::Span::current(), &failure.message);
        let failed = CommandOutcome::Failed(&failure.message);
        telemetry::command_outcome(&command_span, command_type, failed, 0);
        // Retried with `policies.retry`, dead-lettered with its payload when they run out (spec 48).
        let aggregate = runner.map_or("", |runner| runner.aggregate());
        let retry = self.config().for_aggregate(aggregate).policies_retry;
        let writes = match retry.delay_before(attempt).filter(|_| failure.retriable) {
            Some(wait) => WriteSet {
                scheduled: Some(release(ScheduledOutcome::Retry {
                    execute_at: now + wait,
                    error: failure.message.clone(),
                })),
                ..WriteSet::default()
            },
            None => WriteSet {
                scheduled: Some(release(ScheduledOutcome::Complete)),
                dead_letters: vec![scheduled_letter(entry, aggregate, &failure, attempt, now)],
                ..WriteSet::default()
            },
        };
        self.release(self.commit(&writes))
    }

    /// A release that lost its claim leaves the entry to the runner that took it.
    pub(crate) fn release(
        &self,
        result: Result<crate::store::Committed, CommitError>,
    ) -> Result<(), Error> {
        match result {
            Ok(_) | Err(CommitError::ClaimLost { .. }) => Ok(()),
            Err(CommitError::Store(error)) => Err(error.into()),
            Err(other) => Err(Error::Store(crate::store::StoreError::with_source(
                "a scheduled run's write set was refused",
                other,
            ))),
        }
    }
}

/// The dead letter of a scheduled command given up on, with its payload (spec 163).
fn scheduled_letter(
    entry: &ScheduledEntry,
    aggregate: &str,
    failure: &Failure,
    attempts: u32,
    now: Instant,
) -> DeadLetter {
    DeadLetter {
        id: derived_id(&["scheduled", &entry.dedupe_key, "dead-letter"]),
        kind: LetterKind::Scheduled,
        handler: entry.command_type.clone(),
        event_id: None,
        event_type: None,
        aggregate_type: (!aggregate.is_empty()).then(|| aggregate.to_owned()),
        aggregate_id: Some(entry.aggregate_id.clone()),
        error_type: failure.error_type().to_owned(),
        error_message: failure.message.clone(),
        error_stack: Some(failure.stack.clone()),
        attempts,
        first_failed_at: now,
        last_failed_at: now,
        status: LetterStatus::Failed,
        payload: Some(entry.payload.clone()),
    }
}
