//! The runners of one schedule: one to three apps on one database, each on the schedule's
//! simulated clock with ids of its own, each on a store that fails commits on purpose when the
//! simulation asks; dropped and opened again on a restart.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::Setup;
use super::broker::Broker;
use super::database::Database;
use super::ports::{Effects, PortFaults};
use crate::app::{App, AppBuilder};
use crate::clock::{Clock, SimulatedClock, Sleep};
use crate::ids::IdGenerator;
use crate::store::Store;
use crate::testing::{FaultyStore, InjectedFaults, TestApp};
use crate::{Duration, Instant, millis};

/// The simulated clock, whose next sleep polled ends at once when a port call hangs (see
/// [`PortFaults`]): that sleep is the handler's own time limit, polled right after the handler
/// in the same poll.
struct HangingClock {
    inner: Arc<SimulatedClock>,
    slow: Arc<AtomicBool>,
}

impl Clock for HangingClock {
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

/// How the runners' apps are built: the user's builder, given each runner's store and the
/// schedule's ports.
pub(crate) type BuildApp = dyn Fn(&Setup) -> AppBuilder;

/// The runners of one schedule.
pub(crate) struct Runners {
    pub(crate) database: Box<dyn Database>,
    pub(crate) clock: Arc<SimulatedClock>,
    pub(crate) port_faults: PortFaults,
    pub(crate) effects: Effects,
    pub(crate) broker: Broker,
    slow: Arc<AtomicBool>,
    seed: u64,
    /// Commits fail this often, per thousand, while a runner works.
    store_faults: u64,
    runners: Vec<TestApp>,
    stores: Vec<Arc<FaultyStore>>,
    current: usize,
    generation: usize,
    /// The faults injected by stores already dropped.
    pub(crate) injected: InjectedFaults,
}

impl Runners {
    /// The runners of a schedule of `seed` on `database`: one, started.
    pub(crate) async fn new(
        database: Box<dyn Database>,
        seed: u64,
        store_faults: u64,
        port_faults: u64,
        build: &BuildApp,
    ) -> Result<Runners, String> {
        let slow = Arc::new(AtomicBool::new(false));
        let clock = Arc::new(SimulatedClock::default());
        let mut runners = Runners {
            database,
            broker: Broker::new(seed, port_faults, clock.clone()),
            clock,
            port_faults: PortFaults::new(seed, port_faults, slow.clone()),
            effects: Effects::default(),
            slow,
            seed,
            store_faults,
            runners: Vec::new(),
            stores: Vec::new(),
            current: 0,
            generation: 0,
            injected: InjectedFaults::default(),
        };
        runners.start(1, build).await?;
        Ok(runners)
    }

    /// Drops every runner and starts `count` (1 to 3) on the same database, as a restart does.
    pub(crate) async fn start(&mut self, count: usize, build: &BuildApp) -> Result<(), String> {
        self.runners.clear();
        self.collect_faults();
        self.stores.clear();
        self.generation += 1;
        for runner in 0..count.clamp(1, 3) {
            let opened = self
                .database
                .open()
                .await
                .map_err(|e| format!("the database does not open again: {e}"))?;
            let store: Arc<dyn Store> = if self.store_faults > 0 {
                let seed = self.seed ^ (self.generation as u64 * 31 + runner as u64);
                let faulty = Arc::new(FaultyStore::new(opened, seed, self.store_faults));
                // Armed only while this runner works.
                faulty.arm(false);
                self.stores.push(faulty.clone());
                faulty
            } else {
                opened
            };
            let setup = Setup {
                store,
                clock: self.clock.clone(),
                port_faults: self.port_faults.clone(),
                effects: self.effects.clone(),
                broker: self.broker.clone(),
                runner,
            };
            let clock = HangingClock {
                inner: self.clock.clone(),
                slow: self.slow.clone(),
            };
            let ids = Prefixed {
                prefix: format!("g{}r{runner}", self.generation),
                next: AtomicU64::new(0),
            };
            let app = build(&setup)
                .port(self.effects.clone())
                .port(self.broker.clone())
                .clock(Arc::new(clock))
                .ids(Arc::new(ids))
                .build()
                .await
                .map_err(|e| format!("the app does not build: {e}"))?;
            self.runners
                .push(TestApp::with_app(app, self.clock.clone()).expecting_letters());
        }
        self.current = 0;
        Ok(())
    }

    /// Runner `n` (modulo their count) takes over.
    pub(crate) fn turn(&mut self, n: usize) {
        self.current = n % self.runners.len().max(1);
    }

