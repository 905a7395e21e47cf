//! bounda's benchmark: deadline firings, reactions and commands on SQLite files, each beside a
//! floor, plain rusqlite making the same writes, measured in the same run. It reports rates,
//! ratios to the floors, write transactions per unit of work and peak memory; it asserts no
//! times, only that the work it timed was done.
//!
//! ```sh
//! cargo run --release -p bounda-bench              # full sizes, about 40 minutes (10M pending)
//! cargo run --release -p bounda-bench -- --smoke   # tiny sizes, seconds (CI)
//! ```

mod counting;
mod domain;
mod files;
mod floor;
mod instances;
mod measure;
mod memory;
mod pending;
mod postgres;
mod relay;
mod table;

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Parser;

use crate::files::Files;
use crate::measure::Measured;
use crate::table::Row;

/// `calls` by method, `claim_due 0.01, commit_many 0.01`.
fn calls_text(calls: &[(&'static str, f64)]) -> String {
    let text: Vec<String> = calls
        .iter()
        .map(|(method, per)| format!("{method} {per:.3}"))
        .collect();
    text.join(", ")
}

/// Command-line arguments.
#[derive(Debug, Parser)]
#[command(about = "bounda against plain rusqlite doing the same writes, on SQLite files")]
struct Args {
    /// Tiny sizes: a run of seconds that checks the benchmark still works.
    #[arg(long)]
    smoke: bool,
    /// Where to write the table (also printed on stdout).
    #[arg(long, default_value = "target/bounda-bench.md")]
    out: PathBuf,
    /// Only the rows whose name contains this (`reactions`, `1M pending`, `1 ms away`); all by
    /// default.
    #[arg(long)]
    only: Option<String>,
    /// With `--only`: the rows whose whole name is one of its names, separated by `;`
    /// (`reactions;deadline firings, 1 worker process (PostgreSQL)`), rather than those
    /// containing it.
    #[arg(long, requires = "only")]
    exact: bool,
    /// The directory the temporary database files go in (the system's temporary directory by
    /// default); put it on the disk you want measured.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Also measure deadline firings, reactions and process steps on PostgreSQL with 1, 2, 4 and
    /// 8 worker processes, on the
    /// local socket and through a proxy 1 ms away, on a throwaway server started from the
    /// installed binaries (or `BOUNDA_POSTGRES_URL`).
    #[arg(long)]
    postgres: bool,
    /// Units of each PostgreSQL row on the local socket (a fifth of them 1 ms away); the full
    /// size by default.
    #[arg(long)]
    pg_units: Option<usize>,
    /// Run as one of those worker processes (started by the benchmark itself).
    #[arg(long, hide = true, requires_all = ["pg_url", "pg_schema"])]
    pg_worker: bool,
    /// The worker's server.
    #[arg(long, hide = true)]
    pg_url: Option<String>,
    /// The worker's schema.
    #[arg(long, hide = true)]
    pg_schema: Option<String>,
    /// The worker's job: `firings`, `reactions` or `steps`.
    #[arg(long, hide = true, default_value = "firings")]
    pg_job: String,
}

/// How much a commit waits for the disk: bounda-sqlite's `Synchronous`, for both sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `synchronous = FULL`, bounda's default.
    Full,
    /// `synchronous = NORMAL`.
    Normal,
}

impl Mode {
    /// The label in the table.
    pub fn label(self) -> &'static str {
        match self {
            Mode::Full => "FULL",
            Mode::Normal => "NORMAL",
        }
    }

    /// The pragma's value.
    pub fn pragma(self) -> &'static str {
        self.label()
    }

    /// bounda-sqlite's option.
    pub fn synchronous(self) -> bounda_sqlite::Synchronous {
        match self {
            Mode::Full => bounda_sqlite::Synchronous::Full,
            Mode::Normal => bounda_sqlite::Synchronous::Normal,
        }
    }
}

/// How much work each measurement does.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    /// Deadline firings (and instances started for them).
    deadlines: usize,
    /// Reactions.
    reactions: usize,
    /// Commands dispatched.
    commands: usize,
    /// The pending deadline counts the firing rate is measured beside.
    pending: [usize; 3],
    /// Firings timed beside each pending count.
    pending_fired: usize,
    /// Runs of those firings per pending count: the median is the row, the spread a note.
    pending_runs: usize,
    /// Units of each PostgreSQL row on the local socket (a fifth of them 1 ms away).
    postgres: usize,
    /// Events projected into a read model.
    projections: usize,
    /// The logs read models are rebuilt from, smaller first: peak memory after each.
    rebuilds: [usize; 2],
}

