//! How far behind the subscribers are.

pub use crate::app::failing::Failing;
use crate::app::processes::deadline_run::{DeadlinePayload, Unhandled};
use crate::app::processes::step::entry_key;
use crate::app::{App, POLICIES, PROCESSES, StateProblem, UnreadableState};
use crate::{Error, Instant};

/// One subscriber's progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriberLag {
    /// Its name (`policies`).
    pub subscriber: String,
    /// Its checkpoint.
    pub position: u64,
    /// Events stored after its checkpoint, or after the first event it passed while its
    /// handler was held (see `passed`): what it has yet to handle.
    pub lag: u64,
    /// Where its checkpoint passed the events of a paused process, policy or instance, or of
    /// one whose limit was used up, so that its other handlers went on: they run from there
    /// once the hold is over.
    pub passed: Vec<crate::store::Bookmark>,
    /// The event it is held on while a retry is pending, if any.
    pub failing: Option<Failing>,
    /// While its pass fails (its store failing), when it tries again, after its back-off.
    pub paused_until: Option<Instant>,
}

/// How far behind the app is: zero means every consequence of every stored event has happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lag {
    /// The subscribers this app runs, by name.
    pub subscribers: Vec<SubscriberLag>,
    /// The largest lag among them.
    pub max_lag: u64,
    /// Checkpoints in the store of subscribers this app does not run (one a deploy removed, or
    /// one only another app on the same store runs), with their lag: not counted in `max_lag`;
    /// an operator may remove them.
    pub stale: Vec<SubscriberLag>,
    /// Due process deadlines held back behind an unhandled event of their instance stored at or
    /// before them (of the instances the first thousand events after the checkpoint reach; those
    /// behind events the checkpoint passed while their process was held wait too, not counted
    /// here: see each subscriber's `passed`).
    pub waiting_deadlines: u64,
    /// Pending deadlines of failed instances, held by their failure until its letter is retried
    /// (of the instances the oldest thousand open process letters name).
    pub held_deadlines: u64,
    /// Running instances whose scheduler entry disagrees with their stored state, so that their
    /// deadlines do not run when the state says ([`App::drifted`] names them; a worker re-arms
    /// them when it starts, an operator with [`App::rearm`]). Counted by a survey of every
    /// instance at most a minute old.
    pub drifted_entries: u64,
    /// Scheduler entries whose due moment does not read, so that no runner ever claims them
    /// (up to a hundred counted): `check` names them. A hand edit gone wrong, not a runtime
    /// fault.
    pub unclaimable_entries: u64,
    /// What operators paused, and since when and by whom: a paused subscriber's lag grows, a
    /// paused process's, instance's or policy's work waits.
    pub paused: Vec<crate::store::Pause>,
    /// The limits whose permits are used up in their current window: their work waits for the
    /// window's end.
    pub limited: Vec<Limited>,
    /// Each relay: what it has yet to publish, and since when.
    pub relays: Vec<crate::app::RelayLag>,
    /// Each source of commands from other services: what waits there, and since when.
    pub ingress: Vec<crate::ingress::SourceLag>,
}

/// A limit holding work back: its permits used up until its window ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limited {
    /// The limit's window, as the store counts it.
    pub window: crate::store::LimitWindow,
    /// The rate configured.
    pub rate: crate::config::Rate,
    /// The due scheduler entries it holds back: deadlines, delayed policy runs, scheduled
    /// commands.
    pub waiting: u64,
    /// The events of a limited process or policy that wait for it, as [`App::lag`] reads them
    /// from the subscriber that runs it; `None` from [`App::limited`], which reads no
    /// subscriber.
    pub events: Option<HeldEvents>,
}

/// A limited handler's events that wait in its subscriber: from the first one its checkpoint
/// passed while the limit held it, or from the checkpoint when the subscriber waits on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldEvents {
    /// The subscriber (`processes`, `policies`).
    pub subscriber: String,
    /// The position of the first event that waits.
    pub from: u64,
    /// Events stored from there on, of every handler of the subscriber.
    pub stored: u64,
}

impl std::fmt::Display for Limited {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} at {}: {} started in this window; {} due wait until {}",
            self.window.key, self.rate, self.window.taken, self.waiting, self.window.ends
        )?;
        match &self.events {
            Some(events) => write!(
                f,
                "; its events wait in `{}` from position {} ({} stored since)",
                events.subscriber, events.from, events.stored
            ),
            None => Ok(()),
        }
    }
}

