//! bounda's own simulation (issue 11), on the public harness `bounda::testing::simulate`
//! (issue 23): seeded schedules of outside commands, clock moves from a millisecond to two years,
//! handler failures, panics and time limits (the harness's port faults), letters retried and
//! discarded, apps restarted on the same file and several runners taking turns, checked against
//! a reference model and the framework's invariants; and again with commits failing, checked by
//! the domain's own invariants (nothing doubled, nothing lost).
//!
//! `cargo test -p bounda --test simulation` runs the CI slice (fixed seeds and two new ones).
//! The long run: `BOUNDA_SIMULATION_SCHEDULES=10000 cargo test --release -p bounda --test
//! simulation -- --ignored --nocapture long_run`. A failing seed prints its shrunk schedule as
//! a test to paste into `regressions.rs`.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

#[path = "../support/mod.rs"]
mod support;

mod domain;
mod faults;
mod inputs;
mod model;
mod reference;
mod regressions;
mod relayed;

use std::time::Instant as StdInstant;

use bounda::config::{Config, Retry, Strategy};
use bounda::testing::simulate::{Mix, Setup, Simulation, long_run_seeds};
use bounda::{App, AppBuilder, Duration, millis, seconds};

use inputs::Outside;
use reference::Reference;
use support::database::Database;

/// Steps per schedule.
const STEPS: usize = 120;

/// Commits fail this often, per thousand, in the fault runs.
const FAULTS_PER_MILLE: u64 = 60;

fn config() -> Config {
    let mut config = Config::default();
    let retry = Retry {
        strategy: Strategy::Fixed,
        max_attempts: model::MAX_ATTEMPTS as u32,
        base_delay: millis(model::BACKOFF as u64),
        max_delay: millis(model::BACKOFF as u64),
    };
    config.processes.retry = retry;
    config.policies.retry = retry;
    config.processes.handler_timeout = seconds(5);
    config.policies.timeout = seconds(5);
    config
}

fn app(setup: &Setup) -> AppBuilder {
    App::builder_shared(setup.store())
        .only_listed()
        .process::<domain::Watch>()
        .policy::<domain::AcknowledgeOnPaid>()
        .command::<domain::Request>()
        .command::<domain::Acknowledge>()
        .command::<domain::Ping>()
        .port(setup.port_faults())
        .config(config())
}

/// The simulation against the reference model: letters are retried and discarded by inputs
/// the model follows, not by the harness's own letter steps.
pub fn simulation() -> Simulation<Outside, Reference> {
    Simulation::new(Database::new, app)
        .model(Reference::new)
        .port_faults(domain::PORT_FAULTS)
        .mix(Mix {
            send: 50,
            retry: 0,
            discard: 0,
            ..Mix::default()
        })
        .steps(STEPS)
        .check_every(10)
        .settle(Duration::ZERO)
}

/// The simulation with commits failing: the domain's invariants judge, since a failed commit
/// runs work at moments the model does not know.
pub fn faulty() -> Simulation<Outside> {
    judged_by_the_domain(Simulation::new(Database::new, app))
        .store_faults(FAULTS_PER_MILLE)
        .replay_as("faulty()")
}

/// `simulation` judged by the domain's invariants, nothing doubled at any check and nothing lost
/// at the end, with port faults and an operator pausing a process or a policy for a while,
/// through schedules that settle for a day at the end.
fn judged_by_the_domain<I: bounda::testing::simulate::Input>(
    simulation: Simulation<I>,
) -> Simulation<I> {
    simulation
        .port_faults(domain::PORT_FAULTS)
        .mix(Mix {
            pause: 8,
            ..Mix::default()
        })
        .invariant("nothing doubled", |app| async move {
            faults::fault_checks(&app, false).await
        })
        .at_end("nothing lost", |app| async move {
            faults::fault_checks(&app, true).await
        })
        .steps(STEPS)
        .check_every(10)
        .settle(bounda::days(1))
}

/// The settings of [`config`] with a limit on the process, the policy and the scheduled command:
/// what a window cannot start waits for the next one.
fn paced_config() -> Config {
    let mut config = config();
    config.limits = Config::from_json(
        r#"{ "limits": {
            "processes": { "Watch": { "rate": "2/s" } },
            "policies": { "acknowledge_on_paid": { "rate": "1/s" } },
            "commands": { "Ping": { "rate": "1/s" } } } }"#,
    )
    .expect("the limits read")
    .limits;
    config
}

/// The simulation under limits and pauses: the framework's checks hold (each deadline once,
/// never early and never before its instance's earlier events, each event handled once) and the
/// domain's invariants too, while the runs a window cannot start wait for a later one, and an
/// operator pauses a process or a policy for a while (issue 24: its events passed by the
/// subscriber's checkpoint, bookmarked, and returned to on resume).
pub fn held() -> Simulation<Outside> {
    judged_by_the_domain(Simulation::new(Database::new, |setup| {
        app(setup).config(paced_config())
    }))
    .replay_as("held()")
}

#[tokio::test]
async fn runs_come_out_whole_under_limits_and_pauses() {
    let report = held().check(1..=20).await;
    println!("{report}");
    assert!(report.pauses > 0, "pauses were played: {report}");
}

#[tokio::test]
async fn schedules_agree_with_the_model() {
    let report = simulation().run(200).await;
    assert!(report.checks > 0 && report.restarts > 0 && report.letters > 0);
}

#[tokio::test]
async fn runs_come_out_whole_through_failing_commits() {
    let report = faulty().check(1..=40).await;
    println!("{report}");
    assert!(report.pauses > 0, "pauses were played: {report}");
    let store = report.store_faults;
    assert!(
        [store.busy, store.full, store.io, store.after_write]
            .iter()
            .all(|n| *n > 0),
        "every kind of commit fault was injected: {report}"
    );
    let port = report.port_faults;
    assert!(
        [port.failures, port.terminal, port.panics, port.hangs]
            .iter()
            .all(|n| *n > 0),
        "every kind of port fault was played: {report}"
    );
}

#[tokio::test]
#[ignore = "the long run: minutes; see the module's documentation"]
async fn long_run() {
    let seeds = long_run_seeds(1_000_000).unwrap_or(1_000_000..1_010_000);
    let start = StdInstant::now();
    let modelled = simulation().check(seeds.clone()).await;
    // A quarter as many again with commits failing.
    let faulty = faulty().check(seeds.step_by(4)).await;
    let seconds = start.elapsed().as_secs_f64();
    let schedules = modelled.schedules + faulty.schedules;
    println!(
        "{schedules} schedules of {STEPS} steps in {seconds:.1} s: {:.1} schedules/s",
        schedules as f64 / seconds
    );
    println!("against the model: {modelled}");
    println!("with commits failing {FAULTS_PER_MILLE} in 1000: {faulty}");
}
