//! A subscriber's pass: read the events after its checkpoint, claim a batch of deliveries in the
//! inbox (paging past what other runners hold), run them through the engine, and move the
//! checkpoint past what is done.
//! The `policies` and `processes` subscribers are two uses of it.

use crate::app::engine::{Claim, Report, Run, Work};
use crate::app::{App, telemetry};
use crate::store::{InOrder, InboxClaim, InboxPair, PauseTarget};
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

/// How many pages of events (a batch each) a pass reads at most while the pairs it meets are
/// done or held by other runners: so several runners share a subscriber's work, each finding
/// lanes the others do not hold, however far along the log.
const PAGES: usize = 8;

impl App {
    /// One pass of `subscriber` at `now`, delivering each event to what `deliveries` returns
    /// for it. Returns whether anything ran or moved; the rejections of the runs that committed
    /// are added to `rejections`.
    ///
    /// The pass claims at most a batch of deliveries, in order, from the events after the
    /// checkpoint: pages on past deliveries that are done or that other runners hold, leaving
    /// their lanes to them, and runs what it claimed. The checkpoint then stops just before the
    /// first delivery it could not settle.
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
        let batch = self.config().dispatcher.batch_size;
        let mut page = self.read_all(from, batch).await?;
        if page.is_empty() {
            return Ok(false);
        }
        // What operators paused holds here, read once there is something to deliver: a paused
        // subscriber makes no pass; a paused handler's or instance's events wait, as behind a
        // failure waiting for its retry.
        let paused = self.paused().await?;
        if paused.subscriber(subscriber).is_some() {
            return Ok(false);
        }
        let span = telemetry::subscriber_span(subscriber, kind, from, page.len());
        let pass = async {
            let claim_id = self.claim_id();
            let mut order = InOrder::new(batch);
            for pause in paused.all() {
                match &pause.target {
                    PauseTarget::Process { name } | PauseTarget::Policy { name } => {
                        order.hold_handler(name)
                    }
                    PauseTarget::Instance { process, id } => order.hold_lane(process, id),
                    PauseTarget::Subscriber { .. } => {}
                }
            }
            // A handler whose limit is used up in this window waits for the next, its events
            // in order behind the first.
            for window in self.used_up_limits(kind, now).await? {
                order.hold_handler(&window.key.name);
            }
            let mut runs = Vec::new();
            let mut stop: Option<u64> = None;
            let mut last = from;
            for read in 1..=PAGES {
                let more = page.len() >= batch && read < PAGES;
                last = page.last().map_or(last, |event| event.position);
                let planned: Vec<(RecordedEvent, Delivery)> = page
                    .into_iter()
                    .flat_map(|event| {
                        let planned = deliveries(&event);
                        planned.into_iter().map(move |d| (event.clone(), d))
                    })
                    .collect();
                let pairs: Vec<InboxPair<'_>> = planned
                    .iter()
                    .map(|(event, delivery)| InboxPair {
                        handler: delivery.handler,
                        event_id: &event.id,
                        lane: &delivery.lane,
                    })
                    .collect();
                let claims = store
                    .claim_inbox_batch(&pairs, &claim_id, now, self.lease(), &mut order)
                    .await?;
                if claims.len() != pairs.len() {
                    return Err(Error::Store(crate::store::StoreError::new(format!(
                        "the store answered {} claims for {} deliveries; a store must answer each, in order",
                        claims.len(),
                        pairs.len()
                    ))));
                }
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
                if order.full() || !more {
                    break;
                }
                // What this page holds is done or someone else's: look further along.
                page = self.read_all(last, batch).await?;
                if page.is_empty() {
                    break;
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
