//! What the runtime tells the `metrics` facade: counters and histograms as work is committed,
//! gauges when an exporter asks ([`App::survey_metrics`]). Until [`record`] turns it on (the
//! page's `Metrics::install` does), nothing is recorded and nothing is spent on it. The names
//! follow Prometheus's conventions (`_total`, `_seconds`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::Error;
use crate::app::App;
use crate::store::{LetterFilter, LetterStatus, WriteSet};

/// Commands decided, by type and outcome (`stored`, `scheduled`, `rejected`, `failed`).
pub const COMMANDS: &str = "bounda_commands_total";
/// Dead letters filed, by kind, handler and outcome (`terminal`, `retriable_exhausted`).
pub const LETTERS_FILED: &str = "bounda_dead_letters_filed_total";
/// Dead letters open (failed, neither retried nor discarded).
pub const LETTERS_OPEN: &str = "bounda_dead_letters_open";
/// Failed tries of a handler, by kind and handler: each one retried, and each one lettered.
pub const HANDLER_FAILURES: &str = "bounda_handler_failures_total";
/// Deadlines reached, by process and field (`timeout` for the lifetime's end).
pub const DEADLINE_FIRINGS: &str = "bounda_deadline_firings_total";
/// How late a deadline ran after its moment, in seconds, by process.
pub const DEADLINE_LATENESS: &str = "bounda_deadline_lateness_seconds";
/// Instances with a deadline pending, by process.
pub const DEADLINES_PENDING: &str = "bounda_deadlines_pending";
/// Instances whose next deadline is due and has not run, by process.
pub const DEADLINES_OVERDUE: &str = "bounda_deadlines_overdue";
/// Events a subscriber has yet to take, by subscriber.
pub const SUBSCRIBER_LAG: &str = "bounda_subscriber_lag";
/// How long a commit of one or more runs' writes took, in seconds.
pub const COMMIT_SECONDS: &str = "bounda_commit_seconds";
/// Events a relay published (its sink acknowledged them and the run committed), by relay.
pub const RELAY_PUBLISHED: &str = "bounda_relay_published_total";
/// Events a relay has yet to publish, by relay.
pub const RELAY_BEHIND: &str = "bounda_relay_behind";
/// How long ago the oldest event a relay has yet to publish was stored, in seconds, by relay.
pub const RELAY_OLDEST: &str = "bounda_relay_oldest_unpublished_seconds";
/// Messages waiting at a source of commands from other services, by source.
pub const INGRESS_BEHIND: &str = "bounda_ingress_behind";

/// Whether counters and histograms are recorded.
static RECORDING: AtomicBool = AtomicBool::new(false);

/// Turns recording of counters and histograms on or off for the process: on once a recorder is
/// installed (`page::Metrics::install` calls it; an app with a recorder of its own calls it
/// too). Off, the runtime builds no label for them.
pub fn record(on: bool) {
    RECORDING.store(on, Ordering::Relaxed);
}

fn recording() -> bool {
    RECORDING.load(Ordering::Relaxed)
}

/// Describes every instrument to the recorder installed now, for the help an exporter shows.
pub(crate) fn describe() {
    use ::metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(COMMANDS, "Commands decided, by type and outcome.");
    describe_counter!(
        LETTERS_FILED,
        "Dead letters filed, by kind, handler and outcome."
    );
    describe_gauge!(
        LETTERS_OPEN,
        "Dead letters open: neither retried nor discarded."
    );
    describe_counter!(
        HANDLER_FAILURES,
        "Failed tries of a handler: each one retried and each one lettered."
    );
    describe_counter!(DEADLINE_FIRINGS, "Deadlines reached, by process and field.");
    describe_counter!(
        RELAY_PUBLISHED,
        "Events a relay published and its sink acknowledged, by relay."
    );
    describe_histogram!(
        DEADLINE_LATENESS,
        Unit::Seconds,
        "How late a deadline ran after its moment, by process."
    );
    describe_gauge!(
        DEADLINES_PENDING,
        "Instances with a deadline pending, by process; `held` says whether a failed instance's \
         letter holds them until it is retried."
    );
    describe_gauge!(
        DEADLINES_OVERDUE,
        "Instances whose next deadline is due and has not run, by process; `held` says whether \
         a failed instance's letter holds them until it is retried."
    );
    describe_gauge!(SUBSCRIBER_LAG, "Events a subscriber has yet to take.");
    describe_gauge!(RELAY_BEHIND, "Events a relay has yet to publish, by relay.");
    describe_gauge!(
        INGRESS_BEHIND,
        "Messages waiting at a source of commands from other services, by source."
    );
    describe_gauge!(
        RELAY_OLDEST,
        Unit::Seconds,
        "How long ago the oldest event a relay has yet to publish was stored, by relay."
    );
    describe_histogram!(
        COMMIT_SECONDS,
        Unit::Seconds,
        "How long a commit of one or more runs' writes took."
    );
}

/// A command's outcome.
pub(crate) fn command(command_type: &str, outcome: &'static str) {
    if !recording() {
        return;
    }
    ::metrics::counter!(COMMANDS, "command" => command_type.to_owned(), "outcome" => outcome)
        .increment(1);
}

/// An event relay `relay` published, once its run committed.
pub(crate) fn published(relay: &'static str) {
    if !recording() {
        return;
    }
    ::metrics::counter!(RELAY_PUBLISHED, "relay" => relay).increment(1);
}