impl Sizes {
    const FULL: Sizes = Sizes {
        deadlines: 10_000,
        reactions: 10_000,
        commands: 5_000,
        pending: [10_000, 1_000_000, 10_000_000],
        pending_fired: 5_000,
        pending_runs: 3,
        postgres: 5_000,
        projections: 100_000,
        rebuilds: [100_000, 1_000_000],
    };

    const SMOKE: Sizes = Sizes {
        deadlines: 200,
        reactions: 200,
        commands: 100,
        pending: [1_000, 2_000, 5_000],
        pending_fired: 100,
        pending_runs: 3,
        postgres: 100,
        projections: 200,
        rebuilds: [1_000, 5_000],
    };
}

/// The floors of one kind of work: 1 and 100 units per transaction.
fn floors(files: &Files, name: &str, run: impl Fn(&Path, usize) -> f64) -> (f64, f64) {
    let one = run(files.fresh(&format!("{name}-floor1")).path(), 1);
    let hundred = run(files.fresh(&format!("{name}-floor100")).path(), 100);
    (one, hundred)
}

/// The note of a row beside its floor in a statement per table, 100 per commit.
fn per_table_note(what: &str, mode: &str, bounda: f64, floor: f64) -> String {
    format!(
        "{what} ({mode}): floor in a statement per table per commit of 100 {floor:.0}/s; \
         bounda / that floor {}",
        table::ratio(bounda, floor)
    )
}

/// A table row from bounda's measurement and the floors' rates.
fn row(what: &str, mode: &'static str, measured: Measured, (floor1, floor100): (f64, f64)) -> Row {
    let row = Row {
        what: what.to_owned(),
        mode,
        units: measured.units,
        bounda: measured.rate(),
        floor1,
        floor100,
        tx_per_unit: Some(measured.tx_per_unit()),
        rss_kib: memory::resident_kib(),
    };
    eprintln!(
        "  {what} ({mode}): {:.0}/s in {:.2?}, floors {floor1:.0}/s and {floor100:.0}/s, {:.2} tx/unit",
        row.bounda,
        measured.elapsed,
        measured.tx_per_unit()
    );
    row
}

