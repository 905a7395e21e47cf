//! The run engine: every kind of run goes through one loop.
//!
//! A run is a unit of claimed work: one event to one policy or process, one scheduler entry
//! (a delayed command, a delayed policy run, a process deadline), or one dead letter an
//! operator retries. Its [`Work`] runs the handler and says what to write; its [`Claim`] is
//! settled in the same write set. The loop takes a batch of claimed runs and goes through it in
//! waves: a wave holds at most one run per lane (the aggregate instance a run concerns), so one
//! instance's steps run and commit in order; the handlers of a wave of scheduler runs run at
//! once (a subscriber's one after another, as a failure holds its handler's later runs), and
//! the wave's write sets commit in one transaction, each alone in a savepoint, so one that is
//! refused reruns or fails alone. A moved stream reruns the handler on the new
//! state without spending an attempt, after renewing the claim; a failure is
//! retried after its back-off or given up with a letter.

mod claim;
mod pace;
mod prepared;
pub(crate) mod read_ahead;

use std::collections::{HashSet, VecDeque};

use futures_util::future::BoxFuture;

use crate::app::failure::Failure;
pub(crate) use claim::{Claim, Settle};
pub(crate) use prepared::{Beside, Prepared};

use crate::app::App;
use crate::app::{RejectionRecord, telemetry};
use crate::config::Retry;
use crate::store::{ClaimDue, CommitError, Committed, ScheduledEntry, WriteSet};
use crate::{Error, Instant};

/// What a kind of run does: run its handler and say what to write.
pub(crate) trait Work: Send {
    /// Runs the handler of the run's `attempt`-th try. Writes nothing: what it returns is
    /// committed by the engine, with the claim's settling.
    fn execute<'a>(&'a mut self, app: &'a App, attempt: u32) -> BoxFuture<'a, Outcome>;

    /// The streams (type and id) its handler's run loads, read ahead with its wave's
    /// ([`read_ahead`]); none by default.
    fn streams(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// The scheduler entries (by key) its handler's run reads, read ahead with its wave's
    /// ([`read_ahead`]); none by default.
    fn entries(&self) -> Vec<String> {
        Vec::new()
    }

    /// The aggregate whose settings the run follows ("" for none).
    fn aggregate(&self) -> &'static str;

    /// What the run is, for a person reading the log: the handler, and the event or deadline
    /// and instance it runs on.
    fn subject(&self) -> String;

    /// The handler's kind (`policy`, `process`, `scheduled`) and name, for the failure
    /// counter; `None` for a run whose handler never ran (one that could not be prepared).
    fn handler(&self) -> Option<(&'static str, String)> {
        None
    }

    /// The handler whose limit paces the run, as [`handler`](Work::handler) names it: the
    /// handler itself by default; none for a run that only schedules another (a delayed
    /// policy's scheduling, paced when its delayed run runs).
    fn paced_as(&self) -> Option<(&'static str, String)> {
        self.handler()
    }

    /// Whether it is a process step, retried with `processes.retry`; any other run is retried
    /// with `policies.retry`.
    fn process_step(&self) -> bool {
        false
    }

    /// Whether its group's runs of different lanes run at once in a wave: nothing one lane's
    /// run does concerns another's (a relay's publishes, whose acknowledgements are then awaited
    /// together). A run waiting for its retry still holds its group's runs of later waves.
    fn lanes_apart(&self) -> bool {
        false
    }

    /// The back-off of a failed run.
    fn retry(&self, app: &App) -> Retry {
        let settings = app.config().for_aggregate(self.aggregate());
        match self.process_step() {
            true => settings.processes_retry,
            false => settings.policies_retry,
        }
    }

    /// How often a moved stream reruns the handler before it counts as a failure.
    fn concurrency_retries(&self, app: &App) -> u32 {
        app.config()
            .for_aggregate(self.aggregate())
            .concurrency_retries
    }

    /// What giving up writes besides settling the claim: the letter, and for a process
    /// `ProcessFailed`. Nothing by default.
    fn give_up(
        &self,
        _app: &App,
        _failure: &Failure,
        _attempt: u32,
        _now: Instant,
    ) -> Result<WriteSet, Error> {
        Ok(WriteSet::default())
    }

    /// Marks the run's spans failed when its commit is refused.
    fn mark_failed(&self, _message: &str) {}

    /// What a failure writes when an operator's retry runs it: by default nothing, and the
    /// letter stays `failed`.
    fn operator_failure(
        &self,
        _app: &App,
        _failure: &Failure,
        _now: Instant,
    ) -> Result<WriteSet, Error> {
        Ok(WriteSet::default())
    }
}

/// What a run's handler came to.
#[allow(
    clippy::large_enum_variant,
    reason = "one per run, moved once into its write set"
)]
pub(crate) enum Outcome {
    /// Ran: commit these writes.
    Commit(Done),
    /// Failed: retried or given up.
    Failed(Failure),
    /// Not run now (a deadline waiting for its instance's events): the claim is given back
    /// without counting an attempt.
    Defer,
}

