//! Seeded simulations of a whole app: random schedules of outside inputs, clock moves from a
//! millisecond to two years, outages, restarts on the same database, one to three runners taking
//! turns, commits and port calls failing on purpose, dead letters retried and discarded, processes
//! and policies paused for a while (when the [`Mix`] draws them); after
//! each step the framework's invariants and the user's are checked, and a failing schedule is
//! shrunk and printed as a test to paste.
//!
//! The user gives the app (a closure from each runner's [`Setup`] to its builder), the outside
//! inputs (an enum implementing [`Input`]), and invariants (closures over the app). See the
//! guide "Simulating your processes" in the repository's `docs/`.
//!
//! ```
//! use bounda::prelude::*;
//! use bounda::testing::simulate::{Input, Rng, Sent, SimRng, Simulation};
//!
//! #[derive(Debug, Clone, Serialize, Deserialize, Event)]
//! #[event(aggregate = Counter)]
//! struct Bumped { counter_id: String }
//!
//! #[derive(Debug, Clone, Serialize, Deserialize, Events)]
//! enum CounterEvent { Bumped(Bumped) }
//!
//! #[derive(Debug, Default)]
//! struct Counter { bumps: u32 }
//!
//! impl Aggregate for Counter {
//!     const NAME: &'static str = "Counter";
//!     const ID_FIELD: &'static str = "counter_id";
//!     type Event = CounterEvent;
//!     fn apply(&mut self, _: &CounterEvent) { self.bumps += 1; }
//! }
//!
//! #[derive(Debug, Clone, Serialize, Deserialize)]
//! struct Bump { counter_id: String }
//!
//! #[command]
//! impl Command for Bump {
//!     const NAME: &'static str = "Bump";
//!     type Aggregate = Counter;
//!     type Rejection = NoRejection;
//!     fn aggregate_id(&self) -> &str { &self.counter_id }
//!     fn decide(&self, _: &Counter) -> Decision<Self> {
//!         Ok(vec![Bumped { counter_id: self.counter_id.clone() }.into()])
//!     }
//! }
//!
//! /// What the outside world does: bump counter `n`.
//! #[derive(Debug, Clone)]
//! enum Outside { Bump(u8) }
//!
//! impl Input for Outside {
//!     fn draw(rng: &mut SimRng) -> Outside {
//!         Outside::Bump(rng.random_range(0..3))
//!     }
//!
//!     async fn send(&self, app: &App) -> Result<Sent, String> {
//!         let Outside::Bump(n) = self;
//!         Sent::of(app.dispatch(Bump { counter_id: format!("c{n}") }).await)
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! Simulation::<Outside>::new(bounda_sqlite::ScratchFile::new, |setup| {
//!     App::builder_shared(setup.store()).only_listed().command::<Bump>()
//! })
//! .invariant("no counter is bumped past 200", |app| async move {
//!     for n in 0..3 {
//!         let bumps = app.load::<Counter>(&format!("c{n}")).await.map_err(|e| e.to_string())?;
//!         if bumps.state.bumps > 200 {
//!             return Err(format!("c{n} has {} bumps", bumps.state.bumps));
//!         }
//!     }
//!     Ok(())
//! })
//! .steps(30)
//! .check(1..=3)
//! .await;
//! # }
//! ```

mod broker;
mod checks;
mod database;
mod drive;
mod ports;
mod runners;
mod schedule;
#[cfg(feature = "proptest")]
mod strategy;

pub use broker::{Broker, BrokerFaults};
pub use database::Database;
pub use ports::{Effects, Fate, PlayedFaults, PortFaults};
/// The methods of [`SimRng`] an [`Input`] draws with (`random_range`, `random_bool`).
pub use rand::Rng;
pub use schedule::{Mix, SimRng, Step, span};
#[cfg(feature = "proptest")]
pub use strategy::draw_from;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::app::{App, AppBuilder, DispatchError};
use crate::clock::{Clock, SimulatedClock};
use crate::store::Store;
use crate::testing::InjectedFaults;
use crate::{Duration, Instant, days};

use runners::{BuildApp, Runners};

/// What the outside world does to the app under simulation: an enum of the user's own (the
/// printed test of a failing schedule names its variants), drawn from the schedule's random
/// source and sent to the app.
pub trait Input: fmt::Debug + Clone + 'static {
    /// One input, drawn from `rng`. Sizes and moments are best relative (an amount, a delay from
    /// now) so that a shrunk schedule still reads well.
    fn draw(rng: &mut SimRng) -> Self;

    /// The inputs every schedule starts with (opening the accounts a domain works on, say);
    /// none by default.
    fn first(rng: &mut SimRng) -> Vec<Self> {
        let _ = rng;
        Vec::new()
    }

    /// Sends the input to `app`: what the app answered, or the failure that is a finding.
    fn send(&self, app: &App) -> impl Future<Output = Result<Sent, String>>;
}

/// What the app answered an outside input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// The app took it.
    Accepted,
    /// The domain refused it, as it may: with the rejection, as debugging shows it.
    Rejected(String),
}