    /// The runner working now.
    pub(crate) fn runner(&self) -> &TestApp {
        &self.runners[self.current % self.runners.len()]
    }

    /// The app of the runner working now.
    pub(crate) fn app(&self) -> &App {
        self.runner().app()
    }

    /// Whether commits fail on purpose in this schedule.
    pub(crate) fn faulty(&self) -> bool {
        self.store_faults > 0
    }

    /// Arms the current runner's faults (all others disarmed), or disarms them all.
    fn arm(&self, armed: bool) {
        for store in &self.stores {
            store.arm(false);
        }
        if let Some(store) = self.stores.get(self.current) {
            store.arm(armed);
        }
    }

    /// Stops the faults for good: the end of a schedule.
    pub(crate) fn stop_faults(&mut self) {
        self.arm(false);
        self.store_faults = 0;
    }

    /// Adds the faults of the stores about to be dropped to the count.
    pub(crate) fn collect_faults(&mut self) {
        for store in self.stores.drain(..) {
            self.injected.add(&store.injected());
        }
    }

    /// How long a claim lasts: twice the longest handler time limit, as the runtime has it.
    fn lease(&self) -> Duration {
        let config = self.app().config();
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

    /// Runs everything due now. Without faults, the runtime must come to rest at once; with
    /// them, a failed pass is tried again as a runner would after its back-off, work left behind
    /// a claim a failed commit could not give back is waited for (its lease), and a pass that
    /// keeps failing is a finding.
    pub(crate) async fn catch_up(&self) -> Result<(), String> {
        // A relay whose broker is down retries for as long as it is: at rest once it is back.
        for _ in 0..1_000 {
            self.settle().await?;
            match self.relay_retry().await? {
                Some(at) => self.clock.advance_to(at.max(self.clock.now())),
                None => return Ok(()),
            }
        }
        Err("the relays never publish what they hold".into())
    }

    /// When the first failing publish of a relay is tried again, if one fails.
    async fn relay_retry(&self) -> Result<Option<Instant>, String> {
        let lags = self
            .runner()
            .app()
            .relay_lags()
            .await
            .map_err(|e| format!("the relays' lag does not read: {e}"))?;
        Ok(lags
            .iter()
            .filter_map(|lag| lag.failing.as_ref().map(|failing| failing.retry_at))
            .min())
    }

    /// Runs until nothing moves, through the store's faults when they are on.
    async fn settle(&self) -> Result<(), String> {
        if !self.faulty() {
            let idle = self
                .runner()
                .run_until_idle()
                .await
                .map_err(|e| format!("run_until_idle failed: {e}"))?;
            return if idle.idle {
                Ok(())
            } else {
                Err("the runtime does not come to rest".into())
            };
        }
        for _ in 0..200 {
            self.arm(true);
            let result = self.runner().run_until_idle().await;
            self.arm(false);
            let Ok(idle) = result else { continue };
            // Work behind a claim a failed commit left waits for its lease to lapse; what a
            // pause holds, passed by the checkpoints, waits for its resume instead.
            if self.behind().await {
                self.clock.advance(self.lease());
                continue;
            }
            if idle.idle {
                return Ok(());
            }
        }
        Err("the runtime does not come to rest through the faults".into())
    }

    /// Whether a subscriber's checkpoint stands before the head (a read that fails counts as
    /// not: the next round reads again).
    async fn behind(&self) -> bool {
        let Ok(lags) = self.app().subscriber_lags().await else {
            return false;
        };
        lags.subscribers.iter().any(|s| s.position < lags.head)
    }

    /// Moves the clock `by` with the current runner running everything due on the way.
    pub(crate) async fn advance(&self, by: Duration) -> Result<(), String> {
        if !self.faulty() {
            let idle = self
                .runner()
                .advance(by)
                .await
                .map_err(|e| format!("advance failed: {e}"))?;
            return if idle.idle {
                Ok(())
            } else {
                Err("the runtime does not come to rest".into())
            };
        }
        let target = self.clock.now() + by;
        let mut last = None;
        for _ in 0..200 {
            if self.clock.now() >= target {
                return Ok(());
            }
            let left = target.as_millis() - self.clock.now().as_millis();
            self.arm(true);
            last = self.runner().advance(millis(left as u64)).await.err();
            self.arm(false);
            self.catch_up().await?;
        }
        if self.clock.now() < target {
            return Err(format!(
                "the clock does not reach its target through the faults: {last:?}"
            ));
        }
        Ok(())
    }
}
