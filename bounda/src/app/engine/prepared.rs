//! A batch prepared beside the last one's commit: on a store a round trip away, a worker under
//! load claims its next batch and runs that batch's first wave of handlers while the server
//! commits the last batch, where it would otherwise wait for the commit and then for the claim.
//! A subscriber claims its next batch of deliveries there, and runs it once the commit is
//! through. The prepared batch commits once the last one has, so a runner stays one writer at a
//! time.
//!
//! What the last batch commits is not yet seen by handlers run beside it, so the worker's batch
//! is prepared beside only when nothing the last one writes bears on it: none of its runs was
//! deferred (their entries, given back by the commit, would be claimed again at once) and none
//! of its events is one a process takes (a due deadline waits for its instance's events that
//! the process runner has not handled, which the prepared batch's reads would miss). A stream
//! the last batch moves under a prepared run refuses that run's commit, and the run runs again
//! on the new state, as when two runners meet. A subscriber's handlers run in order per lane
//! and a waiting run holds its handler's later ones, which the claims made beside cannot know:
//! when the last batch held a run, the batch claimed beside it is given back unrun
//! ([`Prepared::give_back`]).

use std::collections::{HashSet, VecDeque};

use futures_util::future::BoxFuture;

use super::{Queued, Report, Run};
use crate::Error;
use crate::app::App;

/// What prepares the next batch beside a commit: the worker's claim of due entries.
pub(crate) trait Beside: Sync {
    /// Claims the next batch and prepares it ([`App::prepare`]).
    fn prepare(&self) -> BoxFuture<'_, Result<Box<Prepared>, Error>>;

    /// Whether the batch it prepares runs handlers beside the commit (the worker's first wave),
    /// reading what the commit has not yet written: then it is prepared beside a commit only
    /// when no process takes the events the commit writes.
    fn runs_beside(&self) -> bool;
}

/// A claimed batch, paced, its first wave run or not yet, waiting to commit
/// ([`App::run_prepared`]).
pub(crate) struct Prepared {
    /// How many entries were claimed for it.
    pub(crate) claimed: usize,
    pub(super) queue: VecDeque<Queued>,
    pub(super) held: HashSet<&'static str>,
    /// What its runs reported so far.
    pub(crate) report: Report,
}

impl Prepared {
    /// Gives its runs back unrun, their claims released for the next pass: the batch before it
    /// held a run, which holds later runs of its handler and lane that these claims could not
    /// see.
    pub(crate) fn give_back(&mut self) {
        for queued in &mut self.queue {
            match queued {
                Queued::Execute(run) => run.held_back = true,
                // Only a worker's batch runs its first wave beside, and it is never given back.
                Queued::Write(_) => {}
            }
        }
    }
}

impl App {
    /// The batch of `runs`, `claimed` entries taken for it: paced, and if `run_first` its
    /// first wave's handlers run, their write sets waiting for the batch's commit.
    pub(crate) async fn prepare(
        &self,
        mut runs: Vec<Run>,
        claimed: usize,
        mut report: Report,
        run_first: bool,
    ) -> Prepared {
        self.pace(&mut runs, &mut report).await;
        let mut queue: VecDeque<Queued> = runs.into_iter().map(Queued::Execute).collect();
        let mut held = HashSet::new();
        if run_first {
            let wave = super::next_wave(&mut queue);
            let ran = self.execute_wave(wave, &mut held, &mut report).await;
            for entry in ran.into_iter().rev() {
                queue.push_front(Queued::Write(Box::new(entry)));
            }
        }
        Prepared {
            claimed,
            queue,
            held,
            report,
        }
    }
}