/// A handler's failed try: retried, or lettered.
pub(crate) fn handler_failed(kind: &'static str, handler: &str) {
    if !recording() {
        return;
    }
    ::metrics::counter!(HANDLER_FAILURES, "kind" => kind, "handler" => handler.to_owned())
        .increment(1);
}

/// A dead letter, once stored: a failure of its handler too.
pub(crate) fn letter_filed(letter: &crate::store::DeadLetter) {
    if !recording() {
        return;
    }
    let kind = letter.kind.as_str();
    ::metrics::counter!(
        LETTERS_FILED,
        "kind" => kind,
        "handler" => letter.handler.clone(),
        "outcome" => letter.error_type.clone(),
    )
    .increment(1);
    handler_failed(kind, &letter.handler);
}

/// A commit of `sets` that took `seconds`; the deadlines reached in those that landed, with
/// their lateness.
pub(crate) fn committed(sets: &[WriteSet], landed: impl Fn(usize) -> bool, seconds: f64) {
    if !recording() {
        return;
    }
    ::metrics::histogram!(COMMIT_SECONDS).record(seconds);
    for (index, writes) in sets.iter().enumerate() {
        if !landed(index) {
            continue;
        }
        for append in &writes.appends {
            for event in &append.events {
                let ran = crate::store::instances::deadline_ran(
                    &append.aggregate_type,
                    &event.event_type,
                    &event.payload,
                    event.timestamp,
                );
                let Some(ran) = ran else { continue };
                ::metrics::counter!(
                    DEADLINE_FIRINGS,
                    "process" => ran.process.to_owned(),
                    "field" => ran.field.to_owned(),
                )
                .increment(1);
                ::metrics::histogram!(DEADLINE_LATENESS, "process" => ran.process.to_owned())
                    .record(ran.late.as_millis() as f64 / 1_000.0);
            }
        }
    }
}

impl App {
    /// Sets the gauges from the store: each subscriber's lag, the open dead letters, and by
    /// process the instances with a deadline pending and those overdue. An exporter calls it
    /// before it renders (the operator page's `/metrics` does), so the gauges are as fresh as
    /// the scrape; it reads each scheduler entry of a deadline, one row per instance.
    pub async fn survey_metrics(&self) -> Result<(), Error> {
        describe();
        let subscribers = self.subscriber_lags().await?.subscribers;
        for subscriber in &subscribers {
            ::metrics::gauge!(SUBSCRIBER_LAG, "subscriber" => subscriber.subscriber.clone())
                .set(subscriber.lag as f64);
        }
        let now = self.clock().now();
        for relay in self.relay_lags().await? {
            let waited = relay.oldest.map_or(0.0, |oldest| {
                now.saturating_since(oldest).as_millis() as f64 / 1_000.0
            });
            ::metrics::gauge!(RELAY_BEHIND, "relay" => relay.relay.clone())
                .set(relay.behind as f64);
            ::metrics::gauge!(RELAY_OLDEST, "relay" => relay.relay).set(waited);
        }
        for source in self.source_lags().await {
            if let Ok(behind) = source.behind {
                ::metrics::gauge!(INGRESS_BEHIND, "source" => source.source)
                    .set(behind.messages as f64);
            }
        }
        let open = LetterFilter {
            status: Some(LetterStatus::Failed),
            ..LetterFilter::default()
        };
        let open = self.store().count_dead_letters(&open).await?;
        ::metrics::gauge!(LETTERS_OPEN).set(open as f64);
        let mut by_process: BTreeMap<String, [(u64, u64); 2]> = self
            .processes()
            .map(|process| (process.name().to_owned(), [(0, 0); 2]))
            .collect();
        // The instances index counts the deadlines pending: a store without one has no such
        // gauge, rather than one that reads none.
        let index = self.store().capabilities().instances;
        if let Some(index) = index {
            for counts in index.instance_counts(now).await? {
                by_process.entry(counts.process).or_default()[0] = (counts.pending, counts.overdue);
            }
        }
        // A failed instance has no scheduler entry: its deadlines are held by its letter, and
        // counted apart (of the instances the oldest thousand open process letters name).
        let (held, _) = self.held_deadlines().await?;
        let mut instances = std::collections::BTreeSet::new();
        for due in &held {
            if instances.insert((due.process, due.instance.as_str())) {
                let counts = &mut by_process.entry(due.process.to_owned()).or_default()[1];
                counts.0 += 1;
                let overdue = held
                    .iter()
                    .any(|d| d.process == due.process && d.instance == due.instance && d.at <= now);
                counts.1 += u64::from(overdue);
            }
        }
        // A process whose entries are gone (one a deploy removed) reads 0, not its last count.
        static SEEN: std::sync::Mutex<std::collections::BTreeSet<String>> =
            std::sync::Mutex::new(std::collections::BTreeSet::new());
        {
            let mut seen = SEEN
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for process in seen.iter() {
                by_process.entry(process.clone()).or_default();
            }
            seen.extend(by_process.keys().cloned());
        }
        for (process, counts) in by_process {
            for (held, (pending, overdue)) in ["false", "true"].into_iter().zip(counts) {
                if held == "false" && index.is_none() {
                    continue;
                }
                let labels = [("process", process.clone()), ("held", held.to_owned())];
                ::metrics::gauge!(DEADLINES_PENDING, &labels).set(pending as f64);
                ::metrics::gauge!(DEADLINES_OVERDUE, &labels).set(overdue as f64);
            }
        }
        Ok(())
    }
}
