//! The test harness: an app on simulated time, where one `advance` runs every consequence, and a
//! check of what it logs.

mod core_only;
mod faults;
mod logs;
pub mod simulate;

pub use core_only::CoreOnly;
pub use faults::{Fault, FaultyStore, InjectedFaults};
pub use logs::{Line, Logs};
/// The level of a logged line, as [`Logs::expect`] takes it.
pub use tracing::Level;

use std::collections::HashSet;
use std::sync::Arc;

use crate::aggregate::{Aggregate, Command};
use crate::app::{App, AppBuilder, Decided, DispatchError, Lag, RejectionRecord};
use crate::clock::{Clock, SimulatedClock};
use crate::ids::Sequential;
use crate::store::{DeadLetter, LetterFilter};
use crate::{Duration, Error, Instant, RecordedEvent};

/// An app on a simulated clock that starts at `2026-01-01T00:00:00Z` and moves only when the
/// test moves it, with sequential ids (`id-1`, `id-2`, …).
///
/// A call that files a dead letter fails with [`Error::UnexpectedDeadLetters`], unless the test
/// said it expects letters with [`expecting_letters`](TestApp::expecting_letters): a test that
/// does not look at letters cannot pass over a failure.
#[derive(Debug, Clone)]
pub struct TestApp {
    app: App,
    clock: Arc<SimulatedClock>,
    letters_expected: bool,
}

/// What [`TestApp::run_until_idle`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Idle {
    /// Whether nothing was left to run; false when the passes ran out first.
    pub idle: bool,
    /// The rejections in reactions and the scheduler during the call, in order; a retried run
    /// counts only the attempt that committed.
    pub rejections: Vec<RejectionRecord>,
}

/// How often a settle lets other tasks run first: enough for a task woken by a clock timer to
/// run and await its next store call.
const TIMER_YIELDS: usize = 8;

/// The passes `run_until_idle` makes before it gives up and answers `idle: false`.
const MAX_PASSES: usize = 10_000;

impl TestApp {
    /// Builds `builder` on a simulated clock and sequential ids.
    pub async fn new(builder: AppBuilder) -> Result<TestApp, Error> {
        let clock = Arc::new(SimulatedClock::default());
        let app = builder
            .clock(clock.clone())
            .ids(Arc::new(Sequential::default()))
            .build()
            .await?;
        Ok(TestApp::with_app(app, clock))
    }

    /// Builds `builder`, which must be on a copy of a store (see
    /// [`store::copy`](crate::store::copy)), on a simulated clock at the moment the copy was
    /// taken: the app as it would run on the copied data, for a test of a deploy (see
    /// [`preview`](crate::preview)). A store that is not a copy is refused, so a test never
    /// writes to production.
    pub async fn over_copy(builder: AppBuilder) -> Result<TestApp, Error> {
        let Some(mark) = crate::store::copy_mark(builder.store()).await? else {
            return Err(Error::Configuration {
                message: "this store is not a copy: run a preview on a copy of the store \
                          (`copy`), so that production is never written"
                    .to_owned(),
            });
        };
        let clock = Arc::new(SimulatedClock::at(mark.copied_at));
        // A preview tells no broker what it would publish: it records it.
        let app = builder
            .recording_relays()
            .clock(clock.clone())
            .build()
            .await?;
        Ok(TestApp::with_app(app, clock))
    }

    /// The same test app, whose calls may file dead letters: for a test of failures, which
    /// then looks at them with `app().dead_letters()`.
    pub fn expecting_letters(mut self) -> TestApp {
        self.letters_expected = true;
        self
    }

    /// A test app around `app`, which must read time from `clock`: for several apps on one
    /// store, each with ids of its own.
    pub fn with_app(app: App, clock: Arc<SimulatedClock>) -> TestApp {
        TestApp {
            app,
            clock,
            letters_expected: false,
        }
    }

    /// The simulated clock.
    pub fn clock(&self) -> &Arc<SimulatedClock> {
        &self.clock
    }

    /// The app under test.
    pub fn app(&self) -> &App {
        &self.app
    }

    /// The simulated time.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Runs `command` from outside, as [`App::dispatch`].
    pub async fn dispatch<C: Command>(
        &self,
        command: C,
    ) -> Result<Decided, DispatchError<C::Rejection>> {
        self.app.dispatch(command).await
    }

