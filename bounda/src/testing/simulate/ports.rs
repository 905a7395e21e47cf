//! What a simulation gives a user's fake ports: [`PortFaults`], which makes a call fail, fail
//! for good, panic or hang past its time limit, chosen by the schedule's seed; and [`Effects`],
//! which records each side effect under its idempotency key, as a provider that drops repeats.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::Error;

/// How one call to a port goes, by the seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// The call succeeds.
    Ok,
    /// The call fails with an error the runtime retries.
    Fail,
    /// The call fails with an error the runtime does not retry (`INVALID_CONFIGURATION`, as a
    /// port set up wrong would): a dead letter at once.
    Terminal,
    /// The call panics.
    Panic,
    /// The call never answers: the handler runs past its time limit.
    Hang,
}

/// The fates of a call that meets a fault, for each of its invocations in order; every later
/// invocation succeeds. Of twenty such calls, 8 fail once, 4 twice, 3 three times, 2 fail for
/// good, 2 panic, 1 hangs, whatever the rate.
const TABLE: [&[Fate]; 20] = {
    use Fate::{Fail, Hang, Panic, Terminal};
    [
        &[Fail],
        &[Fail],
        &[Fail],
        &[Fail],
        &[Fail],
        &[Fail],
        &[Fail],
        &[Fail],
        &[Fail, Fail],
        &[Fail, Fail],
        &[Fail, Fail],
        &[Fail, Fail],
        &[Fail, Fail, Fail],
        &[Fail, Fail, Fail],
        &[Fail, Fail, Fail],
        &[Terminal],
        &[Terminal],
        &[Panic],
        &[Panic],
        &[Hang],
    ]
};

/// A stable hash of `seed` and `key`, folded: the same on every run and machine.
fn mix(seed: u64, key: &str) -> u64 {
    let hash = crate::hash::fnv1a(&format!("{seed}:{key}"));
    hash ^ (hash >> 29)
}

/// Makes a fake port's calls fail by the schedule's seed: a call named `key` has a fate for
/// each of its invocations (see [`PortFaults::fates`]), so a retry of the same call may then
/// succeed, and a schedule run again fails the same calls the same way.
///
/// A simulation hands one to the app it builds ([`Setup::port_faults`](super::Setup)); the
/// fake port calls [`call`](PortFaults::call) first:
///
/// ```
/// use bounda::testing::simulate::PortFaults;
///
/// struct FakeSms {
///     faults: PortFaults,
/// }
///
/// impl FakeSms {
///     async fn send(&self, to: &str, key: &str) -> anyhow::Result<()> {
///         self.faults.call(&format!("sms:{key}")).await?;
///         // … what the fake does when the call goes through.
///         Ok(())
///     }
/// }
/// ```
#[derive(Debug, Clone)]
pub struct PortFaults {
    inner: Arc<Faults>,
}

#[derive(Debug)]
struct Faults {
    seed: u64,
    /// Calls that meet a fault, in a hundred.
    per_cent: u64,
    invoked: Mutex<HashMap<String, usize>>,
    /// Set by a call that hangs: the simulation's clock ends the next sleep polled, which is
    /// the handler's own time limit.
    slow: Arc<AtomicBool>,
    played: [AtomicU64; 4],
}

impl PortFaults {
    /// Faults for `seed`: `per_cent` calls in a hundred (at most 100) meet one. Hanging calls
    /// set `slow`, which the simulation's clock reads.
    pub(crate) fn new(seed: u64, per_cent: u64, slow: Arc<AtomicBool>) -> PortFaults {
        PortFaults {
            inner: Arc::new(Faults {
                seed,
                per_cent: per_cent.min(100),
                invoked: Mutex::new(HashMap::new()),
                slow,
                played: Default::default(),
            }),
        }
    }

    /// Faults that never fire: for a fake port outside a simulation.
    pub fn none() -> PortFaults {
        PortFaults::new(0, 0, Arc::new(AtomicBool::new(false)))
    }

