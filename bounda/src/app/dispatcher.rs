//! The dispatcher's pass over the `policies` subscriber: read after the checkpoint, deliver each
//! event to the policies that take it through the inbox, move the checkpoint (spec 30–36,
//! 123–129, 147–155).

use std::collections::HashSet;

use serde_json::json;

use crate::app::policy::PolicyRunner;
use crate::app::reaction::{POLICY_RUN, RejectionRecord};
use crate::app::run::{Failure, policy_key, policy_letter, policy_span, run_policy};
use crate::app::{App, POLICIES, telemetry};
use crate::ids::derived_id;
use crate::store::{CommitError, InboxClaim, InboxMark, InboxOutcome, ScheduledEntry, WriteSet};
use crate::{Error, Instant, RecordedEvent};
use tracing::Instrument;

/// What delivering one event to one policy came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    /// Handled, skipped, or dead-lettered: the policy goes on with its next event.
    Done,
    /// Claimed by another runner, or waiting for a retry: the policy's later events wait.
    Held,
}

impl App {
    /// One dispatcher pass at `now`. Returns whether anything moved; rejections of the
    /// attempts that committed are added to `rejections` in order.
    pub(crate) async fn policy_pass(
        &self,
        now: Instant,
        rejections: &mut Vec<RejectionRecord>,
    ) -> Result<bool, Error> {
        // No policy, no runner: nothing reads, checkpoints or wakes up (spec 32).
        if self.inner.policies.is_empty() {
            return Ok(false);
        }
        let store = self.store();
        let Some(from) = store.checkpoint(POLICIES)? else {
            return Ok(false);
        };
        let events = store.read_all(from, self.config().dispatcher.batch_size)?;
        let Some(last) = events.last().map(|event| event.position) else {
            return Ok(false);
        };
        let span = telemetry::subscriber_span(POLICIES, "policy", from, events.len());
        let pass = async {
            let mut held: HashSet<&'static str> = HashSet::new();
            // Whether any run was claimed: work happened even if the checkpoint stays.
            let mut ran = false;
            // The checkpoint stops just before the first event a policy is held on (spec 148).
            let mut stop: Option<u64> = None;
            for event in &events {
                for policy in self
                    .inner
                    .policies
                    .iter()
                    .filter(|p| event.has_key(p.key()))
                {
                    // A held policy's later events wait for the held one (spec 148).
                    if held.contains(policy.name()) {
                        continue;
                    }
                    if self
                        .deliver(&**policy, event, now, rejections, &mut ran)
                        .await?
                        == Delivery::Held
                    {
                        held.insert(policy.name());
                        stop.get_or_insert(event.position - 1);
                    }
                }
            }
            self.close_pass(POLICIES, from, stop.unwrap_or(last), ran)
        };
        telemetry::pass_outcome(&span, pass.instrument(span.clone()).await)
    }

    /// Ends a pass of `subscriber` that read from `from`: moves its checkpoint to `to`, past the
    /// events before the first held one so they are not read again (spec 149). Someone else
    /// moving it first is fine: they read the same events (spec 147). Returns whether anything
    /// moved, and the pass's outcome for its span (spec 223).
    pub(crate) fn close_pass(
        &self,
        subscriber: &str,
        from: u64,
        to: u64,
        ran: bool,
    ) -> Result<(bool, &'static str), Error> {
        if to > from {
            let moved = self.store().move_checkpoint(subscriber, Some(from), to)?;
            return Ok((true, if moved { "advanced" } else { "moved" }));
        }
        // The checkpoint stays only when the first event read is held.
        Ok((ran, "held"))
    }