    /// Runs `command` from outside, as [`App::dispatch_with`]: later, or in a correlation.
    pub async fn dispatch_with<C: Command>(
        &self,
        command: C,
        options: crate::DispatchOptions,
    ) -> Result<crate::Dispatched, DispatchError<C::Rejection>> {
        self.app.dispatch_with(command, options).await
    }

    /// The events of aggregate instance `id`.
    pub async fn events_of<A: Aggregate>(&self, id: &str) -> Result<Events, Error> {
        Ok(Events(self.app.events_of::<A>(id).await?))
    }

    /// The lag of every subscriber.
    pub async fn lag(&self) -> Result<Lag, Error> {
        self.app.lag().await
    }

    /// Every dead letter, oldest first, whatever its status.
    pub async fn letters(&self) -> Result<Vec<DeadLetter>, Error> {
        self.app.dead_letters().list(&LetterFilter::default()).await
    }

    /// Instance `id` of process `P` as its stream says: its state, status, lifetime and parked
    /// events; `None` if it never started.
    pub async fn instance<P: crate::process::Process>(
        &self,
        id: &str,
    ) -> Result<Option<crate::app::ProcessInstance<P>>, Error> {
        self.app.process_instance::<P>(id).await
    }

    /// Moves the clock by `duration`, then runs until idle: every deadline, delayed command and
    /// retry it passes runs, in order.
    pub async fn advance(&self, duration: Duration) -> Result<Idle, Error> {
        let before = self.letter_ids().await?;
        let idle = self.advance_by(duration).await?;
        self.no_new_letters(&before).await?;
        Ok(idle)
    }

    pub(crate) async fn advance_by(&self, duration: Duration) -> Result<Idle, Error> {
        let target = self.clock.now() + duration;
        // What is pending now happens now, as it would have: a policy reacts to the event just
        // stored before the clock moves on.
        let settled = self.settle(MAX_PASSES, Some(target)).await?;
        let mut rejections = settled.rejections;
        if !settled.idle {
            return Ok(Idle {
                idle: false,
                rejections,
            });
        }
        // Stop at each moment something is due on the way, a clock timer's too, so later work
        // sees earlier work done and timers fire in due order, each at its own moment.
        let mut last = None;
        loop {
            let now = self.clock.now();
            let due = self.app.next_due_at().await?.filter(|due| *due <= target);
            let timer = self
                .clock
                .next_timer()
                .filter(|at| *at > now && *at <= target);
            let Some(next) = due.into_iter().chain(timer).min() else {
                break;
            };
            // An entry still due where the last stop left it (claimed by another runner) is
            // not waited for here.
            if last == Some(next) && timer != Some(next) {
                break;
            }
            last = Some(next);
            self.clock.advance_to(next);
            let idle = self.settle(MAX_PASSES, Some(target)).await?;
            rejections.extend(idle.rejections);
            if !idle.idle {
                return Ok(Idle {
                    idle: false,
                    rejections,
                });
            }
        }
        self.clock.advance_to(target);
        let idle = self.settle(MAX_PASSES, Some(target)).await?;
        rejections.extend(idle.rejections);
        Ok(Idle {
            idle: idle.idle,
            rejections,
        })
    }

    /// Runs dispatcher passes and due scheduled work until nothing moves. Pending
    /// retries are waited for by moving the clock to them, never beyond the last retry; what is
    /// due before that runs on the way, in order. A due deadline held back for its
    /// instance's unhandled events gets its worker rounds at the current moment first, and runs
    /// once they are up; a retry that comes due within the time those rounds take a worker (a
    /// poll interval each) runs first, as it would on a real clock. A relay's publish that
    /// failed is not waited for (its sink is outside, and it retries for as long as it fails):
    /// [`advance`](TestApp::advance) the clock to see it published again.
    pub async fn run_until_idle(&self) -> Result<Idle, Error> {
        self.run_until_idle_with(MAX_PASSES).await
    }

    /// [`run_until_idle`](Self::run_until_idle), giving up after `max_passes` passes.
    pub async fn run_until_idle_with(&self, max_passes: usize) -> Result<Idle, Error> {
        let before = self.letter_ids().await?;
        let idle = self.settle(max_passes, None).await?;
        self.no_new_letters(&before).await?;
        Ok(idle)
    }

    /// The ids of the dead letters stored now, unless letters are expected.
    async fn letter_ids(&self) -> Result<HashSet<String>, Error> {
        if self.letters_expected {
            return Ok(HashSet::new());
        }
        let letters = self
            .app
            .dead_letters()
            .list(&LetterFilter::default())
            .await?;
        Ok(letters.into_iter().map(|letter| letter.id).collect())
    }

