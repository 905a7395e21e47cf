//! `runtime.limits`: how fast a process's, a policy's or a scheduled command's runs may start,
//! counted across every runner on the store.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::store::{LimitKey, LimitKind};
use crate::{Duration, Instant};

/// Limits by what they pace, each by name. A catch-up after an outage (ten thousand deadlines due
/// at once, all calling one provider) then calls it no faster than the provider allows; the
/// runs beyond a window's permits wait for the next window, each instance's in order.
///
/// ```json
/// { "limits": { "processes": { "reminders": { "rate": "100/s" } } } }
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Limits {
    /// By process name: the process's steps, on its events and at its deadlines.
    pub processes: BTreeMap<String, Limit>,
    /// By policy name: the policy's runs, on its events and delayed.
    pub policies: BTreeMap<String, Limit>,
    /// By command name: the runs of scheduled (delayed) commands of that type. A command sent
    /// at once runs in its caller's request, which no limit holds.
    pub commands: BTreeMap<String, Limit>,
    /// By relay name: the relay's publishes, so a sink that takes so many messages a second
    /// is never sent more.
    pub relays: BTreeMap<String, Limit>,
    /// By source name (`nats:PAYMENTS/shop`): the commands a source of commands from other
    /// services takes, the rest waiting at the broker.
    pub ingress: BTreeMap<String, Limit>,
}

impl Limits {
    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        self.processes.is_empty()
            && self.policies.is_empty()
            && self.commands.is_empty()
            && self.relays.is_empty()
            && self.ingress.is_empty()
    }

    /// Whether a limit of `kind` is set.
    pub fn has(&self, kind: LimitKind) -> bool {
        !self.of(kind).is_empty()
    }

    /// The limit of `kind` named `name`, if one is set.
    pub fn get(&self, kind: LimitKind, name: &str) -> Option<&Limit> {
        self.of(kind).get(name)
    }

    /// Every limit set, with its key.
    pub fn all(&self) -> impl Iterator<Item = (LimitKey, &Limit)> {
        [
            LimitKind::Process,
            LimitKind::Policy,
            LimitKind::Command,
            LimitKind::Relay,
            LimitKind::Ingress,
        ]
        .into_iter()
        .flat_map(move |kind| {
            self.of(kind).iter().map(move |(name, limit)| {
                let key = LimitKey {
                    kind,
                    name: name.clone(),
                };
                (key, limit)
            })
        })
    }

    fn of(&self, kind: LimitKind) -> &BTreeMap<String, Limit> {
        match kind {
            LimitKind::Process => &self.processes,
            LimitKind::Policy => &self.policies,
            LimitKind::Command => &self.commands,
            LimitKind::Relay => &self.relays,
            LimitKind::Ingress => &self.ingress,
        }
    }
}

/// One limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Limit {
    /// How many runs may start in each window of time: `"100/s"`, `"600/1m"`.
    pub rate: Rate,
}

/// A number of runs per window of time, written `count/window` (`"100/s"`, `"5/10s"`,
/// `"1000/1h"`; a window without a number is one of its unit). Windows are aligned to the
/// clock (a second's window starts on the second), and at most `count` runs start in each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Runs per window, 1 or more.
    pub count: u32,
    /// The window, 1 ms or more.
    pub per: Duration,
}

impl Rate {
    /// When the window holding `now` ends: its start is the last multiple of `per` since the
    /// epoch, so every runner counts in the same windows.
    pub fn window_end(&self, now: Instant) -> Instant {
        let per = i64::try_from(self.per.as_millis())
            .unwrap_or(i64::MAX)
            .max(1);
        let start = now.as_millis() - now.as_millis().rem_euclid(per);
        Instant::from_millis(start.saturating_add(per)).unwrap_or_else(Instant::max_value)
    }
}

/// A rate that does not read, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{input}` is not a rate: {why}; write it as `count/window`, like `100/s` or `600/1m`")]
pub struct RateError {
    input: String,
    why: String,
}

impl FromStr for Rate {
    type Err = RateError;

    fn from_str(input: &str) -> Result<Rate, RateError> {
        let error = |why: String| RateError {
            input: input.to_owned(),
            why,
        };
        let Some((count, per)) = input.split_once('/') else {
            return Err(error("it has no `/`".to_owned()));
        };
        let count: u32 = count
            .trim()
            .parse()
            .map_err(|_| error(format!("`{}` is not a whole number", count.trim())))?;
        if count == 0 {
            return Err(error("a rate of 0 would run nothing".to_owned()));
        }
        let per = per.trim();
        // `s` is one second.
        let per = match per.starts_with(|c: char| c.is_ascii_digit()) {
            true => per.parse::<Duration>(),
            false => format!("1{per}").parse::<Duration>(),
        }
        .map_err(|e| error(e.to_string()))?;
        if per == Duration::ZERO {
            return Err(error("its window is empty".to_owned()));
        }
        Ok(Rate { count, per })
    }
}

impl fmt::Display for Rate {
    /// `count/window`, the window without its number when it is one unit: `100/s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let per = self.per.to_string();
        match per.strip_prefix('1') {
            Some(unit) if unit.starts_with(|c: char| c.is_ascii_alphabetic()) => {
                write!(f, "{}/{unit}", self.count)
            }
            _ => write!(f, "{}/{per}", self.count),
        }
    }
}

impl Serialize for Rate {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Rate, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{millis, minutes, seconds};

    #[test]
    fn rates_read_and_write_as_count_per_window() {
        let read = |text: &str| text.parse::<Rate>();
        assert_eq!(
            read("100/s"),
            Ok(Rate {
                count: 100,
                per: seconds(1)
            })
        );
        assert_eq!(
            read("600/1m"),
            Ok(Rate {
                count: 600,
                per: minutes(1)
            })
        );
        assert_eq!(
            read(" 5 / 10s "),
            Ok(Rate {
                count: 5,
                per: seconds(10)
            })
        );
        for (rate, written) in [("100/s", "100/s"), ("600/1m", "600/m"), ("5/10s", "5/10s")] {
            assert_eq!(read(rate).map(|r| r.to_string()).as_deref(), Ok(written));
        }
        for (bad, why) in [
            ("100", "no `/`"),
            ("0/s", "a rate of 0"),
            ("x/s", "`x` is not a whole number"),
            ("10/0s", "empty"),
            ("10/fortnight", "fortnight"),
        ] {
            let message = read(bad).map(|_| ()).unwrap_err().to_string();
            assert!(message.contains(why), "{bad}: {message}");
            assert!(message.contains("like `100/s`"), "{message}");
        }
    }

    #[test]
    fn windows_are_aligned_to_the_clock() {
        let rate = Rate {
            count: 1,
            per: seconds(1),
        };
        let at = |ms: i64| Instant::from_millis(ms).unwrap();
        assert_eq!(rate.window_end(at(1_000)), at(2_000));
        assert_eq!(rate.window_end(at(1_999)), at(2_000));
        let rate = Rate {
            count: 1,
            per: millis(300),
        };
        assert_eq!(rate.window_end(at(1_000)), at(1_200));
    }
}
