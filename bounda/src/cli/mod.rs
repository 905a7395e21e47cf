//! The operator's command-line interface, for an app to embed in its own binary so that a retry
//! runs the app's own handlers.
//!
//! ```no_run
//! use clap::{Parser, Subcommand};
//!
//! #[derive(Parser)]
//! struct Cli {
//!     #[command(subcommand)]
//!     command: Command,
//! }
//!
//! #[derive(Subcommand)]
//! enum Command {
//!     /// The app's own job.
//!     Run,
//!     #[command(flatten)]
//!     Operator(bounda::cli::Operator),
//! }
//! # async fn example(app: bounda::App) -> std::process::ExitCode {
//! match Cli::parse().command {
//!     Command::Run => std::process::ExitCode::SUCCESS,
//!     Command::Operator(command) => bounda::cli::run(&app, command).await,
//! }
//! # }
//! ```

mod by;
mod deploy;
mod escape;

use deploy::io;
mod instances;
mod letters;
mod logging;
mod pauses;
mod rebuild;
#[cfg(feature = "page")]
mod serve;
mod service;

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};

use crate::App;
use crate::store::{DeadLetter, LetterFilter, LetterKind, LetterStatus};
use escape::Plain;

pub use deploy::{CopyArgs, PreviewArgs, copy, preview};
pub use instances::InstancesArgs;
pub use letters::{Asking, RetryAllArgs, RetryArgs};
pub use logging::Logging;
pub use pauses::{PauseArgs, Target};
#[cfg(feature = "page")]
pub use serve::ServeArgs;
pub use service::{Service, ServiceArgs, ServiceCommand, WorkArgs};

/// The operator's commands.
#[derive(Debug, Clone, Subcommand)]
pub enum Operator {
    /// How far behind each subscriber is, and what holds it.
    Lag,
    /// Process instances, the latest started first (or the soonest due): by process, status,
    /// what is overdue or due soon, correlation or id prefix, a page at a time; or how many.
    Instances(InstancesArgs),
    /// Pauses a process, one instance, a policy or a subscriber for every runner on the store:
    /// its events and deadlines wait until `resume`. Kept with who paused it (`--by`), when, and
    /// why (`--reason`); `lag` shows it.
    Pause(PauseArgs),
    /// Resumes what `pause` paused: what waited runs in order, deadlines that came due late.
    #[command(subcommand)]
    Resume(Target),
    /// Pending process deadlines, soonest first: when (and how far off), process, instance,
    /// field, and `waiting` for one due but held for its instance's earlier events; then each
    /// instance left out, and why.
    Deadlines(DeadlineArgs),
    /// Runs the app gave up on.
    #[command(subcommand)]
    DeadLetters(Letters),
    /// The story of one process instance: each step with what caused it, the state it changed
    /// and the deadlines it set, moved or cleared; then what is pending, parked and lettered.
    Explain(ExplainArgs),
    /// Reads every stored event and every open process instance through this build, and
    /// matches every scheduler entry with what runs it: what a deploy of this build would meet.
    /// Changes nothing. Exits 3 when anything would fail.
    Check(CheckArgs),
    /// Re-arms the scheduler entries that disagree with their instances' stored states, from
    /// those states (what a worker does when it starts): of every process, one process, or one
    /// instance. Prints each entry it changed.
    Rearm(RearmArgs),
    /// Rebuilds a read model from the whole log into a new table beside the live one, which
    /// keeps serving, then swaps it in. Resumes a rebuild of the same code that stopped; shows
    /// a progress bar on a terminal.
    Rebuild(RebuildArgs),
}

