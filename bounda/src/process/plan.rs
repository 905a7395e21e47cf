//! The deadline plan: from the state alone, which deadline comes due next (spec 78–82).
//!
//! The runtime keeps one scheduler entry per instance at [`next`]; when it comes due it does not
//! trust the entry but asks [`due`] again, so an entry the state no longer backs runs nothing
//! (spec 79).

use crate::Instant;
use crate::process::ProcessState;

/// The reserved deadline that ends a process when its lifetime runs out (spec 95).
pub const TIMEOUT: &str = "timeout";

/// A pending deadline: which field, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DueDeadline {
    /// When it comes due. Compared first, so the earliest deadline sorts first.
    pub at: Instant,
    /// The deadline field, or [`TIMEOUT`]. Breaks ties between equal moments (spec 81).
    pub field: &'static str,
}

/// Every pending deadline of `state`, the `timeout` at `timeout_at` included, soonest first, ties
/// by field name.
pub fn pending<P: ProcessState>(state: &P, timeout_at: Option<Instant>) -> Vec<DueDeadline> {
    let mut pending: Vec<DueDeadline> = P::DEADLINES
        .iter()
        .filter_map(|field| {
            (field.get)(state).moment().map(|at| DueDeadline {
                at,
                field: field.name,
            })
        })
        .chain(timeout_at.map(|at| DueDeadline { at, field: TIMEOUT }))
        .collect();
    pending.sort_unstable();
    pending
}

/// The earliest pending deadline, where the instance's one scheduler entry belongs (spec 78).
pub fn next<P: ProcessState>(state: &P, timeout_at: Option<Instant>) -> Option<DueDeadline> {
    let fields = P::DEADLINES.iter().filter_map(|field| {
        (field.get)(state).moment().map(|at| DueDeadline {
            at,
            field: field.name,
        })
    });
    fields
        .chain(timeout_at.map(|at| DueDeadline { at, field: TIMEOUT }))
        .min()
}

/// The deadline to run at `now`: the earliest pending one if its moment is at or before `now`
/// (spec 81–82). A moment already past is due at once; none is ever due early.
pub fn due<P: ProcessState>(
    state: &P,
    timeout_at: Option<Instant>,
    now: Instant,
) -> Option<DueDeadline> {
    next(state, timeout_at).filter(|deadline| deadline.at <= now)
}
