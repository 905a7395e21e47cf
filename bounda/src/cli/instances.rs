//! `instances`: process instances found by process, status, what is due, correlation or id,
//! a page at a time.

use std::io::Write;

use clap::Args;

use super::escape::Plain;
use super::{ago, io, relative};
use crate::App;
use crate::store::{InstanceCursor, InstanceOrder, InstanceQuery, InstanceStatus};

/// What `instances` lists.
#[derive(Debug, Clone, Args)]
pub struct InstancesArgs {
    /// Only this process's instances, by name.
    #[arg(long)]
    pub process: Option<String>,
    /// Only instances in this status: running, failed, timed-out or completed.
    #[arg(long, value_parser = status)]
    pub status: Option<InstanceStatus>,
    /// Only running instances whose next deadline is past and has not run.
    #[arg(long, conflicts_with = "due_within")]
    pub overdue: bool,
    /// Only running instances whose next deadline comes within this span from now (`2h`).
    #[arg(long, value_name = "SPAN")]
    pub due_within: Option<crate::Duration>,
    /// Only instances started under this correlation id.
    #[arg(long)]
    pub correlation: Option<String>,
    /// Only instances whose id starts with this text.
    #[arg(long, value_name = "PREFIX")]
    pub id: Option<String>,
    /// The soonest due first (only instances with a deadline pending), instead of the latest
    /// started first.
    #[arg(long)]
    pub soonest: bool,
    /// How many to list, 1 to 1,000.
    #[arg(
        long,
        default_value_t = 50,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000)
    )]
    pub limit: usize,
    /// Go on after this cursor, which the page before printed last.
    #[arg(long, value_name = "CURSOR")]
    pub after: Option<InstanceCursor>,
    /// Print only how many instances match.
    #[arg(long)]
    pub count: bool,
    /// As JSON lines (the next page's cursor as a last line `{"next": ..}`).
    #[arg(long)]
    pub json: bool,
}

/// An instance status on the command line.
fn status(text: &str) -> Result<InstanceStatus, String> {
    InstanceStatus::parse(text).ok_or_else(|| {
        format!("`{text}` is no status; use running, failed, timed-out or completed")
    })
}

/// Lists or counts the instances `args` asks for.
pub(super) async fn run(
    app: &App,
    args: InstancesArgs,
    out: &mut impl Write,
) -> Result<(), crate::Error> {
    let now = app.clock().now();
    let query = InstanceQuery {
        process: args.process.clone(),
        status: args.status,
        due_from: args.due_within.map(|_| now),
        due_until: match (args.overdue, args.due_within) {
            (true, _) => Some(now),
            (false, Some(within)) => Some(now + within),
            (false, None) => None,
        },
        correlation_id: args.correlation,
        id_prefix: args.id,
        order: match args.soonest {
            true => InstanceOrder::Soonest,
            false => InstanceOrder::Newest,
        },
        after: args.after,
        limit: args.limit,
    };
    // A process the app does not run may still have instances (a deploy removed it); a name
    // with none is a typo, and said so.
    if let Some(process) = &args.process
        && !app.processes().any(|p| p.name() == process)
        && app
            .count_instances(&InstanceQuery {
                process: Some(process.clone()),
                ..InstanceQuery::default()
            })
            .await?
            == 0
    {
        let known: Vec<&str> = app.processes().map(|p| p.name()).collect();
        return Err(crate::Error::NotFound {
            what: format!(
                "process `{process}` in this app or its store (its processes: {})",
                known.join(", ")
            ),
        });
    }
    if args.count {
        let count = app.count_instances(&query).await?;
        match args.json {
            true => writeln!(out, "{}", serde_json::json!({ "count": count })),
            false => writeln!(out, "{count}"),
        }
        .map_err(io)?;
        return Ok(());
    }
    let page = app.instances(&query).await?;
    for row in &page.rows {
        if args.json {
            writeln!(out, "{}", serde_json::to_value(row).unwrap_or_default()).map_err(io)?;
            continue;
        }
        let due = match row.next_due {
            Some(at) => format!("  next due {at} ({})", relative(at, now)),
            None => String::new(),
        };
        writeln!(
            out,
            "{}:{}  {:<9}  started {} ({}), last step {}{due}  correlation {}",
            row.process,
            Plain(&row.instance_id),
            row.status,
            row.started_at,
            ago(row.started_at, now),
            ago(row.updated_at, now),
            Plain(&row.correlation_id),
        )
        .map_err(io)?;
    }
    match (&page.next, args.json) {
        (Some(next), true) => {
            writeln!(out, "{}", serde_json::json!({ "next": next.to_string() })).map_err(io)?
        }
        (Some(next), false) => writeln!(out, "more: --after {}", Plain(next)).map_err(io)?,
        (None, _) if page.rows.is_empty() && !args.json => {
            writeln!(out, "no instance matches").map_err(io)?
        }
        (None, _) => {}
    }
    Ok(())
}