impl Operator {
    /// Whether the command only reads the store: it then opens it read-only, as it is, so it
    /// never changes the file it is pointed at (a backup, a mistyped path).
    pub fn only_reads(&self) -> bool {
        match self {
            Operator::Lag
            | Operator::Instances(_)
            | Operator::Deadlines(_)
            | Operator::Explain(_)
            | Operator::Check(_) => true,
            Operator::Rearm(args) => args.dry_run,
            Operator::DeadLetters(letters) => match letters {
                Letters::List(_) | Letters::Show { .. } => true,
                Letters::RetryAll(args) => args.bulk.dry_run,
                Letters::DiscardAll(args) => args.dry_run,
                Letters::Retry(_) | Letters::Discard { .. } => false,
            },
            Operator::Pause(_) | Operator::Resume(_) | Operator::Rebuild(_) => false,
        }
    }
}

/// What `rebuild` rebuilds.
#[derive(Debug, Clone, Args)]
pub struct RebuildArgs {
    /// The read model, by name (`order-summary`).
    pub read_model: String,
    /// Start from the log's beginning, abandoning a rebuild under way instead of resuming it:
    /// after a change the rebuild's fingerprint does not see (a function a projection calls).
    #[arg(long)]
    pub afresh: bool,
}

/// How `check` reports.
#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// As one JSON document.
    #[arg(long)]
    pub json: bool,
}

/// What `rearm` re-arms.
#[derive(Debug, Clone, Args)]
pub struct RearmArgs {
    /// Only this process, by name.
    pub process: Option<String>,
    /// Only this instance of it.
    pub id: Option<String>,
    /// Only list the entries that disagree; change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// What `explain` explains.
#[derive(Debug, Clone, Args)]
pub struct ExplainArgs {
    /// The process, by name (`OrderLifecycle`).
    pub process: String,
    /// The instance's id.
    pub id: String,
    /// As one JSON document.
    #[arg(long)]
    pub json: bool,
}

/// `dead-letters` subcommands: list, show, retry or discard the runs given up on.
#[derive(Debug, Clone, Subcommand)]
pub enum Letters {
    /// Lists letters, oldest first.
    List(ListArgs),
    /// Shows one letter whole.
    Show {
        /// The letter.
        id: String,
    },
    /// Asks the workers to run the letter's work again, as production runs it, and waits for
    /// what it did; exits 2 if it failed, 3 if no worker ran it in the time waited (the request
    /// stays: a worker runs it when one runs).
    Retry(RetryArgs),
    /// Gives the letter up.
    Discard {
        /// The letter.
        id: String,
    },
    /// Asks the workers to retry every open letter the filters match, oldest first, in paced
    /// batches, printing each outcome; exits 2 if one did not go through, 3 if a batch was not
    /// run in the time waited (the rest are left). Interrupted, run it again: what it retried
    /// is no longer open.
    RetryAll(RetryAllArgs),
    /// Discards every open letter the filters match, in paced batches; exits 2 if one did not
    /// go through.
    DiscardAll(BulkArgs),
}

/// Which open letters `retry-all` and `discard-all` take, and how fast.
#[derive(Debug, Clone, Args)]
pub struct BulkArgs {
    /// Only this kind.
    #[arg(long, value_enum)]
    pub kind: Option<Kind>,
    /// Only this handler.
    #[arg(long)]
    pub handler: Option<String>,
    /// Only letters whose error message contains this text.
    #[arg(long)]
    pub error: Option<String>,
    /// Only letters that last failed at or after this moment (`2026-12-01T00:00:00Z`).
    #[arg(long)]
    pub failed_from: Option<crate::Instant>,
    /// Only letters that last failed before this moment.
    #[arg(long)]
    pub failed_until: Option<crate::Instant>,
    /// At most this many letters.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Letters per batch.
    #[arg(long, default_value_t = 50)]
    pub batch: usize,
    /// The pause between batches (`1s`, `500ms`).
    #[arg(long, default_value = "1s")]
    pub pause: crate::Duration,
    /// Only count the letters that match.
    #[arg(long)]
    pub dry_run: bool,
}

impl BulkArgs {
    /// The filter the flags say.
    fn filter(&self) -> LetterFilter {
        LetterFilter {
            kind: self.kind.map(Kind::letter_kind),
            handler: self.handler.clone(),
            error_contains: self.error.clone(),
            failed_from: self.failed_from,
            failed_until: self.failed_until,
            limit: self.limit,
            ..LetterFilter::default()
        }
    }
}

/// Filters of `dead-letters list`.
#[derive(Debug, Clone, Args)]
pub struct ListArgs {
    /// Only this kind.
    #[arg(long, value_enum)]
    pub kind: Option<Kind>,
    /// Only this handler.
    #[arg(long)]
    pub handler: Option<String>,
    /// Only this status.
    #[arg(long, value_enum)]
    pub status: Option<Status>,
    /// At most this many.
    #[arg(long)]
    pub limit: Option<usize>,
    /// As JSON lines.
    #[arg(long)]
    pub json: bool,
}

/// Filters of `deadlines`.
#[derive(Debug, Clone, Default, Args)]
pub struct DeadlineArgs {
    /// Only this process.
    #[arg(long)]
    pub process: Option<String>,
    /// Only this instance.
    #[arg(long)]
    pub instance: Option<String>,
    /// As JSON lines.
    #[arg(long)]
    pub json: bool,
}

/// A letter kind on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
#[allow(missing_docs)]
pub enum Kind {
    Policy,
    Process,
    Scheduled,
    Relay,
    Ingress,
}

impl Kind {
    fn letter_kind(self) -> LetterKind {
        match self {
            Kind::Policy => LetterKind::Policy,
            Kind::Process => LetterKind::Process,
            Kind::Scheduled => LetterKind::Scheduled,
            Kind::Relay => LetterKind::Relay,
            Kind::Ingress => LetterKind::Ingress,
        }
    }
}

/// A letter status on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
#[allow(missing_docs)]
pub enum Status {
    Failed,
    Retried,
    Discarded,
}

/// Runs `command` on `app`, printing to standard output; errors go to standard error. Exit code
/// 2 when a retry fails, 1 for any other error. A reader that closes the pipe early (`| head`)
/// ends the command quietly, as `ls` ends.
pub async fn run(app: &App, command: Operator) -> ExitCode {
    let mut out = Piped::stdout();
    let result = execute(app, command, &mut out).await;
    out.exit(result)
}

/// Standard output that notes when its reader has closed the pipe.
struct Piped<W> {
    inner: W,
    closed: bool,
}

impl Piped<std::io::StdoutLock<'static>> {
    /// Standard output.
    fn stdout() -> Self {
        Piped {
            inner: std::io::stdout().lock(),
            closed: false,
        }
    }
}