/// The PostgreSQL rows: deadline firings, reactions and process steps by W = 1, 2, 4, 8 worker
/// processes, on the local socket and 1 ms away, each beside the floor at N = W connections
/// measured in the same run, and the issue's targets as ratios of those numbers.
async fn postgres_rows(
    units: usize,
    wants: &impl Fn(&str) -> bool,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) {
    use postgres::{Job, Route};
    /// One row's rate beside its floors (1 and 100 per commit), by job, route and workers.
    type Rate = ((Job, Route, usize), f64, (f64, f64));
    let mut rates: Vec<Rate> = Vec::new();
    for job in Job::ALL {
        for route in [Route::Local, Route::Distant] {
            // A millisecond per round trip: a fifth of the work measures the same rates in a
            // fifth of the time.
            let units = match route {
                Route::Local => units,
                Route::Distant => (units / 5).max(1),
            };
            for workers in [1, 2, 4, 8] {
                let what = format!(
                    "{}, {workers} worker process{}",
                    job.label(),
                    if workers == 1 { "" } else { "es" }
                );
                // `--only` matches the name with its route: "1 ms away" picks those rows.
                if !wants(&format!("{what} ({})", route.label())) {
                    continue;
                }
                let floors = (
                    postgres::floor(job, units, workers, 1, route, floor::Way::PerRow).await,
                    postgres::floor(job, units, workers, 100, route, floor::Way::PerRow).await,
                );
                let per_table = match workers {
                    1 => Some(
                        postgres::floor(job, units, workers, 100, route, floor::Way::PerTable)
                            .await,
                    ),
                    _ => None,
                };
                let measured = postgres::work(job, units, workers, route).await;
                if let Some(per_table) = per_table {
                    notes.push(per_table_note(
                        &what,
                        route.label(),
                        measured.rate(),
                        per_table,
                    ));
                }
                let mut row = row(&what, route.label(), measured, floors);
                row.tx_per_unit = None;
                row.rss_kib = None;
                rates.push(((job, route, workers), row.bounda, floors));
                rows.push(row);
            }
        }
    }
    for job in Job::ALL {
        let rate = |route, workers| {
            rates
                .iter()
                .find(|(key, ..)| *key == (job, route, workers))
                .map(|(_, rate, floors)| (*rate, *floors))
        };
        let mut targets = Vec::new();
        if let (Some((one, _)), Some((four, _)), Some((eight, _))) = (
            rate(Route::Distant, 1),
            rate(Route::Distant, 4),
            rate(Route::Distant, 8),
        ) {
            targets.push(format!(
                "1 ms away: 4 workers / 1 worker {} (target 3), 8 workers / 1 worker {} (target 5)",
                table::ratio(four, one),
                table::ratio(eight, one)
            ));
        }
        if let Some((one, (_, floor100))) = rate(Route::Distant, 1) {
            targets.push(format!(
                "1 ms away: 1 worker / one-connection floor at 100 per commit {} (target 0.6)",
                table::ratio(one, floor100)
            ));
        }
        let local: Vec<String> = [1, 2, 4]
            .into_iter()
            .filter_map(|w| rate(Route::Local, w).map(|(r, (_, f))| (w, r, f)))
            .map(|(w, r, f)| format!("W = {w}: {}", table::ratio(r, f)))
            .collect();
        if !local.is_empty() {
            targets.push(format!(
                "local socket, W workers / floor at N = W, 100 per commit (target 0.5): {}",
                local.join(", ")
            ));
        }
        for route in [Route::Local, Route::Distant] {
            let by_workers: Vec<f64> = [1, 2, 4, 8]
                .into_iter()
                .filter_map(|w| rate(route, w).map(|(r, _)| r))
                .collect();
            if by_workers.len() > 1 {
                let growing = by_workers.windows(2).all(|pair| pair[1] >= pair[0]);
                targets.push(format!(
                    "{}: more workers never do fewer: {}",
                    route.label(),
                    if growing { "yes" } else { "no" }
                ));
            }
        }
        notes.extend(
            targets
                .into_iter()
                .map(|target| format!("{}: {target}", job.label())),
        );
    }
    notes.push(format!(
        "PostgreSQL rows: a throwaway server on this machine's disk, flushing every commit \
         (or `BOUNDA_POSTGRES_URL`); \"1 ms away\": every connection through a proxy that \
         delays each byte by {} ms each way, as from another machine (a fifth of the units); \
         each worker a process of this benchmark running `App::run` with the defaults (batch \
         100, poll 100 ms), timed from the workers' start, process start and connection \
         included, until the last unit is stored, then checked (each instance did its unit \
         once, every event placed once in one order without holes, each stream in version \
         order); the floors: plain SQL from as many connections as workers, by the same \
         route: per firing one statement taking the first due row (`FOR UPDATE SKIP \
         LOCKED`) and moving it on, one appending the event; per reaction an inbox mark and \
         the command's event; per process step an inbox mark, the instance's first event and \
         its timeout's row",
        postgres::ROUND_TRIP.as_secs_f64() * 1000.0 / 2.0
    ));
}

