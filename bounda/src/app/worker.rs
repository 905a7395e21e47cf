//! The scheduled worker: claims the entries due, in order, and runs them through the engine,
//! each committing with the release of its claim.

use std::sync::Arc;

use crate::app::RejectionRecord;
use crate::app::command_run::{CommandRun, scheduled_letter_id};
use futures_util::future::BoxFuture;

use crate::app::engine::{Beside, Claim, Prepared, Report, Run, Work};
use crate::app::missing::{LetterOf, Missing};
use crate::app::policy_run::{POLICY_RUN, PolicyRun, PolicyRunPayload, policy_letter_id};
use crate::app::processes::deadline_run::{DeadlinePayload, DeadlineRun, Unhandled};
use crate::app::processes::step::PROCESS_DEADLINE;
use crate::app::processes::writes::LetterPayload;
use crate::app::schedule::ScheduledContext;
use crate::app::{App, telemetry};
use crate::ids::derived_id;
use crate::store::retry_requests::LETTER_RETRY;
use crate::store::{DeadLetter, LetterKind, ScheduledEntry};

/// About how many runs one worker pass makes before the subscribers' passes get their turn.
const RUNS_PER_PASS: usize = 1_000;
use crate::{Error, Instant, RecordedEvent};

impl App {
    /// One worker pass at `now`: runs every entry due, in order. Returns whether any ran; a
    /// deadline held back for the process runner did not.
    pub(crate) async fn worker_pass(
        &self,
        now: Instant,
        rejections: &mut Vec<RejectionRecord>,
    ) -> Result<bool, Error> {
        let claim_id = self.claim_id();
        let limit = self.config().dispatcher.batch_size;
        let entries = self
            .store()
            .claim_due(&claim_id, now, self.lease(), limit)
            .await?;
        let next = NextBatch {
            app: self,
            claim_id: &claim_id,
            limit,
        };
        // On a store a round trip away, the next batch is prepared while the last commits.
        let beside = self
            .store()
            .capabilities()
            .pipelined_batches
            .then_some(&next as &dyn Beside);
        let mut batch = self.batch_of(entries, &claim_id, false).await?;
        let mut ran = false;
        // While batches come full, each commit takes the next one; a pass runs about
        // `RUNS_PER_PASS` runs before the subscribers get their turn.
        let mut rounds = RUNS_PER_PASS.div_ceil(limit);
        while batch.claimed > 0 {
            rounds -= 1;
            let full = batch.claimed >= limit;
            batch.report.then_claim = (full && rounds > 0 && !self.stopping()).then_some(limit);
            let result = self.run_prepared(&mut batch, beside).await;
            let report = &mut batch.report;
            rejections.append(&mut report.rejections);
            result?;
            ran |= report.ran;
            batch = match report.prepared.take() {
                Some(prepared) => *prepared?,
                None => {
                    let claimed = std::mem::take(&mut report.claimed);
                    self.batch_of(claimed, &claim_id, false).await?
                }
            };
        }
        Ok(ran)
    }

    /// The batch of claimed `entries`, its first wave run if `run_first`. A requested retry
    /// runs at once, as the operator's retry does, not as a run of the batch.
    async fn batch_of(
        &self,
        entries: Vec<ScheduledEntry>,
        claim_id: &str,
        run_first: bool,
    ) -> Result<Prepared, Error> {
        let claimed = entries.len();
        let (requested, others): (Vec<_>, Vec<_>) = entries
            .into_iter()
            .partition(|entry| entry.command_type == LETTER_RETRY);
        let report = Report {
            ran: !requested.is_empty(),
            ..Report::default()
        };
        self.run_requested_retries(requested, claim_id).await?;
        let runs = self.scheduled_runs(others, claim_id).await?;
        Ok(self.prepare(runs, claimed, report, run_first).await)
    }

