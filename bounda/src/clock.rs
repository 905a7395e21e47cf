//! Time comes from a [`Clock`]: the system clock in production, a simulated one in tests. No other
//! code reads the wall clock.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use crate::{Duration, Instant};

/// A future that completes when a clock has passed a moment.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Where the runtime reads the time.
pub trait Clock: Send + Sync + 'static {
    /// The current moment.
    fn now(&self) -> Instant;

    /// Completes once `duration` has passed on this clock: what handler time limits count.
    /// By default, real time.
    fn sleep(&self, duration: Duration) -> Sleep {
        Box::pin(tokio::time::sleep(duration.into()))
    }
}

/// The system's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::from(chrono::Utc::now())
    }
}

/// A clock that moves only when told to: tests run months in milliseconds. Handler
/// time limits count its time too, so a test of a slow handler (a fake that moves the clock)
/// does not depend on the machine; a handler that never finishes is still cut after a real
/// minute, so a test does not hang.
///
/// Code under test waits on it with [`Timer`]s ([`after`](SimulatedClock::after),
/// [`timer_at`](SimulatedClock::timer_at)): a fake port that answers an hour later, a provider's
/// rate limit. A timer fires once the clock reaches its moment; `TestApp::advance` stops the
/// clock at each pending timer's moment in turn, so they fire in due order, each seeing the
/// clock at its own moment. Timers due at one moment fire in the order they were made: the clock
/// wakes their tasks in that order, so on a current-thread runtime each runs until it next
/// waits before the next one's runs, and a simulation plays the same from its seed.
#[derive(Debug)]
pub struct SimulatedClock {
    now: Mutex<Instant>,
    moved: tokio::sync::watch::Sender<Instant>,
    /// The timers waiting, by due moment and then by when they were made.
    timers: Arc<Mutex<Timers>>,
    next_timer: AtomicU64,
}

/// The timers waiting, by due moment and then by when they were made, each with the waker of
/// the task awaiting it, once awaited.
type Timers = BTreeMap<(Instant, u64), Option<Waker>>;

/// How long, in real time, a handler on the simulated clock may wait for nothing at all.
const REAL_TIME_BACKSTOP: std::time::Duration = std::time::Duration::from_secs(60);

impl SimulatedClock {
    /// The default start of a simulation: `2026-01-01T00:00:00Z`.
    pub fn start() -> Instant {
        // 2026-01-01T00:00:00Z in milliseconds since the epoch.
        Instant::from_millis(1_767_225_600_000)
            .unwrap_or_else(|| Instant::from(chrono::DateTime::UNIX_EPOCH))
    }

    /// A clock at `now`.
    pub fn at(now: Instant) -> SimulatedClock {
        SimulatedClock {
            now: Mutex::new(now),
            moved: tokio::sync::watch::Sender::new(now),
            timers: Arc::default(),
            next_timer: AtomicU64::new(0),
        }
    }

    /// A timer that fires once the clock has moved `duration` on from now.
    pub fn after(&self, duration: Duration) -> Timer {
        self.timer_at(self.now() + duration)
    }

    /// A timer that fires once the clock reaches `at`: at once, for a moment already passed.
    pub fn timer_at(&self, at: Instant) -> Timer {
        let key = (at, self.next_timer.fetch_add(1, Ordering::Relaxed));
        lock(&self.timers).insert(key, None);
        Timer {
            key,
            timers: Arc::clone(&self.timers),
            moved: self.moved.subscribe(),
        }
    }

    /// How many timers are waiting: made, neither fired nor dropped.
    pub fn pending_timers(&self) -> usize {
        lock(&self.timers).len()
    }

    /// The moment the next waiting timer fires at, if any.
    pub fn next_timer(&self) -> Option<Instant> {
        lock(&self.timers).keys().next().map(|(at, _)| *at)
    }

    /// Moves the clock forward by `duration`.
    pub fn advance(&self, duration: Duration) {
        let moved = {
            let mut now = self.lock();
            *now = *now + duration;
            self.moved.send_replace(*now);
            *now
        };
        self.wake_due(moved);
    }

    /// Moves the clock to `moment` if it is later; the clock never goes back.
    pub fn advance_to(&self, moment: Instant) {
        let moved = {
            let mut now = self.lock();
            if moment <= *now {
                return;
            }
            *now = moment;
            self.moved.send_replace(*now);
            moment
        };
        self.wake_due(moved);
    }