impl Outcome {
    /// A run with nothing to write but its claim's settling.
    pub(crate) fn nothing() -> Outcome {
        Outcome::Commit(Done::default())
    }

    /// The outcome of a run whose reads may fail: a store that fails fails the run (retried).
    pub(crate) fn of(result: Result<Outcome, Error>) -> Outcome {
        result.unwrap_or_else(|error| Outcome::Failed(Failure::of_error(&error)))
    }
}

/// The writes of a run that ran.
#[derive(Default)]
pub(crate) struct Done {
    pub(crate) writes: WriteSet,
    /// The rejections of the commands it sent, reported once it commits.
    pub(crate) rejections: Vec<RejectionRecord>,
    /// What to report once it has committed (a scheduled command's outcome).
    pub(crate) after: Option<Box<dyn FnOnce() + Send>>,
}

impl Done {
    /// Writes `writes`.
    pub(crate) fn writes(writes: WriteSet) -> Done {
        Done {
            writes,
            ..Done::default()
        }
    }
}

/// One claimed run.
pub(crate) struct Run {
    pub(crate) work: Box<dyn Work>,
    pub(crate) claim: Claim,
    /// Which try this is, the first being 1.
    pub(crate) attempt: u32,
    /// The aggregate instance it concerns: a lane's runs commit one at a time, in order.
    pub(crate) lane: String,
    /// The handler whose later runs wait while this one waits for its retry.
    pub(crate) group: Option<&'static str>,
    /// The event's position, for a subscriber's checkpoint.
    pub(crate) position: Option<u64>,
    /// When its claim was taken or last renewed, for a claim with a lease.
    claimed_at: Option<Instant>,
    /// Whether its limit's permits ran out ([`pace`]): given back unrun, for a later window.
    held_back: bool,
    /// The limit's window whose permit it took, given back if it does not run.
    permit: Option<(crate::store::LimitKey, Instant)>,
    /// Reruns after a moved stream so far.
    reruns: u32,
}

impl Run {
    /// A run of `work` under `claim`.
    pub(crate) fn new(work: Box<dyn Work>, claim: Claim, attempt: u32, lane: String) -> Run {
        Run {
            work,
            claim,
            attempt,
            lane,
            group: None,
            position: None,
            claimed_at: None,
            held_back: false,
            permit: None,
            reruns: 0,
        }
    }

    /// The same run, its claim taken at `at`: before it runs, a claim that has used half its
    /// lease is renewed, and a run whose claim was taken over runs nothing.
    pub(crate) fn claimed_at(mut self, at: Instant) -> Run {
        self.claimed_at = Some(at);
        self
    }

    /// The same run, holding `group`'s later runs while it waits for a retry.
    pub(crate) fn in_group(mut self, group: &'static str, position: u64) -> Run {
        self.group = Some(group);
        self.position = Some(position);
        self
    }
}

