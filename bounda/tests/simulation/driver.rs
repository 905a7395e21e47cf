//! Runs a schedule on the real runtime (SQLite on a file, apps dropped and reopened, several
//! runners), beside the model, and checks that they agree and that the invariants hold.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bounda::clock::{Clock, SimulatedClock, Sleep};
use bounda::config::{Config, Retry, Strategy};
use bounda::ids::IdGenerator;
use bounda::store::{LetterFilter, LetterKind, LetterStatus, Store};
use bounda::testing::TestApp;
use bounda::{App, Duration, Instant, ProcessStatus, Retried, millis, seconds};

use super::domain::{self, Ask, Plan, Request, Watch};
use super::model::{self, Model};
use super::schedule::{Act, Step};
use super::support::database::Database;
use bounda::testing::FaultyStore;

/// What a run found: the first disagreement or broken invariant, with the step it followed.
pub type Outcome = Result<Stats, String>;

/// What a schedule exercised, for the report.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    pub steps: usize,
    pub checks: usize,
    /// Periodic comparisons skipped because work was pending (after an outage or a restart).
    pub skipped: usize,
    pub letters: usize,
    pub restarts: usize,
    /// Commits failed on purpose: before writing (busy, full, I/O), and after.
    pub faults: [u64; 4],
}

/// The simulated clock, whose sleep polled next ends when a handler says it has run past its
/// limit (see [`Plan::slow`]).
struct SimClock {
    inner: Arc<SimulatedClock>,
    slow: Arc<AtomicBool>,
}

impl Clock for SimClock {
    fn now(&self) -> Instant {
        self.inner.now()
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        let mut inner = self.inner.sleep(duration);
        let slow = self.slow.clone();
        Box::pin(std::future::poll_fn(move |cx| {
            if slow.swap(false, Ordering::SeqCst) {
                return std::task::Poll::Ready(());
            }
            inner.as_mut().poll(cx)
        }))
    }
}

/// Ids unique across every app of a schedule: `g<generation>r<runner>-<n>`.
struct Prefixed {
    prefix: String,
    next: AtomicU64,
}

impl IdGenerator for Prefixed {
    fn next_id(&self) -> String {
        format!(
            "{}-{}",
            self.prefix,
            self.next.fetch_add(1, Ordering::Relaxed) + 1
        )
    }
}

/// A schedule in progress.
struct Run {
    /// The database the runners open, a SQLite file or a PostgreSQL schema (the suite's switch).
    database: Database,
    clock: Arc<SimulatedClock>,
    plan: Arc<Plan>,
    runners: Vec<TestApp>,
    current: usize,
    generation: usize,
    /// Whether work may be pending that no runner has run.
    dirty: bool,
    model: Model,
    stats: Stats,
    /// Commits fail this often (per thousand), while a runner works; the model then only
    /// answers for what outside commands decide, and the fault checks replace it.
    faults: Option<u64>,
    /// The stores of the runners, to arm their faults.
    stores: Vec<Arc<FaultyStore>>,
}

fn config() -> Config {
    let mut config = Config::default();
    let retry = Retry {
        strategy: Strategy::Fixed,
        max_attempts: model::MAX_ATTEMPTS as u32,
        base_delay: millis(model::BACKOFF as u64),
        max_delay: millis(model::BACKOFF as u64),
    };
    config.processes.retry = retry;
    config.policies.retry = retry;
    config.processes.handler_timeout = seconds(5);
    config.policies.timeout = seconds(5);
    config
}

/// How long a claim lasts: twice the longest handler time limit, as the runtime has it.
fn lease() -> Duration {
    let config = config();
    let longest = [
        config.commands.timeout,
        config.policies.timeout,
        config.processes.handler_timeout,
    ]
    .into_iter()
    .max()
    .unwrap_or(Duration::ZERO);
    millis(longest.as_millis() * 2 + 1)
}

fn account(n: u8) -> String {
    format!("a{n}")
}

impl Run {
    async fn new(seed: u64, faults: Option<u64>) -> Run {
        let clock = Arc::new(SimulatedClock::default());
        let plan = Arc::new(Plan {
            seed,
            ..Plan::default()
        });
        let now = clock.now().as_millis();
        let mut run = Run {
            database: Database::new(),
            clock,
            plan,
            runners: Vec::new(),
            current: 0,
            generation: 0,
            dirty: false,
            model: Model::new(seed, now),
            stats: Stats::default(),
            faults,
            stores: Vec::new(),
        };
        run.start(1).await;
        run
    }