/// Deadline firings beside each pending count (instances stored as an app stores them, see
/// `pending`), `pending_runs` runs each on one base file per count, reset between measurements: the median run is
/// the row, each run's rate and the spread a note, and the ratio of the largest count's median
/// to the smallest's, with the range the runs allow, the figure to hold.
async fn pending_rows(
    files: &Files,
    sizes: Sizes,
    wants: &impl Fn(&str) -> bool,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) {
    let fired = sizes.pending_fired;
    let name = |pending: usize| format!("deadline firings, {} pending", short(pending));
    let mut bases = Vec::new();
    for pending in sizes.pending {
        if !wants(&name(pending)) {
            continue;
        }
        let file = files.fresh(&format!("base-{}", short(pending)));
        let start = Instant::now();
        let base = pending::Base::write(file.path(), pending).await;
        let took = start.elapsed();
        let bytes = std::fs::metadata(base.path()).map_or(0, |m| m.len());
        eprintln!(
            "  {} pending instances stored in {took:.1?}: {:.0} MiB",
            short(pending),
            bytes as f64 / 1_048_576.0
        );
        notes.push(format!(
            "{} pending instances: a file of {:.0} MiB, written in {:.0} s",
            short(pending),
            bytes as f64 / 1_048_576.0,
            took.as_secs_f64()
        ));
        bases.push((pending, base, file));
    }
    for mode in [Mode::Full, Mode::Normal] {
        let mut by_pending = Vec::new();
        for (pending, base, _) in &bases {
            let what = name(*pending);
            let mut runs = Vec::new();
            for _ in 0..sizes.pending_runs {
                base.reset();
                runs.push(measure::deadline_firings(base.path(), mode, fired, 100).await);
            }
            runs.sort_by(|a, b| a.rate().total_cmp(&b.rate()));
            let rates: Vec<f64> = runs.iter().map(Measured::rate).collect();
            let median = runs[runs.len() / 2];
            let pending_floors = (
                {
                    base.reset();
                    floor::deadline_firings(
                        base.path(),
                        mode,
                        fired,
                        1,
                        floor::Way::PerRow,
                        floor::Checkpoints::Inline,
                    )
                },
                {
                    base.reset();
                    floor::deadline_firings(
                        base.path(),
                        mode,
                        fired,
                        100,
                        floor::Way::PerRow,
                        floor::Checkpoints::Inline,
                    )
                },
            );
            let row = row(&what, mode.label(), median, pending_floors);
            notes.push(format!(
                "{what} at {}: runs {} /s, spread {}",
                mode.label(),
                rates
                    .iter()
                    .map(|rate| format!("{rate:.0}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                spread(&rates)
            ));
            by_pending.push((*pending, rates, row.floor1, row.floor100));
            rows.push(row);
        }
        if let [first, .., last] = by_pending.as_slice() {
            let (low, high) = (short(first.0), short(last.0));
            let median = |rates: &[f64]| rates[rates.len() / 2];
            let (lowest, highest) = (
                last.1[0] / first.1[first.1.len() - 1],
                last.1[last.1.len() - 1] / first.1[0],
            );
            notes.push(format!(
                "rate({high} pending) / rate({low} pending) at {}: bounda {} (medians; the runs \
                 allow {} to {}), floor 1/tx {}, floor 100/tx {}",
                mode.label(),
                table::ratio(median(&last.1), median(&first.1)),
                table::ratio(lowest, 1.0),
                table::ratio(highest, 1.0),
                table::ratio(last.2, first.2),
                table::ratio(last.3, first.3),
            ));
        }
    }
}

/// How far sorted `rates` spread about their median, as `±x%`.
fn spread(rates: &[f64]) -> String {
    let median = rates[rates.len() / 2];
    let (low, high) = (rates[0], rates[rates.len() - 1]);
    let half = (high - low) / 2.0 / median * 100.0;
    format!("±{half:.1}% of the median")
}

/// A count as `10k`, `1M`.
fn short(count: usize) -> String {
    match count {
        n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{}M", n / 1_000_000),
        n if n >= 1_000 && n % 1_000 == 0 => format!("{}k", n / 1_000),
        n => n.to_string(),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = Args::parse();
    if let (true, Some(url), Some(schema)) = (args.pg_worker, &args.pg_url, &args.pg_schema) {
        let Some(job) = postgres::Job::parse(&args.pg_job) else {
            eprintln!(
                "--pg-job takes firings, reactions or steps, not `{}`",
                args.pg_job
            );
            std::process::exit(2);
        };
        postgres::worker(job, url, schema).await;
        return;
    }
    let sizes = if args.smoke {
        Sizes::SMOKE
    } else {
        Sizes::FULL
    };
    let started = Instant::now();
    let files = Files::new(args.dir.as_deref());
    eprintln!(
        "bounda-bench ({}), files in {}",
        if args.smoke { "smoke" } else { "full" },
        files.dir.path().display()
    );
    let wants = |what: &str| {
        args.only.as_deref().is_none_or(|only| match args.exact {
            true => only.split(';').any(|name| name == what),
            false => what.contains(only),
        })
    };
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    // The relays' broker: a local nats-server, started once if a relay row is wanted.
    let nats = match wants("relay") {
        true => match bounda_nats::testing::NatsServer::start() {
            Ok(server) => {
                notes.push(
                    "relay rows: a nats-server on this machine, started by the benchmark, a stream per \
                     measurement; bounda's relay (one runner, the defaults: batch 100) publishes what was \
                     stored before it is timed, each message acknowledged; the floors read the log a \
                     page of 1 or 100 events at a time, publish each with its id as `Nats-Msg-Id` and \
                     its CloudEvents headers, await the page's acknowledgements together, and move a \
                     checkpoint row in one transaction; on PostgreSQL, one connection to the \
                     benchmark's server on the local socket"
                        .to_owned(),
                );
                Some(server)
            }
            Err(error) => {
                eprintln!("  no relay rows: {error:#}");
                notes.push(format!(
                    "no relay rows: nats-server did not start: {error:#}"
                ));
                None
            }
        },
        false => None,
    };
    let mut streams = 0;
    let mut stream = || {
        streams += 1;
        format!("BENCH{streams}")
    };

    for mode in [Mode::Full, Mode::Normal] {
        let n = sizes.deadlines;
        // The floors of the deadline rows, measured once for all of them.
        let mut deadline_floors = None;
        let mut deadline_floors = || {
            *deadline_floors.get_or_insert_with(|| {
                floors(&files, "deadlines", |path, per_tx| {
                    floor::deadline_firings(
                        path,
                        mode,
                        n,
                        per_tx,
                        floor::Way::PerRow,
                        floor::Checkpoints::Inline,
                    )
                })
            })
        };
        if wants("deadline firings") {
            let firings =
                measure::deadline_firings(files.fresh("deadlines").path(), mode, n, 100).await;
            let per_table = floor::deadline_firings(
                files.fresh("deadlines-floor-per-table").path(),
                mode,
                n,
                100,
                floor::Way::PerTable,
                floor::Checkpoints::Inline,
            );
            notes.push(per_table_note(
                "deadline firings",
                mode.label(),
                firings.rate(),
                per_table,
            ));
            // At NORMAL bounda checkpoints its WAL on a thread of its own; the floors in the
            // table checkpoint inline, as SQLite does by default. This one shows the ratio
            // against a floor spared its checkpoints altogether.
            let deferred = floor::deadline_firings(
                files.fresh("deadlines-floor-deferred").path(),
                mode,
                n,
                100,
                floor::Way::PerRow,
                floor::Checkpoints::Deferred,
            );
            notes.push(format!(
                "deadline firings ({}): floor at 100 per commit with no checkpoint during its run \
                 {deferred:.0}/s; bounda / that floor {}",
                mode.label(),
                table::ratio(firings.rate(), deferred)
            ));
            rows.push(row(
                "deadline firings",
                mode.label(),
                firings,
                deadline_floors(),
            ));
        }
        if mode == Mode::Full && wants("deadline firings") {
            let calls =
                measure::store_calls_per_firing(files.fresh("deadlines-counted").path(), n).await;
            notes.push(format!(
                "store calls per deadline firing (batch 100, counted on a run of its own by a \
                 wrapper around the store): {}",
                calls_text(&calls)
            ));
        }
        if wants("deadline firings, batch 1") {
            let one_by_one =
                measure::deadline_firings(files.fresh("deadlines-batch1").path(), mode, n, 1).await;
            rows.push(row(
                "deadline firings, batch 1",
                mode.label(),
                one_by_one,
                deadline_floors(),
            ));
        }

        if wants("daily deadline firings") {
            // Plain and civil runs go in pairs, one right after the other, the first of each
            // pair alternating; the ratio is the median of the pairs' ratios, so both sides of
            // each ratio met the same minute of the same machine. Each row is its median run.
            const PAIRS: usize = 7;
            let (mut plain, mut civil, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
            for pair in 0..PAIRS {
                let (plain_file, civil_file) =
                    (files.fresh("daily-plain"), files.fresh("daily-civil"));
                let plain_run = measure::daily_firings::<domain::daily::Plain>;
                let civil_run = measure::daily_firings::<domain::daily::Civil>;
                let (p, c) = match pair % 2 {
                    0 => {
                        let p = plain_run(plain_file.path(), mode, n).await;
                        (p, civil_run(civil_file.path(), mode, n).await)
                    }
                    _ => {
                        let c = civil_run(civil_file.path(), mode, n).await;
                        (plain_run(plain_file.path(), mode, n).await, c)
                    }
                };
                ratios.push(c.rate() / p.rate());
                plain.push(p);
                civil.push(c);
            }
            ratios.sort_by(f64::total_cmp);
            let shown = ratios
                .iter()
                .map(|ratio| format!("{ratio:.3}"))
                .collect::<Vec<_>>()
                .join(", ");
            notes.push(format!(
                "daily deadline firings on the calendar / plain, each setting the next day's (a \
                 daily rule's next occurrence in Europe/Paris, kept with its zone and rule, beside \
                 24 hours added to the moment that came due), the median of {PAIRS} pairs run \
                 back to back ({shown}), at {}: {} (target 0.95 at least)",
                mode.label(),
                table::ratio(ratios[PAIRS / 2], 1.0)
            ));
            rows.push(row(
                "daily deadline firings, plain",
                mode.label(),
                measure::median_run(plain),
                deadline_floors(),
            ));
            rows.push(row(
                "daily deadline firings, on the calendar",
                mode.label(),
                measure::median_run(civil),
                deadline_floors(),
            ));
        }

        if let Some(server) = &nats {
            if wants("relay publishes") {
                let name = stream();
                let measured =
                    relay::publishes(files.fresh("relay").path(), mode, n, server, &name).await;
                let (one, hundred) = (
                    relay::floor(
                        files.fresh("relay-floor1").path(),
                        mode,
                        n,
                        1,
                        server,
                        &stream(),
                    )
                    .await,
                    relay::floor(
                        files.fresh("relay-floor100").path(),
                        mode,
                        n,
                        100,
                        server,
                        &stream(),
                    )
                    .await,
                );
                rows.push(row(
                    "relay publishes to JetStream",
                    mode.label(),
                    measured,
                    (one, hundred),
                ));
            }
            if wants("deadline firings, beside a relay") {
                let without =
                    measure::deadline_firings(files.fresh("unrelayed").path(), mode, n, 100).await;
                let beside = relay::beside_firings(
                    files.fresh("relayed").path(),
                    mode,
                    n,
                    server,
                    &stream(),
                )
                .await;
                notes.push(format!(
                    "deadline firings beside a relay / without one, measured one after the other \
                     at {}: {} (target 0.9 at least)",
                    mode.label(),
                    table::ratio(beside.rate(), without.rate())
                ));
                rows.push(row(
                    "deadline firings, beside a relay",
                    mode.label(),
                    beside,
                    deadline_floors(),
                ));
            }
        }

        for (what, rate) in [
            ("deadline firings, under a limit not reached", "1000000/s"),
            ("deadline firings, paced at 1,000/s", "1000/s"),
        ] {
            if !wants(what) {
                continue;
            }
            let paced = measure::paced_firings(files.fresh("paced").path(), mode, n, rate).await;
            let measured_floors = deadline_floors();
            rows.push(row(what, mode.label(), paced, measured_floors));
        }

        let n = sizes.reactions;
        let mut reaction_floors = None;
        for (what, beside_paused) in [
            ("reactions", false),
            ("reactions, beside a paused policy", true),
        ] {
            if !wants(what) {
                continue;
            }
            let reactions =
                measure::reactions(files.fresh("reactions").path(), mode, n, beside_paused).await;
            if !beside_paused {
                let per_table = floor::reactions(
                    files.fresh("reactions-floor-per-table").path(),
                    mode,
                    n,
                    100,
                    floor::Way::PerTable,
                );
                notes.push(per_table_note(
                    what,
                    mode.label(),
                    reactions.rate(),
                    per_table,
                ));
            }
            let measured_floors = *reaction_floors.get_or_insert_with(|| {
                floors(&files, "reactions", |path, per_tx| {
                    floor::reactions(path, mode, n, per_tx, floor::Way::PerRow)
                })
            });
            rows.push(row(what, mode.label(), reactions, measured_floors));
        }

        if mode == Mode::Full && wants("reactions") {
            let calls =
                measure::store_calls_per_reaction(files.fresh("reactions-counted").path(), n).await;
            notes.push(format!(
                "store calls per reaction (counted on a run of its own by a wrapper around the \
                 store): {}",
                calls_text(&calls)
            ));
        }

        let n = sizes.projections;
        if wants("projections") {
            let projections =
                measure::projections(files.fresh("projections").path(), mode, n).await;
            let projection_floors = floors(&files, "projections", |path, per_tx| {
                floor::projections(path, mode, n, per_tx)
            });
            rows.push(row(
                "projections",
                mode.label(),
                projections,
                projection_floors,
            ));
        }

        let n = sizes.commands;
        if wants("commands") {
            let commands = measure::commands(files.fresh("commands").path(), mode, n).await;
            let command_floors = floors(&files, "commands", |path, per_tx| {
                floor::commands(path, mode, n, per_tx)
            });
            rows.push(row("commands", mode.label(), commands, command_floors));
        }
    }

    pending_rows(&files, sizes, &wants, &mut rows, &mut notes).await;

    if wants("rebuild") {
        let mut rebuilt = Vec::new();
        for events in sizes.rebuilds {
            let (done, peak) =
                measure::rebuild(files.fresh("rebuild").path(), Mode::Full, events).await;
            eprintln!(
                "  rebuild of {}: {:.0} events/s in {:.2?}, peak {:?} KiB",
                short(events),
                done.rate(),
                done.elapsed,
                peak
            );
            rebuilt.push(format!(
                "{} events in {:.1} s ({:.0} events/s, {:.3} write transactions per event), \
                 peak resident set during it {}",
                short(events),
                done.elapsed.as_secs_f64(),
                done.rate(),
                done.tx_per_unit(),
                peak.map_or_else(|| "unknown".to_owned(), table::mebibytes)
            ));
        }
        notes.push(format!(
            "a read model rebuilt from the log (`rebuild`, FULL, slices of 1,000 events into a \
             table beside the live one, then the swap): {}",
            rebuilt.join("; ")
        ));
    }

    if let (true, Some(server)) = (args.postgres && wants("relay publishes"), &nats) {
        let units = args.pg_units.unwrap_or(sizes.postgres);
        let measured = relay::publishes_on_postgres(units, server, &stream()).await;
        let floors = (
            relay::floor_on_postgres(units, 1, server, &stream()).await,
            relay::floor_on_postgres(units, 100, server, &stream()).await,
        );
        let mut row = row(
            "relay publishes to JetStream",
            "PostgreSQL",
            measured,
            floors,
        );
        row.tx_per_unit = None;
        rows.push(row);
    }

    if args.postgres {
        postgres_rows(
            args.pg_units.unwrap_or(sizes.postgres),
            &wants,
            &mut rows,
            &mut notes,
        )
        .await;
    }

    if wants("latency") {
        let (units, spacing) = if args.smoke { (5, 20) } else { (40, 37) };
        let late = measure::lateness(
            files.fresh("latency").path(),
            Mode::Full,
            units,
            std::time::Duration::from_millis(spacing),
        )
        .await;
        eprintln!("  latency: {late:?}");
        notes.push(format!(
            "deadline lateness under `App::run` on the real clock, an idle worker, poll interval \
             {} ms (FULL): median {} ms, max {} ms over {} deadlines",
            late.poll.as_millis(),
            late.median.as_millis(),
            late.max.as_millis(),
            late.units
        ));
    }

    if wants("page") {
        let due = if args.smoke { 20 } else { 100 };
        let mut drawn = Vec::new();
        for pending in [sizes.pending[0], sizes.pending[2]] {
            let median = measure::page_overview(files.fresh("page").path(), pending, due, 5).await;
            eprintln!("  page overview, {} pending: {median:.2?}", short(pending));
            drawn.push(format!(
                "{:.2} ms with {} pending",
                median.as_secs_f64() * 1e3,
                short(pending)
            ));
        }
        notes.push(format!(
            "the operator page's overview, {due} deadlines in its 48-hour window, median of 5 \
             views through its router: {}",
            drawn.join(", ")
        ));
    }

    if wants("instances") {
        let (small, large) = if args.smoke {
            (1_000, 10_000)
        } else {
            (1_000, 1_000_000)
        };
        let path = files.fresh("instances");
        let options = bounda_sqlite::Options {
            synchronous: Mode::Normal.synchronous(),
            ..bounda_sqlite::Options::default()
        };
        let sqlite = bounda_sqlite::SqliteStore::open_with(path.path(), options)
            .expect("cannot open the instances' file");
        notes.push(instances_note("SQLite (NORMAL)", &sqlite, small, large).await);
        drop(sqlite);
        let filled = instances::migrate_again(path.path());
        eprintln!(
            "  the migration's fill of {}: {filled:.1?}",
            short(large as usize)
        );
        notes.push(format!(
            "the migration that makes the instances index, on a file of {} process instances \
             written before it (the table dropped, the schema version set back): {:.1} s",
            short(large as usize),
            filled.as_secs_f64()
        ));
        if args.postgres {
            let store = postgres::fresh_store("instances").await;
            notes.push(instances_note("PostgreSQL", &store, small, large).await);
        }
    }

    if wants("check") {
        let (instances, events) = if args.smoke {
            (1_000, 10_000)
        } else {
            (100_000, 1_000_000)
        };
        let measure::Preflighted {
            checked,
            survey,
            floor,
            before,
            copy,
            copy_floor,
            copy_rows,
        } = measure::preflight(files.fresh("check").path(), instances, events).await;
        eprintln!(
            "  check: {:.2?}, survey {:.2?}, copy {:.2?}",
            checked.elapsed, survey, copy
        );
        notes.push(format!(
            "the check before a deploy (`App::preflight`, the `check` command) on {} events and {} \
             process instances: {:.1} s, {:.1}x its floor ({:.1} s: every event and every \
             instance's snapshot read through the store, nothing decoded); the survey a runner \
             makes when it starts (every instance's entry against its state): {:.1} s; peak \
             memory {} before the check, {} after it",
            short(events),
            short(instances),
            checked.elapsed.as_secs_f64(),
            checked.elapsed.as_secs_f64() / floor.as_secs_f64(),
            floor.as_secs_f64(),
            survey.as_secs_f64(),
            before.map_or_else(|| "unknown".to_owned(), table::mebibytes),
            memory::peak_kib().map_or_else(|| "unknown".to_owned(), table::mebibytes)
        ));
        notes.push(format!(
            "a copy of that store into a fresh SQLite file (`store::copy`, the `copy` command), \
             through the store's interface a page at a time: {:.1} s; {:.1}x its floor ({:.1} s: \
             SQLite's `VACUUM INTO` of the same file, its pages written once and no record read \
             out), {:.1}x the same rows copied by SQL in one transaction ({:.1} s: every row and \
             index entry written again, nothing read out of SQLite)",
            copy.as_secs_f64(),
            copy.as_secs_f64() / copy_floor.as_secs_f64(),
            copy_floor.as_secs_f64(),
            copy.as_secs_f64() / copy_rows.as_secs_f64(),
            copy_rows.as_secs_f64()
        ));
    }

    notes.push(format!(
        "peak memory (VmHWM, the whole process: bounda, floors and benchmark): {}",
        memory::peak_kib().map_or_else(|| "unknown".to_owned(), table::mebibytes)
    ));
    notes.push(
        "the batch-1 rows reuse the floors measured for the default batch (100): the floor \
         does not depend on bounda's batch size"
            .to_owned(),
    );
    notes.push(format!(
        "sizes: {} deadlines, {} reactions, {} commands; {} firings beside each pending count, {} runs each; \
         one fresh file per measurement, its WAL checkpointed after setup; a floor firing \
         moves its row to the timeout, as bounda re-arms it; write transactions are \
         counted by SQLite's commit hook on bounda's connection, claims included",
        sizes.deadlines, sizes.reactions, sizes.commands, sizes.pending_fired, sizes.pending_runs
    ));
    notes.push(format!(
        "whole run: {:.1} s{}",
        started.elapsed().as_secs_f64(),
        if args.smoke { " (smoke sizes)" } else { "" }
    ));

    let title = if args.smoke {
        "bounda benchmark (smoke)"
    } else {
        "bounda benchmark"
    };
    let report = table::render(title, &rows, &notes);
    print!("{report}");
    if let Some(parent) = args.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .unwrap_or_else(|error| panic!("cannot create {}: {error}", parent.display()));
    }
    std::fs::write(&args.out, &report)
        .unwrap_or_else(|error| panic!("cannot write {}: {error}", args.out.display()));
    eprintln!("written to {}", args.out.display());
}

/// The listings and counts of the instances index on `store` beside `small`, then `large`,
/// instances, as a note: each one's median at both sizes and their ratio.
async fn instances_note(
    name: &str,
    store: &dyn bounda::store::Store,
    small: u64,
    large: u64,
) -> String {
    instances::fill(store, 0, small).await;
    let before = instances::time(store).await;
    let filling = Instant::now();
    instances::fill(store, small, large).await;
    let filled = filling.elapsed();
    let after = instances::time(store).await;
    let ms = |took: std::time::Duration| format!("{:.2} ms", took.as_secs_f64() * 1e3);
    let lines: Vec<String> = before
        .iter()
        .zip(&after)
        .map(|((label, small_took, _), (_, large_took, answered))| {
            eprintln!(
                "  instances on {name}, {label}: {} beside {}, {} beside {} ({answered})",
                ms(*small_took),
                short(small as usize),
                ms(*large_took),
                short(large as usize)
            );
            format!(
                "{label} {} / {} ({answered})",
                ms(*small_took),
                ms(*large_took)
            )
        })
        .collect();
    format!(
        "instances on {name}, median of 5, beside {} / {} instances (rows or count answered at \
         the larger): {}; {} instances written as steps write them in {:.1} s",
        short(small as usize),
        short(large as usize),
        lines.join("; "),
        short((large - small) as usize),
        filled.as_secs_f64()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_short() {
        assert_eq!(short(10_000), "10k");
        assert_eq!(short(1_000_000), "1M");
        assert_eq!(short(2_500), "2500");
    }

    #[test]
    fn arguments_parse() {
        let args = Args::try_parse_from(["bench", "--smoke", "--only", "1M pending"])
            .expect("valid arguments");
        assert!(args.smoke);
        assert_eq!(args.only.as_deref(), Some("1M pending"));
        assert_eq!(args.out, PathBuf::from("target/bounda-bench.md"));
    }
}