/// The events limit `limited` holds in `subscribers`: a process's in the process runner's, a
/// policy's in the policies'; from its bookmark, else from the checkpoint while events wait.
fn held_events(limited: &Limited, subscribers: &[SubscriberLag], head: u64) -> Option<HeldEvents> {
    use crate::store::LimitKind;
    let name = match limited.window.key.kind {
        LimitKind::Process => crate::app::PROCESSES,
        LimitKind::Policy => crate::app::POLICIES,
        LimitKind::Relay => crate::app::RELAYS,
        LimitKind::Command | LimitKind::Ingress => return None,
    };
    let subscriber = subscribers.iter().find(|s| s.subscriber == name)?;
    let from = subscriber
        .passed
        .iter()
        .filter(|mark| mark.handler == limited.window.key.name)
        .map(|mark| mark.position)
        .min()
        .or_else(|| (subscriber.lag > 0).then(|| subscriber.position + 1))?;
    Some(HeldEvents {
        subscriber: name.to_owned(),
        from,
        stored: (head + 1).saturating_sub(from),
    })
}

/// The subscribers' lags, read at one head.
pub(crate) struct Lags {
    /// Of the subscribers this app runs.
    pub(crate) subscribers: Vec<SubscriberLag>,
    /// Of checkpoints in the store this app does not run.
    pub(crate) stale: Vec<SubscriberLag>,
    /// The last position stored, which they were read against.
    pub(crate) head: u64,
}

impl App {
    /// The lag of each subscriber this app runs, and the stale checkpoints: the part of
    /// [`lag`](App::lag) its gauges read on every pass.
    pub(crate) async fn subscriber_lags(&self) -> Result<Lags, Error> {
        let head = self.store().head().await?;
        let mut subscribers = Vec::new();
        let mut stale = Vec::new();
        let holds = match self.store().capabilities().read_models {
            Some(tables) if self.read_models().next().is_some() => tables.holds().await?,
            _ => Vec::new(),
        };
        for (subscriber, position) in self.store().checkpoints().await? {
            if let Some(model) = self.read_models().find(|m| m.subscriber() == subscriber) {
                // A hold at or before the checkpoint is over: the event was projected since.
                let failing = holds
                    .iter()
                    .find(|held| held.read_model == model.name() && held.position > position)
                    .map(|held| Failing {
                        handler: model.name().to_owned(),
                        position: held.position,
                        event_id: held.event_id.clone(),
                        event_type: held.event_type.clone(),
                        message: held.message.clone(),
                        attempts: held.attempts,
                        retry_at: held.retry_at,
                    });
                subscribers.push(SubscriberLag {
                    paused_until: self.paused_until(&subscriber),
                    failing,
                    subscriber,
                    position,
                    lag: head.saturating_sub(position),
                    passed: Vec::new(),
                });
                continue;
            }
            let handlers: Option<Vec<&str>> = if subscriber == crate::app::POLICIES {
                (!self.inner.policies.is_empty())
                    .then(|| self.inner.policies.iter().map(|p| p.name()).collect())
            } else if subscriber == crate::app::PROCESSES {
                (!self.inner.processes.is_empty())
                    .then(|| self.inner.processes.iter().map(|p| p.name()).collect())
            } else if subscriber == crate::app::RELAYS {
                (!self.inner.relays.is_empty())
                    .then(|| self.relays().map(|relay| relay.name()).collect())
            } else {
                None
            };
            // Where the policies', processes' and relays' checkpoints passed held events.
            let cursor = match handlers {
                Some(_) => self.store().cursor(&subscriber).await?,
                None => None,
            }
            .unwrap_or(crate::store::Cursor {
                checkpoint: position,
                bookmarks: Vec::new(),
            });
            let lag = SubscriberLag {
                paused_until: self.paused_until(&subscriber),
                failing: match &handlers {
                    Some(handlers) => self.failing(handlers).await?,
                    None => None,
                },
                subscriber,
                position: cursor.checkpoint,
                lag: head.saturating_sub(cursor.handled_to()),
                passed: cursor.bookmarks,
            };
            match handlers {
                Some(_) => subscribers.push(lag),
                None => stale.push(lag),
            }
        }
        Ok(Lags {
            subscribers,
            stale,
            head,
        })
    }

