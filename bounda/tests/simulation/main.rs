//! A deterministic simulation of the runtime (issue 11): seeded schedules of outside commands,
//! clock moves from a millisecond to two years, handler failures, panics and time limits,
//! letters retried and discarded, apps restarted on the same file and several runners taking
//! turns, checked against a reference model and the invariants after each schedule.
//!
//! `cargo test -p bounda --test simulation` runs the CI slice (fixed seeds and a few new ones).
//! The long run: `SIMULATION_SCHEDULES=10000 cargo test --release -p bounda --test simulation
//! -- --ignored --nocapture long_run`. A failing seed prints its shrunk schedule as a test to
//! paste into `regressions.rs`.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

#[path = "../support/mod.rs"]
mod support;

mod domain;
mod driver;
mod model;
mod regressions;
mod schedule;

use std::time::Instant as StdInstant;

use schedule::Step;

/// Steps per schedule.
const STEPS: usize = 120;

/// Keeps the planned panics of handlers out of the output; any other panic is printed.
fn quiet_planned_panics() {
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let planned = info
                .payload()
                .downcast_ref::<String>()
                .is_some_and(|message| message.starts_with("planned panic"));
            if !planned {
                default(info);
            }
        }));
    });
}

/// How a schedule runs: against the model, or with commits failing this often per thousand.
#[derive(Debug, Clone, Copy)]
pub enum Mode {
    Model,
    Faults(u64),
}

impl Mode {
    async fn run(self, seed: u64, schedule: &[Step]) -> driver::Outcome {
        match self {
            Mode::Model => driver::run(seed, schedule).await,
            Mode::Faults(per_mille) => driver::run_with_faults(seed, schedule, per_mille).await,
        }
    }
}

/// Runs `schedule` with `seed` in `mode`; on a failure, panics with the schedule shrunk and
/// printed as a test to paste into `regressions.rs`.
async fn check(seed: u64, schedule: &[Step], mode: Mode) -> driver::Stats {
    quiet_planned_panics();
    match mode.run(seed, schedule).await {
        Ok(stats) => stats,
        Err(error) => {
            let shrunk = shrink(seed, schedule, mode);
            let again = match mode.run(seed, &shrunk).await {
                Err(again) => again,
                Ok(_) => "the shrunk schedule passes: keep the whole one".to_owned(),
            };
            panic!(
                "seed {seed} ({mode:?}) failed: {error}\n\nshrunk to {} steps: {again}\n\n{}\n",
                shrunk.len(),
                schedule::as_rust(&format!("seed_{seed}"), seed, &shrunk, mode)
            );
        }
    }
}

/// The failing schedule with as few steps as still fail.
fn shrink(seed: u64, schedule: &[Step], mode: Mode) -> Vec<Step> {
    let runtime = tokio::runtime::Handle::current();
    let fails = |candidate: &[Step]| {
        let candidate = candidate.to_vec();
        tokio::task::block_in_place(|| {
            runtime.block_on(async { mode.run(seed, &candidate).await.is_err() })
        })
    };
    schedule::shrink(schedule, fails)
}

/// Replays a schedule kept as a regression test.
pub async fn replay(seed: u64, schedule: &[Step]) {
    check(seed, schedule, Mode::Model).await;
}

/// Replays a schedule kept as a regression test, with commits failing.
pub async fn replay_with_faults(seed: u64, schedule: &[Step]) {
    check(seed, schedule, Mode::Faults(FAULTS_PER_MILLE)).await;
}

/// Runs a schedule for each seed in `mode`, and adds up what they did.
async fn simulate(seeds: impl Iterator<Item = u64>, mode: Mode) -> (usize, driver::Stats) {
    let mut total = driver::Stats::default();
    let mut count = 0;
    for seed in seeds {
        let schedule = schedule::generate(seed, STEPS);
        let stats = check(seed, &schedule, mode).await;
        total.steps += stats.steps;
        total.checks += stats.checks;
        total.skipped += stats.skipped;
        total.letters += stats.letters;
        total.restarts += stats.restarts;
        for (sum, n) in total.faults.iter_mut().zip(stats.faults) {
            *sum += n;
        }
        count += 1;
    }
    (count, total)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn fixed_seeds_agree_with_the_model() {
    let (count, stats) = simulate(1..=200, Mode::Model).await;
    println!("{count} schedules: {stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn new_seeds_agree_with_the_model() {
    let first = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
        * 1_000;
    println!("new seeds from {first}");
    let (count, stats) = simulate(first..first + 8, Mode::Model).await;
    println!("{count} schedules: {stats:?}");
}

/// Commits fail this often, per thousand, in the fault runs.
const FAULTS_PER_MILLE: u64 = 60;

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn runs_come_out_whole_through_failing_commits() {
    let (count, stats) = simulate(1..=40, Mode::Faults(FAULTS_PER_MILLE)).await;
    let faults = stats.faults;
    println!(
        "{count} schedules, commits failing {FAULTS_PER_MILLE} in 1000: {} busy, {} full, {} I/O before writing, {} after writing",
        faults[0], faults[1], faults[2], faults[3]
    );
    assert!(
        faults.iter().all(|n| *n > 0),
        "every kind of fault was injected"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "the long run: minutes; see the module's documentation"]
async fn long_run() {
    let count: u64 = std::env::var("SIMULATION_SCHEDULES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let first: u64 = std::env::var("SIMULATION_FIRST_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    let start = StdInstant::now();
    let (modelled, stats) = simulate(first..first + count, Mode::Model).await;
    // A quarter as many again with commits failing.
    let (faulty, with_faults) = simulate(
        (first..first + count).step_by(4),
        Mode::Faults(FAULTS_PER_MILLE),
    )
    .await;
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "{} schedules of {STEPS} steps in {seconds:.1} s: {:.1} schedules/s",
        modelled + faulty,
        (modelled + faulty) as f64 / seconds
    );
    println!(
        "{modelled} against the model: {} steps, {} comparisons ({} skipped while work was pending; each: every account's events with their times, instance and deadlines reached, the letters; positions and versions contiguous, each deadline reached once, never early, never before its instance's earlier events, lag 0), {} letters at the end, {} restarts; integrity_check after each",
        stats.steps, stats.checks, stats.skipped, stats.letters, stats.restarts
    );
    let faults = with_faults.faults;
    println!(
        "{faulty} with commits failing {FAULTS_PER_MILLE} in 1000: {} busy, {} full, {} I/O before writing, {} after writing; no payment acknowledged twice, no link pinged twice, no event handled twice; once the faults stop, every due payment acknowledged or lettered, every due link pinged or its ping lettered, every event of a running instance handled",
        faults[0], faults[1], faults[2], faults[3]
    );
}