/// What a batch came to.
#[derive(Default)]
pub(crate) struct Report {
    /// Whether any run ran (committed, failed or gave up): work moved on.
    pub(crate) ran: bool,
    /// The rejections of the runs that committed, in order.
    pub(crate) rejections: Vec<RejectionRecord>,
    /// The first position a held run stands at: a subscriber's checkpoint stops before it.
    pub(crate) held_from: Option<u64>,
    /// Failures of runs the runtime does not retry itself (an operator's retry), in order.
    pub(crate) failures: Vec<Failure>,
    /// A letter that was already settled, or that another retry held, when its retry ran or
    /// committed.
    pub(crate) letter_settled: Option<String>,
    /// When a run's claim was last renewed: an operator's retry carries it from one step to
    /// the next, so its letter's claim is renewed at half its lease, as other claims are.
    pub(crate) renewed_at: Option<Instant>,
    /// How many entries to claim with the batch's last commit, unless a run was deferred: a
    /// worker under load claims its next batch in the transaction that commits this one.
    pub(crate) then_claim: Option<usize>,
    /// What `then_claim` claimed.
    pub(crate) claimed: Vec<ScheduledEntry>,
    /// The next batch, when `then_claim` prepared it beside the commit ([`prepared`]).
    pub(crate) prepared: Option<Result<Box<Prepared>, Error>>,
    /// Whether a run was deferred unrun (a deadline waiting for its instance's events).
    pub(crate) deferred: bool,
    /// The first failure of the store itself: reported once the rest of the batch was tried;
    /// the runs it stopped keep their claims, which lapse.
    pub(crate) store_error: Option<Error>,
    /// The limits' permits of runs that did not run, to give back.
    pub(crate) returned: Vec<(crate::store::LimitKey, Instant)>,
}

impl Report {
    /// Records a failure of the store that stopped `run`, which is held.
    fn store_failed(&mut self, run: &Run, error: Error) {
        self.hold(run);
        self.store_error.get_or_insert(error);
    }

    /// Takes in what one run's execution reported, in the batch's order: what `execute` and
    /// what it calls record.
    fn absorb(&mut self, other: Report) {
        let Report {
            ran,
            mut rejections,
            held_from,
            mut failures,
            letter_settled,
            renewed_at,
            then_claim: _,
            mut claimed,
            prepared: _,
            deferred,
            store_error,
            mut returned,
        } = other;
        self.ran |= ran;
        self.rejections.append(&mut rejections);
        if let Some(position) = held_from {
            self.hold_at(position);
        }
        self.failures.append(&mut failures);
        if letter_settled.is_some() {
            self.letter_settled = letter_settled;
        }
        self.renewed_at = self.renewed_at.max(renewed_at);
        self.claimed.append(&mut claimed);
        self.deferred |= deferred;
        self.returned.append(&mut returned);
        if let Some(error) = store_error {
            self.store_error.get_or_insert(error);
        }
    }

    /// Keeps `run`'s permit, if it took one, to give back: it does not run.
    fn unrun(&mut self, run: &mut Run) {
        if let Some(permit) = run.permit.take() {
            self.returned.push(permit);
        }
    }

    fn hold(&mut self, run: &Run) {
        if let Some(position) = run.position {
            self.hold_at(position);
        }
    }

    fn hold_at(&mut self, position: u64) {
        self.held_from = Some(self.held_from.map_or(position, |p| p.min(position)));
    }
}

/// A run waiting in the batch: to execute, or with its write set ready.
enum Queued {
    Execute(Run),
    Write(Box<(Run, WriteSet, Kind)>),
}

/// What a write set in a wave settles.
enum Kind {
    /// The handler ran.
    Done {
        rejections: Vec<RejectionRecord>,
        after: Option<Box<dyn FnOnce() + Send>>,
    },
    /// A failure, retried at `retry_at`, or given up.
    Failed {
        failure: Failure,
        retry_at: Option<Instant>,
    },
    /// Given back unrun; `holds` when the subscriber must wait for it.
    Released { holds: bool },
}

