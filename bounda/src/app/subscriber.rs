//! A subscriber's pass: read the events after its checkpoint, claim a batch of deliveries in the
//! inbox (paging past what other runners hold), run them through the engine, and move the
//! checkpoint past what is done, and past what a pause or a used-up limit holds, bookmarked
//! (`store::bookmarks`) and returned to once the hold is over. On a store a round trip away, the
//! next batch is claimed while the last one commits (`engine::prepared`).
//! The `policies`, `processes` and `relays` subscribers are its uses.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use futures_util::future::BoxFuture;

use crate::app::engine::{Beside, Claim, Prepared, Report, Run, Work};
use crate::app::holds::Holds;
use crate::app::{App, telemetry};
use crate::store::{Bookmark, Cursor, InOrder, InboxClaim, InboxPair};
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

/// How many batches a pass runs at most on a store a round trip away, each claimed while the
/// one before it commits; elsewhere a pass runs one. A bound, so the other subscribers and the
/// worker get their turn.
const BATCHES: usize = 4;

/// What one pass of a subscriber claims with: its claim, its holds, its deliveries and the
/// order of its claims, carried from one batch to the next.
struct Turn<'a, F> {
    app: &'a App,
    claim_id: String,
    holds: Holds,
    deliveries: F,
    /// How many pairs a batch claims.
    batch: usize,
    /// The order of the pass's claims, once its first batch is claimed.
    order: Mutex<Option<InOrder>>,
}