    /// The lag of each subscriber this app runs, read from the store; the
    /// checkpoints of subscribers it does not run are listed apart as stale.
    pub async fn lag(&self) -> Result<Lag, Error> {
        let Lags {
            subscribers,
            stale,
            head,
        } = self.subscriber_lags().await?;
        let max_lag = subscribers.iter().map(|s| s.lag).max().unwrap_or(0);
        let (held, _) = self.held_deadlines().await?;
        let mut limited = self.limited().await?;
        for limit in &mut limited {
            limit.events = held_events(limit, &subscribers, head);
        }
        Ok(Lag {
            subscribers,
            max_lag,
            stale,
            waiting_deadlines: self.waiting_deadline_count().await?,
            held_deadlines: held.len() as u64,
            drifted_entries: self.drifted_count().await?,
            unclaimable_entries: self.store().unclaimable_entries(UNCLAIMABLE).await?.len() as u64,
            paused: self.pauses().await?,
            limited,
            relays: self.relay_lags().await?,
            ingress: self.source_lags().await,
        })
    }

    /// The limits holding work back now ([`Lag::limited`]). Asks the store only when limits
    /// are set.
    pub async fn limited(&self) -> Result<Vec<Limited>, Error> {
        self.limited_at(self.clock().now()).await
    }

    /// The limits holding work back at `now`.
    pub(crate) async fn limited_at(&self, now: Instant) -> Result<Vec<Limited>, Error> {
        let limits = &self.config().limits;
        if limits.is_empty() {
            return Ok(Vec::new());
        }
        let store = self.limit_store()?;
        let held: std::collections::HashMap<_, _> =
            store.held_by_limits(now).await?.into_iter().collect();
        let mut limited = Vec::new();
        for window in store.limit_windows(now).await? {
            let Some(limit) = limits.get(window.key.kind, &window.key.name) else {
                continue;
            };
            if !window.used_up() {
                continue;
            }
            limited.push(Limited {
                waiting: held.get(&window.key).copied().unwrap_or(0),
                events: None,
                rate: limit.rate,
                window,
            });
        }
        Ok(limited)
    }

    /// Due deadlines held back behind an unhandled event of their instance stored at or before
    /// them, as the store says (of the instances the first thousand events after the checkpoint
    /// reach, paused ones left out): what any reader sees, not only the process that runs the
    /// worker. A deadline of a process whose events the checkpoint passed while it was held
    /// also waits until the runner returns to them; `passed` shows those.
    pub(crate) async fn waiting_deadline_count(&self) -> Result<u64, Error> {
        let unhandled = Unhandled::read(self).await?;
        if unhandled.instances().next().is_none() {
            self.forget_waits_that_ended().await?;
            return Ok(0);
        }
        let paused = self.paused().await?;
        let now = self.clock().now();
        let mut count = 0;
        for (process, id) in unhandled.instances() {
            // A paused instance's deadline does not wait for its events: it waits for its
            // resume, and nothing moves it meanwhile.
            if paused.instance(process, id).is_some() {
                continue;
            }
            let armed = self
                .store()
                .scheduled(&entry_key(process, id))
                .await?
                .and_then(|entry| DeadlinePayload::of(&entry))
                .and_then(|payload| Instant::from_millis(payload.at));
            if armed.is_some_and(|at| unhandled.holds_due(process, id, at, now)) {
                count += 1;
            }
        }
        self.forget_waits_that_ended().await?;
        Ok(count)
    }

    /// Forgets the waiting rounds of this runner's held deadlines whose entries are no longer
    /// armed at the moment they waited at: the awaited event cleared or moved them.
    async fn forget_waits_that_ended(&self) -> Result<(), Error> {
        let waiting: Vec<(String, i64)> = self
            .waiting()
            .iter()
            .map(|(key, (at, _))| (key.clone(), *at))
            .collect();
        for (key, at) in waiting {
            let armed = self
                .store()
                .scheduled(&key)
                .await?
                .and_then(|entry| DeadlinePayload::of(&entry))
                .is_some_and(|payload| payload.at == at);
            if !armed {
                self.waiting().remove(&key);
            }
        }
        Ok(())
    }