impl Sent {
    /// The answer of a dispatch: a rejection is an answer, any other failure a finding.
    pub fn of<T, R: fmt::Debug>(result: Result<T, DispatchError<R>>) -> Result<Sent, String> {
        match result {
            Ok(_) => Ok(Sent::Accepted),
            Err(DispatchError::Rejected(rejection)) => Ok(Sent::Rejected(format!("{rejection:?}"))),
            Err(DispatchError::Failed(error)) => Err(format!("dispatch failed: {error}")),
        }
    }
}

/// What each runner's app is built with.
pub struct Setup {
    store: Arc<dyn Store>,
    clock: Arc<SimulatedClock>,
    port_faults: PortFaults,
    effects: Effects,
    broker: Broker,
    runner: usize,
}

impl Setup {
    /// The runner's store: build the app on it with [`App::builder_shared`].
    pub fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    /// The schedule's port faults, for the app's fake ports to play (shared by every runner and
    /// restart of the schedule).
    pub fn port_faults(&self) -> PortFaults {
        self.port_faults.clone()
    }

    /// The schedule's recorded side effects, for the app's fake ports to record in (shared by
    /// every runner and restart). The simulation registers it as a port too, so an invariant
    /// reads it with `app.port::<Effects>()`.
    pub fn effects(&self) -> Effects {
        self.effects.clone()
    }

    /// The schedule's broker: a relay's sink, and what delivers the commands other services
    /// send ([`Broker::deliver`]), failing as the schedule's port faults say (shared by every
    /// runner and restart). The simulation checks that every event its relays take reaches it,
    /// each stream in order, and that each command it delivers decides once.
    pub fn broker(&self) -> Broker {
        self.broker.clone()
    }

    /// The schedule's simulated clock, for a fake port that waits on simulated time
    /// ([`SimulatedClock::after`], [`SimulatedClock::timer_at`]): the simulation sets it on the
    /// app itself.
    pub fn clock(&self) -> Arc<SimulatedClock> {
        self.clock.clone()
    }

    /// Which runner this is: 0, 1 or 2.
    pub fn runner(&self) -> usize {
        self.runner
    }
}

/// A reference model the app is compared with: what the user expects of each input and each
/// moment, computed without the runtime. Most simulations need none; bounda's own runs one.
pub trait Model<I>: 'static {
    /// Before `input` is sent at `now`: a span to advance first, for an input the model cannot
    /// order against a deadline about to come due.
    fn before(&mut self, input: &I, now: Instant) -> Option<Duration> {
        let _ = (input, now);
        None
    }

    /// `input` was sent and the app answered `sent`: an error where the model expected another
    /// answer.
    fn sent(&mut self, input: &I, sent: &Sent) -> Result<(), String>;

    /// The clock moved `by` with a runner running: everything due on the way ran.
    fn advanced(&mut self, by: Duration);

    /// The clock moved `by` while no runner ran.
    fn outage(&mut self, by: Duration);

    /// The runners caught up at `now`: an error where the model's clock says otherwise.
    fn settled(&mut self, now: Instant) -> Result<(), String>;

    /// Compares the model with the app at rest.
    fn compare(&mut self, app: &App) -> impl Future<Output = Result<(), String>>;
}

/// No model: the invariants alone judge.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoModel;

