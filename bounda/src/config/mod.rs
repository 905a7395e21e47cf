//! The runtime's settings, with their defaults and per-aggregate overrides.

mod limits;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{Duration, days, millis, seconds};

pub use limits::{Limit, Limits, Rate, RateError};

/// Every setting of the runtime. `Config::default()` is the defaults; read one from
/// JSON with [`Config::from_json`], where a missing key keeps its default.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    /// Command handlers.
    pub commands: Commands,
    /// Policies, and scheduled commands' retries.
    pub policies: Policies,
    /// Processes.
    pub processes: Processes,
    /// The dispatcher and the scheduled worker.
    pub dispatcher: Dispatcher,
    /// Settings for one aggregate's commands, policies and processes, by aggregate name.
    pub overrides: BTreeMap<String, Overrides>,
    /// How fast processes', policies' and scheduled commands' runs may start, by name.
    pub limits: Limits,
}

/// `runtime.commands`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Commands {
    /// How long one command-handler run may take. Default `30s`.
    pub timeout: Duration,
    /// How many times a command reruns after its stream moved. Default 3.
    pub concurrency_retries: u32,
}

impl Default for Commands {
    fn default() -> Commands {
        Commands {
            timeout: seconds(30),
            concurrency_retries: 3,
        }
    }
}

/// `runtime.policies`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Policies {
    /// How long one policy-handler run may take. Default `30s`.
    pub timeout: Duration,
    /// How policy runs and scheduled commands retry.
    pub retry: Retry,
    /// How deep a chain of reactions may go. Default 25.
    pub max_chain_depth: u32,
}

impl Default for Policies {
    fn default() -> Policies {
        Policies {
            timeout: seconds(30),
            retry: Retry::default(),
            max_chain_depth: 25,
        }
    }
}

/// `runtime.processes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Processes {
    /// A process's lifetime when its `#[process(timeout = ..)]` says none. Default `7d`.
    pub timeout: Duration,
    /// How long one process-handler run may take. Default `30s`.
    pub handler_timeout: Duration,
    /// How process steps retry: the built-in default, never inherited from policies.
    pub retry: Retry,
}

impl Default for Processes {
    fn default() -> Processes {
        Processes {
            timeout: days(7),
            handler_timeout: seconds(30),
            retry: Retry::default(),
        }
    }
}

/// `runtime.dispatcher`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Dispatcher {
    /// How often passes and the scheduled worker run. Default `100ms`.
    pub poll_interval: Duration,
    /// Events read per subscriber per pass. Default 100.
    pub batch_size: usize,
    /// How long a subscriber whose pass failed (its store failing) waits before it tries again:
    /// `baseDelay`, doubling after each failure in a row, at most `maxDelay`.
    pub backoff: Backoff,
    /// How long [`App::catch_up`](crate::App::catch_up) waits for the read models a command's
    /// events touch. Default `5s`.
    pub catch_up: CatchUp,
}

/// `runtime.dispatcher.catchUp`: the wait of a request for its own writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct CatchUp {
    /// The longest wait: past it, the caller goes on with the read models as they are, and a
    /// warning names those still behind. Default `5s`.
    pub timeout: Duration,
}

impl Default for CatchUp {
    fn default() -> CatchUp {
        CatchUp {
            timeout: seconds(5),
        }
    }
}

impl Default for Dispatcher {
    fn default() -> Dispatcher {
        Dispatcher {
            poll_interval: millis(100),
            batch_size: 100,
            backoff: Backoff::default(),
            catch_up: CatchUp::default(),
        }
    }
}

/// `runtime.dispatcher.backoff`: the wait of a failing subscriber.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Backoff {
    /// The first wait. Default `1s`.
    pub base_delay: Duration,
    /// The longest wait. Default `30s`.
    pub max_delay: Duration,
    /// Failures in a row of one subscriber, with nothing anywhere moving since the first, after
    /// which [`App::run`](crate::App::run) stops with the last one's cause: a store that keeps
    /// refusing (a read-only file, a full disk) will not get better by itself; a service manager
    /// restarts the app, an operator sees why. Default 5 (with the default waits, 15 seconds
    /// of back-off). A store out of reach (a database server restarting, a failover) is not
    /// counted: it is waited out however long it lasts, each failure logged.
    pub max_failures: u32,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff {
            base_delay: seconds(1),
            max_delay: seconds(30),
            max_failures: 5,
        }
    }
}

