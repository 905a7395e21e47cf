//! A subscriber's pass: read the events after its checkpoint, claim each delivery in the inbox
//! in one batch, run them through the engine, and move the checkpoint past what is done.
//! The `policies` and `processes` subscribers are two uses of it.

use crate::app::engine::{Claim, Report, Run, Work};
use crate::app::{App, telemetry};
use crate::store::{InboxClaim, InboxPair};
use crate::{Error, Instant, RecordedEvent};
use tracing::Instrument;

/// One event for one handler of a subscriber.
pub(crate) struct Delivery {
    /// The handler's name: its inbox key.
    pub(crate) handler: &'static str,
    /// The aggregate instance the run concerns.
    pub(crate) lane: String,
    pub(crate) work: Box<dyn Work>,
}

impl App {
    /// One pass of `subscriber` at `now`, delivering each event to what `deliveries` returns
    /// for it. Returns whether anything ran or moved; the rejections of the runs that committed
    /// are added to `rejections`.
    pub(crate) async fn subscriber_pass(
        &self,
        subscriber: &'static str,
        kind: &'static str,
        now: Instant,
        rejections: &mut Vec<crate::app::RejectionRecord>,
        deliveries: impl Fn(&RecordedEvent) -> Vec<Delivery>,
    ) -> Result<bool, Error> {
        let store = self.store();
        let Some(from) = store.checkpoint(subscriber).await? else {
            return Ok(false);
        };
        let events = self
            .read_all(from, self.config().dispatcher.batch_size)
            .await?;
        let Some(last) = events.last().map(|event| event.position) else {
            return Ok(false);
        };
        let span = telemetry::subscriber_span(subscriber, kind, from, events.len());
        let pass = async {
            let planned: Vec<(&RecordedEvent, Delivery)> = events
                .iter()
                .flat_map(|event| deliveries(event).into_iter().map(move |d| (event, d)))
                .collect();
            let pairs: Vec<InboxPair<'_>> = planned
                .iter()
                .map(|(event, delivery)| InboxPair {
                    handler: delivery.handler,
                    event_id: &event.id,
                })
                .collect();
            let claim_id = self.claim_id();
            let claims = store
                .claim_inbox_batch(&pairs, &claim_id, now, self.lease())
                .await?;
            if claims.len() != pairs.len() {
                return Err(Error::Store(crate::store::StoreError::new(format!(
                    "the store answered {} claims for {} deliveries; a store must answer each, in order",
                    claims.len(),
                    pairs.len()
                ))));
            }
            // The checkpoint stops just before the first event a handler is held on (spec 148).
            let mut stop: Option<u64> = None;
            let mut runs = Vec::new();
            for ((event, delivery), claim) in planned.into_iter().zip(claims) {
                match claim {
                    InboxClaim::Claimed { attempt } => {
                        let claim = Claim::Inbox {
                            handler: delivery.handler,
                            event_id: event.id.clone(),
                            claim_id: claim_id.clone(),
                        };
                        let run = Run::new(delivery.work, claim, attempt, delivery.lane);
                        let run = run
                            .in_group(delivery.handler, event.position)
                            .claimed_at(now);
                        runs.push(run);
                    }
                    InboxClaim::Succeeded | InboxClaim::DeadLettered => {}
                    InboxClaim::Held | InboxClaim::Waiting { .. } | InboxClaim::Skipped => {
                        stop = Some(stop.map_or(event.position, |p| p.min(event.position)));
                    }
                }
            }
            let claimed = !runs.is_empty();
            let mut report = Report::default();
            let result = self.run_batch(runs, &mut report).await;
            rejections.append(&mut report.rejections);
            result?;
            let stop = match (stop, report.held_from) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            self.close_pass(subscriber, from, stop.map_or(last, |p| p - 1), claimed)
                .await
        };
        telemetry::pass_outcome(&span, pass.instrument(span.clone()).await)
    }

    /// Ends a pass of `subscriber` that read from `from`: moves its checkpoint to `to`, past the
    /// events before the first held one so they are not read again. Someone else
    /// moving it first is fine: they read the same events. Returns whether anything
    /// moved, and the pass's outcome for its span.
    async fn close_pass(
        &self,
        subscriber: &str,
        from: u64,
        to: u64,
        ran: bool,
    ) -> Result<(bool, &'static str), Error> {
        if to > from {
            let moved = self
                .store()
                .move_checkpoint(subscriber, Some(from), to)
                .await?;
            return Ok((true, if moved { "advanced" } else { "moved" }));
        }
        // The checkpoint stays only when the first event read is held.
        Ok((ran, "held"))
    }
}
