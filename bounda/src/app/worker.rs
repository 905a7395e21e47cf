//! The scheduled worker: claims the entries due, in order, and runs them through the engine,
//! each committing with the release of its claim (spec 38–52, 135, 200–201).

use std::sync::Arc;

use crate::app::RejectionRecord;
use crate::app::command_run::CommandRun;
use crate::app::engine::{Claim, Report, Run, Work};
use crate::app::policy_run::{NothingToRun, POLICY_RUN, PolicyRun, PolicyRunPayload};
use crate::app::processes::deadline_run::{DeadlinePayload, DeadlineRun, Unhandled};
use crate::app::processes::step::PROCESS_DEADLINE;
use crate::app::reaction::ScheduledContext;
use crate::app::{App, telemetry};
use crate::store::{ClaimDue, ScheduledEntry};

/// About how many runs one worker pass makes before the subscribers' passes get their turn.
const RUNS_PER_PASS: usize = 1_000;
use crate::{Error, Instant};

impl App {
    /// One worker pass at `now`: runs every entry due, in order. Returns whether any ran; a
    /// deadline held back for the process runner did not.
    pub(crate) async fn worker_pass(
        &self,
        now: Instant,
        rejections: &mut Vec<RejectionRecord>,
    ) -> Result<bool, Error> {
        let claim_id = self.next_id();
        let limit = self.config().dispatcher.batch_size;
        let mut entries = self
            .store()
            .claim_due(&claim_id, now, self.lease(), limit)?;
        let mut ran = false;
        // While batches come full, each commit claims the next one; a pass runs about
        // `RUNS_PER_PASS` runs before the subscribers get their turn.
        let mut rounds = RUNS_PER_PASS.div_ceil(limit);
        while !entries.is_empty() {
            rounds -= 1;
            let full = entries.len() >= limit;
            let mut report = Report {
                then_claim: (full && rounds > 0 && !self.stopping()).then(|| ClaimDue {
                    claim_id: claim_id.clone(),
                    now: self.clock().now(),
                    lease: self.lease(),
                    limit,
                }),
                ..Report::default()
            };
            let runs = self.scheduled_runs(entries, &claim_id)?;
            let result = self.run_batch(runs, &mut report).await;
            rejections.append(&mut report.rejections);
            result?;
            ran |= report.ran;
            entries = report.claimed;
        }
        Ok(ran)
    }

    /// The runs of claimed entries, in due order.
    fn scheduled_runs(
        &self,
        entries: Vec<ScheduledEntry>,
        claim_id: &str,
    ) -> Result<Vec<Run>, Error> {
        // Which instances have events the process runner has not handled, read once a batch.
        let unhandled = if entries.iter().any(|e| e.command_type == PROCESS_DEADLINE) {
            Arc::new(Unhandled::read(self)?)
        } else {
            Arc::default()
        };
        let mut runs = Vec::with_capacity(entries.len());
        for entry in entries {
            let work = self.scheduled_work(&entry, &unhandled)?;
            // Each entry under the claim it was taken with: batches claimed with the previous
            // commit have claims of their own.
            let claim = Claim::Scheduled {
                dedupe_key: entry.dedupe_key,
                claim_id: entry.claim_id.unwrap_or_else(|| claim_id.to_owned()),
            };
            runs.push(Run::new(
                work,
                claim,
                entry.attempts + 1,
                entry.aggregate_id,
            ));
        }
        Ok(runs)
    }

    /// What a scheduler entry runs: a delayed policy run, a process deadline, or a command.
    fn scheduled_work(
        &self,
        entry: &ScheduledEntry,
        unhandled: &Arc<Unhandled>,
    ) -> Result<Box<dyn Work>, Error> {
        let context: Option<ScheduledContext> = serde_json::from_value(entry.context.clone()).ok();
        let correlation = context
            .as_ref()
            .map_or("", |context| context.cause.correlation_id.as_str());
        let span = telemetry::scheduled_span(&entry.command_type, correlation, entry.attempts + 1);
        Ok(match entry.command_type.as_str() {
            POLICY_RUN => {
                let payload: Option<PolicyRunPayload> =
                    serde_json::from_value(entry.payload.clone()).ok();
                let policy = payload.as_ref().and_then(|payload| {
                    self.policies()
                        .find(|policy| policy.name() == payload.policy)
                });
                let event = match &payload {
                    Some(payload) => self.store().read_event(&payload.event_id)?,
                    None => None,
                };
                match (policy, event) {
                    (Some(policy), Some(event)) => {
                        Box::new(PolicyRun::new(Arc::clone(policy), event).delayed(span))
                    }
                    // A policy a deploy removed, or an event gone: nothing left to run.
                    _ => Box::new(NothingToRun),
                }
            }
            PROCESS_DEADLINE => {
                let payload: Option<DeadlinePayload> =
                    serde_json::from_value(entry.payload.clone()).ok();
                let process = payload.as_ref().and_then(|payload| {
                    self.processes()
                        .find(|process| process.name() == payload.process)
                });
                match (payload, process) {
                    (Some(payload), Some(process)) => Box::new(DeadlineRun::new(
                        Arc::clone(process),
                        payload,
                        &entry.dedupe_key,
                        entry.execute_at,
                        Arc::clone(unhandled),
                        span,
                    )),
                    // A process a deploy removed: nothing left to run.
                    _ => Box::new(NothingToRun),
                }
            }
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
