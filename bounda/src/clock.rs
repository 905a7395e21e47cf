//! Time comes from a [`Clock`]: the system clock in production, a simulated one in tests. No other
//! code reads the wall clock.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

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
#[derive(Debug)]
pub struct SimulatedClock {
    now: Mutex<Instant>,
    moved: tokio::sync::watch::Sender<Instant>,
}

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
        }
    }

    /// Moves the clock forward by `duration`.
    pub fn advance(&self, duration: Duration) {
        let mut now = self.lock();
        *now = *now + duration;
        self.moved.send_replace(*now);
    }

    /// Moves the clock to `moment` if it is later; the clock never goes back.
    pub fn advance_to(&self, moment: Instant) {
        let mut now = self.lock();
        if moment > *now {
            *now = moment;
            self.moved.send_replace(*now);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Instant> {
        // An `Instant` cannot be left half-written, so a poisoned lock still holds a valid one.
        self.now
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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
    use crate::hours;

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

    #[test]
    fn the_system_clock_is_now() {
        let before = Instant::from(chrono::Utc::now());
        let now = SystemClock.now();
        assert!(now >= before && now - before < crate::seconds(5));
    }
}