    /// `count` runners on the database, as a restart brings them up.
    async fn start(&mut self, count: usize) {
        self.runners.clear();
        self.generation += 1;
        self.collect_faults();
        self.stores.clear();
        for runner in 0..count.max(1) {
            let opened = self.database.open().await;
            let store: Arc<dyn Store> = match self.faults {
                None => opened,
                Some(per_mille) => {
                    let seed = self.plan.seed ^ (self.generation as u64 * 31 + runner as u64);
                    let faulty = Arc::new(FaultyStore::new(opened, seed, per_mille));
                    // Armed only while this runner is the current one.
                    faulty.arm(false);
                    self.stores.push(faulty.clone());
                    faulty
                }
            };
            let clock = SimClock {
                inner: self.clock.clone(),
                slow: self.plan.slow.clone(),
            };
            let ids = Prefixed {
                prefix: format!("g{}r{runner}", self.generation),
                next: AtomicU64::new(0),
            };
            let app = App::builder_shared(store)
                .only_listed()
                .process::<Watch>()
                .policy::<domain::AcknowledgeOnPaid>()
                .command::<Request>()
                .command::<domain::Acknowledge>()
                .command::<domain::Ping>()
                .port(self.plan.clone())
                .config(config())
                .clock(Arc::new(clock))
                .ids(Arc::new(ids))
                .build()
                .await
                .expect("the app builds");
            self.runners
                .push(TestApp::with_app(app, self.clock.clone()).expecting_letters());
        }
        self.current = 0;
    }

    /// Adds the faults of the stores about to be dropped to the count.
    fn collect_faults(&mut self) {
        for store in &self.stores {
            let injected = store.injected();
            let counts = [
                injected.busy,
                injected.full,
                injected.io,
                injected.after_write,
            ];
            for (total, n) in self.stats.faults.iter_mut().zip(counts) {
                *total += n;
            }
        }
    }

    /// Arms or disarms the current runner's faults.
    fn arm(&self, armed: bool) {
        for store in &self.stores {
            store.arm(false);
        }
        if let Some(store) = self.stores.get(self.current % self.runners.len().max(1)) {
            store.arm(armed);
        }
    }

    fn runner(&self) -> &TestApp {
        &self.runners[self.current % self.runners.len()]
    }

    async fn app(&self) -> &App {
        self.runner().app()
    }

    /// Every runner's work done, the model's too, and their clocks agreeing.
    async fn catch_up(&mut self) -> Result<(), String> {
        if self.faults.is_some() {
            return self.catch_up_through_faults(true).await;
        }
        let idle = self
            .runner()
            .run_until_idle()
            .await
            .map_err(|e| format!("run_until_idle failed: {e}"))?;
        if !idle.idle {
            return Err("the runtime did not come to rest".into());
        }
        self.model.settle();
        self.dirty = false;
        let now = self.clock.now().as_millis();
        if now != self.model.now {
            return Err(format!(
                "the clocks differ: runtime {}, model {}",
                show(now),
                show(self.model.now)
            ));
        }
        Ok(())
    }

    /// Runs until idle with commits failing (if `armed`): a failed pass is tried again, as a
    /// runner would after its back-off, and a pass that keeps failing is a finding.
    async fn catch_up_through_faults(&mut self, armed: bool) -> Result<(), String> {
        for _ in 0..200 {
            self.arm(armed);
            let result = self.runner().run_until_idle().await;
            self.arm(false);
            let Ok(idle) = result else { continue };
            // Work left behind a claim that a failed commit could not give back (idle to this
            // runner, yet lagging): the claim lapses after its lease.
            if self
                .app()
                .await
                .lag()
                .await
                .is_ok_and(|lag| lag.max_lag > 0)
            {
                self.clock.advance(lease());
                continue;
            }
            if idle.idle {
                self.dirty = false;
                self.model.now = self.clock.now().as_millis();
                return Ok(());
            }
        }
        Err("the runtime does not come to rest through the faults".into())
    }