impl<W: Write> Piped<W> {
    /// How a command that wrote here ends: its code, or 1 with its error on standard error.
    fn exit(&self, result: Result<ExitCode, crate::Error>) -> ExitCode {
        match result {
            Ok(code) => code,
            // The reader took what it wanted and went: nothing is wrong.
            Err(_) if self.closed => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: {}", Plain(crate::error::chain(&error)));
                ExitCode::from(1)
            }
        }
    }

    fn note<T>(&mut self, result: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(error) = &result {
            self.closed |= error.kind() == std::io::ErrorKind::BrokenPipe;
        }
        result
    }
}

impl<W: Write> Write for Piped<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let written = self.inner.write(bytes);
        self.note(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let flushed = self.inner.flush();
        self.note(flushed)
    }
}

/// [`run`], writing to `out`.
pub async fn execute(
    app: &App,
    command: Operator,
    out: &mut impl Write,
) -> Result<ExitCode, crate::Error> {
    match command {
        Operator::Rebuild(args) => rebuild::run(app, &args.read_model, args.afresh, out).await?,
        Operator::Instances(args) => instances::run(app, args, out).await?,
        Operator::Pause(args) => pauses::pause(app, args, out).await?,
        Operator::Resume(target) => pauses::resume(app, target, out).await?,
        Operator::Lag => {
            let lag = app.lag().await?;
            // Names in one column, however long a read model's.
            let width = lag
                .subscribers
                .iter()
                .chain(&lag.stale)
                .map(|s| s.subscriber.len())
                .max()
                .unwrap_or(0)
                .max(12);
            for s in &lag.subscribers {
                writeln!(
                    out,
                    "{:<width$} position {:>8}  lag {:>6}",
                    Plain(&s.subscriber),
                    s.position,
                    s.lag
                )
                .map_err(io)?;
                if let Some(failing) = &s.failing {
                    let on = failing_on(failing);
                    writeln!(out, "  held by {} {on}", failing.handler).map_err(io)?;
                }
                for bookmark in &s.passed {
                    writeln!(
                        out,
                        "  passed {} while held; they run once the hold is over",
                        Plain(bookmark)
                    )
                    .map_err(io)?;
                }
            }
            let now = app.clock().now();
            // `, the oldest stored 5m ago` when something waits.
            let oldest = |at: Option<crate::Instant>, what: &str| {
                at.map(|at| format!(", the oldest {what} {}", ago(at, now)))
                    .unwrap_or_default()
            };
            for relay in &lag.relays {
                let waited = oldest(relay.oldest, "stored");
                writeln!(
                    out,
                    "relay {} to {}: {} behind{waited}",
                    Plain(&relay.relay),
                    Plain(&relay.sink),
                    relay.behind
                )
                .map_err(io)?;
                if let Some(failing) = &relay.failing {
                    writeln!(out, "  failing {}", failing_on(failing)).map_err(io)?;
                }
            }
            for source in &lag.ingress {
                match &source.behind {
                    Ok(behind) => {
                        let waited = oldest(behind.oldest, "sent");
                        writeln!(
                            out,
                            "ingress {}: {} waiting{waited}",
                            Plain(&source.source),
                            behind.messages
                        )
                    }
                    Err(error) => writeln!(
                        out,
                        "ingress {}: cannot tell what waits: {}",
                        Plain(&source.source),
                        Plain(error)
                    ),
                }
                .map_err(io)?;
            }
            for s in &lag.stale {
                writeln!(
                    out,
                    "{:<width$} position {:>8}  lag {:>6}  stale: this app does not run it",
                    Plain(&s.subscriber),
                    s.position,
                    s.lag
                )
                .map_err(io)?;
            }
            writeln!(
                out,
                "max lag {}, {} deadlines waiting, {} held by failed instances, {} entries disagree with their state",
                lag.max_lag, lag.waiting_deadlines, lag.held_deadlines, lag.drifted_entries
            )
            .map_err(io)?;
            if lag.unclaimable_entries > 0 {
                writeln!(
                    out,
                    "{} scheduler entries whose due moment does not read: no runner claims them; `check` names them",
                    lag.unclaimable_entries
                )
                .map_err(io)?;
            }
            for pause in &lag.paused {
                writeln!(out, "paused: {}", Plain(pause)).map_err(io)?;
            }
            for limited in &lag.limited {
                writeln!(out, "limited: {}", Plain(limited)).map_err(io)?;
            }
        }
        Operator::Deadlines(args) => {
            if let Some(process) = &args.process
                && !app.processes().any(|p| p.name() == process)
            {
                let known: Vec<&str> = app.processes().map(|p| p.name()).collect();
                return Err(crate::Error::NotFound {
                    what: format!(
                        "process `{process}` in this app (its processes: {})",
                        known.join(", ")
                    ),
                });
            }
            let now = app.clock().now();
            let (pending, left_out) = app.pending_and_left_out().await?;
            let wanted = |process: &str, instance: &str| {
                args.process.as_deref().is_none_or(|p| p == process)
                    && args.instance.as_deref().is_none_or(|i| i == instance)
            };
            let pending: Vec<_> = pending
                .into_iter()
                .filter(|d| wanted(d.process, &d.instance))
                .collect();
            let left_out: Vec<_> = left_out
                .into_iter()
                .filter(|s| wanted(&s.process, &s.instance))
                .collect();
            for d in &pending {
                if args.json {
                    let line = serde_json::json!({
                        "process": d.process,
                        "instance": d.instance,
                        "field": d.field,
                        "at": d.at,
                        "local": d.local,
                        "waiting": d.waiting,
                        "heldBy": d.held_by,
                        "drift": d.drift,
                        "paused": d.paused,
                    });
                    writeln!(out, "{line}").map_err(io)?;
                } else {
                    let waiting = match (&d.held_by, d.paused, d.waiting) {
                        (Some(letter), _, _) => {
                            format!("  held: its instance failed, letter {}", Plain(letter))
                        }
                        (None, true, _) => "  paused".to_owned(),
                        (None, false, true) => "  waiting".to_owned(),
                        (None, false, false) => String::new(),
                    };
                    let drift = match &d.drift {
                        Some(drift) => format!("  entry disagrees: {}", Plain(drift)),
                        None => String::new(),
                    };
                    let local = match &d.local {
                        Some(local) => format!("  {local}"),
                        None => String::new(),
                    };
                    writeln!(
                        out,
                        "{}  {:<14}  {}:{}  {}{local}{waiting}{drift}",
                        d.at,
                        relative(d.at, now),
                        d.process,
                        Plain(&d.instance),
                        d.field
                    )
                    .map_err(io)?;
                }
            }
            for state in &left_out {
                let problem = state.problem.to_string();
                if args.json {
                    let line = serde_json::json!({
                        "process": state.process,
                        "instance": state.instance,
                        "leftOut": problem,
                    });
                    writeln!(out, "{line}").map_err(io)?;
                } else {
                    writeln!(
                        out,
                        "left out {}:{}: {}",
                        Plain(&state.process),
                        Plain(&state.instance),
                        Plain(&problem)
                    )
                    .map_err(io)?;
                }
            }
            if !args.json {
                let waiting = pending.iter().filter(|d| d.waiting).count();
                let held = pending.iter().filter(|d| d.held_by.is_some()).count();
                let drifted = pending.iter().filter(|d| d.drift.is_some()).count();
                let drifted = match drifted {
                    0 => String::new(),
                    n => format!(", {n} behind an entry that disagrees (`rearm` re-arms it)"),
                };
                let left = match left_out.len() {
                    0 => String::new(),
                    n => format!(", {n} instance(s) left out"),
                };
                writeln!(
                    out,
                    "{} pending, {waiting} waiting, {held} held{drifted}{left}",
                    pending.len()
                )
                .map_err(io)?;
            }
        }
        Operator::DeadLetters(Letters::List(args)) => {
            let filter = LetterFilter {
                kind: args.kind.map(Kind::letter_kind),
                handler: args.handler,
                status: args.status.map(|status| match status {
                    Status::Failed => LetterStatus::Failed,
                    Status::Retried => LetterStatus::Retried,
                    Status::Discarded => LetterStatus::Discarded,
                }),
                limit: args.limit,
                ..LetterFilter::default()
            };
            let letters = app.dead_letters().list(&filter).await?;
            if letters.is_empty() && !args.json {
                writeln!(out, "no dead letters match").map_err(io)?;
            }
            for letter in letters {
                let parked = app.dead_letters().parked(&letter).await?;
                if args.json {
                    writeln!(out, "{}", letter_json(&letter, parked)).map_err(io)?;
                } else {
                    writeln!(
                        out,
                        "{}  {} {:?} {}  {} on {}  {}  ({} attempts)",
                        Plain(&letter.id),
                        letter.status.as_str(),
                        letter.kind,
                        Plain(&letter.handler),
                        Plain(&letter.error_type),
                        Plain(letter.event_type.as_deref().unwrap_or("-")),
                        Plain(&letter.error_message),
                        letter.attempts
                    )
                    .map_err(io)?;
                    if parked > 0 {
                        writeln!(out, "  {parked} events are parked behind it").map_err(io)?;
                    }
                }
            }
        }
        Operator::DeadLetters(Letters::Show { id }) => match app.dead_letters().get(&id).await? {
            Some(letter) => {
                let parked = app.dead_letters().parked(&letter).await?;
                let mut shown = letter_json(&letter, parked);
                let retries = app.dead_letters().requests(&id).await?;
                shown["retries"] = serde_json::to_value(retries).unwrap_or_default();
                writeln!(out, "{shown:#}").map_err(io)?;
            }
            None => {
                return Err(crate::Error::NotFound {
                    what: format!("dead letter `{id}`"),
                });
            }
        },
        Operator::DeadLetters(Letters::Retry(args)) => return letters::retry(app, args, out).await,
        Operator::DeadLetters(Letters::Discard { id }) => {
            app.dead_letters().discard(&id).await?;
            writeln!(out, "discarded {}", Plain(&id)).map_err(io)?;
        }
        Operator::DeadLetters(
            Letters::RetryAll(RetryAllArgs { bulk: args, .. }) | Letters::DiscardAll(args),
        ) if args.dry_run => {
            let count = app.dead_letters().count_open(&args.filter()).await?;
            let count = args.limit.map_or(count, |limit| count.min(limit as u64));
            let letters = if count == 1 {
                "letter matches"
            } else {
                "letters match"
            };
            writeln!(out, "{count} open {letters}").map_err(io)?;
        }
        Operator::DeadLetters(Letters::RetryAll(args)) => {
            return letters::retry_all(app, args, out).await;
        }
        Operator::DeadLetters(Letters::DiscardAll(args)) => {
            return letters::discard_all(app, &args, out).await;
        }
        Operator::Explain(args) => {
            let Some(story) = app.explain_named(&args.process, &args.id).await? else {
                return Err(crate::Error::NotFound {
                    what: format!("instance `{}` of process `{}`", args.id, args.process),
                });
            };
            if args.json {
                let json = serde_json::to_string_pretty(&story).map_err(|e| {
                    crate::Error::Configuration {
                        message: format!("cannot write JSON: {e}"),
                    }
                })?;
                writeln!(out, "{json}").map_err(io)?;
            } else {
                write_story(&story, app.clock().now(), out).map_err(io)?;
            }
        }
        Operator::Check(args) => {
            let report = app.preflight().await?;
            if args.json {
                let json = serde_json::to_string_pretty(&report).map_err(|e| {
                    crate::Error::Configuration {
                        message: format!("cannot write JSON: {e}"),
                    }
                })?;
                writeln!(out, "{json}").map_err(io)?;
            } else {
                write_preflight(&report, out).map_err(io)?;
            }
            if !report.passes() {
                return Ok(ExitCode::from(3));
            }
        }
        Operator::Rearm(args) => {
            let scope = match (&args.process, &args.id) {
                (None, _) => crate::Rearm::All,
                (Some(process), None) => crate::Rearm::Process(process),
                (Some(process), Some(id)) => crate::Rearm::Instance(process, id),
            };
            let drifts = match args.dry_run {
                true => app.drifted(scope).await?,
                false => app.rearm(scope).await?,
            };
            for drift in &drifts {
                writeln!(
                    out,
                    "{}:{}  {}",
                    drift.process,
                    Plain(&drift.instance),
                    Plain(drift)
                )
                .map_err(io)?;
            }
            let summary = match args.dry_run {
                true => format!("{} entries disagree with their state", drifts.len()),
                false => format!("re-armed {} entries from their state", drifts.len()),
            };
            writeln!(out, "{summary}").map_err(io)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What `check` found, for a person: each kind of problem under its heading, then the verdict.
fn write_preflight(report: &crate::Preflight, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        out,
        "read {} events and {} process instances",
        report.events, report.instances
    )?;
    if !report.unreadable_events.is_empty() {
        writeln!(out, "events this build does not read:")?;
        for problem in &report.unreadable_events {
            writeln!(
                out,
                "  {}.{}: {} event(s), the first {} in {}: {}",
                Plain(&problem.aggregate),
                Plain(&problem.event_type),
                problem.count,
                Plain(&problem.first_event),
                Plain(&problem.stream),
                Plain(&problem.reason)
            )?;
        }
    }
    if !report.unreadable_states.is_empty() {
        writeln!(out, "process states this build does not read whole:")?;
        for state in &report.unreadable_states {
            writeln!(
                out,
                "  {}:{}: {}",
                Plain(&state.process),
                Plain(&state.instance),
                Plain(&state.problem)
            )?;
        }
    }
    if !report.lost_moments.is_empty() {
        writeln!(
            out,
            "moments stored in state fields this build does not read (a runner will not start):"
        )?;
        for lost in &report.lost_moments {
            writeln!(
                out,
                "  {}:{}: `{}` at {}",
                lost.process,
                Plain(&lost.instance),
                Plain(&lost.field),
                lost.at
            )?;
        }
    }
    if !report.rezoned_deadlines.is_empty() {
        writeln!(
            out,
            "deadlines set in a zone whose rules this build's zone database ({}) changed (each \
             fires at the moment it holds until a handler sets it again):",
            report.zone_database
        )?;
        for moved in &report.rezoned_deadlines {
            writeln!(
                out,
                "  {}:{}: `{}` set for {} fires at {}; this build's rules put that at {}",
                moved.process,
                Plain(&moved.instance),
                moved.field,
                Plain(&moved.local),
                moved.at,
                moved.resolved
            )?;
        }
    }
    if !report.orphan_entries.is_empty() {
        writeln!(out, "scheduler entries nothing in this build runs:")?;
        for orphan in &report.orphan_entries {
            writeln!(
                out,
                "  {}: {} entr{}: {}",
                Plain(&orphan.runs),
                orphan.count,
                if orphan.count == 1 { "y" } else { "ies" },
                orphan.reason
            )?;
        }
    }
    if !report.drifted_entries.is_empty() {
        writeln!(
            out,
            "scheduler entries that disagree with their state (`rearm` re-arms them from it, as a runner does when it starts):"
        )?;
        for drift in &report.drifted_entries {
            writeln!(
                out,
                "  {}:{}: {}",
                drift.process,
                Plain(&drift.instance),
                Plain(drift)
            )?;
        }
    }
    if !report.unknown_aggregates.is_empty() {
        writeln!(
            out,
            "aggregates no command of this build decides on, their events not read: {}",
            Plain(report.unknown_aggregates.join(", "))
        )?;
    }
    if !report.unreadable_entries.is_empty() {
        writeln!(
            out,
            "scheduler entries whose row does not read (each becomes a dead letter when claimed):"
        )?;
        for entry in &report.unreadable_entries {
            writeln!(
                out,
                "  {} `{}`: {}",
                Plain(&entry.command_type),
                Plain(&entry.key),
                Plain(&entry.reason)
            )?;
        }
    }
    let problems = report.problems();
    match report.passes() {
        true => writeln!(out, "check passed: this build reads everything stored"),
        false => writeln!(out, "check failed: {problems} problem(s) above would fail"),
    }
}

/// `story` for a person: a header, one line a step with its changes indented under it, then
/// what is pending, parked and lettered.
fn write_story(
    story: &crate::explain::Explained,
    now: crate::Instant,
    out: &mut impl Write,
) -> std::io::Result<()> {
    let status = story.status.as_text();
    write!(
        out,
        "{} {}: {status}",
        Plain(&story.process),
        Plain(&story.instance)
    )?;
    match story.timeout_at {
        Some(at) => writeln!(out, ", its lifetime ends {} ({at})", relative(at, now))?,
        None => writeln!(out)?,
    }
    if let Some(pause) = &story.paused {
        writeln!(out, "  {}: nothing of it runs until resumed", Plain(pause))?;
    }
    for step in &story.steps {
        writeln!(
            out,
            "  #{:<6} {}  {:<16} {}  [correlation {}]",
            step.position,
            step.at,
            ago(step.at, now),
            Plain(step.describe()),
            Plain(&step.correlation_id)
        )?;
        // A moment as the step saw it: `in 24h` from the step's own time.
        let moment = |at: Option<crate::Instant>| {
            at.map_or_else(
                || "-".to_owned(),
                |at| format!("{at} ({})", relative(at, step.at)),
            )
        };
        for detail in step.details(moment) {
            writeln!(out, "      {}", Plain(detail))?;
        }
    }
    if let Some(why) = &story.unreadable {
        writeln!(
            out,
            "pending: unknown, its state does not read: {}",
            Plain(why)
        )?;
    } else if story.pending.is_empty() {
        writeln!(out, "pending: nothing")?;
    } else {
        writeln!(out, "pending:")?;
        for due in &story.pending {
            let waiting = match (&due.held_by, due.waiting) {
                (Some(letter), _) => format!("  held by its failure, letter {}", Plain(letter)),
                (None, true) => "  waiting".to_owned(),
                (None, false) => String::new(),
            };
            // A deadline set on the calendar reads in its zone, its instant beside.
            let at = match &due.local {
                Some(local) => local.clone(),
                None => due.at.to_string(),
            };
            writeln!(
                out,
                "  {:<20} {at}  {}{waiting}",
                due.field,
                relative(due.at, now)
            )?;
        }
    }
    if let Some(drift) = &story.drift {
        writeln!(out, "scheduler: {}", Plain(drift))?;
    }
    for parked in &story.parked {
        writeln!(
            out,
            "parked: {} ({}), stored {}",
            Plain(&parked.event_type),
            Plain(&parked.event_id),
            ago(parked.at, now)
        )?;
    }
    for letter in &story.letters {
        writeln!(
            out,
            "letter {}: {} on {}: {} ({} attempts)",
            Plain(&letter.id),
            letter.status.as_str(),
            Plain(letter.failed.as_deref().unwrap_or("-")),
            Plain(&letter.error),
            letter.attempts
        )?;
    }
    for published in &story.published {
        write!(
            out,
            "published by relay {} to {}: {} events, {} waiting",
            Plain(&published.relay),
            Plain(&published.sink),
            published.published,
            published.waiting
        )?;
        match published.letters.as_slice() {
            [] => writeln!(out)?,
            letters => writeln!(out, ", refused: letters {}", Plain(&letters.join(", ")))?,
        }
    }
    Ok(())
}

/// A letter as `--json` and `show` print it; `parked` counts the events behind a process
/// letter.
fn letter_json(letter: &DeadLetter, parked: usize) -> serde_json::Value {
    serde_json::json!({
        "id": letter.id,
        "kind": letter.kind,
        "handler": letter.handler,
        "eventId": letter.event_id,
        "eventType": letter.event_type,
        "aggregateType": letter.aggregate_type,
        "aggregateId": letter.aggregate_id,
        "errorType": letter.error_type,
        "errorMessage": letter.error_message,
        "attempts": letter.attempts,
        "firstFailedAt": letter.first_failed_at,
        "lastFailedAt": letter.last_failed_at,
        "status": letter.status,
        "payload": letter.payload,
        "parked": parked,
    })
}

/// What a held run failed on and when it runs again: `on OrderPlaced (position 7): the
/// provider is down; attempt 3, retry at …`.
fn failing_on(failing: &crate::Failing) -> String {
    format!(
        "on {} (position {}): {}; attempt {}, retry at {}",
        Plain(&failing.event_type),
        failing.position,
        Plain(&failing.message),
        failing.attempts,
        failing.retry_at
    )
}

/// `at` as seen from `now`, to the two largest units: `in 2h 5m`, `overdue 3m`, `now`.
pub fn relative(at: crate::Instant, now: crate::Instant) -> String {
    crate::instant::until(at, now)
}

/// `at` as seen from `now` for something that happened: `3m ago`, `in 2h 5m`, `now`.
pub fn ago(at: crate::Instant, now: crate::Instant) -> String {
    crate::instant::ago(at, now)
}