impl Backoff {
    /// The wait after `failures` failures in a row (1 for the first).
    pub fn delay_after(&self, failures: u32) -> Duration {
        // The waits of a failed run's exponential back-off, without an end.
        let doubling = Retry {
            strategy: Strategy::Exponential,
            max_attempts: u32::MAX,
            base_delay: self.base_delay,
            max_delay: self.max_delay,
        };
        doubling
            .delay_before(failures.max(1))
            .unwrap_or(self.max_delay)
    }
}

/// How a failed run is retried. `strategy` is required whenever `retry` is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Retry {
    /// How the wait grows.
    pub strategy: Strategy,
    /// Runs in all, the first included, before the failure becomes a dead letter. Default 3.
    #[serde(default = "Retry::default_max_attempts")]
    pub max_attempts: u32,
    /// The first wait. Default `1s`.
    #[serde(default = "Retry::default_base_delay")]
    pub base_delay: Duration,
    /// The longest wait. Default `30s`.
    #[serde(default = "Retry::default_max_delay")]
    pub max_delay: Duration,
}

/// How the wait before a retry grows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Give up on the first failure.
    None,
    /// Always `base_delay`.
    Fixed,
    /// `base_delay × n`.
    Linear,
    /// `base_delay × 2^(n−1)`.
    Exponential,
}

impl Retry {
    fn default_max_attempts() -> u32 {
        3
    }

    fn default_base_delay() -> Duration {
        seconds(1)
    }

    fn default_max_delay() -> Duration {
        seconds(30)
    }

    /// The wait before retry `n` (1 for the first retry), capped at `max_delay`; `None` when the
    /// run is given up instead: `strategy` none, or `n` runs already made `max_attempts`.
    pub fn delay_before(&self, n: u32) -> Option<Duration> {
        if n == 0 || n >= self.max_attempts {
            return None;
        }
        let base = self.base_delay;
        let delay = match self.strategy {
            Strategy::None => return None,
            Strategy::Fixed => base,
            Strategy::Linear => base.checked_mul(u64::from(n)).unwrap_or(Duration::MAX),
            Strategy::Exponential => 2u64
                .checked_pow(n - 1)
                .and_then(|factor| base.checked_mul(factor))
                .unwrap_or(Duration::MAX),
        };
        Some(delay.min(self.max_delay))
    }
}

impl Default for Retry {
    /// Exponential, 3 attempts, `1s` then doubling, at most `30s`.
    fn default() -> Retry {
        Retry {
            strategy: Strategy::Exponential,
            max_attempts: Retry::default_max_attempts(),
            base_delay: Retry::default_base_delay(),
            max_delay: Retry::default_max_delay(),
        }
    }
}

/// Settings for one aggregate; a key left out comes from the app's settings.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Overrides {
    /// `commands.timeout` for this aggregate's commands.
    pub commands_timeout: Option<Duration>,
    /// `policies.timeout` for policies of this aggregate.
    pub policies_timeout: Option<Duration>,
    /// `policies.retry` for this aggregate's policies and scheduled commands.
    pub policies_retry: Option<Retry>,
    /// `processes.handlerTimeout` for this aggregate's processes.
    pub processes_handler_timeout: Option<Duration>,
    /// `processes.retry` for this aggregate's processes.
    pub processes_retry: Option<Retry>,
    /// `processes.timeout` for this aggregate's processes; a process's own `timeout` wins.
    pub processes_timeout: Option<Duration>,
}

/// The longest handler time limit a configuration may set.
pub const MAX_TIME_LIMIT: Duration = days(1);

/// A configuration that cannot be read: the path of the first problem and what it is.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration at `{path}`: {message}")]
pub struct ConfigError {
    /// Where: `policies.retry.baseDelay`.
    pub path: String,
    /// What.
    pub message: String,
}

impl ConfigError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        "INVALID_CONFIGURATION"
    }
}