    async fn step(&mut self, step: Step) -> Result<(), String> {
        self.stats.steps += 1;
        match step {
            Step::Send(n, act) => {
                self.catch_up().await?;
                let account = account(n);
                // Keep commands away from a deadline about to come due (see the model).
                if let Some(at) = self.model.deadline_near(&account, 10_000) {
                    let by = (at - self.model.now + 1) as u64;
                    self.advance(by).await?;
                }
                let now = self.clock.now();
                let ask = match act {
                    Act::Open => Ask::Open,
                    Act::Pay(amount) => Ask::Pay(amount),
                    Act::Move(Some(after)) => Ask::Move(Some(now + millis(after))),
                    Act::Move(None) => Ask::Move(None),
                    Act::Cancel => Ask::Cancel,
                    Act::Archive => Ask::Archive,
                };
                let accepted = self
                    .runner()
                    .dispatch(Request {
                        account_id: account.clone(),
                        ask: ask.clone(),
                    })
                    .await;
                let accepted = match accepted {
                    Ok(_) => true,
                    Err(bounda::DispatchError::Rejected(_)) => false,
                    Err(error) => return Err(format!("dispatch failed: {error}")),
                };
                let expected = self.model.dispatch(&account, &ask);
                if accepted != expected {
                    return Err(format!(
                        "{account} {ask:?}: runtime accepted {accepted}, model {expected}"
                    ));
                }
                self.catch_up().await
            }
            Step::Advance(by) => {
                self.catch_up().await?;
                self.advance(by).await
            }
            Step::Outage(by) => {
                self.clock.advance(millis(by));
                self.model.outage(by as i64);
                self.dirty = true;
                Ok(())
            }
            Step::Turn(runner) => {
                self.current = usize::from(runner) % self.runners.len();
                self.catch_up().await
            }
            Step::Retry(n) | Step::Discard(n) => {
                self.catch_up().await?;
                let account = account(n);
                if self.faults.is_some() {
                    if let Some(id) = self.pick(&account).await? {
                        if matches!(step, Step::Discard(_)) {
                            let _ = self.app().await.dead_letters().discard(&id).await;
                        } else {
                            let _ = self.app().await.dead_letters().retry(&id).await;
                        }
                    }
                    return self.catch_up().await;
                }
                let picked = self.model.pick(&account);
                let letter = self.pick(&account).await?;
                match (picked, letter) {
                    (None, None) => return Ok(()),
                    (Some(index), Some(id)) => {
                        if matches!(step, Step::Discard(_)) {
                            self.app()
                                .await
                                .dead_letters()
                                .discard(&id)
                                .await
                                .map_err(|e| format!("discard failed: {e}"))?;
                            self.model.discard(index);
                        } else {
                            let through = matches!(
                                self.app().await.dead_letters().retry(&id).await,
                                Ok(Retried::Done | Retried::FailedAgain { .. })
                            );
                            let expected = self.model.retry(index);
                            if through != expected {
                                return Err(format!(
                                    "retry of {account}'s letter: runtime went through {through}, model {expected}"
                                ));
                            }
                        }
                    }
                    (picked, letter) => {
                        return Err(format!(
                            "{account}'s failed letter: model {picked:?}, runtime {letter:?}"
                        ));
                    }
                }
                self.catch_up().await
            }
            Step::Restart(count) => {
                self.stats.restarts += 1;
                self.start(usize::from(count)).await;
                Ok(())
            }
        }
    }

    async fn advance(&mut self, by: u64) -> Result<(), String> {
        if self.faults.is_some() {
            let target = self.clock.now() + millis(by);
            let mut last = None;
            for _ in 0..200 {
                if self.clock.now() >= target {
                    break;
                }
                let left = target.as_millis() - self.clock.now().as_millis();
                self.arm(true);
                last = self.runner().advance(millis(left as u64)).await.err();
                self.arm(false);
                self.catch_up_through_faults(true).await?;
            }
            if self.clock.now() < target {
                return Err(format!(
                    "the clock does not reach its target through the faults: {last:?}"
                ));
            }
            self.model.now = self.clock.now().as_millis();
            return Ok(());
        }
        let idle = self
            .runner()
            .advance(millis(by))
            .await
            .map_err(|e| format!("advance failed: {e}"))?;
        if !idle.idle {
            return Err("the runtime did not come to rest".into());
        }
        self.model.advance(by as i64);
        let now = self.clock.now().as_millis();
        if now != self.model.now {
            return Err(format!(
                "after advancing, the clocks differ: runtime {}, model {}",
                show(now),
                show(self.model.now)
            ));
        }
        Ok(())
    }

