//! The page's budget of wrong tokens, one for every request it serves: a token is compared only
//! when the budget allows, so guesses sent at once do not wait out their delays together. A
//! few mistakes cost nothing; then each wrong token doubles the wait before the next is
//! compared, up to a minute; after [`LOCK_AFTER`] in a row, sign-in is locked for
//! [`LOCKOUT`], the right token included. Restarting the page lifts it; so does waiting.

use std::sync::Mutex;

use crate::{Duration, Instant, minutes, seconds};

/// Wrong tokens that cost nothing: a typo or two.
const FREE: u32 = 3;

/// The longest wait between two compared tokens.
const LONGEST: Duration = seconds(60);

/// Wrong tokens in a row that lock sign-in.
pub(super) const LOCK_AFTER: u32 = 20;

/// How long sign-in stays locked.
pub(super) const LOCKOUT: Duration = minutes(15);

/// The fewest characters a page token may have: fewer can be guessed within the budget's
/// lifetimes.
pub const MIN_TOKEN_CHARS: usize = 16;

/// The wrong tokens since the last right one, and when the next may be compared.
#[derive(Debug, Default)]
pub(super) struct Guard {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Wrong tokens in a row.
    failures: u32,
    /// No token is compared before this moment.
    next: Option<Instant>,
    /// Whether the wait is a lockout.
    locked: bool,
}

/// What an attempt to sign in came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Attempt {
    /// The token is right.
    Right,
    /// The token is wrong; `locked` when this one locked sign-in.
    Wrong { locked: bool },
    /// Not compared: the budget allows the next comparison at `until`.
    Wait { until: Instant, locked: bool },
}

impl Guard {
    /// Compares a token with `right` at `now`, if the budget allows it now; the comparison and
    /// the budget's update are one step, so of guesses sent at once only those the budget
    /// allows are compared.
    pub(super) fn attempt(&self, now: Instant, right: impl FnOnce() -> bool) -> Attempt {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(until) = state.next.filter(|until| now < *until) {
            return Attempt::Wait {
                until,
                locked: state.locked,
            };
        }
        if right() {
            *state = State::default();
            return Attempt::Right;
        }
        state.failures = state.failures.saturating_add(1);
        let locked = state.failures >= LOCK_AFTER;
        let wait = match locked {
            true => LOCKOUT,
            false => delay(state.failures),
        };
        state.next = (wait > Duration::ZERO).then_some(now + wait);
        state.locked = locked;
        if locked {
            // Counted afresh once the lockout ends.
            state.failures = 0;
        }
        Attempt::Wrong { locked }
    }
}

/// The wait after the `failures`-th wrong token in a row: none for the first few, then one
/// second, doubling up to [`LONGEST`].
fn delay(failures: u32) -> Duration {
    let Some(past) = failures.checked_sub(FREE + 1) else {
        return Duration::ZERO;
    };
    seconds(1_u64 << past.min(6)).min(LONGEST)
}

/// Refuses a page token too short to resist guessing, saying how to make one.
pub fn check_token(token: &str) -> Result<(), crate::Error> {
    let length = token.chars().count();
    if length < MIN_TOKEN_CHARS {
        return Err(crate::Error::Configuration {
            message: format!(
                "the page's token has {length} characters, and it needs at least \
                 {MIN_TOKEN_CHARS} so that it cannot be guessed; make one with `openssl rand -hex 24`"
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_grow_after_the_free_mistakes_and_stop_at_a_minute() {
        let waits: Vec<u64> = (1..=12).map(|n| delay(n).as_millis() / 1_000).collect();
        assert_eq!(waits, [0, 0, 0, 1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(delay(u32::MAX), seconds(60));
    }

    #[test]
    fn a_token_is_compared_only_when_the_budget_allows_and_a_lockout_holds_the_right_one() {
        let guard = Guard::default();
        let start = Instant::from_millis(0).unwrap();
        for _ in 0..FREE {
            assert_eq!(
                guard.attempt(start, || false),
                Attempt::Wrong { locked: false }
            );
        }
        assert_eq!(
            guard.attempt(start, || false),
            Attempt::Wrong { locked: false }
        );
        let mut compared = false;
        let waited = guard.attempt(start, || {
            compared = true;
            true
        });
        assert!(!compared, "not compared while the budget waits");
        assert_eq!(
            waited,
            Attempt::Wait {
                until: start + seconds(1),
                locked: false
            }
        );
        assert_eq!(guard.attempt(start + seconds(1), || true), Attempt::Right);

        let mut now = start;
        let mut last = Attempt::Right;
        for _ in 0..LOCK_AFTER {
            last = guard.attempt(now, || false);
            now = now + seconds(61);
        }
        assert_eq!(last, Attempt::Wrong { locked: true });
        let locked_at = now - seconds(61);
        assert!(matches!(
            guard.attempt(locked_at + minutes(14), || true),
            Attempt::Wait { locked: true, .. }
        ));
        assert_eq!(guard.attempt(locked_at + LOCKOUT, || true), Attempt::Right);
    }
}