impl<I> Model<I> for NoModel {
    fn sent(&mut self, _: &I, _: &Sent) -> Result<(), String> {
        Ok(())
    }
    fn advanced(&mut self, _: Duration) {}
    fn outage(&mut self, _: Duration) {}
    fn settled(&mut self, _: Instant) -> Result<(), String> {
        Ok(())
    }
    async fn compare(&mut self, _: &App) -> Result<(), String> {
        Ok(())
    }
}

type Check = Box<dyn Fn(App) -> Pin<Box<dyn Future<Output = Result<(), String>>>>>;

/// A user's invariant, by name.
struct Invariant {
    name: String,
    check: Check,
}

impl Invariant {
    fn new<F, Fut>(name: &str, check: F) -> Invariant
    where
        F: Fn(App) -> Fut + 'static,
        Fut: Future<Output = Result<(), String>> + 'static,
    {
        Invariant {
            name: name.to_owned(),
            check: Box::new(move |app| Box::pin(check(app))),
        }
    }

    /// Checks every invariant of `invariants` on `app`: the first broken one, named.
    async fn hold(invariants: &[Invariant], app: &App) -> Result<(), String> {
        for invariant in invariants {
            (invariant.check)(app.clone())
                .await
                .map_err(|error| format!("invariant \"{}\": {error}", invariant.name))?;
        }
        Ok(())
    }
}

/// A seeded simulation of an app: build it, then [`check`](Simulation::check) seeds,
/// [`run`](Simulation::run) the slice the environment asks for, or
/// [`replay`](Simulation::replay) a printed schedule.
pub struct Simulation<I: Input, M: Model<I> = NoModel> {
    database: Box<dyn Fn() -> Box<dyn Database>>,
    build: Box<BuildApp>,
    invariants: Vec<Invariant>,
    at_end: Vec<Invariant>,
    model: Box<dyn Fn(u64, Instant) -> M>,
    /// Whether a model follows the schedules.
    modelled: bool,
    steps: usize,
    every: usize,
    mix: Mix,
    store_faults: u64,
    port_faults: u64,
    settle: Duration,
    replay_as: String,
    _input: std::marker::PhantomData<fn() -> I>,
}

/// What the schedules of a check exercised.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// Schedules run.
    pub schedules: usize,
    /// Steps run.
    pub steps: usize,
    /// Times the invariants (and the model) were checked.
    pub checks: usize,
    /// Checks skipped because an outage left work pending, or something was paused.
    pub skipped: usize,
    /// Restarts.
    pub restarts: usize,
    /// Processes and policies paused for a while, and resumed.
    pub pauses: usize,
    /// Dead letters filed.
    pub letters: usize,
    /// Commits failed on purpose.
    pub store_faults: InjectedFaults,
    /// Port calls failed on purpose.
    pub port_faults: PlayedFaults,
    /// What the broker failed, lost and dropped.
    pub broker: BrokerFaults,
    /// Side effects recorded.
    pub effects: usize,
    /// Repeats of a side effect under its key, dropped.
    pub repeats: u64,
}

impl Report {
    fn add(&mut self, other: &Report) {
        self.schedules += other.schedules;
        self.steps += other.steps;
        self.checks += other.checks;
        self.skipped += other.skipped;
        self.restarts += other.restarts;
        self.pauses += other.pauses;
        self.letters += other.letters;
        self.store_faults.add(&other.store_faults);
        self.port_faults.add(&other.port_faults);
        self.broker.add(&other.broker);
        self.effects += other.effects;
        self.repeats += other.repeats;
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let store = &self.store_faults;
        let port = &self.port_faults;
        write!(
            f,
            "{} schedules, {} steps, {} checks ({} skipped while work was pending or paused), {} restarts, \
             {} pauses, {} dead letters; commits failed: {} busy, {} full, {} I/O, {} after writing; port \
             calls failed: {} retriable, {} terminal, {} panics, {} hangs; {} side effects ({} \
             repeats dropped); broker: {} publishes failed, {} acknowledgements lost, {} refused \
             while down, {} repeats dropped, {} commands delivered again",
            self.schedules,
            self.steps,
            self.checks,
            self.skipped,
            self.restarts,
            self.pauses,
            self.letters,
            store.busy,
            store.full,
            store.io,
            store.after_write,
            port.failures,
            port.terminal,
            port.panics,
            port.hangs,
            self.effects,
            self.repeats,
            self.broker.failures,
            self.broker.acks_lost,
            self.broker.down,
            self.broker.repeats,
            self.broker.redeliveries,
        )
    }
}