    /// The runtime's failed letter for `account` the model would pick: its process letter,
    /// else its policy letters by payment.
    async fn pick(&self, account: &str) -> Result<Option<String>, String> {
        let letters = self
            .app()
            .await
            .dead_letters()
            .list(&LetterFilter {
                status: Some(LetterStatus::Failed),
                ..LetterFilter::default()
            })
            .await
            .map_err(|e| e.to_string())?;
        let store = self.app().await.store();
        let mut mine = Vec::new();
        for letter in letters {
            if letter.aggregate_id.as_deref() != Some(account) {
                continue;
            }
            let version = match (&letter.kind, &letter.event_id) {
                (LetterKind::Process, _) => 0,
                (_, Some(event)) => store
                    .read_event(event)
                    .await
                    .map_err(|e| e.to_string())?
                    .map_or(u64::MAX, |event| event.version),
                (_, None) => u64::MAX,
            };
            mine.push(((letter.kind != LetterKind::Process, version), letter.id));
        }
        mine.sort();
        Ok(mine.into_iter().next().map(|(_, id)| id))
    }

    /// The runtime and the model agree on every account, instance and letter, and the
    /// invariants hold; a disagreement on an instance shows its history.
    async fn compare(&mut self) -> Result<(), String> {
        if self.faults.is_some() {
            self.stats.checks += 1;
            let checked = fault_checks(self.app().await, false).await;
            return self.with_history(checked).await;
        }
        let agreed = self.agree().await;
        self.with_history(agreed).await
    }

    /// A failed check, with the history that shows it.
    async fn with_history(&self, checked: Result<(), String>) -> Result<(), String> {
        let Err(error) = checked else {
            return Ok(());
        };
        let history = self.history().await.unwrap_or_default();
        Err(format!("{error}\n{history}"))
    }

    /// Every account's events and lifecycle, one line each, with the model's view.
    async fn history(&self) -> Result<String, String> {
        let store = self.app().await.store();
        let mut lines = Vec::new();
        for account in self.model.accounts.keys() {
            for (kind, stream) in [
                ("Account", account.clone()),
                ("process:Watch", account.clone()),
            ] {
                for e in store
                    .read_stream(kind, &stream)
                    .await
                    .map_err(|e| e.to_string())?
                {
                    let mut payload = e.payload.clone();
                    if let Some(map) = payload.as_object_mut() {
                        map.remove("state");
                        map.remove("aggregateType");
                        map.remove("aggregateId");
                    }
                    lines.push(format!(
                        "  {} {kind}:{stream} v{} {} {} {payload}",
                        e.timestamp, e.version, e.id, e.event_type
                    ));
                }
            }
            lines.push(format!(
                "  model: {:?}",
                self.model.accounts[account].instance
            ));
        }
        lines.push(format!("  model letters: {:?}", self.model.letters));
        Ok(lines.join("\n"))
    }