    /// The fates of the invocations of call `key` under `seed` when `per_cent` calls in a
    /// hundred meet a fault: empty for a call that always succeeds. A reference model of the
    /// app reads them to know what the runtime will meet.
    pub fn fates(seed: u64, per_cent: u64, key: &str) -> &'static [Fate] {
        let hash = mix(seed, key);
        if hash % 100 >= per_cent.min(100) {
            return &[];
        }
        // The kind from other bits than the rate's, so every kind comes at any rate.
        TABLE[(hash / 100 % TABLE.len() as u64) as usize]
    }

    /// Plays the next invocation of call `key`: `Ok` when it goes through; an error, a panic
    /// (`planned panic of …`) or a call that never answers when its fate says so.
    ///
    /// A call that never answers ends when the handler's time limit does: call it from a
    /// handler (a policy, a process step), not from an input's `send` or a projection, which
    /// have no time limit and would wait for ever.
    pub async fn call(&self, key: &str) -> anyhow::Result<()> {
        if self.next(key)? {
            self.inner.slow.store(true, Ordering::SeqCst);
            std::future::pending::<()>().await;
        }
        Ok(())
    }

    /// Plays the next invocation of call `key` in a synchronous port: as
    /// [`call`](PortFaults::call), except that a call whose fate is to hang fails at once,
    /// saying it timed out (a synchronous call cannot wait on the simulated clock).
    pub fn try_call(&self, key: &str) -> anyhow::Result<()> {
        if self.next(key)? {
            anyhow::bail!("planned time-out of {key}");
        }
        Ok(())
    }

    /// Counts an invocation of `key` and plays its fate: `Ok(true)` for a call to hang.
    fn next(&self, key: &str) -> anyhow::Result<bool> {
        let faults = &self.inner;
        let n = {
            let mut invoked = faults
                .invoked
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let n = invoked.entry(key.to_owned()).or_insert(0);
            *n += 1;
            *n
        };
        let fate = PortFaults::fates(faults.seed, faults.per_cent, key)
            .get(n - 1)
            .copied()
            .unwrap_or(Fate::Ok);
        let counter = match fate {
            Fate::Ok => return Ok(false),
            Fate::Fail => 0,
            Fate::Terminal => 1,
            Fate::Panic => 2,
            Fate::Hang => 3,
        };
        faults.played[counter].fetch_add(1, Ordering::Relaxed);
        match fate {
            Fate::Terminal => Err(Error::Configuration {
                message: format!("planned terminal failure of {key} (invocation {n})"),
            }
            .into()),
            Fate::Panic => panic!("planned panic of {key} (invocation {n})"),
            Fate::Hang => Ok(true),
            Fate::Ok | Fate::Fail => {
                anyhow::bail!("planned failure of {key} (invocation {n})")
            }
        }
    }

    /// How many invocations of call `key` there were.
    pub fn invocations(&self, key: &str) -> usize {
        self.inner
            .invoked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .copied()
            .unwrap_or(0)
    }

    /// The faults played so far.
    pub(crate) fn played(&self) -> PlayedFaults {
        let [failures, terminal, panics, hangs] =
            std::array::from_fn(|i| self.inner.played[i].load(Ordering::Relaxed));
        PlayedFaults {
            failures,
            terminal,
            panics,
            hangs,
        }
    }
}

/// How many port calls met each kind of fault.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PlayedFaults {
    /// Failures the runtime retries.
    pub failures: u64,
    /// Failures it does not retry.
    pub terminal: u64,
    /// Panics.
    pub panics: u64,
    /// Calls that never answered.
    pub hangs: u64,
}

impl PlayedFaults {
    /// Adds `other`'s counts.
    pub(crate) fn add(&mut self, other: &PlayedFaults) {
        self.failures += other.failures;
        self.terminal += other.terminal;
        self.panics += other.panics;
        self.hangs += other.hangs;
    }
}

/// The side effects a simulation's fake ports made, each under its idempotency key, as a
/// provider keeps them: a repeat under a key is dropped. One key given to two different effects
/// is a finding the simulation reports.
///
/// ```
/// use bounda::testing::simulate::Effects;
///
/// let effects = Effects::default();
/// assert!(effects.record("key-1", "sms to 555-0100: your order shipped"));
/// assert!(!effects.record("key-1", "sms to 555-0100: your order shipped"), "a repeat is dropped");
/// assert_eq!(effects.len(), 1);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Effects {
    inner: Arc<Mutex<Recorded>>,
}

#[derive(Debug, Default)]
struct Recorded {
    /// The effect made under each key.
    by_key: BTreeMap<String, String>,
    /// Keys given to an effect other than their first: (key, first, other).
    clashes: Vec<(String, String, String)>,
    repeats: u64,
}

impl Effects {
    /// Records `effect` under `key`: whether it was made now (`false` for a repeat, which a
    /// provider drops).
    pub fn record(&self, key: &str, effect: impl Into<String>) -> bool {
        let effect = effect.into();
        let mut recorded = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        match recorded.by_key.get(key) {
            None => {
                recorded.by_key.insert(key.to_owned(), effect);
                true
            }
            Some(first) => {
                if *first != effect {
                    let first = first.clone();
                    recorded.clashes.push((key.to_owned(), first, effect));
                }
                recorded.repeats += 1;
                false
            }
        }
    }

    /// Every effect made, by key.
    pub fn all(&self) -> BTreeMap<String, String> {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .by_key
            .clone()
    }

    /// How many effects were made.
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .by_key
            .len()
    }

    /// Whether none was.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many repeats were dropped.
    pub fn repeats(&self) -> u64 {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .repeats
    }

    /// A key given to two different effects, if any: one key must name one effect.
    pub(crate) fn clash(&self) -> Option<String> {
        let recorded = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        recorded.clashes.first().map(|(key, first, other)| {
            format!(
                "idempotency key {key} was given to two effects: `{first}` and `{other}`. A retry \
                 repeats its step under the same key, so an effect's text must be the same each \
                 time it runs: make it of what the step read (its event, its state, its moment \
                 due), never of when it ran (`now()`)"
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 44: a key given to two effects says what differed and that the text must not
    // depend on when the step ran.
    #[test]
    fn a_clash_says_what_differed_and_why_it_must_not() {
        let effects = Effects::default();
        assert!(effects.record("remind:u-1", "remind u-1 at 1000"));
        effects.record("remind:u-1", "remind u-1 at 2000");
        let clash = effects.clash().unwrap();
        assert!(
            clash.contains("`remind u-1 at 1000` and `remind u-1 at 2000`")
                && clash.contains("never of when it ran (`now()`)"),
            "{clash}"
        );
    }
}