    /// The earliest moment a scheduled command, delayed policy run or deadline becomes due.
    pub async fn next_due_at(&self) -> Result<Option<Instant>, Error> {
        let now = self.clock().now();
        Ok(self.store().next_due_at(now, self.lease()).await?)
    }

    /// Every pending deadline of every open instance, soonest first: which instance, which
    /// field, when, and whether it is due and waits for an earlier event of its instance
    /// (beyond the original, which only counts them). An instance whose stored state cannot be read is left out, with a warning
    /// in the log; [`unreadable_states`](App::unreadable_states) names them all.
    pub async fn pending_deadlines(&self) -> Result<Vec<crate::app::PendingDeadline>, Error> {
        let (pending, left_out) = self.pending_and_left_out().await?;
        warn_left_out(&left_out);
        Ok(pending)
    }

    /// The pending deadlines, and the instances left out of them because their state cannot
    /// be read.
    pub(crate) async fn pending_and_left_out(
        &self,
    ) -> Result<(Vec<crate::app::PendingDeadline>, Vec<UnreadableState>), Error> {
        let entries = self
            .store()
            .scheduled_of_type(crate::app::processes::step::PROCESS_DEADLINE)
            .await?;
        let (mut pending, mut left_out) = self.pending_of_entries(entries).await?;
        let (held, unreadable) = self.held_deadlines().await?;
        merge(&mut pending, held);
        left_out.extend(unreadable);
        Ok((pending, left_out))
    }

    /// The pending deadlines of failed instances (of those the oldest thousand open process
    /// letters name), each held by its instance's letter; and the instances left out because
    /// their state cannot be read. A failed instance has no scheduler
    /// entry: its deadlines are read from its state, as the retry will arm them.
    pub(crate) async fn held_deadlines(
        &self,
    ) -> Result<(Vec<crate::app::PendingDeadline>, Vec<UnreadableState>), Error> {
        let filter = crate::store::LetterFilter {
            kind: Some(crate::store::LetterKind::Process),
            status: Some(crate::store::LetterStatus::Failed),
            limit: Some(HELD_LETTERS),
            ..crate::store::LetterFilter::default()
        };
        let mut held = Vec::new();
        let mut left_out = Vec::new();
        for letter in self.store().dead_letters(&filter).await? {
            let Some(process) = self.processes().find(|p| p.name() == letter.handler) else {
                continue;
            };
            let Some(payload) = crate::app::processes::writes::LetterPayload::of(&letter) else {
                continue;
            };
            let instance = match self.load_instance(&**process, &payload.instance).await {
                Ok(Some(instance)) => instance,
                Ok(None) => continue,
                Err(error) => {
                    left_out.push(UnreadableState {
                        process: process.name().to_owned(),
                        instance: payload.instance.clone(),
                        problem: StateProblem::of_load(error)?,
                    });
                    continue;
                }
            };
            // Only the letter of the failure that holds the instance now.
            if instance.status != crate::app::ProcessStatus::Failed
                || instance.letter_id.as_deref() != Some(letter.id.as_str())
            {
                continue;
            }
            match process.pending(&instance) {
                Ok(dues) => held.extend(dues.into_iter().map(|due| crate::app::PendingDeadline {
                    process: process.name(),
                    instance: payload.instance.clone(),
                    field: due.due.field,
                    at: due.due.at,
                    local: due.local,
                    waiting: false,
                    held_by: Some(letter.id.clone()),
                    drift: None,
                    paused: false,
                })),
                Err(error) => left_out.push(UnreadableState {
                    process: process.name().to_owned(),
                    instance: payload.instance.clone(),
                    problem: StateProblem::Unreadable(error.to_string()),
                }),
            }
        }
        Ok((held, left_out))
    }

    /// The deadlines pending up to `until`, read through the store's due-moment index: of at most
    /// `limit` instances whose earliest deadline comes by then (an instance's other deadlines
    /// come later), whether any comes later, and the instances left out because their state
    /// cannot be read (each with a warning in the log). What a page shows of the hours ahead,
    /// however many are pending.
    pub async fn pending_until(&self, until: Instant, limit: usize) -> Result<Ahead, Error> {
        // One more than asked: a list cut short says so.
        let (mut entries, mut later) = self
            .store()
            .scheduled_until(
                crate::app::processes::step::PROCESS_DEADLINE,
                until,
                limit.saturating_add(1),
            )
            .await?;
        if entries.len() > limit {
            entries.truncate(limit);
            later = true;
        }
        let (mut pending, mut unreadable) = self.pending_of_entries(entries).await?;
        let (held, held_unreadable) = self.held_deadlines().await?;
        merge(&mut pending, held);
        unreadable.extend(held_unreadable);
        warn_left_out(&unreadable);
        later |= pending.iter().any(|due| due.at > until);
        pending.retain(|due| due.at <= until);
        Ok(Ahead {
            pending,
            later,
            unreadable,
        })
    }

