//! `pause` and `resume`: a process, an instance, a policy or a subscriber stopped for a while,
//! in the store, so every runner on it obeys.

use std::io::Write;

use clap::Args;

use super::escape::Plain;
use super::io;
use crate::App;
use crate::store::PauseTarget;

/// What to pause or resume: the store's pause target, read from the command line.
pub type Target = PauseTarget;

/// What `pause` pauses, and who asks.
#[derive(Debug, Clone, Args)]
pub struct PauseArgs {
    /// What to pause.
    #[command(subcommand)]
    pub target: Target,
    /// The operator's name, kept with the pause; the login name ($USER, else $LOGNAME) by
    /// default.
    #[arg(long, global = true, env = "USER", hide_env_values = true)]
    pub by: Option<String>,
    /// Why, kept with the pause and shown with it.
    #[arg(long, global = true)]
    pub reason: Option<String>,
}

/// Pauses what `args` names, saying so.
pub(super) async fn pause(
    app: &App,
    args: PauseArgs,
    out: &mut impl Write,
) -> Result<(), crate::Error> {
    let by = super::by::operator(args.by, "who pauses it")?;
    let target = args.target;
    match app
        .pause(target.clone(), &by, args.reason.as_deref())
        .await?
    {
        true => writeln!(out, "{} paused by {}", Plain(&target), Plain(&by)),
        false => writeln!(out, "{} was paused already; left as it was", Plain(&target)),
    }
    .map_err(io)
}

/// Resumes what `target` names, saying so.
pub(super) async fn resume(
    app: &App,
    target: Target,
    out: &mut impl Write,
) -> Result<(), crate::Error> {
    match app.resume(&target).await? {
        true => writeln!(out, "{} resumed", Plain(&target)),
        false => writeln!(out, "{} was not paused", Plain(&target)),
    }
    .map_err(io)
}
