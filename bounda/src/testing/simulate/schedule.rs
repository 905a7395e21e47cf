//! Schedules: the steps of one simulated run, drawn from a seed, shrunk when one fails, and
//! printed as a test to paste.

use std::fmt;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The random source a simulation draws from: the same seed draws the same schedule on every
/// machine.
pub type SimRng = ChaCha8Rng;

/// One step of a schedule. `I` is the user's outside input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step<I> {
    /// Sends an outside input, then runs everything it caused.
    Send(I),
    /// Moves the clock this many milliseconds with a runner running: everything due on the way
    /// runs, in due order.
    Advance(u64),
    /// Moves the clock this many milliseconds while no runner runs: an outage, caught up by the
    /// next step.
    Outage(u64),
    /// Runner `n` (of those running, modulo their count) takes over and catches up.
    Turn(u8),
    /// An operator retries the `n`th open dead letter (modulo their count, oldest first).
    Retry(u8),
    /// An operator discards it.
    Discard(u8),
    /// Every runner stops, and this many (1 to 3) open the same database again.
    Restart(u8),
    /// An operator pauses the `n`th process, policy or running instance (modulo their count:
    /// processes, policies, then the first two instances running) for this many of the steps
    /// that follow (1 to 8), and then resumes it: what it held runs then, late, in order. The
    /// checks wait while something is paused.
    Pause(u8, u8),
}

/// How often each kind of step is drawn, in shares: a schedule of a domain without letters or
/// restarts sets their share to 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mix {
    /// Outside inputs.
    pub send: u32,
    /// Clock moves with a runner running.
    pub advance: u32,
    /// Outages.
    pub outage: u32,
    /// Another runner taking over.
    pub turn: u32,
    /// Letters retried.
    pub retry: u32,
    /// Letters discarded.
    pub discard: u32,
    /// Restarts.
    pub restart: u32,
    /// A process or a policy paused for a while. None by default: a reference model that
    /// expects each step's work done at once does not know about pauses.
    pub pause: u32,
}

impl Default for Mix {
    fn default() -> Mix {
        Mix {
            send: 38,
            advance: 25,
            outage: 8,
            turn: 10,
            retry: 8,
            discard: 4,
            restart: 7,
            pause: 0,
        }
    }
}

const SECOND: u64 = 1_000;
const HOUR: u64 = 3_600 * SECOND;
const DAY: u64 = 24 * HOUR;

/// A span in milliseconds, from one to two years' worth, most of them between an hour and forty
/// days: the times processes keep.
pub fn span(rng: &mut SimRng) -> u64 {
    match rng.random_range(0..10) {
        0 => rng.random_range(1..SECOND),
        1..=2 => rng.random_range(SECOND..HOUR),
        3..=6 => rng.random_range(HOUR..2 * DAY),
        7..=8 => rng.random_range(2 * DAY..40 * DAY),
        _ => rng.random_range(40 * DAY..730 * DAY),
    }
}

/// A schedule of `steps` steps drawn from `seed`: `first` inputs (what starts the domain, such
/// as opening its accounts), then steps by `mix`, each input drawn by `draw`.
pub(crate) fn generate<I>(
    seed: u64,
    steps: usize,
    mix: &Mix,
    first: &dyn Fn(&mut SimRng) -> Vec<I>,
    draw: &dyn Fn(&mut SimRng) -> I,
) -> Vec<Step<I>> {
    let mut rng = SimRng::seed_from_u64(seed);
    let mut schedule: Vec<Step<I>> = first(&mut rng).into_iter().map(Step::Send).collect();
    let shares = [
        mix.send,
        mix.advance,
        mix.outage,
        mix.turn,
        mix.retry,
        mix.discard,
        mix.restart,
        mix.pause,
    ];
    let total: u32 = shares.iter().sum();
    while schedule.len() < steps && total > 0 {
        let mut roll = rng.random_range(0..total);
        let mut kind = 0;
        while roll >= shares[kind] {
            roll -= shares[kind];
            kind += 1;
        }
        schedule.push(match kind {
            0 => Step::Send(draw(&mut rng)),
            1 => Step::Advance(span(&mut rng)),
            2 => Step::Outage(span(&mut rng)),
            3 => Step::Turn(rng.random_range(0..3)),
            4 => Step::Retry(rng.random_range(0..4)),
            5 => Step::Discard(rng.random_range(0..4)),
            6 => Step::Restart(rng.random_range(1..4)),
            _ => Step::Pause(rng.random_range(0..6), rng.random_range(1..9)),
        });
    }
    schedule
}

/// `schedule` as a test to paste: `simulation` is the expression that builds the simulation
/// the failing run used, and `input` the name of the input enum, whose variants the steps name
/// as its `Debug` prints them.
pub(crate) fn as_rust<I: fmt::Debug>(
    simulation: &str,
    input: &str,
    seed: u64,
    schedule: &[Step<I>],
) -> String {
    let steps: Vec<String> = schedule
        .iter()
        .map(|step| format!("                Step::{step:?},"))
        .collect();
    format!(
        "#[tokio::test]\nasync fn seed_{seed}() {{\n    use bounda::testing::simulate::Step;\n    #[allow(unused_imports)]\n    use {input}::*;\n    {simulation}\n        .replay(\n            {seed},\n            &[\n{}\n            ],\n        )\n        .await;\n}}",
        steps.join("\n")
    )
}

/// The last segment of a type's path: how a test in the same module names it.
pub(crate) fn short_name(path: &str) -> &str {
    let base = path.split('<').next().unwrap_or(path);
    base.rsplit("::").next().unwrap_or(base)
}