    /// The deadlines of the instances `entries` arm, soonest first, and the instances left out
    /// because their state cannot be read.
    async fn pending_of_entries(
        &self,
        entries: Vec<crate::store::ScheduledEntry>,
    ) -> Result<(Vec<crate::app::PendingDeadline>, Vec<UnreadableState>), Error> {
        let unhandled = Unhandled::read(self).await?;
        let paused = self.paused().await?;
        let now = self.clock().now();
        let mut pending = Vec::new();
        let mut left_out = Vec::new();
        for entry in entries {
            let Some(payload) = DeadlinePayload::of(&entry) else {
                tracing::warn!(
                    key = %entry.dedupe_key,
                    "a process deadline entry does not read; left out of the pending deadlines"
                );
                continue;
            };
            let Some(process) = self.processes().find(|p| p.name() == payload.process) else {
                left_out.push(UnreadableState {
                    process: payload.process.clone(),
                    instance: entry.aggregate_id.clone(),
                    problem: StateProblem::UnknownProcess,
                });
                continue;
            };
            let instance = match self.load_instance(&**process, &entry.aggregate_id).await {
                Ok(Some(instance)) => instance,
                Ok(None) => {
                    tracing::warn!(
                        process = %process.name(),
                        instance = %entry.aggregate_id,
                        "a deadline entry is armed for an instance with no history; left out"
                    );
                    continue;
                }
                Err(error) => {
                    left_out.push(UnreadableState {
                        process: process.name().to_owned(),
                        instance: entry.aggregate_id.clone(),
                        problem: StateProblem::of_load(error)?,
                    });
                    continue;
                }
            };
            let dues = match process.pending(&instance) {
                Ok(dues) => dues,
                Err(error) => {
                    left_out.push(UnreadableState {
                        process: process.name().to_owned(),
                        instance: entry.aggregate_id.clone(),
                        problem: StateProblem::Unreadable(error.to_string()),
                    });
                    continue;
                }
            };
            let drift = crate::app::processes::rearm::drift_of(
                &**process,
                &entry.aggregate_id,
                &instance,
                Some(&entry),
            );
            for (index, crate::process::plan::Described { due, local }) in
                dues.into_iter().enumerate()
            {
                // The entry is armed at the first; only it can be held back.
                let waiting = index == 0
                    && unhandled.holds_due(process.name(), &entry.aggregate_id, due.at, now);
                pending.push(crate::app::PendingDeadline {
                    process: process.name(),
                    instance: entry.aggregate_id.clone(),
                    field: due.field,
                    at: due.at,
                    local,
                    waiting,
                    held_by: None,
                    drift: drift.clone(),
                    paused: paused
                        .instance(process.name(), &entry.aggregate_id)
                        .is_some(),
                });
            }
        }
        merge(&mut pending, Vec::new());
        Ok((pending, left_out))
    }

    /// How many events are parked behind the failure of `process`'s instance `id`.
    pub async fn parked_behind(&self, process: &str, id: &str) -> Result<usize, Error> {
        let Some(runner) = self.processes().find(|p| p.name() == process) else {
            return Ok(0);
        };
        Ok(self
            .load_instance(&**runner, id)
            .await?
            .filter(|instance| instance.status == crate::app::ProcessStatus::Failed)
            .map_or(0, |instance| instance.parked_behind()))
    }