impl Config {
    /// Reads a configuration from JSON; missing keys keep their defaults, an unknown key, a wrong
    /// type or an unreadable duration is an error naming its path.
    pub fn from_json(json: &str) -> Result<Config, ConfigError> {
        let deserializer = &mut serde_json::Deserializer::from_str(json);
        let config: Config = serde_path_to_error::deserialize(deserializer).map_err(|error| {
            let path = error.path().to_string();
            ConfigError {
                path,
                message: error.into_inner().to_string(),
            }
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Refuses settings the runtime cannot keep its promises with: a handler time limit of 0
    /// or beyond a day (a claim lasts twice the longest, and another runner takes over a claim
    /// whose lease has passed), or a batch size of 0 (nothing would run). The error names the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut limits = vec![
            ("commands.timeout".to_owned(), self.commands.timeout),
            ("policies.timeout".to_owned(), self.policies.timeout),
            (
                "processes.handlerTimeout".to_owned(),
                self.processes.handler_timeout,
            ),
        ];
        for (aggregate, overrides) in &self.overrides {
            let keys = [
                ("commandsTimeout", overrides.commands_timeout),
                ("policiesTimeout", overrides.policies_timeout),
                (
                    "processesHandlerTimeout",
                    overrides.processes_handler_timeout,
                ),
            ];
            for (key, limit) in keys {
                if let Some(limit) = limit {
                    limits.push((format!("overrides.{aggregate}.{key}"), limit));
                }
            }
        }
        for (path, limit) in limits {
            if limit == Duration::ZERO || limit > MAX_TIME_LIMIT {
                return Err(ConfigError {
                    path,
                    message: format!(
                        "a handler time limit must be more than 0 and at most {MAX_TIME_LIMIT}, \
                         not {limit}"
                    ),
                });
            }
        }
        if self.dispatcher.backoff.base_delay == Duration::ZERO {
            return Err(ConfigError {
                path: "dispatcher.backoff.baseDelay".to_owned(),
                message: "must be more than 0: a failing store is not tried again at once"
                    .to_owned(),
            });
        }
        if self.dispatcher.backoff.max_failures == 0 {
            return Err(ConfigError {
                path: "dispatcher.backoff.maxFailures".to_owned(),
                message: "must be 1 or more: the first failure is one".to_owned(),
            });
        }
        if self.dispatcher.batch_size == 0 {
            return Err(ConfigError {
                path: "dispatcher.batchSize".to_owned(),
                message: "the batch size must be 1 or more: with 0 nothing would run".to_owned(),
            });
        }
        Ok(())
    }

    /// The settings for `aggregate`: its overrides over the app's settings.
    pub fn for_aggregate(&self, aggregate: &str) -> Settings {
        let overrides = self.overrides.get(aggregate).cloned().unwrap_or_default();
        Settings {
            commands_timeout: overrides.commands_timeout.unwrap_or(self.commands.timeout),
            concurrency_retries: self.commands.concurrency_retries,
            policies_timeout: overrides.policies_timeout.unwrap_or(self.policies.timeout),
            policies_retry: overrides.policies_retry.unwrap_or(self.policies.retry),
            max_chain_depth: self.policies.max_chain_depth,
            processes_timeout: overrides
                .processes_timeout
                .unwrap_or(self.processes.timeout),
            processes_handler_timeout: overrides
                .processes_handler_timeout
                .unwrap_or(self.processes.handler_timeout),
            processes_retry: overrides.processes_retry.unwrap_or(self.processes.retry),
        }
    }
}

/// The settings in force for one aggregate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// See [`Commands::timeout`].
    pub commands_timeout: Duration,
    /// See [`Commands::concurrency_retries`].
    pub concurrency_retries: u32,
    /// See [`Policies::timeout`].
    pub policies_timeout: Duration,
    /// See [`Policies::retry`].
    pub policies_retry: Retry,
    /// See [`Policies::max_chain_depth`].
    pub max_chain_depth: u32,
    /// See [`Processes::timeout`].
    pub processes_timeout: Duration,
    /// See [`Processes::handler_timeout`].
    pub processes_handler_timeout: Duration,
    /// See [`Processes::retry`].
    pub processes_retry: Retry,
}

#[cfg(test)]
mod tests {
    use super::*;

    // spec §25
    #[test]
    fn defaults_are_those_of_the_spec() {
        let config = Config::default();
        assert_eq!(config.commands.timeout, seconds(30));
        assert_eq!(config.commands.concurrency_retries, 3);
        assert_eq!(config.policies.timeout, seconds(30));
        assert_eq!(config.policies.max_chain_depth, 25);
        assert_eq!(config.processes.timeout, days(7));
        assert_eq!(config.processes.handler_timeout, seconds(30));
        assert_eq!(config.dispatcher.poll_interval, millis(100));
        assert_eq!(config.dispatcher.batch_size, 100);
        let retry = config.policies.retry;
        assert_eq!(
            (
                retry.strategy,
                retry.max_attempts,
                retry.base_delay,
                retry.max_delay
            ),
            (Strategy::Exponential, 3, seconds(1), seconds(30))
        );
        assert_eq!(Config::from_json("{}").unwrap(), config);
    }