    /// Wakes the tasks awaiting the timers due at `now`, in the order the timers were made.
    fn wake_due(&self, now: Instant) {
        let due: Vec<Waker> = lock(&self.timers)
            .iter()
            .take_while(|((at, _), _)| *at <= now)
            .filter_map(|(_, waker)| waker.clone())
            .collect();
        for waker in due {
            waker.wake();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Instant> {
        // An `Instant` cannot be left half-written, so a poisoned lock still holds a valid one.
        self.now
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// `mutex`'s value; a poisoned lock still holds a whole one (each change is one insert or
/// remove).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A wait on a [`SimulatedClock`]: completes once the clock reaches its moment. Counted among the
/// clock's [`pending_timers`](SimulatedClock::pending_timers) until it fires or is dropped.
pub struct Timer {
    key: (Instant, u64),
    timers: Arc<Mutex<Timers>>,
    /// The clock's moment; a clock dropped first fires every timer.
    moved: tokio::sync::watch::Receiver<Instant>,
}

impl Timer {
    /// The moment it fires at.
    pub fn due(&self) -> Instant {
        self.key.0
    }
}

impl std::fmt::Debug for Timer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timer").field("due", &self.key.0).finish()
    }
}

impl Future for Timer {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let reached = *self.moved.borrow() >= self.key.0 || self.moved.has_changed().is_err();
        let mut timers = lock(&self.timers);
        if reached {
            timers.remove(&self.key);
            return Poll::Ready(());
        }
        // The clock wakes it once it reaches the moment.
        if let Some(waker) = timers.get_mut(&self.key) {
            *waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        lock(&self.timers).remove(&self.key);
    }
}

impl Drop for SimulatedClock {
    /// Fires every timer still awaited: nothing will move this clock again.
    fn drop(&mut self) {
        self.wake_due(Instant::max_value());
    }
}

impl Default for SimulatedClock {
    fn default() -> SimulatedClock {
        SimulatedClock::at(SimulatedClock::start())
    }
}

impl Clock for SimulatedClock {
    fn now(&self) -> Instant {
        *self.lock()
    }

    /// Completes once the clock has been moved `duration` on, or after a real minute.
    fn sleep(&self, duration: Duration) -> Sleep {
        let until = self.now() + duration;
        let mut moved = self.moved.subscribe();
        Box::pin(async move {
            let passed = moved.wait_for(|now| *now >= until);
            let _ = tokio::time::timeout(REAL_TIME_BACKSTOP, passed).await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{hours, seconds};

    // spec 180
    #[test]
    fn a_simulated_clock_starts_at_2026_and_moves_only_when_told() {
        let clock = SimulatedClock::default();
        assert_eq!(clock.now().to_string(), "2026-01-01T00:00:00.000Z");
        assert_eq!(clock.now(), clock.now());
        clock.advance(hours(72));
        assert_eq!(clock.now().to_string(), "2026-01-04T00:00:00.000Z");
        clock.advance_to(SimulatedClock::start());
        assert_eq!(
            clock.now().to_string(),
            "2026-01-04T00:00:00.000Z",
            "never back"
        );
    }

    // Issue 44: timers due at one moment fire in the order they were made, whatever order their
    // tasks started in, so a simulation on a current-thread runtime plays the same from its seed.
    #[test]
    fn timers_due_at_one_moment_fire_in_the_order_they_were_made() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        for round in 0..16 {
            let order = runtime.block_on(async {
                let clock = Arc::new(SimulatedClock::default());
                let fired = Arc::new(Mutex::new(Vec::new()));
                let timers: Vec<Timer> = (0..4).map(|_| clock.after(seconds(1))).collect();
                let mut tasks = Vec::new();
                // Started last first: the order they were made is what counts.
                for (n, timer) in timers.into_iter().enumerate().rev() {
                    let fired = Arc::clone(&fired);
                    tasks.push(tokio::spawn(async move {
                        timer.await;
                        lock(&fired).push(n);
                    }));
                }
                // Every task awaits its timer before the clock moves.
                tokio::task::yield_now().await;
                clock.advance(seconds(1));
                for task in tasks {
                    task.await.unwrap();
                }
                lock(&fired).clone()
            });
            assert_eq!(order, [0, 1, 2, 3], "round {round}");
        }
    }

    #[test]
    fn the_system_clock_is_now() {
        let before = Instant::from(chrono::Utc::now());
        let now = SystemClock.now();
        assert!(now >= before && now - before < crate::seconds(5));
    }
}
