//! Schedules: the steps of one simulation, drawn from a seed, shrunk when one fails, and printed
//! as Rust to paste into a regression test.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// What an outside command asks, with a move relative to the moment it is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    Open,
    Pay(u64),
    /// Move the movable deadline this many milliseconds after now, or clear it.
    Move(Option<u64>),
    Cancel,
    Archive,
}

/// One step of a schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A command from outside to account `a<n>`.
    Send(u8, Act),
    /// `TestApp::advance` by this many milliseconds: everything due on the way runs.
    Advance(u64),
    /// The clock moves this many milliseconds while no runner runs.
    Outage(u64),
    /// Runner `n` (of those running) takes over and catches up. (A turn of fewer passes would
    /// run work late at a moment the model does not know: a ping is scheduled from when its
    /// link ran.)
    Turn(u8),
    /// An operator retries account `a<n>`'s first failed letter.
    Retry(u8),
    /// An operator discards it.
    Discard(u8),
    /// Every app is dropped and this many runners reopen the database.
    Restart(u8),
}

/// Accounts a schedule uses.
pub const ACCOUNTS: u8 = 4;

const SECOND: u64 = 1_000;
const HOUR: u64 = 3_600 * SECOND;
const DAY: u64 = 24 * HOUR;

/// A schedule of `steps` steps drawn from `seed`.
pub fn generate(seed: u64, steps: usize) -> Vec<Step> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut schedule = Vec::with_capacity(steps);
    for account in 0..ACCOUNTS {
        if rng.random_bool(0.8) {
            schedule.push(Step::Send(account, Act::Open));
        }
    }
    while schedule.len() < steps {
        let account = rng.random_range(0..ACCOUNTS);
        let step = match rng.random_range(0..100) {
            0..=14 => Step::Send(account, Act::Pay(rng.random_range(1..100))),
            15..=24 => Step::Send(account, Act::Move(Some(duration(&mut rng)))),
            25..=27 => Step::Send(account, Act::Move(None)),
            28..=31 => Step::Send(account, Act::Cancel),
            32..=33 => Step::Send(account, Act::Archive),
            34..=37 => Step::Send(account, Act::Open),
            38..=62 => Step::Advance(duration(&mut rng)),
            63..=70 => Step::Outage(duration(&mut rng)),
            71..=80 => Step::Turn(rng.random_range(0..3)),
            81..=88 => Step::Retry(account),
            89..=92 => Step::Discard(account),
            _ => Step::Restart(rng.random_range(1..4)),
        };
        schedule.push(step);
    }
    schedule
}

/// A span from a millisecond to two years, most of them around the process's own times.
fn duration(rng: &mut ChaCha8Rng) -> u64 {
    match rng.random_range(0..10) {
        0 => rng.random_range(1..SECOND),
        1..=2 => rng.random_range(SECOND..HOUR),
        3..=6 => rng.random_range(HOUR..2 * DAY),
        7..=8 => rng.random_range(2 * DAY..40 * DAY),
        _ => rng.random_range(40 * DAY..730 * DAY),
    }
}

/// The smallest schedule, by removing steps, on which `fails` still fails.
pub fn shrink(schedule: &[Step], fails: impl Fn(&[Step]) -> bool) -> Vec<Step> {
    let mut current = schedule.to_vec();
    let mut chunk = current.len() / 2;
    while chunk >= 1 {
        let mut start = 0;
        while start < current.len() {
            let end = (start + chunk).min(current.len());
            let candidate: Vec<Step> = current[..start]
                .iter()
                .chain(&current[end..])
                .copied()
                .collect();
            if fails(&candidate) {
                current = candidate;
            } else {
                start += chunk;
            }
        }
        chunk /= 2;
    }
    current
}

/// `schedule` as Rust, to paste into `regressions.rs`: replayed in `mode`, on the runtime
/// flavour shrinking needs.
pub fn as_rust(name: &str, seed: u64, schedule: &[Step], mode: super::Mode) -> String {
    let steps: Vec<String> = schedule
        .iter()
        .map(|step| format!("        {step:?},"))
        .collect();
    let replay = match mode {
        super::Mode::Model => "replay",
        super::Mode::Faults(_) => "replay_with_faults",
    };
    format!(
        "#[tokio::test(flavor = \"multi_thread\", worker_threads = 1)]\nasync fn {name}() {{\n    {replay}({seed}, &[\n{}\n    ])\n    .await;\n}}",
        steps.join("\n")
    )
}