/// A schedule that failed: what broke, and the schedule shrunk to the fewest steps that still
/// break it, printed as a test to paste.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The schedule's seed.
    pub seed: u64,
    /// What broke first, with the step it followed.
    pub error: String,
    /// Steps of the schedule.
    pub steps: usize,
    /// Steps of the shrunk schedule.
    pub shrunk: usize,
    /// What breaks in the shrunk schedule.
    pub shrunk_error: String,
    /// The shrunk schedule as a `#[tokio::test]` to paste.
    pub test: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "simulation seed {} failed: {}\n\nshrunk from {} to {} steps: {}\n\n{}\n",
            self.seed, self.error, self.steps, self.shrunk, self.shrunk_error, self.test
        )
    }
}

impl<I: Input> Simulation<I, NoModel> {
    /// A simulation of the app `build` makes on each runner's store, on a fresh database from
    /// `database` for each schedule. By default: 60 steps, checks every 5, no faults, a week
    /// of settling at the end.
    pub fn new<D: Database + 'static>(
        database: impl Fn() -> D + 'static,
        build: impl Fn(&Setup) -> AppBuilder + 'static,
    ) -> Simulation<I, NoModel> {
        Simulation {
            database: Box::new(move || Box::new(database())),
            build: Box::new(build),
            invariants: Vec::new(),
            at_end: Vec::new(),
            model: Box::new(|_, _| NoModel),
            modelled: false,
            steps: 60,
            every: 5,
            mix: Mix::default(),
            store_faults: 0,
            port_faults: 0,
            settle: days(7),
            replay_as: "simulation()".to_owned(),
            _input: std::marker::PhantomData,
        }
    }
}

impl<I: Input, M: Model<I>> Simulation<I, M> {
    /// Compares the app with a reference model, made for each schedule from its seed and its
    /// starting moment. A model cannot follow failing commits (`store_faults`), which run work
    /// at moments it does not know: a simulation with both panics when it runs, saying so.
    pub fn model<N: Model<I>>(
        self,
        model: impl Fn(u64, Instant) -> N + 'static,
    ) -> Simulation<I, N> {
        Simulation {
            database: self.database,
            build: self.build,
            invariants: self.invariants,
            at_end: self.at_end,
            model: Box::new(model),
            modelled: true,
            steps: self.steps,
            every: self.every,
            mix: self.mix,
            store_faults: self.store_faults,
            port_faults: self.port_faults,
            settle: self.settle,
            replay_as: self.replay_as,
            _input: std::marker::PhantomData,
        }
    }

    /// Adds an invariant, checked whenever the app is at rest and at the end: `Err` with what
    /// is wrong fails the schedule.
    pub fn invariant<F, Fut>(mut self, name: &str, check: F) -> Simulation<I, M>
    where
        F: Fn(App) -> Fut + 'static,
        Fut: Future<Output = Result<(), String>> + 'static,
    {
        self.invariants.push(Invariant::new(name, check));
        self
    }

    /// Adds an invariant checked only at the end, once the store's faults stopped and the clock
    /// moved past the settling span: what must have happened by then (every order ended, say).
    pub fn at_end<F, Fut>(mut self, name: &str, check: F) -> Simulation<I, M>
    where
        F: Fn(App) -> Fut + 'static,
        Fut: Future<Output = Result<(), String>> + 'static,
    {
        self.at_end.push(Invariant::new(name, check));
        self
    }

    /// Steps per schedule (60 by default).
    pub fn steps(mut self, steps: usize) -> Simulation<I, M> {
        self.steps = steps;
        self
    }

    /// Checks the invariants (and the model) after every `every` steps, when the app is at rest
    /// (5 by default; 1 checks after each).
    pub fn check_every(mut self, every: usize) -> Simulation<I, M> {
        self.every = every.max(1);
        self
    }