    // Issue 9: a time limit of 0, or one whose lease overflows the calendar, is refused by key.
    #[test]
    fn time_limits_outside_a_sane_range_are_refused_by_key() {
        for (json, path) in [
            (
                r#"{"processes":{"handlerTimeout":"0ms"}}"#,
                "processes.handlerTimeout",
            ),
            (r#"{"policies":{"timeout":"400000d"}}"#, "policies.timeout"),
            (r#"{"commands":{"timeout":"2d"}}"#, "commands.timeout"),
            (
                r#"{"overrides":{"Order":{"policiesTimeout":"0s"}}}"#,
                "overrides.Order.policiesTimeout",
            ),
            (r#"{"dispatcher":{"batchSize":0}}"#, "dispatcher.batchSize"),
        ] {
            let error = Config::from_json(json).expect_err(json);
            assert_eq!(error.path, path, "{json}");
            assert_eq!(error.code(), "INVALID_CONFIGURATION");
        }
        let longest = r#"{"processes":{"handlerTimeout":"1d"},"policies":{"timeout":"1ms"}}"#;
        assert!(
            Config::from_json(longest).is_ok(),
            "the bounds themselves are fine"
        );
    }

    // spec 152, 153
    #[test]
    fn retry_waits_grow_by_strategy_and_stop_at_max_attempts() {
        let retry = Retry::default();
        assert_eq!(retry.delay_before(1), Some(seconds(1)));
        assert_eq!(retry.delay_before(2), Some(seconds(2)));
        assert_eq!(
            retry.delay_before(3),
            None,
            "3 runs in all, the first included"
        );
        let long = Retry {
            max_attempts: 10,
            ..Retry::default()
        };
        assert_eq!(long.delay_before(5), Some(seconds(16)));
        assert_eq!(
            long.delay_before(6),
            Some(seconds(30)),
            "capped at maxDelay"
        );
        let linear = Retry {
            strategy: Strategy::Linear,
            max_attempts: 5,
            ..Retry::default()
        };
        assert_eq!(linear.delay_before(3), Some(seconds(3)));
        let fixed = Retry {
            strategy: Strategy::Fixed,
            max_attempts: 5,
            ..Retry::default()
        };
        assert_eq!(fixed.delay_before(4), Some(seconds(1)));
        let none = Retry {
            strategy: Strategy::None,
            ..Retry::default()
        };
        assert_eq!(none.delay_before(1), None, "give up on the first failure");
        let huge = Retry {
            max_attempts: u32::MAX,
            max_delay: Duration::MAX,
            ..Retry::default()
        };
        assert_eq!(huge.delay_before(200), Some(Duration::MAX), "no overflow");
    }

    // spec 156, 192, 212
    #[test]
    fn json_is_read_with_overrides_and_bad_input_names_its_path() {
        let config = Config::from_json(
            r#"{
                "policies": { "retry": { "strategy": "fixed", "baseDelay": "2s" } },
                "overrides": { "Order": { "policiesRetry": { "strategy": "none" }, "commandsTimeout": 5000 } }
            }"#,
        )
        .unwrap();
        assert_eq!(config.policies.retry.base_delay, seconds(2));
        assert_eq!(
            config.processes.retry,
            Retry::default(),
            "processes do not inherit policies.retry"
        );
        let order = config.for_aggregate("Order");
        assert_eq!(order.policies_retry.strategy, Strategy::None);
        assert_eq!(order.commands_timeout, seconds(5));
        assert_eq!(
            order.processes_handler_timeout,
            seconds(30),
            "left out: the app's setting"
        );
        assert_eq!(
            config.for_aggregate("Payment").policies_retry.strategy,
            Strategy::Fixed
        );

        let bad_duration =
            Config::from_json(r#"{ "policies": { "timeout": "30 seconds" } }"#).unwrap_err();
        assert_eq!(bad_duration.path, "policies.timeout");
        assert!(
            bad_duration
                .message
                .contains("`30 seconds` is not a duration"),
            "{bad_duration}"
        );
        let unknown =
            Config::from_json(r#"{ "dispatcher": { "pollIntervall": "1s" } }"#).unwrap_err();
        assert_eq!(unknown.path, "dispatcher.pollIntervall");
        let no_strategy =
            Config::from_json(r#"{ "processes": { "retry": { "maxAttempts": 5 } } }"#).unwrap_err();
        assert_eq!(no_strategy.path, "processes.retry");
        assert!(no_strategy.message.contains("strategy"), "{no_strategy}");
        let wrong_type =
            Config::from_json(r#"{ "commands": { "concurrencyRetries": "three" } }"#).unwrap_err();
        assert_eq!(wrong_type.path, "commands.concurrencyRetries");
        assert_eq!(wrong_type.code(), "INVALID_CONFIGURATION");
    }
}