/// A batch of deliveries claimed from pages of the log.
struct Claimed {
    /// The position its pages were read after.
    from: u64,
    /// The last position its pages read.
    last: u64,
    /// Whether it claimed any pair.
    claimed: bool,
    /// The first position whose delivery waits: the checkpoint stops before it.
    stop: Option<u64>,
    /// Where it passed held deliveries, the first of each holder.
    bookmarks: BTreeMap<(&'static str, Option<String>), Bookmark>,
    /// Whether its last page was full: events may follow.
    more: bool,
}

/// The next batch of a pass, claimed beside the last batch's commit.
struct NextDeliveries<'t, 'a, F> {
    turn: &'t Turn<'a, F>,
    /// The position to read after: the last one the batch before read.
    from: u64,
    claimed: Mutex<Option<Claimed>>,
}

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
    ///
    /// On a store a round trip away, a pass whose batch came full claims the next batch while
    /// the last one commits and runs it after, up to [`BATCHES`] batches; a batch claimed
    /// beside one that held a run is given back unrun.
    pub(crate) async fn subscriber_pass(
        &self,
        subscriber: &'static str,
        kind: &'static str,
        now: Instant,
        rejections: &mut Vec<crate::app::RejectionRecord>,
        deliveries: impl Fn(&RecordedEvent) -> Vec<Delivery> + Sync,
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
        let page = self.read_all(from, batch).await?;
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
            let turn = Turn {
                app: self,
                claim_id: self.claim_id(),
                holds,
                deliveries,
                batch,
                order: Mutex::new(None),
            };
            let (first, runs) = turn.claim(page, from).await?;
            let mut claimed = Some(first);
            let mut batch = self.prepare(runs, 0, Report::default(), false).await;
            // Where the checkpoint stands as this pass moved it; `None` once a batch stopped it
            // short, so the batches after it leave it there.
            let mut standing = Some(from);
            let mut outcome = (returned, "held");
            // On a store a round trip away, each batch's commit claims the next one beside it.
            let pipelined = store.capabilities().pipelined_batches;
            for round in 1..=BATCHES {
                let Some(this) = claimed.take() else { break };
                let next = (pipelined
                    && this.more
                    && this.stop.is_none()
                    && round < BATCHES
                    && !self.stopping())
                .then(|| NextDeliveries {
                    turn: &turn,
                    from: this.last,
                    claimed: Mutex::new(None),
                });
                batch.report.then_claim = next.as_ref().map(|_| turn.batch);
                let beside = next.as_ref().map(|next| next as &dyn Beside);
                let result = self.run_prepared(&mut batch, beside).await;
                rejections.append(&mut batch.report.rejections);
                self.or_give_back(result, &mut batch.report).await?;
                let held_from = batch.report.held_from;
                if standing == Some(this.from) {
                    let stop = match (this.stop, held_from) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                    let to = stop.map_or(this.last, |p| p - 1);
                    // Only what the checkpoint passes needs a bookmark.
                    let bookmarks: Vec<Bookmark> = this
                        .bookmarks
                        .into_values()
                        .filter(|bookmark| bookmark.position <= to)
                        .collect();
                    let ran = this.claimed || returned;
                    let closed = self
                        .close_pass(subscriber, this.from, to, &bookmarks, ran)
                        .await;
                    let (moved, label) = self.or_give_back(closed, &mut batch.report).await?;
                    outcome = (outcome.0 || moved, if moved { label } else { outcome.1 });
                    standing = (to == this.last).then_some(to);
                } else {
                    outcome.0 |= this.claimed;
                }
                let Some(prepared) = batch.report.prepared.take() else {
                    break;
                };
                let mut prepared = *prepared?;
                claimed = next.and_then(|next| next.claimed.into_inner().ok().flatten());
                // A run held here holds later runs of its handler and lane, which the claims
                // made beside the commit could not see: they are given back unrun.
                if held_from.is_some() {
                    prepared.give_back();
                    if let Some(next) = &mut claimed {
                        next.more = false;
                    }
                }
                batch = prepared;
            }
            Ok(outcome)
        };
        telemetry::pass_outcome(&span, pass.instrument(span.clone()).await)
    }

    /// `result`, having given back the batch `report` holds, claimed beside a commit, when it
    /// is an error that ends the pass before that batch runs: its claims are released for the
    /// next pass rather than left to lapse. Failing that too, they lapse with their lease, which
    /// is logged.
    async fn or_give_back<T>(
        &self,
        result: Result<T, Error>,
        report: &mut Report,
    ) -> Result<T, Error> {
        if result.is_ok() {
            return result;
        }
        if let Some(Ok(mut prepared)) = report.prepared.take() {
            prepared.give_back();
            if let Err(error) = self.run_prepared(&mut prepared, None).await {
                tracing::warn!(
                    code = error.code(),
                    "cannot give back a batch claimed beside a commit; its claims lapse with \
                     their lease: {}",
                    crate::error::chain(&error)
                );
            }
        }
        result
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

impl<F> Turn<'_, F>
where
    F: Fn(&RecordedEvent) -> Vec<Delivery> + Sync,
{
    /// Claims a batch of deliveries from `page` on, read after `from`: pages on past
    /// deliveries that are done, held (bookmarking the first of each holder) or that other
    /// runners hold, up to [`PAGES`] pages. Returns what it claimed and the runs.
    async fn claim(
        &self,
        mut page: Vec<RecordedEvent>,
        from: u64,
    ) -> Result<(Claimed, Vec<Run>), Error> {
        let app = self.app;
        let store = app.store();
        let mut order = {
            let mut kept = self.order.lock().unwrap_or_else(PoisonError::into_inner);
            match kept.take() {
                Some(mut order) => {
                    order.next_batch();
                    order
                }
                None => self.holds.order(self.batch),
            }
        };
        // A later batch of the pass claims at the clock's time, so its lease counts from then.
        let now = app.clock().now();
        let mut runs = Vec::new();
        let mut claimed = Claimed {
            from,
            last: from,
            claimed: false,
            stop: None,
            bookmarks: BTreeMap::new(),
            more: false,
        };
        for read in 1..=PAGES {
            claimed.more = page.len() >= self.batch;
            claimed.last = page.last().map_or(claimed.last, |event| event.position);
            let planned: Vec<(RecordedEvent, Delivery)> = page
                .into_iter()
                .flat_map(|event| {
                    let planned = (self.deliveries)(&event);
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
                .claim_inbox_batch(&pairs, &self.claim_id, now, app.lease(), &mut order)
                .await?;
            if claims.len() != pairs.len() {
                return Err(Error::Store(crate::store::StoreError::new(format!(
                    "the store answered {} claims for {} deliveries; a store must answer each, in order",
                    claims.len(),
                    pairs.len()
                ))));
            }
            for ((event, delivery), claim) in planned.into_iter().zip(claims) {
                self.place(event, delivery, claim, now, &mut claimed, &mut runs);
            }
            if order.full() || !claimed.more || read == PAGES {
                break;
            }
            // What this page holds is done, held or someone else's: look further along.
            page = app.read_all(claimed.last, self.batch).await?;
            if page.is_empty() {
                claimed.more = false;
                break;
            }
        }
        *self.order.lock().unwrap_or_else(PoisonError::into_inner) = Some(order);
        claimed.claimed = !runs.is_empty();
        Ok((claimed, runs))
    }

    /// Takes in how `delivery` of `event` was claimed: a run when it was; a held pair is
    /// passed, bookmarked (its handler's first pair, or its lane's); any other waits, and the
    /// checkpoint stops before it.
    fn place(
        &self,
        event: RecordedEvent,
        delivery: Delivery,
        claim: InboxClaim,
        now: Instant,
        claimed: &mut Claimed,
        runs: &mut Vec<Run>,
    ) {
        match claim {
            InboxClaim::Claimed { attempt } => {
                let claim = Claim::Inbox {
                    handler: delivery.handler,
                    event_id: event.id.clone(),
                    claim_id: self.claim_id.clone(),
                };
                let run = Run::new(delivery.work, claim, attempt, delivery.lane);
                let run = run
                    .in_group(delivery.handler, event.position)
                    .claimed_at(now);
                runs.push(run);
            }
            InboxClaim::Succeeded | InboxClaim::DeadLettered => {}
            InboxClaim::Held | InboxClaim::Waiting { .. } | InboxClaim::Skipped => {
                let holder = (claim == InboxClaim::Skipped)
                    .then(|| self.holds.holder(delivery.handler, &delivery.lane))
                    .flatten();
                match holder {
                    Some(lane) => {
                        let key = (delivery.handler, lane.map(str::to_owned));
                        claimed
                            .bookmarks
                            .entry(key)
                            .or_insert_with_key(|(handler, lane)| Bookmark {
                                handler: (*handler).to_owned(),
                                lane: lane.clone(),
                                position: event.position,
                            });
                    }
                    None => {
                        claimed.stop = Some(
                            claimed
                                .stop
                                .map_or(event.position, |p| p.min(event.position)),
                        );
                    }
                }
            }
        }
    }
}

impl<F> Beside for NextDeliveries<'_, '_, F>
where
    F: Fn(&RecordedEvent) -> Vec<Delivery> + Sync,
{
    fn prepare(&self) -> BoxFuture<'_, Result<Box<Prepared>, Error>> {
        Box::pin(async move {
            let app = self.turn.app;
            let page = app.read_all(self.from, self.turn.batch).await?;
            if page.is_empty() {
                return Ok(Box::new(
                    app.prepare(Vec::new(), 0, Report::default(), false).await,
                ));
            }
            let (claimed, runs) = self.turn.claim(page, self.from).await?;
            let count = runs.len();
            *self.claimed.lock().unwrap_or_else(PoisonError::into_inner) = Some(claimed);
            Ok(Box::new(
                app.prepare(runs, count, Report::default(), false).await,
            ))
        })
    }

    fn runs_beside(&self) -> bool {
        false
    }
}