    /// How often each kind of step is drawn.
    pub fn mix(mut self, mix: Mix) -> Simulation<I, M> {
        self.mix = mix;
        self
    }

    /// Makes commits fail `per_mille` times in a thousand while a runner works (busy, full, I/O
    /// before writing, or written and answered with an error), through a
    /// [`FaultyStore`](crate::testing::FaultyStore); they stop at the end, and then nothing may
    /// be missing.
    pub fn store_faults(mut self, per_mille: u64) -> Simulation<I, M> {
        self.store_faults = per_mille;
        self
    }

    /// Makes `per_cent` port calls in a hundred meet a fault, through the [`PortFaults`] the
    /// app's fake ports play: a failure the runtime retries (most), a terminal failure, a panic
    /// or a call that never answers. Unlike the store's faults they go on through the end: each
    /// call's faults are finite, so a retried call goes through.
    pub fn port_faults(mut self, per_cent: u64) -> Simulation<I, M> {
        self.port_faults = per_cent.min(100);
        self
    }

    /// How far the clock moves at the end, with the faults stopped, before the last checks: at
    /// least the app's longest deadline, so that everything pending comes due (a week by
    /// default).
    pub fn settle(mut self, settle: Duration) -> Simulation<I, M> {
        self.settle = settle;
        self
    }

    /// The expression the printed test of a failing schedule builds the simulation with
    /// (`simulation()` by default): the test's own helper.
    pub fn replay_as(mut self, expression: &str) -> Simulation<I, M> {
        self.replay_as = expression.to_owned();
        self
    }

    /// The schedule `seed` draws.
    pub fn schedule(&self, seed: u64) -> Vec<Step<I>> {
        schedule::generate(seed, self.steps, &self.mix, &I::first, &I::draw)
    }

    /// Runs the schedule of each seed; on a failure, panics with the schedule shrunk and printed
    /// as a test to paste. Returns what the schedules exercised.
    pub async fn check(&self, seeds: impl IntoIterator<Item = u64>) -> Report {
        let mut total = Report::default();
        for seed in seeds {
            let schedule = self.schedule(seed);
            let report = self.check_schedule(seed, &schedule).await;
            total.add(&report);
        }
        total
    }