    /// Delivers `event` to `policy`: claim, run, commit with the inbox mark (spec 123–131).
    async fn deliver(
        &self,
        policy: &dyn PolicyRunner,
        event: &RecordedEvent,
        now: Instant,
        rejections: &mut Vec<RejectionRecord>,
        ran: &mut bool,
    ) -> Result<Delivery, Error> {
        let store = self.store();
        let claim_id = self.next_id();
        let attempt =
            match store.claim_inbox(policy.name(), &event.id, &claim_id, now, self.lease())? {
                InboxClaim::Claimed { attempt } => {
                    *ran = true;
                    attempt
                }
                InboxClaim::Succeeded | InboxClaim::DeadLettered => return Ok(Delivery::Done),
                InboxClaim::Held | InboxClaim::Waiting { .. } => return Ok(Delivery::Held),
            };
        let mark = |outcome| InboxMark {
            handler: policy.name().to_owned(),
            event_id: event.id.clone(),
            claim_id: claim_id.clone(),
            outcome,
        };
        if let Some(delay) = policy.delay() {
            // A delayed policy's run is scheduled at the event's time plus the delay, not at read
            // time plus the delay (spec 37).
            let writes = WriteSet {
                schedule: vec![policy_run(policy.name(), event, event.timestamp + delay)],
                inbox: Some(mark(InboxOutcome::Succeeded)),
                ..WriteSet::default()
            };
            return self.settle(self.commit(&writes));
        }
        let settings = self.config().for_aggregate(policy.key().aggregate);
        let mut reruns = 0;
        let span = policy_span(policy, event, attempt);
        loop {
            let failure = match run_policy(
                self,
                policy,
                event,
                policy_key(policy.name(), &event.id),
                &span,
            )
            .await
            {
                Ok(staging) => {
                    let writes = WriteSet {
                        appends: staging.appends,
                        schedule: staging.scheduled,
                        inbox: Some(mark(InboxOutcome::Succeeded)),
                        ..WriteSet::default()
                    };
                    match self.commit(&writes) {
                        Ok(_) => {
                            rejections.extend(staging.rejections);
                            return Ok(Delivery::Done);
                        }
                        // A moved stream costs no attempt: renew the claim and run again on
                        // the new state, unless the claim was taken over (spec 128, 133).
                        Err(CommitError::StreamMoved { .. })
                            if reruns < settings.concurrency_retries =>
                        {
                            reruns += 1;
                            if !store.renew_inbox(
                                policy.name(),
                                &event.id,
                                &claim_id,
                                self.clock().now(),
                            )? {
                                return Ok(Delivery::Held);
                            }
                            continue;
                        }
                        Err(CommitError::ClaimLost { .. }) => return Ok(Delivery::Held),
                        Err(error) => {
                            let error = anyhow::Error::new(error);
                            Failure::of(&error)
                        }
                    }
                }
                Err(failure) => failure,
            };
            // A refused commit fails the attempt too, so its span says so.
            telemetry::failed(&span, &failure.message);
            // Retries run on later passes, after the back-off (spec 152, 155).
            let writes = match settings
                .policies_retry
                .delay_before(attempt)
                .filter(|_| failure.retriable)
            {
                Some(wait) => WriteSet {
                    inbox: Some(mark(InboxOutcome::Failed {
                        retry_at: now + wait,
                        error: failure.message.clone(),
                    })),
                    ..WriteSet::default()
                },
                // Given up: the letter stands alone, the policy's later events go on (spec 36).
                None => WriteSet {
                    inbox: Some(mark(InboxOutcome::DeadLettered {
                        error: failure.message.clone(),
                    })),
                    dead_letters: vec![policy_letter(policy.name(), event, &failure, attempt, now)],
                    ..WriteSet::default()
                },
            };
            let retrying = writes.dead_letters.is_empty();
            self.settle(self.commit(&writes))?;
            return Ok(if retrying {
                Delivery::Held
            } else {
                Delivery::Done
            });
        }
    }

    /// A settled claim is done; a claim lost meanwhile belongs to another runner.
    fn settle(
        &self,
        result: Result<crate::store::Committed, CommitError>,
    ) -> Result<Delivery, Error> {
        match result {
            Ok(_) => Ok(Delivery::Done),
            Err(CommitError::ClaimLost { .. }) => Ok(Delivery::Held),
            Err(CommitError::Store(error)) => Err(error.into()),
            Err(other) => Err(Error::Store(crate::store::StoreError::with_source(
                "a policy's write set was refused",
                other,
            ))),
        }
    }
}

/// The scheduler entry of a delayed policy's run (spec 37, 41).
fn policy_run(policy: &str, event: &RecordedEvent, execute_at: Instant) -> ScheduledEntry {
    ScheduledEntry {
        dedupe_key: derived_id(&["policy-run", policy, &event.id]),
        command_type: POLICY_RUN.to_owned(),
        aggregate_id: event.aggregate_id.clone(),
        payload: json!({ "policy": policy, "eventId": event.id }),
        execute_at,
        context: json!({}),
        attempts: 0,
        last_error: None,
        revision: 0,
        claim_id: None,
        claimed_at: None,
    }
}
