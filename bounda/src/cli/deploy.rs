//! The commands before a deploy that need more than the app: `copy` (a second store to write)
//! and `preview` (the app built again on a copy, on simulated time).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::Piped;
use super::escape::Plain;
use crate::preview::{self, Report};
use crate::store::Store;
use crate::{AppBuilder, Error, days};

/// Where `copy` writes.
#[derive(Debug, Clone, Args)]
pub struct CopyArgs {
    /// The SQLite file to create; it must not exist.
    pub to: PathBuf,
}

/// How far `preview` runs, and how it reports.
#[derive(Debug, Clone, Args)]
pub struct PreviewArgs {
    /// How many days to run, from the moment the copy was taken.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=36_500))]
    pub days: u64,
    /// The report as one JSON document, to keep and compare with `--against`.
    #[arg(long)]
    pub json: bool,
    /// What changes from the report an earlier build wrote with `--json` on the same copy.
    #[arg(long, value_name = "OLD.json", conflicts_with = "json")]
    pub against: Option<PathBuf>,
}

/// A failed write of the command's output, as the command's error.
pub(super) fn io(error: std::io::Error) -> Error {
    Error::Configuration {
        message: format!("cannot write: {error}"),
    }
}

/// Copies everything `from` holds into the empty store `to`, marked as a copy of `source` taken
/// now, and says what it copied. Exits 1 with the error when it cannot.
pub async fn copy(from: &dyn Store, to: &dyn Store, source: &str) -> ExitCode {
    let mut out = Piped::stdout();
    let result = copy_to(from, to, source, &mut out).await;
    out.exit(result)
}

async fn copy_to(
    from: &dyn Store,
    to: &dyn Store,
    source: &str,
    out: &mut impl Write,
) -> Result<ExitCode, Error> {
    let now = crate::clock::Clock::now(&crate::clock::SystemClock);
    let copied = crate::store::copy(from, to, source, now).await?;
    // A copy of a copy keeps the first copy's moment and source.
    let (source, at) = copied
        .mark
        .as_ref()
        .map_or((source, now), |mark| (mark.source.as_str(), mark.copied_at));
    let keys = match copied.ingress {
        0 => String::new(),
        keys => format!(", {keys} keys of commands from other services"),
    };
    writeln!(
        out,
        "copied {source} at {at}: {} events, {} checkpoints, {} inbox entries, {} scheduler \
         entries, {} dead letters{keys}",
        copied.events, copied.checkpoints, copied.inbox, copied.scheduled, copied.dead_letters
    )
    .map_err(io)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `builder` (the app on a copy, its ports doubles) as [`preview::preview`] does for
/// `args.days`, and prints the report: as text, as JSON, or as the changes from an earlier
/// report. Exits 3 when the run filed a letter or the copy does not read through this build,
/// 1 with the error when it cannot run.
pub async fn preview(builder: AppBuilder, args: PreviewArgs) -> ExitCode {
    let mut out = Piped::stdout();
    let result = preview_to(builder, &args, &mut out).await;
    out.exit(result)
}

async fn preview_to(
    builder: AppBuilder,
    args: &PreviewArgs,
    out: &mut impl Write,
) -> Result<ExitCode, Error> {
    // The earlier report is read first: a mistyped path fails before the run.
    let against = match &args.against {
        Some(path) => Some(read_report(path)?),
        None => None,
    };
    let report = preview::preview(builder, days(args.days)).await?;
    if args.json {
        let json = serde_json::to_string_pretty(&report).map_err(|e| Error::Configuration {
            message: format!("cannot write JSON: {e}"),
        })?;
        writeln!(out, "{json}").map_err(io)?;
    } else {
        write_report(&report, out).map_err(io)?;
    }
    if let (Some(old), Some(path)) = (&against, &args.against) {
        let changes = preview::changes(old, &report);
        writeln!(out, "changes from {}:", path.display()).map_err(io)?;
        if changes.is_empty() {
            writeln!(out, "  none: both builds do the same").map_err(io)?;
        }
        for change in changes {
            writeln!(out, "  {change}").map_err(io)?;
        }
    }
    Ok(match report.passes() {
        true => ExitCode::SUCCESS,
        false => ExitCode::from(3),
    })
}

/// The report an earlier `preview --json` wrote at `path`.
fn read_report(path: &std::path::Path) -> Result<Report, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Configuration {
        message: format!("cannot read `{}`: {e}", path.display()),
    })?;
    serde_json::from_str(&text).map_err(|e| Error::Configuration {
        message: format!(
            "`{}` is not a report of `preview --json`: {e}",
            path.display()
        ),
    })
}

fn write_report(report: &Report, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        out,
        "preview from {} to {}",
        report.from.to_chrono().format("%Y-%m-%d %H:%M:%S UTC"),
        report.until.to_chrono().format("%Y-%m-%d %H:%M:%S UTC")
    )?;
    let c = &report.check;
    if !c.passes() || c.drifted_entries > 0 {
        writeln!(
            out,
            "before the run: {} events and {} instances do not read, {} instances hold moments \
             this build lost, {} entries have nothing to run them, {} entries re-armed",
            c.unreadable_events,
            c.unreadable_states,
            c.lost_moments,
            c.orphan_entries,
            c.drifted_entries
        )?;
    }
    for (name, p) in &report.processes {
        let fired: Vec<String> = p
            .fired
            .iter()
            .map(|(field, count)| format!("{field} {count}"))
            .collect();
        let fired = match fired.is_empty() {
            true => "none".to_owned(),
            false => fired.join(", "),
        };
        writeln!(
            out,
            "{name}: deadlines fired {fired}; {} started, {} completed, {} timed out, {} failed; \
             {} commands from its deadlines",
            p.started, p.completed, p.timed_out, p.failed, p.commands
        )?;
    }
    // Deadlines set on the calendar, read in their zones: a run across a clock change shows
    // them at their local time on either side.
    const LOCAL_SHOWN: usize = 5;
    let local: Vec<&crate::preview::Fired> =
        report.fired.iter().filter(|f| f.local.is_some()).collect();
    for firing in local.iter().take(LOCAL_SHOWN) {
        writeln!(
            out,
            "  {}.{} of {} due {}",
            firing.process,
            firing.field,
            Plain(&firing.instance),
            firing.local.as_deref().unwrap_or_default()
        )?;
    }
    if local.len() > LOCAL_SHOWN {
        writeln!(
            out,
            "  and {} more deadlines set in a zone",
            local.len() - LOCAL_SHOWN
        )?;
    }
    for (event, count) in &report.events {
        writeln!(out, "  {count:>6} {}", Plain(event))?;
    }
    let mut calls: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    for call in &report.calls {
        *calls
            .entry(format!("{}.{}", call.port, call.call))
            .or_default() += 1;
    }
    for (call, count) in &calls {
        writeln!(out, "  {count:>6} calls of {call}")?;
    }
    let t = &report.total;
    writeln!(
        out,
        "total: {} deadlines fired, {} commands ({} rejected), {} events, {} letters, {} \
         instances ended, {} failed",
        t.deadlines_fired,
        t.commands,
        t.rejected,
        t.events,
        t.letters,
        t.instances_ended,
        t.instances_failed
    )?;
    for letter in &report.letters {
        let on = letter
            .aggregate_id
            .as_deref()
            .map(|id| format!(" for `{id}`"))
            .unwrap_or_default();
        writeln!(
            out,
            "  letter {} {}{}: {}",
            Plain(&letter.id),
            letter.handler,
            Plain(on),
            Plain(&letter.error)
        )?;
    }
    Ok(())
}