    /// The slice the environment asks for: the long run's seeds when
    /// `BOUNDA_SIMULATION_SCHEDULES` is set (see [`long_run_seeds`]), otherwise seeds 1 to
    /// `schedules` and two new ones drawn from the time (printed, to replay a finding).
    pub async fn run(&self, schedules: u64) -> Report {
        let report = match long_run_seeds(1) {
            Some(seeds) => self.check(seeds).await,
            None => {
                let fresh = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |since| since.as_secs())
                    * 1_000;
                println!("new seeds {fresh} and {}", fresh + 1);
                let mut report = self.check(1..=schedules).await;
                report.add(&self.check(fresh..fresh + 2).await);
                report
            }
        };
        println!("{report}");
        report
    }

    /// Runs a printed schedule with `seed` again: the test a failing check prints.
    pub async fn replay(&self, seed: u64, schedule: &[Step<I>]) -> Report {
        self.check_schedule(seed, schedule).await
    }

    /// Runs `schedule`; on a failure, shrinks it and panics with the test to paste.
    async fn check_schedule(&self, seed: u64, schedule: &[Step<I>]) -> Report {
        match self.try_schedule(seed, schedule).await {
            Ok(report) => report,
            Err(finding) => panic!("{finding}"),
        }
    }

    /// Runs the schedule of each seed until one fails: its finding, shrunk, or `None` when
    /// every schedule passed. For a test that a simulation catches a bug.
    pub async fn find(&self, seeds: impl IntoIterator<Item = u64>) -> Option<Finding> {
        for seed in seeds {
            let schedule = self.schedule(seed);
            if let Err(finding) = self.try_schedule(seed, &schedule).await {
                return Some(finding);
            }
        }
        None
    }

    /// Runs `schedule`; on a failure, shrinks it.
    async fn try_schedule(&self, seed: u64, schedule: &[Step<I>]) -> Result<Report, Finding> {
        assert!(
            !(self.modelled && self.store_faults > 0),
            "a model cannot follow failing commits, which run work at moments it does not know: \
             run the model without `store_faults`, and the faults with invariants"
        );
        quiet_planned_panics();
        let failure = match self.run_schedule(seed, schedule).await {
            Ok(report) => return Ok(report),
            Err(failure) => failure,
        };
        let shrunk = self.shrink(seed, schedule, &failure).await;
        let again = match self.run_schedule(seed, &shrunk).await {
            Err(again) => again.to_string(),
            Ok(_) => "the shrunk schedule passes: replay the whole one".to_owned(),
        };
        let input = schedule::short_name(std::any::type_name::<I>());
        Err(Finding {
            seed,
            error: failure.to_string(),
            steps: schedule.len(),
            shrunk: shrunk.len(),
            shrunk_error: again,
            test: schedule::as_rust(&self.replay_as, input, seed, &shrunk),
        })
    }

    /// The smallest schedule, by removing steps, that still fails as `failure` did (the same
    /// invariant or disagreement): halves, then quarters, down to single steps.
    async fn shrink(&self, seed: u64, schedule: &[Step<I>], failure: &Failure) -> Vec<Step<I>> {
        let mut current = schedule.to_vec();
        let mut chunk = current.len().div_ceil(2);
        while chunk >= 1 {
            let mut start = 0;
            while start < current.len() {
                let end = (start + chunk).min(current.len());
                let candidate: Vec<Step<I>> = current[..start]
                    .iter()
                    .chain(&current[end..])
                    .cloned()
                    .collect();
                let same = match self.run_schedule(seed, &candidate).await {
                    Err(again) => again.kind() == failure.kind(),
                    Ok(_) => false,
                };
                if same {
                    current = candidate;
                } else {
                    start += chunk;
                }
            }
            chunk /= 2;
        }
        current
    }

    /// Runs `schedule` with `seed`: what it exercised, or the first broken invariant or
    /// disagreement, with the step it followed.
    async fn run_schedule(&self, seed: u64, schedule: &[Step<I>]) -> Result<Report, Failure> {
        let failed = |at: String| move |what: String| Failure { at, what };
        let runners = Runners::new(
            (self.database)(),
            seed,
            self.store_faults,
            self.port_faults,
            &*self.build,
        )
        .await
        .map_err(failed("at the start".to_owned()))?;
        let model = (self.model)(seed, runners.clock.now());
        let mut run = drive::Run::new(self, runners, model);
        for (index, step) in schedule.iter().enumerate() {
            run.step(step)
                .await
                .map_err(failed(format!("step {index} ({step:?})")))?;
            if index % self.every == self.every - 1 {
                run.check()
                    .await
                    .map_err(failed(format!("after step {index} ({step:?})")))?;
            }
        }
        run.finish().await.map_err(failed("at the end".to_owned()))
    }
}

/// How a schedule failed: where, and what broke.
#[derive(Debug)]
struct Failure {
    at: String,
    what: String,
}

impl Failure {
    /// What broke, without its details: the invariant, or the disagreement's first words. A
    /// shrunk schedule must break the same.
    fn kind(&self) -> &str {
        self.what.split(':').next().unwrap_or(&self.what)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.at, self.what)
    }
}

/// The seeds of a long run, when `BOUNDA_SIMULATION_SCHEDULES` says how many: from
/// `BOUNDA_SIMULATION_FIRST_SEED`, else from `first`. `None` when the variable is not set.
pub fn long_run_seeds(first: u64) -> Option<std::ops::Range<u64>> {
    let number = |name: &str| std::env::var(name).ok().and_then(|n| n.parse::<u64>().ok());
    let count = number("BOUNDA_SIMULATION_SCHEDULES")?;
    let first = number("BOUNDA_SIMULATION_FIRST_SEED").unwrap_or(first);
    Some(first..first.saturating_add(count))
}

/// Keeps the planned panics of port faults out of the output; any other panic is printed.
fn quiet_planned_panics() {
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let planned = info
                .payload()
                .downcast_ref::<String>()
                .is_some_and(|message| message.starts_with("planned panic"));
            if !planned {
                default(info);
            }
        }));
    });
}