    /// The runs of claimed entries, in due order.
    async fn scheduled_runs(
        &self,
        entries: Vec<ScheduledEntry>,
        claim_id: &str,
    ) -> Result<Vec<Run>, Error> {
        // Which instances have events the process runner has not handled, read once a batch.
        let unhandled = if entries.iter().any(|e| e.command_type == PROCESS_DEADLINE) {
            Arc::new(Unhandled::read(self).await.unwrap_or_else(|error| {
                tracing::warn!(
                    code = error.code(),
                    "cannot read the events the process runner has not handled; due deadlines \
                     wait a round: {}",
                    crate::error::chain(&error)
                );
                Unhandled::unknown()
            }))
        } else {
            Arc::default()
        };
        let mut runs = Vec::with_capacity(entries.len());
        for entry in entries {
            let work = self.scheduled_work(&entry, &unhandled).await?;
            // Each entry under the claim it was taken with: batches claimed with the previous
            // commit have claims of their own.
            let claim = Claim::Scheduled {
                dedupe_key: entry.dedupe_key,
                claim_id: entry.claim_id.unwrap_or_else(|| claim_id.to_owned()),
            };
            let run = Run::new(work, claim, entry.attempts + 1, entry.aggregate_id);
            runs.push(match entry.claimed_at {
                Some(at) => run.claimed_at(at),
                None => run,
            });
        }
        Ok(runs)
    }

    /// What a scheduler entry runs: a delayed policy run, a process deadline, or a command.
    async fn scheduled_work(
        &self,
        entry: &ScheduledEntry,
        unhandled: &Arc<Unhandled>,
    ) -> Result<Box<dyn Work>, Error> {
        // A row that does not read runs nothing: its letter names it and keeps what is stored.
        if let Some(unreadable) = &entry.unreadable {
            return Ok(unreadable_entry(entry, unreadable));
        }
        // Only a command's entry keeps a context; the runtime's own (a delayed policy run, a
        // process deadline) keep none.
        let command = !matches!(entry.command_type.as_str(), POLICY_RUN | PROCESS_DEADLINE);
        let context: Option<ScheduledContext> = match command {
            false => None,
            true => match serde_json::from_value(entry.context.clone()) {
                Ok(context) => Some(context),
                Err(error) => {
                    // A command's run fails for it, naming the entry; this says why.
                    tracing::warn!(
                        key = %entry.dedupe_key,
                        "a scheduled command's context does not read: {error}"
                    );
                    None
                }
            },
        };
        let correlation = context
            .as_ref()
            .map_or("", |context| context.cause.correlation_id.as_str());
        let span = telemetry::scheduled_span(&entry.command_type, correlation, entry.attempts + 1);
        Ok(match entry.command_type.as_str() {
            POLICY_RUN => {
                let payload =
                    match serde_json::from_value::<PolicyRunPayload>(entry.payload.clone()) {
                        Ok(payload) => payload,
                        Err(error) => return Ok(unreadable_entry(entry, &error)),
                    };
                let policy = self
                    .policies()
                    .find(|policy| policy.name() == payload.policy);
                let event = match self.read_event(&payload.event_id).await {
                    Ok(event) => event,
                    // This entry fails alone (retried, then its letter); the others run.
                    Err(error) => {
                        let letter = policy_letter(payload);
                        return Ok(Box::new(Missing::failing(&error, letter).of_entry(entry)));
                    }
                };
                match (policy, event) {
                    (Some(policy), Some(event)) => {
                        Box::new(PolicyRun::new(Arc::clone(policy), event).delayed(span))
                    }
                    (None, event) => Box::new(policy_missing(payload, event).of_entry(entry)),
                    (Some(_), None) => Box::new(event_missing(payload).of_entry(entry)),
                }
            }
            PROCESS_DEADLINE => {
                let payload = match DeadlinePayload::read(entry) {
                    Ok(payload) => payload,
                    Err(error) => return Ok(unreadable_entry(entry, &error)),
                };
                let process = self
                    .processes()
                    .find(|process| process.name() == payload.process);
                match process {
                    Some(process) => Box::new(DeadlineRun::new(
                        Arc::clone(process),
                        payload,
                        &entry.dedupe_key,
                        Arc::clone(unhandled),
                        span,
                    )),
                    None => Box::new(process_missing(payload, entry.execute_at).of_entry(entry)),
                }
            }
            // A command type no longer registered fails as its run (`UnknownCommand`), with the
            // command's letter and payload.
            command_type => Box::new(
                CommandRun::new(
                    self,
                    command_type,
                    &entry.aggregate_id,
                    entry.payload.clone(),
                    context.map(|context| context.cause.metadata()),
                    &entry.dedupe_key,
                )
                .scheduled(span),
            ),
        })
    }
}

