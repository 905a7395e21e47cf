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

/// Runs `schedule` with `seed`; on a failure, panics with the shrunk schedule as Rust.
async fn check(seed: u64, schedule: &[Step]) -> driver::Stats {
    quiet_planned_panics();
    match driver::run(seed, schedule).await {
        Ok(stats) => stats,
        Err(error) => {
            let shrunk = shrink(seed, schedule).await;
            let again = driver::run(seed, &shrunk).await.err().unwrap_or_default();
            panic!(
                "seed {seed} failed: {error}\n\nshrunk to {} steps: {again}\n\n{}\n",
                shrunk.len(),
                schedule::as_rust(&format!("seed_{seed}"), seed, &shrunk)
            );
        }
    }
}

/// The failing schedule with as few steps as still fail.
async fn shrink(seed: u64, schedule: &[Step]) -> Vec<Step> {
    let runtime = tokio::runtime::Handle::current();
    let fails = |candidate: &[Step]| {
        let candidate = candidate.to_vec();
        tokio::task::block_in_place(|| {
            runtime.block_on(async { driver::run(seed, &candidate).await.is_err() })
        })
    };
    schedule::shrink(schedule, fails)
}

/// Replays a schedule kept as a regression test.
pub async fn replay(seed: u64, schedule: &[Step]) {
    check(seed, schedule).await;
}

/// Replays a schedule kept as a regression test, with commits failing.
pub async fn replay_with_faults(seed: u64, schedule: &[Step]) {
    quiet_planned_panics();
    if let Err(error) = driver::run_with_faults(seed, schedule, FAULTS_PER_MILLE).await {
        panic!("seed {seed} with faults failed: {error}");
    }
}

/// Runs `count` schedules from `first`, and reports what they did.
async fn simulate(seeds: impl Iterator<Item = u64>) -> (usize, driver::Stats) {
    let mut total = driver::Stats::default();
    let mut count = 0;
    for seed in seeds {
        let schedule = schedule::generate(seed, STEPS);
        let stats = check(seed, &schedule).await;
        total.steps += stats.steps;
        total.checks += stats.checks;
        total.letters += stats.letters;
        total.restarts += stats.restarts;
        count += 1;
    }
    (count, total)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn fixed_seeds_agree_with_the_model() {
    let (count, stats) = simulate(1..=200).await;
    println!("{count} schedules: {stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn new_seeds_agree_with_the_model() {
    let first = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
        * 1_000;
    println!("new seeds from {first}");
    let (count, stats) = simulate(first..first + 8).await;
    println!("{count} schedules: {stats:?}");
}

/// Commits fail this often, per thousand, in the fault runs.
const FAULTS_PER_MILLE: u64 = 60;

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn runs_come_out_whole_through_failing_commits() {
    quiet_planned_panics();
    let mut faults = [0; 4];
    for seed in 1..=40 {
        let schedule = schedule::generate(seed, STEPS);
        match driver::run_with_faults(seed, &schedule, FAULTS_PER_MILLE).await {
            Ok(stats) => {
                for (total, n) in faults.iter_mut().zip(stats.faults) {
                    *total += n;
                }
            }
            Err(error) => {
                let runtime = tokio::runtime::Handle::current();
                let shrunk = schedule::shrink(&schedule, |candidate| {
                    let candidate = candidate.to_vec();
                    tokio::task::block_in_place(|| {
                        runtime.block_on(async {
                            driver::run_with_faults(seed, &candidate, FAULTS_PER_MILLE)
                                .await
                                .is_err()
                        })
                    })
                });
                panic!(
                    "seed {seed} with faults failed: {error}\n\nshrunk to {} steps:\n{}",
                    shrunk.len(),
                    schedule::as_rust(&format!("faults_{seed}"), seed, &shrunk)
                );
            }
        }
    }
    println!(
        "faults injected: {} busy, {} full, {} I/O before writing, {} after writing",
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
    quiet_planned_panics();
    let count: u64 = std::env::var("SIMULATION_SCHEDULES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let first: u64 = std::env::var("SIMULATION_FIRST_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    let start = StdInstant::now();
    let (modelled, stats) = simulate(first..first + count).await;
    // A quarter as many again with commits failing.
    let mut faults = [0; 4];
    let mut faulty = 0;
    for seed in (first..first + count).step_by(4) {
        let schedule = schedule::generate(seed, STEPS);
        match driver::run_with_faults(seed, &schedule, FAULTS_PER_MILLE).await {
            Ok(stats) => {
                for (total, n) in faults.iter_mut().zip(stats.faults) {
                    *total += n;
                }
                faulty += 1;
            }
            Err(error) => panic!(
                "seed {seed} with faults failed: {error}\n{}",
                schedule::as_rust(&format!("faults_{seed}"), seed, &schedule)
            ),
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "{} schedules of {STEPS} steps in {seconds:.1} s: {:.1} schedules/s",
        modelled + faulty,
        (modelled + faulty) as f64 / seconds
    );
    println!(
        "{modelled} against the model: {} steps, {} comparisons (every account's events, instance and deadlines reached, the letters; positions and versions contiguous, each deadline reached once, never early, never before its instance's earlier events, lag 0), {} letters at the end, {} restarts; integrity_check after each",
        stats.steps, stats.checks, stats.letters, stats.restarts
    );
    println!(
        "{faulty} with commits failing: {} busy, {} full, {} I/O before writing, {} after writing; nothing doubled, nothing lost",
        faults[0], faults[1], faults[2], faults[3]
    );
}