    /// How many events wait parked behind process letter `letter` (see
    /// [`DeadLetters::parked`](crate::DeadLetters::parked)).
    pub(crate) async fn parked_behind_letter(
        &self,
        letter: &crate::store::DeadLetter,
    ) -> Result<usize, Error> {
        if letter.kind != crate::store::LetterKind::Process
            || letter.status != crate::store::LetterStatus::Failed
        {
            return Ok(0);
        }
        let Some(payload) = crate::app::processes::writes::LetterPayload::of(letter) else {
            return Ok(0);
        };
        let Some(runner) = self.processes().find(|p| p.name() == letter.handler) else {
            return Ok(0);
        };
        let instance = match self.load_instance(&**runner, &payload.instance).await {
            Ok(Some(instance)) => instance,
            Ok(None) => return Ok(0),
            // An instance whose history does not read: its letter says why, and what is
            // parked behind it cannot be counted.
            Err(error) => {
                crate::app::StateProblem::of_load(error)?;
                return Ok(0);
            }
        };
        if instance.letter_id.as_deref() != Some(letter.id.as_str()) {
            return Ok(0);
        }
        Ok(instance.parked_behind())
    }

    /// The earliest pending retry of a policy, a process or a scheduled entry, and of a relay's
    /// publish at or before `relays_until` (none without it: a relay retries for as long as
    /// its sink fails, so a test's clock follows it only as far as it is asked to go); a paused
    /// handler's, subscriber's or instance's retries wait for its resume, so they are left out.
    pub(crate) async fn next_retry_at(
        &self,
        relays_until: Option<Instant>,
    ) -> Result<Option<Instant>, Error> {
        let mut next = self.store().next_scheduled_retry().await?;
        let paused = self.paused().await?;
        let policies = self
            .inner
            .policies
            .iter()
            .map(|p| (POLICIES, p.name(), false));
        let processes = self
            .inner
            .processes
            .iter()
            .map(|p| (PROCESSES, p.name(), false));
        let relays = self.relays().map(|r| (crate::app::RELAYS, r.name(), true));
        for (subscriber, name, relay) in policies.chain(processes).chain(relays) {
            if paused.handler(name).is_some() || paused.subscriber(subscriber).is_some() {
                continue;
            }
            let retry = match paused.instances().any(|(process, _)| process == name) {
                true => self.first_retry_unpaused(name, &paused).await?,
                false => self.store().next_inbox_retry(name).await?,
            };
            let retry = match relay {
                true => retry.filter(|at| relays_until.is_some_and(|until| *at <= until)),
                false => retry,
            };
            next = next.into_iter().chain(retry).min();
        }
        Ok(next)
    }

    /// The first retry of process `name` whose instance is not paused, among its first
    /// [`PAUSED_FAILURES`] failures.
    async fn first_retry_unpaused(
        &self,
        name: &str,
        paused: &crate::store::Paused,
    ) -> Result<Option<Instant>, Error> {
        let Some(runner) = self.processes().find(|p| p.name() == name) else {
            return Ok(None);
        };
        for failure in self.store().inbox_failures(name, PAUSED_FAILURES).await? {
            let instance = match self.read_event(&failure.event_id).await? {
                Some(event) => runner.instance_of(&event).ok().flatten(),
                None => None,
            };
            if instance.is_none_or(|id| paused.instance(name, &id).is_none()) {
                return Ok(Some(failure.retry_at));
            }
        }
        Ok(None)
    }
}

/// How many failures of a process with a paused instance are read to find the first retry that
/// is not paused.
const PAUSED_FAILURES: usize = 100;

/// The deadlines of the hours ahead, as [`App::pending_until`] reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ahead {
    /// The deadlines due by the moment asked, soonest first.
    pub pending: Vec<crate::app::PendingDeadline>,
    /// Whether more come after them: later than the moment, or beyond the instances read.
    pub later: bool,
    /// The instances left out because their stored state cannot be read.
    pub unreadable: Vec<UnreadableState>,
}

/// How many open process letters the held deadlines are read from, oldest first.
const HELD_LETTERS: usize = 1_000;

/// How many unclaimable scheduler entries `lag` counts at most.
const UNCLAIMABLE: usize = 100;

/// `more` added to `pending`, soonest first.
fn merge(pending: &mut Vec<crate::app::PendingDeadline>, more: Vec<crate::app::PendingDeadline>) {
    pending.extend(more);
    pending.sort_by(|a, b| (a.at, a.field, &a.instance).cmp(&(b.at, b.field, &b.instance)));
}

/// Says in the log which instances a list of deadlines leaves out, and why.
fn warn_left_out(left_out: &[UnreadableState]) {
    for state in left_out {
        tracing::warn!(
            process = %state.process,
            instance = %state.instance,
            problem = ?state.problem,
            "a pending deadline is left out: its instance's state cannot be read"
        );
    }
}
