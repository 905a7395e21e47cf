//! Retrying and discarding dead letters from the command line. A retry is asked of the workers,
//! which run it as production runs it, not in the operator's shell with its environment; the
//! command waits for what it did.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;

use super::escape::Plain;
use super::{BulkArgs, io};
use crate::App;
use crate::store::{RetryOutcome, RetryRequest};

/// `dead-letters retry`: which letter, how long to wait, who asks.
#[derive(Debug, Clone, Args)]
pub struct RetryArgs {
    /// The letter.
    pub id: String,
    /// How it is asked.
    #[command(flatten)]
    pub asking: Asking,
}

/// `dead-letters retry-all`: which letters and how fast, how long to wait, who asks.
#[derive(Debug, Clone, Args)]
pub struct RetryAllArgs {
    /// Which letters, how fast.
    #[command(flatten)]
    pub bulk: BulkArgs,
    /// How each is asked.
    #[command(flatten)]
    pub asking: Asking,
}

/// How a retry is asked of the workers.
#[derive(Debug, Clone, Args)]
pub struct Asking {
    /// How long to wait for a worker to run the retry (for `retry-all`, each batch); `0s` only
    /// requests it.
    #[arg(long, default_value = "30s")]
    pub wait: crate::Duration,
    /// The operator's name, kept with the request; the login name ($USER, else $LOGNAME) by
    /// default.
    #[arg(long, env = "USER", hide_env_values = true)]
    pub by: Option<String>,
}

impl Asking {
    /// Who asks.
    fn by(&self) -> Result<String, crate::Error> {
        super::by::operator(self.by.clone(), "who asks for the retry")
    }

    /// How long to wait, in real time: the workers run in other processes.
    fn real_wait(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.wait.as_millis())
    }
}

/// Asks the workers to retry a letter and prints what the retry did: exit 2 when it did not go
/// through, 3 when no worker ran it in the time waited.
pub(super) async fn retry(
    app: &App,
    args: RetryArgs,
    out: &mut impl Write,
) -> Result<ExitCode, crate::Error> {
    let by = args.asking.by()?;
    let letters = app.dead_letters();
    let request = match letters.request_retry(&args.id, &by).await {
        Ok(request) => request,
        // An unknown letter is a mistake like any other (1); one no worker could retry (settled,
        // paused) is a retry that did not go through (2).
        Err(error @ (crate::Error::NotFound { .. } | crate::Error::Store(_))) => return Err(error),
        Err(error) => {
            eprintln!("error: {}", Plain(crate::error::chain(&error)));
            return Ok(ExitCode::from(2));
        }
    };
    let request = letters
        .await_request(&request, args.asking.real_wait())
        .await?;
    told(&request, args.asking.wait, out)
}

/// Prints what `request` did, with its exit code.
fn told(
    request: &RetryRequest,
    wait: crate::Duration,
    out: &mut impl Write,
) -> Result<ExitCode, crate::Error> {
    let id = Plain(&request.letter);
    let code = match &request.outcome {
        Some(RetryOutcome::Retried) => {
            writeln!(out, "retried {id}").map_err(io)?;
            ExitCode::SUCCESS
        }
        Some(RetryOutcome::Rejected {
            command_type,
            rejected,
            message,
        }) => {
            writeln!(
                out,
                "retried {id}: command rejected, {} {}: {}",
                Plain(command_type),
                Plain(rejected),
                Plain(message)
            )
            .map_err(io)?;
            ExitCode::SUCCESS
        }
        Some(RetryOutcome::FailedAgain {
            letter,
            drained,
            parked,
        }) => {
            writeln!(
                out,
                "retried {id}: its step ran and {drained} parked events were handled, then a \
                 later step failed: new letter {}, {parked} events parked behind it",
                Plain(letter)
            )
            .map_err(io)?;
            ExitCode::from(2)
        }
        Some(RetryOutcome::Failed { error, .. }) => {
            eprintln!("error: the retry of {id} failed: {}", Plain(error));
            ExitCode::from(2)
        }
        None => {
            writeln!(
                out,
                "the retry of {id} is requested (request {}), but no worker ran it within {}: \
                 it stays requested and runs when a worker runs; `dead-letters show {id}` tells \
                 what it did",
                Plain(&request.id),
                wait,
            )
            .map_err(io)?;
            ExitCode::from(3)
        }
    };
    Ok(code)
}

/// Asks the workers to retry every open letter the flags match, printing each outcome and the
/// counts: exit 2 when one did not go through, 3 when a batch waited in vain.
pub(super) async fn retry_all(
    app: &App,
    args: RetryAllArgs,
    out: &mut impl Write,
) -> Result<ExitCode, crate::Error> {
    let by = args.asking.by()?;
    let (filter, pace, wait) = (
        args.bulk.filter(),
        pace(&args.bulk),
        args.asking.real_wait(),
    );
    let mut printed = Printed::new(out);
    let report = app
        .dead_letters()
        .request_retry_all(&filter, pace, &by, wait, |id, outcome| {
            printed.outcome(id, outcome)
        })
        .await?;
    printed.report(&report, Some(args.asking.wait))
}

/// Discards every open letter the flags match, printing each outcome and the counts: exit 2
/// when one did not go through.
pub(super) async fn discard_all(
    app: &App,
    args: &BulkArgs,
    out: &mut impl Write,
) -> Result<ExitCode, crate::Error> {
    let mut printed = Printed::new(out);
    let report = app
        .dead_letters()
        .discard_all(&args.filter(), pace(args), |id, outcome| {
            printed.outcome(id, outcome)
        })
        .await?;
    printed.report(&report, None)
}

fn pace(args: &BulkArgs) -> crate::Pace {
    crate::Pace {
        batch: args.batch,
        pause: args.pause,
    }
}

/// A bulk action's lines, printed as its outcomes come; the first failure to print is kept.
struct Printed<'o, W: Write> {
    out: &'o mut W,
    written: std::io::Result<()>,
}

impl<'o, W: Write> Printed<'o, W> {
    fn new(out: &'o mut W) -> Printed<'o, W> {
        Printed {
            out,
            written: Ok(()),
        }
    }

    fn outcome(&mut self, id: &str, outcome: &crate::BulkOutcome) {
        if self.written.is_ok() {
            self.written = match outcome {
                crate::BulkOutcome::Failed(error) => {
                    writeln!(self.out, "{}  failed: {}", Plain(id), Plain(error))
                }
                other => writeln!(self.out, "{}  {}", Plain(id), other.name()),
            };
        }
    }

    /// The counts, and what was left; the exit code.
    fn report(
        self,
        report: &crate::BulkReport,
        wait: Option<crate::Duration>,
    ) -> Result<ExitCode, crate::Error> {
        self.written.map_err(io)?;
        let counts = report.counts();
        let summary: Vec<String> = counts
            .iter()
            .map(|(name, n)| format!("{n} {name}"))
            .collect();
        match summary.is_empty() {
            true => writeln!(self.out, "no open letters match").map_err(io)?,
            false => writeln!(self.out, "{}", summary.join(", ")).map_err(io)?,
        }
        if let (Some(wait), true) = (wait, counts.contains_key("waiting")) {
            writeln!(
                self.out,
                "no worker ran the waiting retries within {}: they stay requested; {} more \
                 letters were left as they are: run this again once a worker runs",
                wait, report.untaken
            )
            .map_err(io)?;
        }
        Ok(if counts.contains_key("failed") {
            ExitCode::from(2)
        } else if counts.contains_key("waiting") {
            ExitCode::from(3)
        } else {
            ExitCode::SUCCESS
        })
    }
}