    async fn agree(&mut self) -> Result<(), String> {
        self.stats.checks += 1;
        let app = self.app().await.clone();
        let store = app.store();
        for (account, expected) in &self.model.accounts {
            let events = store
                .read_stream("Account", account)
                .await
                .map_err(|e| e.to_string())?;
            // Types and times, sorted: events at one moment may be stored in either order.
            let mut types: Vec<(&str, i64)> = events
                .iter()
                .map(|e| (e.event_type.as_str(), e.timestamp.as_millis()))
                .collect();
            let mut model_types: Vec<(&str, i64)> = expected.events.clone();
            types.sort_unstable();
            model_types.sort_unstable();
            if types != model_types {
                return Err(format!(
                    "{account}'s events (type, time): runtime {types:?}, model {model_types:?}"
                ));
            }
            let instance = app
                .process_instance::<Watch>(account)
                .await
                .map_err(|e| format!("{account}'s instance does not read: {e}"))?;
            match (&expected.instance, instance) {
                (None, None) => {}
                (Some(model), Some(runtime)) => {
                    let status = match runtime.status {
                        ProcessStatus::Started => model::Status::Started,
                        ProcessStatus::Completed => model::Status::Completed,
                        ProcessStatus::Failed => model::Status::Failed,
                        ProcessStatus::TimedOut => model::Status::TimedOut,
                    };
                    let state = &runtime.state;
                    let ours = (
                        status,
                        state.paid,
                        state.links,
                        state.hits,
                        state.chain.moment().map(Instant::as_millis),
                        state.movable.moment().map(Instant::as_millis),
                    );
                    let theirs = (
                        model.status,
                        model.paid,
                        model.links,
                        model.hits,
                        model.chain,
                        model.movable,
                    );
                    if ours != theirs {
                        return Err(format!(
                            "{account}'s instance (status, paid, links, hits, chain, movable): runtime {ours:?}, model {theirs:?}"
                        ));
                    }
                    if !model.given_up && runtime.parked != model.parked.len() {
                        return Err(format!(
                            "{account}'s parked events: runtime {}, model {}",
                            runtime.parked,
                            model.parked.len()
                        ));
                    }
                    let reached = reached(store, account).await?;
                    if reached != model.reached {
                        return Err(format!(
                            "{account}'s deadlines reached: runtime {reached:?}, model {:?}",
                            model.reached
                        ));
                    }
                }
                (model, runtime) => {
                    return Err(format!(
                        "{account}'s instance: runtime {}, model {}",
                        runtime.is_some(),
                        model.is_some()
                    ));
                }
            }
        }
        let letters = app
            .dead_letters()
            .list(&LetterFilter::default())
            .await
            .map_err(|e| e.to_string())?;
        let mut ours: Vec<(bool, String, &str)> = letters
            .iter()
            .map(|l| {
                let status = match l.status {
                    LetterStatus::Failed => "failed",
                    LetterStatus::Retried => "retried",
                    LetterStatus::Discarded => "discarded",
                };
                (
                    l.kind == LetterKind::Process,
                    l.aggregate_id.clone().unwrap_or_default(),
                    status,
                )
            })
            .collect();
        let mut theirs: Vec<(bool, String, &str)> = self
            .model
            .letters
            .iter()
            .map(|l| {
                let status = if l.discarded {
                    "discarded"
                } else if l.retried {
                    "retried"
                } else {
                    "failed"
                };
                (l.process, l.account.clone(), status)
            })
            .collect();
        ours.sort();
        theirs.sort();
        if ours != theirs {
            return Err(format!("letters: runtime {ours:?}, model {theirs:?}"));
        }
        self.stats.letters = ours.len();
        invariants(&app, true).await
    }
}

/// `(moment, field)` of every deadline an instance reached, from its history.
async fn reached(store: &dyn Store, account: &str) -> Result<Vec<(i64, &'static str)>, String> {
    let stream = store
        .read_stream("process:Watch", account)
        .await
        .map_err(|e| e.to_string())?;
    let mut reached = Vec::new();
    for event in &stream {
        let field = match event.event_type.as_str() {
            "ProcessDeadlineReached" => match event.payload["field"].as_str() {
                Some("chain") => "chain",
                Some("movable") => "movable",
                other => return Err(format!("an unknown deadline reached: {other:?}")),
            },
            "ProcessTimedOut" => "timeout",
            _ => continue,
        };
        let at: Instant = serde_json::from_value(event.payload["at"].clone())
            .map_err(|e| format!("a reached moment does not read: {e}"))?;
        reached.push((at.as_millis(), field));
    }
    Ok(reached)
}