    /// Fails with the letters filed since `before` was read, unless letters are expected.
    async fn no_new_letters(&self, before: &HashSet<String>) -> Result<(), Error> {
        if self.letters_expected {
            return Ok(());
        }
        let filed: Vec<String> = self
            .app
            .dead_letters()
            .list(&LetterFilter::default())
            .await?
            .into_iter()
            .filter(|letter| !before.contains(&letter.id))
            .map(|letter| describe(&letter))
            .collect();
        if filed.is_empty() {
            Ok(())
        } else {
            Err(Error::UnexpectedDeadLetters { letters: filed })
        }
    }

    /// Runs until nothing moves, letters or not, following retries and limits' windows; a
    /// relay's retries only up to `horizon` (none without one): a relay whose sink stays out of
    /// reach retries for ever, and an advance of the clock stops where it was asked to.
    async fn settle(&self, max_passes: usize, horizon: Option<Instant>) -> Result<Idle, Error> {
        let mut rejections = Vec::new();
        self.app.start().await?;
        // Tasks woken by the clock's timers run before the passes, so what they do is seen.
        for _ in 0..TIMER_YIELDS {
            tokio::task::yield_now().await;
        }
        for _ in 0..max_passes {
            let now = self.clock.now();
            let moved_policies = self.app.policy_pass(now, &mut rejections).await?;
            let moved_processes = self.app.process_pass(now, &mut rejections).await?;
            let moved_relays = self.app.relay_pass(now, &mut rejections).await?;
            let moved_work = self.app.worker_pass(now, &mut rejections).await?;
            let mut moved_read_models = false;
            for model in self.app.read_models() {
                moved_read_models |= self.app.read_model_pass(model.as_ref()).await?;
            }
            if moved_policies || moved_processes || moved_relays || moved_work || moved_read_models
            {
                continue;
            }
            // What a limit holds runs when its window ends: the clock moves there.
            let held = self.app.limit_held_until(now).await?;
            // A deadline held back for its instance's unhandled events gets its worker rounds
            // at this moment, and then runs, before the clock moves on (spec 86); unless a limit
            // holds work, whose window's end comes first, or a retry comes due within the time
            // those rounds take a worker (a poll interval each), which then runs first: the
            // event it retries may be what the deadline waits for.
            let retry = self.app.next_retry_at(horizon).await?;
            if self.app.waiting_deadline_count().await? > 0 && held.is_none() {
                let poll = self.app.config().dispatcher.poll_interval.as_millis();
                let rounds = u64::from(crate::app::processes::deadline_run::MAX_WAIT_ROUNDS);
                if let Some(at) = retry.filter(|at| *at <= now + crate::millis(poll * rounds)) {
                    self.clock.advance_to(at);
                }
                continue;
            }
            let Some(retry) = retry.into_iter().chain(held).min() else {
                return Ok(Idle {
                    idle: true,
                    rejections,
                });
            };
            let next = self
                .app
                .next_due_at()
                .await?
                .filter(|due| *due > now)
                .map_or(retry, |due| due.min(retry));
            if next <= now {
                // Due now, yet nothing here could move it: a limit holds it until its window
                // ends, or another runner's claim does, and work is left (spec 177).
                match held {
                    Some(end) => {
                        self.clock.advance_to(end);
                        continue;
                    }
                    None => {
                        return Ok(Idle {
                            idle: false,
                            rejections,
                        });
                    }
                }
            }
            self.clock.advance_to(next);
        }
        Ok(Idle {
            idle: false,
            rejections,
        })
    }
}

/// One line on a letter: its handler, what it failed on, and why.
fn describe(letter: &DeadLetter) -> String {
    let on = match (&letter.event_type, &letter.aggregate_id) {
        (Some(event), Some(id)) => format!(" on {event} of `{id}`"),
        (Some(event), None) => format!(" on {event}"),
        (None, Some(id)) => format!(" for `{id}`"),
        (None, None) => String::new(),
    };
    format!(
        "`{}`{on} after {} attempt(s): {}",
        letter.handler, letter.attempts, letter.error_message
    )
}

/// An aggregate instance's events, for assertions.
#[derive(Debug, Clone, PartialEq)]
pub struct Events(pub Vec<RecordedEvent>);

impl Events {
    /// The event types, in order.
    pub fn types(&self) -> Vec<&str> {
        self.0
            .iter()
            .map(|event| event.event_type.as_str())
            .collect()
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
