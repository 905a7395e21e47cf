//! A preview of a deploy on production's own data: this build run on a copy of the store (see
//! [`store::copy`](crate::store::copy)) on simulated time, from the moment the copy was taken
//! for a horizon, with the app's ports replaced by doubles that record and succeed. It reports
//! what would happen: deadlines fired, commands sent, events written, letters filed, instances
//! ended, per process and in total, and the calls the doubles recorded in [`PortCalls`] when
//! the app has that port. Two builds' reports on one copy compare with [`changes`].
//!
//! ```no_run
//! # async fn example(builder: bounda::AppBuilder) -> Result<(), bounda::Error> {
//! // `builder`: the app on the copy, its ports replaced by recording doubles.
//! let report = bounda::preview::preview(builder, bounda::days(30)).await?;
//! println!("{} deadlines would fire", report.total.deadlines_fired);
//! # Ok(())
//! # }
//! ```
//!
//! A preview writes to the copy as the app would to production, so it runs only on a store
//! marked as a copy: production is never written.

pub(crate) mod calls;
mod compare;
mod report;

pub use calls::{PortCall, PortCalls};
pub use compare::changes;
pub use report::{
    CheckSummary, Ended, Ending, Fired, Letter, ProcessSummary, Rejected, Report, Sent, Totals,
};

use std::collections::HashSet;

use crate::store::LetterFilter;
use crate::testing::TestApp;
use crate::{Duration, Error};

/// Events read per page.
const PAGE: usize = 1_000;

/// Builds `builder` (an app on a copy, its ports doubles) on simulated time from the copy's
/// moment, runs it for `horizon`, and reports what it did.
pub async fn preview(builder: crate::AppBuilder, horizon: Duration) -> Result<Report, Error> {
    let app = TestApp::over_copy(builder).await?.expecting_letters();
    run(&app, horizon).await
}

/// Runs `app` (a [`TestApp::over_copy`]) for `horizon` and reports what it did, letters
/// included: what a test of a deploy asserts on.
pub async fn run(app: &TestApp, horizon: Duration) -> Result<Report, Error> {
    let from = app.now();
    let preflight = app.app().preflight().await?;
    let check = CheckSummary {
        unreadable_events: preflight
            .unreadable_events
            .iter()
            .map(|problem| problem.count)
            .sum(),
        unreadable_states: preflight.unreadable_states.len() as u64,
        lost_moments: preflight.lost_moments.len() as u64,
        drifted_entries: preflight.drifted_entries.len() as u64,
        // An entry whose row does not read has nothing to run it either.
        orphan_entries: preflight
            .orphan_entries
            .iter()
            .map(|o| o.count)
            .sum::<u64>()
            + preflight.unreadable_entries.len() as u64,
    };
    let head = app.app().store().head().await?;
    let letters_before: HashSet<String> = app
        .app()
        .dead_letters()
        .list(&LetterFilter::default())
        .await?
        .into_iter()
        .map(|letter| letter.id)
        .collect();
    // The calls recorded before the run (a test's own) are not the run's.
    let calls = app.app().port::<PortCalls>().ok();
    let calls_before = calls.map_or(0, PortCalls::len);
    let idle = app.advance_by(horizon).await?;
    if !idle.idle {
        return Err(Error::PreviewUnfinished {
            reason: format!(
                "work was still moving at {} after as many passes as a run takes, {} short of \
                 the horizon (a reaction or a deadline that keeps scheduling itself?)",
                app.now(),
                (from + horizon).saturating_since(app.now())
            ),
        });
    }
    let mut report = Report::empty(from, app.now(), check);
    if let Some(calls) = calls {
        report.calls = calls.calls().split_off(calls_before);
    }
    report::read(app.app(), head, &letters_before, &idle.rejections, report).await
}