/// A worker's next batch, claimed and its first wave run beside the last batch's commit.
struct NextBatch<'a> {
    app: &'a App,
    claim_id: &'a str,
    limit: usize,
}

impl Beside for NextBatch<'_> {
    fn prepare(&self) -> BoxFuture<'_, Result<Box<Prepared>, Error>> {
        Box::pin(async move {
            let app = self.app;
            let entries = app
                .store()
                .claim_due(self.claim_id, app.clock().now(), app.lease(), self.limit)
                .await?;
            Ok(Box::new(app.batch_of(entries, self.claim_id, true).await?))
        })
    }

    fn runs_beside(&self) -> bool {
        true
    }
}

/// A delayed policy run whose policy the app no longer has: the policy's letter on its event.
fn policy_missing(payload: PolicyRunPayload, event: Option<RecordedEvent>) -> Missing {
    let reason = format!(
        "policy `{}` is no longer in the app; add it back and retry this letter",
        payload.policy
    );
    let letter = policy_letter(payload);
    Missing::new(
        reason,
        Box::new(move |failure, attempts, now| {
            let letter = letter(failure, attempts, now);
            DeadLetter {
                event_type: event.as_ref().map(|e| e.event_type.clone()),
                aggregate_type: event.as_ref().map(|e| e.aggregate_type.clone()),
                aggregate_id: event.as_ref().map(|e| e.aggregate_id.clone()),
                ..letter
            }
        }),
    )
}

/// A delayed policy run whose event is not in the store.
fn event_missing(payload: PolicyRunPayload) -> Missing {
    let reason = format!(
        "the event `{}` of policy `{}`'s delayed run is not in the store",
        payload.event_id, payload.policy
    );
    Missing::new(reason, policy_letter(payload))
}

/// The letter of a delayed policy run on the event it names.
fn policy_letter(payload: PolicyRunPayload) -> LetterOf {
    Box::new(move |failure, attempts, now| {
        let id = policy_letter_id(&payload.policy, &payload.event_id);
        DeadLetter {
            event_id: Some(payload.event_id.clone()),
            ..failure.letter(id, LetterKind::Policy, &payload.policy, attempts, now)
        }
    })
}

/// A deadline of a process the app no longer has: the process's letter on its instance; its
/// retry, once the process is back, arms the instance's deadlines again.
fn process_missing(payload: DeadlinePayload, at: Instant) -> Missing {
    let reason = format!(
        "process `{}` is no longer in the app; add it back and retry this letter",
        payload.process
    );
    Missing::new(
        reason,
        Box::new(move |failure, attempts, now| {
            let id = derived_id(&[
                "process",
                &payload.process,
                &payload.instance,
                "deadline",
                &payload.at.to_string(),
                "dead-letter",
            ]);
            DeadLetter {
                aggregate_id: Some(payload.instance.clone()),
                payload: serde_json::to_value(LetterPayload {
                    instance: payload.instance.clone(),
                    deadline: None,
                    at: Some(at),
                })
                .ok(),
                ..failure.letter(id, LetterKind::Process, &payload.process, attempts, now)
            }
        }),
    )
}

/// An entry whose row does not read, or of the runtime's own whose payload no longer reads: a
/// scheduled letter keeping what is stored.
fn unreadable_entry(entry: &ScheduledEntry, why: &dyn std::fmt::Display) -> Box<dyn Work> {
    let reason = match &entry.unreadable {
        Some(_) => format!(
            "scheduled `{}` entry `{}` cannot be read: {why}",
            entry.command_type, entry.dedupe_key
        ),
        None => format!(
            "scheduled `{}` entry `{}` has a payload this app cannot read ({why}): {}",
            entry.command_type, entry.dedupe_key, entry.payload
        ),
    };
    let (key, command_type) = (entry.dedupe_key.clone(), entry.command_type.clone());
    let (aggregate_id, payload) = (entry.aggregate_id.clone(), entry.payload.clone());
    Box::new(
        Missing::new(
            reason,
            Box::new(move |failure, attempts, now| {
                let id = scheduled_letter_id(&key);
                DeadLetter {
                    aggregate_id: Some(aggregate_id.clone()),
                    payload: Some(payload.clone()),
                    ..failure.letter(id, LetterKind::Scheduled, &command_type, attempts, now)
                }
            }),
        )
        .of_entry(entry),
    )
}