/// What must hold of any store, whatever the schedule. With `in_order`, also that no deadline
/// ran before its instance's events stored at or before its moment; with failing commits that
/// does not hold by design (spec 86: a deadline held for a process runner that is stuck runs
/// after ten worker rounds).
async fn invariants(app: &App, in_order: bool) -> Result<(), String> {
    let store = app.store();
    let mut events = Vec::new();
    loop {
        let after = events
            .last()
            .map_or(0, |e: &bounda::RecordedEvent| e.position);
        let page = store
            .read_all(after, 10_000)
            .await
            .map_err(|e| e.to_string())?;
        if page.is_empty() {
            break;
        }
        events.extend(page);
    }
    let mut versions: HashMap<(String, String), u64> = HashMap::new();
    for (index, event) in events.iter().enumerate() {
        if event.position != index as u64 + 1 {
            return Err(format!(
                "positions have a gap: {} at index {index}",
                event.position
            ));
        }
        let version = versions
            .entry((event.aggregate_type.clone(), event.aggregate_id.clone()))
            .or_insert(0);
        *version += 1;
        if event.version != *version {
            return Err(format!(
                "{}:{} skips from version {} to {}",
                event.aggregate_type,
                event.aggregate_id,
                *version - 1,
                event.version
            ));
        }
    }
    // Each (field, moment) once, never early, and never before its instance's events stored
    // at or before its moment.
    let mut by_account: BTreeMap<&str, Vec<&bounda::RecordedEvent>> = BTreeMap::new();
    for event in &events {
        if event.aggregate_type == "process:Watch" {
            by_account
                .entry(&event.aggregate_id)
                .or_default()
                .push(event);
        }
    }
    for (account, stream) in by_account {
        let mut seen = HashSet::new();
        let mut handled: HashSet<String> = HashSet::new();
        for event in stream {
            if let Some(id) = event.payload.get("eventId").and_then(|id| id.as_str()) {
                handled.insert(id.to_owned());
            }
            if event.event_type != "ProcessDeadlineReached" {
                continue;
            }
            let field = event.payload["field"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let at: Instant =
                serde_json::from_value(event.payload["at"].clone()).map_err(|e| e.to_string())?;
            if !seen.insert((field.clone(), at)) {
                return Err(format!("{account}: {field} at {at} reached twice"));
            }
            if event.timestamp < at {
                return Err(format!(
                    "{account}: {field} due at {at} ran early, at {}",
                    event.timestamp
                ));
            }
            if !in_order {
                continue;
            }
            let before = events.iter().filter(|e| {
                e.aggregate_type == "Account"
                    && e.aggregate_id == account
                    && matches!(
                        e.event_type.as_str(),
                        "Opened" | "Paid" | "Moved" | "Cancelled"
                    )
                    && e.timestamp <= at
            });
            for earlier in before {
                if !handled.contains(&earlier.id) {
                    return Err(format!(
                        "{account}: {field} at {at} ran before {} ({}) stored at {}",
                        earlier.event_type, earlier.id, earlier.timestamp
                    ));
                }
            }
        }
    }
    let lag = app.lag().await.map_err(|e| e.to_string())?;
    if lag.max_lag != 0 {
        return Err(format!(
            "lag {} after catching up: {:?}",
            lag.max_lag, lag.subscribers
        ));
    }
    Ok(())
}

fn show(ms: i64) -> String {
    Instant::from_millis(ms).map_or(ms.to_string(), |at| at.to_string())
}

/// Runs `schedule` with `seed`'s plan: the first disagreement, or what it exercised.
pub async fn run(seed: u64, schedule: &[Step]) -> Outcome {
    simulate(seed, schedule, None).await
}

/// Runs `schedule` with `seed`'s plan while commits fail `per_mille` times in a thousand: runs
/// come out whole, are never doubled and never lost.
pub async fn run_with_faults(seed: u64, schedule: &[Step], per_mille: u64) -> Outcome {
    simulate(seed, schedule, Some(per_mille)).await
}

async fn simulate(seed: u64, schedule: &[Step], faults: Option<u64>) -> Outcome {
    let mut run = Run::new(seed, faults).await;
    for (index, step) in schedule.iter().enumerate() {
        run.step(*step)
            .await
            .map_err(|error| format!("step {index} ({step:?}): {error}"))?;
        if index % 10 == 9 {
            if run.dirty {
                run.stats.skipped += 1;
            } else {
                run.compare()
                    .await
                    .map_err(|error| format!("after step {index} ({step:?}): {error}"))?;
            }
        }
    }
    if faults.is_some() {
        // The faults stop; whatever they left is retried, and then nothing may be missing.
        run.catch_up_through_faults(false)
            .await
            .map_err(|error| format!("at the end: {error}"))?;
        run.runner()
            .advance(millis(86_400_000))
            .await
            .map_err(|error| format!("at the end: {error}"))?;
        let checked = fault_checks(run.app().await, true).await;
        let checked = checked.map_err(|error| format!("at the end: {error}"));
        run.with_history(checked).await?;
        run.collect_faults();
    } else {
        run.catch_up()
            .await
            .map_err(|error| format!("at the end: {error}"))?;
        run.compare()
            .await
            .map_err(|error| format!("at the end: {error}"))?;
    }
    run.database.check_integrity()?;
    Ok(run.stats)
}

/// What commits failing on purpose must not break: nothing doubled (an acknowledgement per
/// payment at most, a ping per chain link, an event handled once), and at the end, with the
/// faults stopped, nothing lost (every payment acknowledged or lettered, every link's ping sent
/// or lettered, every event of a running instance handled).
async fn fault_checks(app: &App, end: bool) -> Result<(), String> {
    invariants(app, false).await?;
    let store = app.store();
    let now = app.clock().now();
    let letters = app
        .dead_letters()
        .list(&LetterFilter::default())
        .await
        .map_err(|e| e.to_string())?;
    let accounts: std::collections::BTreeSet<String> = store
        .read_all(0, 100_000)
        .await
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|e| e.aggregate_type == "Account")
        .map(|e| e.aggregate_id)
        .collect();
    for account in accounts {
        let events = store
            .read_stream("Account", &account)
            .await
            .map_err(|e| e.to_string())?;
        // Each acknowledgement names the payment it acknowledges as its cause.
        let mut acknowledged = HashSet::new();
        for ack in events.iter().filter(|e| e.event_type == "Acknowledged") {
            if !acknowledged.insert(ack.metadata.causation_id.clone()) {
                return Err(format!(
                    "{account}: payment {} acknowledged twice",
                    ack.metadata.causation_id
                ));
            }
        }
        let mut links = HashSet::new();
        for ping in events.iter().filter(|e| e.event_type == "Pinged") {
            if !links.insert(ping.payload["link"].as_u64()) {
                return Err(format!(
                    "{account}: link {} pinged twice",
                    ping.payload["link"]
                ));
            }
        }
        let lifecycle = store
            .read_stream("process:Watch", &account)
            .await
            .map_err(|e| e.to_string())?;
        let mut handled = HashSet::new();
        for step in lifecycle
            .iter()
            .filter(|e| e.event_type == "ProcessHandled")
        {
            let id = step.payload["eventId"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if !handled.insert(id.clone()) {
                return Err(format!("{account}: event {id} handled twice"));
            }
        }
        if !end {
            continue;
        }
        let mine: Vec<&bounda::store::DeadLetter> = letters
            .iter()
            .filter(|l| l.aggregate_id.as_deref() == Some(account.as_str()))
            .filter(|l| l.status != LetterStatus::Retried)
            .collect();
        let open = |kind: LetterKind| mine.iter().filter(move |l| l.kind == kind);
        let ack_delay = domain::ACK_DELAY.as_millis() as i64;
        for paid in events.iter().filter(|e| {
            e.event_type == "Paid" && e.timestamp.as_millis() + ack_delay <= now.as_millis()
        }) {
            let lettered = open(LetterKind::Policy).any(|l| l.event_id.as_ref() == Some(&paid.id));
            if !acknowledged.contains(&paid.id) && !lettered {
                return Err(format!(
                    "{account}: payment {} neither acknowledged nor lettered",
                    paid.id
                ));
            }
        }
        let ping_delay = domain::PING_DELAY.as_millis() as i64;
        let chain = lifecycle
            .iter()
            .filter(|e| e.event_type == "ProcessDeadlineReached" && e.payload["field"] == "chain");
        for (index, link) in chain.enumerate() {
            let number = index as u64 + 1;
            let due = link.timestamp.as_millis() + ping_delay <= now.as_millis();
            let lettered = open(LetterKind::Scheduled).any(|l| {
                l.payload
                    .as_ref()
                    .is_some_and(|payload| payload["link"].as_u64() == Some(number))
            });
            if due && !links.contains(&Some(number)) && !lettered {
                return Err(format!(
                    "{account}: link {number} neither pinged nor lettered"
                ));
            }
        }
        if let Some(instance) = app
            .process_instance::<Watch>(&account)
            .await
            .map_err(|e| e.to_string())?
            && instance.status == ProcessStatus::Started
        {
            for event in events.iter().filter(|e| {
                matches!(
                    e.event_type.as_str(),
                    "Opened" | "Paid" | "Moved" | "Cancelled"
                )
            }) {
                if !handled.contains(&event.id) {
                    return Err(format!(
                        "{account}: {} ({}) never handled by its running instance",
                        event.event_type, event.id
                    ));
                }
            }
        }
    }
    Ok(())
}
