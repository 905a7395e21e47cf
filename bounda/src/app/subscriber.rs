//! A subscriber's pass: read the events after its checkpoint, claim a batch of deliveries in the
//! inbox (paging past what other runners hold), run them through the engine, and move the
//! checkpoint past what is done, and past what a pause or a used-up limit holds, bookmarked
//! (`store::bookmarks`) and returned to once the hold is over.
//! The `policies` and `processes` subscribers are two uses of it.

use std::collections::BTreeMap;

use crate::app::engine::{Claim, Report, Run, Work};
use crate::app::holds::Holds;
use crate::app::{App, telemetry};
use crate::store::{Bookmark, Cursor, InboxClaim, InboxPair};
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
/// done, held, or taken by other runners: so several runners share a subscriber's work, each finding
/// lanes the others do not hold, however far along the log.
const PAGES: usize = 8;

impl App {
    /// One pass of `subscriber` at `now`, delivering each event to what `deliveries` returns
    /// for it. Returns whether anything ran or moved; the rejections of the runs that committed
    /// are added to `rejections`.
    ///
    /// The pass first returns to the bookmarks whose hold is over. It then claims at most a
    /// batch of deliveries, in order, from the events after the checkpoint: pages on past
    /// deliveries that are done, held (bookmarking the first of each holder) or that other
    /// runners hold, leaving their lanes to them, and runs what it claimed. The checkpoint then
    /// moves past the held deliveries, bookmarked, and stops just before the first delivery
    /// that waits (for its retry, for another runner, for a permit).
    pub(crate) async fn subscriber_pass(
        &self,
        subscriber: &'static str,
        kind: &'static str,
        now: Instant,
        rejections: &mut Vec<crate::app::RejectionRecord>,
        deliveries: impl Fn(&RecordedEvent) -> Vec<Delivery>,
    ) -> Result<bool, Error> {
        let store = self.store();
        let Some(mut cursor) = store.cursor(subscriber).await? else {
            return Ok(false);
        };
        // What operators paused and the limits used up hold here, read once there is something
        // to deliver or a bookmark to return to: a paused subscriber makes no pass; a held
        // handler's or instance's events wait, and the checkpoint passes them.
        let mut holds = None;
        let mut returned = false;
        if !cursor.bookmarks.is_empty() {
            let Some(read) = self.read_holds(subscriber, kind, now).await? else {
                return Ok(false);
            };
            returned = self.return_to_ended(subscriber, &cursor, &read).await?;
            if returned {
                match store.cursor(subscriber).await? {
                    Some(again) => cursor = again,
                    None => return Ok(true),
                }
            }
            holds = Some(read);
        }
        let from = cursor.checkpoint;
        let batch = self.config().dispatcher.batch_size;
        let mut page = self.read_all(from, batch).await?;
        if page.is_empty() {
            return Ok(returned);
        }
        let holds = match holds {
            Some(holds) => holds,
            None => match self.read_holds(subscriber, kind, now).await? {
                Some(holds) => holds,
                None => return Ok(returned),
            },
        };
        let span = telemetry::subscriber_span(subscriber, kind, from, page.len());
        let pass = async {
            let claim_id = self.claim_id();
            let mut order = holds.order(batch);
            let mut runs = Vec::new();
            let mut stop: Option<u64> = None;
            let mut bookmarks: BTreeMap<(&'static str, Option<String>), Bookmark> = BTreeMap::new();
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
                            // A held pair is passed, bookmarked (its handler's first pair, or
                            // its lane's); any other waits, and the checkpoint stops before it.
                            let holder = (claim == InboxClaim::Skipped)
                                .then(|| holds.holder(delivery.handler, &delivery.lane))
                                .flatten();
                            match holder {
                                Some(lane) => {
                                    let key = (delivery.handler, lane.map(str::to_owned));
                                    bookmarks.entry(key).or_insert_with_key(|(handler, lane)| {
                                        Bookmark {
                                            handler: (*handler).to_owned(),
                                            lane: lane.clone(),
                                            position: event.position,
                                        }
                                    });
                                }
                                None => {
                                    stop = Some(
                                        stop.map_or(event.position, |p| p.min(event.position)),
                                    );
                                }
                            }
                        }
                    }
                }
                if order.full() || !more {
                    break;
                }
                // What this page holds is done, held or someone else's: look further along.
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
            let to = stop.map_or(last, |p| p - 1);
            // Only what the checkpoint passes needs a bookmark.
            let bookmarks: Vec<Bookmark> = bookmarks
                .into_values()
                .filter(|bookmark| bookmark.position <= to)
                .collect();
            self.close_pass(subscriber, from, to, &bookmarks, claimed || returned)
                .await
        };
        telemetry::pass_outcome(&span, pass.instrument(span.clone()).await)
    }

    /// Returns `subscriber` to the bookmarks of `cursor` whose hold `holds` no longer keeps;
    /// whether there were any.
    async fn return_to_ended(
        &self,
        subscriber: &str,
        cursor: &Cursor,
        holds: &Holds,
    ) -> Result<bool, Error> {
        let over: Vec<(&str, &str)> = cursor
            .bookmarks
            .iter()
            .filter(|bookmark| !holds.keeps(bookmark))
            .map(|bookmark| (bookmark.handler.as_str(), bookmark.lane_key()))
            .collect();
        if over.is_empty() {
            return Ok(false);
        }
        self.store().return_to_bookmarks(subscriber, &over).await?;
        tracing::debug!(subscriber, held = ?over, "returned to the events a hold kept");
        Ok(true)
    }

    /// What holds `subscriber`'s handlers of `kind` at `now`, or `None` while the subscriber
    /// itself is paused: it makes no pass.
    async fn read_holds(
        &self,
        subscriber: &str,
        kind: &str,
        now: Instant,
    ) -> Result<Option<Holds>, Error> {
        let paused = self.paused().await?;
        if paused.subscriber(subscriber).is_some() {
            return Ok(None);
        }
        Ok(Some(self.holds(kind, now, &paused).await?))
    }

    /// Ends a pass of `subscriber` that read from `from`: moves its checkpoint to `to`, past the
    /// events before the first one that waits so they are not read again, leaving `bookmarks`
    /// where it passes held ones. Someone else moving it first is fine: they read the same
    /// events. Returns whether anything moved, and the pass's outcome for its span.
    async fn close_pass(
        &self,
        subscriber: &str,
        from: u64,
        to: u64,
        bookmarks: &[Bookmark],
        ran: bool,
    ) -> Result<(bool, &'static str), Error> {
        if to > from {
            let moved = self
                .store()
                .pass_checkpoint(subscriber, from, to, bookmarks)
                .await?;
            return Ok((true, if moved { "advanced" } else { "moved" }));
        }
        // The checkpoint stays only when the first event read is held.
        Ok((ran, "held"))
    }
}