impl App {
    /// Runs `runs`, in order per lane, committing each wave in one transaction. A commit the
    /// store refuses fails its runs like any failure (retried after their back-off);
    /// when recording that failure is refused too, the runs keep their claims, which lapse,
    /// and the store's error is returned once the rest of the batch was tried.
    pub(crate) async fn run_batch(&self, runs: Vec<Run>, report: &mut Report) -> Result<(), Error> {
        let mut batch = self.prepare(runs, 0, std::mem::take(report), false).await;
        let result = self.run_prepared(&mut batch, None).await;
        *report = batch.report;
        result
    }

    /// Runs a batch [`prepare`](App::prepare)d, as [`run_batch`](App::run_batch) does. Its last
    /// wave takes the next batch when its report's `then_claim` asks: prepared by `beside`
    /// while the wave commits, where there is one and nothing the wave writes bears on the
    /// next batch ([`prepared`]), or else claimed in the wave's transaction.
    pub(crate) async fn run_prepared(
        &self,
        batch: &mut Prepared,
        beside: Option<&dyn Beside>,
    ) -> Result<(), Error> {
        let queue = &mut batch.queue;
        let (held, report) = (&mut batch.held, &mut batch.report);
        while !queue.is_empty() {
            let next_wave = next_wave(queue);
            let entries = self.execute_wave(next_wave, held, report).await;
            let mut wave: Vec<(Run, Kind)> = Vec::with_capacity(entries.len());
            let mut sets: Vec<WriteSet> = Vec::with_capacity(entries.len() + 1);
            for (run, writes, kind) in entries {
                wave.push((run, kind));
                sets.push(writes);
            }
            // The batch's last wave takes the next batch.
            let claiming = queue.is_empty() && !report.deferred;
            let mut preparing = None;
            // Taken only by that wave: an earlier one leaves it for the last.
            if let Some(limit) = claiming.then(|| report.then_claim.take()).flatten() {
                let feeds = |beside: &&dyn Beside| {
                    beside.runs_beside() && sets.iter().any(|writes| self.feeds_processes(writes))
                };
                match beside.filter(|beside| !feeds(beside)) {
                    Some(beside) => preparing = Some(beside),
                    // Claimed now, under a claim of its own, so its lease counts from now.
                    None => sets.push(WriteSet {
                        claim_due: Some(ClaimDue {
                            claim_id: self.claim_id(),
                            now: self.clock().now(),
                            lease: self.lease(),
                            limit,
                        }),
                        ..WriteSet::default()
                    }),
                }
            }
            let mut results = match preparing {
                Some(beside) => {
                    let (results, prepared) =
                        futures_util::future::join(self.commit_all(&mut sets), beside.prepare())
                            .await;
                    report.prepared = Some(prepared);
                    results
                }
                None => self.commit_all(&mut sets).await,
            };
            if results.len() > wave.len() {
                match results.pop() {
                    Some(Ok(committed)) => report.claimed = committed.claimed,
                    Some(Err(error)) => {
                        let unavailable = error.is_unavailable();
                        report.store_error.get_or_insert(Error::Store(
                            crate::store::StoreError::with_source(
                                "cannot claim due entries",
                                error,
                            )
                            .unavailable_if(unavailable),
                        ));
                    }
                    None => {}
                }
            }
            let mut reruns = Vec::new();
            for ((run, kind), result) in wave.into_iter().zip(results) {
                if let Some(queued) = self.committed(run, kind, result, report, held).await {
                    reruns.push(queued);
                }
            }
            // Reruns go first, in order: their lanes' later runs wait behind them.
            for queued in reruns.into_iter().rev() {
                queue.push_front(queued);
            }
        }
        self.return_permits(std::mem::take(&mut report.returned))
            .await;
        match report.store_error.take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Runs the handlers of a wave (one run per lane), in wave order. Runs of no group (the
    /// scheduler's: deadlines, delayed commands, delayed policy runs) and runs whose lanes are
    /// apart (a relay's) run at once, so their reads and their handlers' waits overlap; a
    /// subscriber's other runs run one after another, as a failure holds its handler's later
    /// runs. Either way, the streams the runs load are read ahead first, a read per stream type
    /// for the whole wave ([`read_ahead`]).
    async fn execute_wave(
        &self,
        wave: Vec<Queued>,
        held: &mut HashSet<&'static str>,
        report: &mut Report,
    ) -> Vec<(Run, WriteSet, Kind)> {
        let together = wave.len() > 1
            && wave.iter().all(|queued| match queued {
                Queued::Execute(run) => run.group.is_none() || run.work.lanes_apart(),
                Queued::Write(_) => true,
            });
        let mut streams: Vec<(String, String)> = Vec::new();
        let mut entries: Vec<String> = Vec::new();
        for queued in &wave {
            if let Queued::Execute(run) = queued {
                streams.extend(run.work.streams());
                entries.extend(run.work.entries());
            }
        }
        let ahead = read_ahead::ReadAhead::read(self, streams, entries).await;
        if !together {
            return ahead
                .during(async {
                    let mut entries = Vec::with_capacity(wave.len());
                    for queued in wave {
                        let entry = match queued {
                            Queued::Write(entry) => Some(*entry),
                            Queued::Execute(run) => self.execute(run, held, report).await,
                        };
                        // A run waiting for its retry holds its group's later runs from here on.
                        if let Some((run, _, kind)) = &entry {
                            hold_if_waiting(run, kind, held);
                        }
                        entries.extend(entry);
                    }
                    entries
                })
                .await;
        }
        let earlier = held.clone();
        let runs = wave.into_iter().map(|queued| {
            // Nothing a run does here holds another's; what waits from an earlier wave still
            // holds its group.
            let mut holding = earlier.clone();
            async move {
                match queued {
                    Queued::Write(entry) => (Some(*entry), Report::default(), holding),
                    Queued::Execute(run) => {
                        let mut own = Report::default();
                        let entry = self.execute(run, &mut holding, &mut own).await;
                        (entry, own, holding)
                    }
                }
            }
        });
        let mut entries = Vec::new();
        for (entry, own, holding) in ahead.during(futures_util::future::join_all(runs)).await {
            report.absorb(own);
            // A run whose claim was lost holds its group in later waves, as one after another.
            held.extend(holding);
            if let Some((run, _, kind)) = &entry {
                hold_if_waiting(run, kind, held);
            }
            entries.extend(entry);
        }
        entries
    }

    /// Runs one run's handler: its write set with the claim settled, or `None` when there is
    /// nothing to commit (an operator's retry that failed).
    async fn execute(
        &self,
        mut run: Run,
        held: &mut HashSet<&'static str>,
        report: &mut Report,
    ) -> Option<(Run, WriteSet, Kind)> {
        // A held handler's later runs, and the runtime's own runs once the app is stopping, are
        // given back unrun (spec 46, 148, 188); an operator's retry runs to its answer.
        let stopping = self.stopping() && run.claim.retries();
        if run.group.is_some_and(|group| held.contains(group)) || stopping || run.held_back {
            report.unrun(&mut run);
            let mut writes = WriteSet::default();
            run.claim.settle(&mut writes, Settle::Release);
            return Some((run, writes, Kind::Released { holds: true }));
        }
        if !self.still_claimed(&mut run, report).await {
            report.unrun(&mut run);
            if let Some(group) = run.group {
                held.insert(group);
            }
            return None;
        }
        match run.work.execute(self, run.attempt).await {
            Outcome::Commit(done) => {
                let mut writes = done.writes;
                run.claim.settle(&mut writes, Settle::Done);
                let kind = Kind::Done {
                    rejections: done.rejections,
                    after: done.after,
                };
                Some((run, writes, kind))
            }
            Outcome::Defer => {
                report.unrun(&mut run);
                report.deferred = true;
                let mut writes = WriteSet::default();
                run.claim.settle(&mut writes, Settle::Release);
                Some((run, writes, Kind::Released { holds: false }))
            }
            Outcome::Failed(failure) => self.failed(run, failure, report),
        }
    }

    /// Whether `run` still holds its claim: one that has used half its lease (a long batch) is
    /// renewed first; one taken over meanwhile is someone else's, and the run is held.
    async fn still_claimed(&self, run: &mut Run, report: &mut Report) -> bool {
        let Some(claimed_at) = run.claimed_at else {
            return true;
        };
        let half = crate::millis(self.lease().as_millis() / 2);
        if self.clock().now() <= claimed_at + half {
            return true;
        }
        self.renew(run, report).await
    }

    /// Renews `run`'s claim for a lease from now. `false` when another runner took it over
    /// meanwhile or the store failed: the run is held.
    async fn renew(&self, run: &mut Run, report: &mut Report) -> bool {
        let now = self.clock().now();
        match run.claim.renew(self.store(), now, self.lease()).await {
            Ok(true) => {
                run.claimed_at = Some(now);
                report.renewed_at = Some(now);
                true
            }
            Ok(false) => {
                claim_lost(run, report);
                false
            }
            Err(error) => {
                report.store_failed(run, error.into());
                false
            }
        }
    }

    /// The write set of a failed run: its retry, or its letter. `None` when
    /// there is nothing to write (an operator's retry that failed), or when what giving up
    /// writes could not be made (the run is held, its claim lapses, and the error is reported).
    fn failed(
        &self,
        run: Run,
        failure: Failure,
        report: &mut Report,
    ) -> Option<(Run, WriteSet, Kind)> {
        let now = self.clock().now();
        // A store out of reach failed the run's reads: no fault of the run's, which is held, its
        // claim lapsing, and runs again once the store is back, no attempt spent.
        if failure.unavailable && run.claim.retries() {
            let error = crate::store::StoreError::new(failure.message).unavailable_if(true);
            report.store_failed(&run, Error::Store(error));
            return None;
        }
        if !run.claim.retries() {
            report.failures.push(failure.clone());
            let mut writes = match run.work.operator_failure(self, &failure, now) {
                Ok(writes) => writes,
                Err(error) => {
                    report.store_failed(&run, error);
                    return None;
                }
            };
            if writes.is_empty() {
                return None;
            }
            let error = failure.message.clone();
            run.claim.settle(&mut writes, Settle::GiveUp { error });
            let kind = Kind::Failed {
                failure,
                retry_at: None,
            };
            return Some((run, writes, kind));
        }
        let wait = run
            .work
            .retry(self)
            .delay_before(run.attempt)
            .filter(|_| failure.retriable);
        let (writes, retry_at) = match wait {
            Some(wait) => {
                let mut writes = WriteSet::default();
                let at = now + wait;
                let error = failure.message.clone();
                run.claim.settle(
                    &mut writes,
                    Settle::Retry {
                        at,
                        error,
                        failed_at: now,
                    },
                );
                (writes, Some(at))
            }
            None => {
                let mut writes = match run.work.give_up(self, &failure, run.attempt, now) {
                    Ok(writes) => writes,
                    Err(error) => {
                        report.store_failed(&run, error);
                        return None;
                    }
                };
                let error = failure.message.clone();
                run.claim.settle(&mut writes, Settle::GiveUp { error });
                (writes, None)
            }
        };
        Some((run, writes, Kind::Failed { failure, retry_at }))
    }

    /// What follows a write set's commit.
    async fn committed(
        &self,
        run: Run,
        kind: Kind,
        result: Result<Committed, CommitError>,
        report: &mut Report,
        held: &mut HashSet<&'static str>,
    ) -> Option<Queued> {
        let error = match result {
            Ok(_) => {
                match kind {
                    Kind::Done { rejections, after } => {
                        report.ran = true;
                        report.rejections.extend(rejections);
                        if let Some(after) = after {
                            after();
                        }
                    }
                    Kind::Failed { failure, retry_at } => {
                        report.ran = true;
                        if let Some(at) = retry_at {
                            report.hold(&run);
                            let subject = run.work.subject();
                            telemetry::run_retried(&subject, run.group, run.attempt, at, &failure);
                            if let Some((kind, handler)) = run.work.handler() {
                                crate::metrics::handler_failed(kind, &handler);
                            }
                        }
                    }
                    Kind::Released { holds } => {
                        if holds {
                            report.hold(&run);
                        }
                    }
                }
                return None;
            }
            Err(error) => error,
        };
        match (error, kind) {
            // Someone else holds the run now: it is theirs to finish (spec 47, 127).
            (
                error @ (CommitError::ClaimLost { .. } | CommitError::ScheduledClaimLost { .. }),
                _,
            ) => {
                // A lease that lapsed: the run was slower than it, this process was cut off, or
                // the runners' clocks disagree.
                tracing::warn!(
                    code = error.code(),
                    lease = %self.lease(),
                    "{error}: its lease lapsed and another runner took the run over, so this \
                     runner's commit of it was refused; {CLOCKS}"
                );
                report.hold(&run);
                if let Some(group) = run.group {
                    held.insert(group);
                }
                None
            }
            (CommitError::LetterSettled { id }, _) => {
                report.letter_settled = Some(id);
                None
            }
            // A moved stream costs no attempt: renew the claim and run again on the new state
            // (spec 89, 128, 133).
            (CommitError::StreamMoved { .. }, Kind::Done { .. })
                if run.reruns < run.work.concurrency_retries(self) =>
            {
                let mut run = run;
                run.reruns += 1;
                match self.renew(&mut run, report).await {
                    true => Some(Queued::Execute(run)),
                    false => None,
                }
            }
            // A give-up that found the instance moved: look again after the next step.
            (CommitError::StreamMoved { .. }, Kind::Failed { failure, .. }) => {
                let mut writes = WriteSet::default();
                let at = self.clock().now();
                let error = failure.message.clone();
                run.claim.settle(
                    &mut writes,
                    Settle::Retry {
                        at,
                        error,
                        failed_at: at,
                    },
                );
                if let Some(group) = run.group {
                    held.insert(group);
                }
                let kind = Kind::Failed {
                    failure,
                    retry_at: Some(at),
                };
                Some(Queued::Write(Box::new((run, writes, kind))))
            }
            // A store out of reach is no fault of the run's: it keeps its claim, which lapses, and
            // runs again once the store is back, no attempt spent.
            (CommitError::Store(error), Kind::Done { .. }) if error.is_unavailable() => {
                report.store_failed(&run, error.into());
                None
            }
            // A refused commit fails the run: retried, or given up (spec 154).
            (error, Kind::Done { .. }) => {
                let failure = Failure::of(&anyhow::Error::new(error));
                run.work.mark_failed(&failure.message);
                let (run, writes, kind) = self.failed(run, failure, report)?;
                hold_if_waiting(&run, &kind, held);
                Some(Queued::Write(Box::new((run, writes, kind))))
            }
            // Recording a failure or a release was refused too: the claim lapses and the run is
            // tried again (spec 126).
            (CommitError::Store(error), _) => {
                report.store_failed(&run, error.into());
                None
            }
            (error, _) => {
                let unavailable = error.is_unavailable();
                let error =
                    crate::store::StoreError::with_source("a run's write set was refused", error)
                        .unavailable_if(unavailable);
                report.store_failed(&run, Error::Store(error));
                None
            }
        }
    }

    /// Commits `sets` in one transaction (one alone needs no savepoint), each with what it
    /// changes in the instances index; once they are on the file, counts the letters they filed, the deadlines they reached and the commit's time. A subscriber that takes none of a write
    /// set's events is skipped past them in the same transaction.
    pub(crate) async fn commit_all(
        &self,
        sets: &mut [WriteSet],
    ) -> Vec<Result<Committed, CommitError>> {
        for writes in sets.iter_mut() {
            writes.skip = self.skipping(writes);
            writes.instances = writes.instance_changes();
        }
        let started = std::time::Instant::now();
        let results = match &*sets {
            [] => Vec::new(),
            [one] => vec![self.store().commit(one).await],
            many => self.store().commit_many(many).await,
        };
        let seconds = started.elapsed().as_secs_f64();
        // A store answers each write set, in order; one that does not is broken, and what it
        // did is unknown: every run of the group fails and is run again.
        let results = if results.len() == sets.len() {
            results
        } else {
            let message = format!(
                "the store answered {} results for {} write sets; a store must answer each, in order",
                results.len(),
                sets.len()
            );
            tracing::error!("{message}");
            sets.iter()
                .map(|_| {
                    Err(CommitError::Store(crate::store::StoreError::new(
                        message.clone(),
                    )))
                })
                .collect()
        };
        for (writes, result) in sets.iter().zip(&results) {
            if result.is_ok() {
                for letter in &writes.dead_letters {
                    telemetry::dead_lettered(letter);
                }
            }
        }
        if !sets.is_empty() {
            crate::metrics::committed(sets, |index| results[index].is_ok(), seconds);
        }
        results
    }
}

impl App {
    /// The subscribers that take none of the events `writes` appends.
    fn skipping(&self, writes: &WriteSet) -> Vec<String> {
        if writes.appends.is_empty() {
            return Vec::new();
        }
        let mut skip = Vec::new();
        if !self.inner.policies.is_empty()
            && !appended(writes).any(|(aggregate, event)| {
                self.policies()
                    .any(|p| p.key().aggregate == aggregate && p.key().event == event)
            })
        {
            skip.push(crate::app::POLICIES.to_owned());
        }
        if !self.inner.processes.is_empty() && !self.feeds_processes(writes) {
            skip.push(crate::app::PROCESSES.to_owned());
        }
        skip
    }

    /// Whether a process takes an event `writes` appends.
    fn feeds_processes(&self, writes: &WriteSet) -> bool {
        appended(writes).any(|(aggregate, event)| {
            self.processes()
                .any(|process| process.takes_key(aggregate, event))
        })
    }
}

/// The aggregate type and event type of each event `writes` appends.
fn appended(writes: &WriteSet) -> impl Iterator<Item = (&str, &str)> {
    writes.appends.iter().flat_map(|append| {
        append
            .events
            .iter()
            .map(|event| (append.aggregate_type.as_str(), event.event_type.as_str()))
    })
}

/// The next wave of `queue`: its runs from the front, up to the first whose lane is already in
/// the wave.
fn next_wave(queue: &mut VecDeque<Queued>) -> Vec<Queued> {
    let mut lanes: HashSet<String> = HashSet::new();
    let mut wave: Vec<Queued> = Vec::new();
    while let Some(next) = queue.front() {
        let lane = match next {
            Queued::Execute(run) => &run.lane,
            Queued::Write(entry) => &entry.0.lane,
        };
        if !lanes.insert(lane.clone()) {
            break;
        }
        let Some(next) = queue.pop_front() else { break };
        wave.push(next);
    }
    wave
}

/// Holds `run`'s group when it waits for a retry: the group's later runs wait behind it.
fn hold_if_waiting(run: &Run, kind: &Kind, held: &mut HashSet<&'static str>) {
    if let (
        Kind::Failed {
            retry_at: Some(_), ..
        },
        Some(group),
    ) = (kind, run.group)
    {
        held.insert(group);
    }
}

/// Leaves `run` to the runner that took its claim over, found when renewing it: the run is held,
/// and an operator's retry whose letter another retry holds answers that the letter is settled
/// or being retried.
/// What a claim taken over says of the runners, whose clocks the leases assume agree: another
/// runner takes a claim over once its lease has passed on that runner's clock.
const CLOCKS: &str = "unless this runner was stopped or cut off that long, the runners' clocks \
     disagree by more than half a lease: keep them in sync (NTP)";

fn claim_lost(run: &Run, report: &mut Report) {
    tracing::warn!(
        claim = ?run.claim,
        "its lease lapsed and another runner took the run over, so this runner leaves it to them; \
         {CLOCKS}"
    );
    report.hold(run);
    if let Claim::Letter { id, .. } = &run.claim {
        report.letter_settled = Some(id.clone());
    }
}
