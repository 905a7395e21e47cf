//! The deadline plan: from the state alone, which deadline comes due next.
//!
//! The runtime keeps one scheduler entry per instance at [`next`]; when it comes due it does not
//! trust the entry but asks [`due`] again, so an entry the state no longer backs runs nothing.
//! A (field, moment) pair comes due once: the pairs that already did are
//! [`Reached`], and a state that sets a field back to one of them does not run it again.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::Instant;
use crate::process::ProcessState;

/// The reserved deadline that ends a process when its lifetime runs out.
pub const TIMEOUT: &str = "timeout";

/// A pending deadline: which field, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct DueDeadline {
    /// When it comes due. Compared first, so the earliest deadline sorts first.
    pub at: Instant,
    /// The deadline field, or [`TIMEOUT`]. Breaks ties between equal moments.
    pub field: &'static str,
}

/// The (field, moment) pairs of an instance that already came due, to the millisecond: each
/// comes due once. Empty for a new instance.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reached(HashMap<String, HashSet<i64>>);

impl Reached {
    /// Whether `field` already came due at `at`.
    pub fn contains(&self, field: &str, at: Instant) -> bool {
        self.0
            .get(field)
            .is_some_and(|moments| moments.contains(&at.as_millis()))
    }

    /// Records that `field` came due at `at`.
    pub fn insert(&mut self, field: &str, at: Instant) {
        self.0
            .entry(field.to_owned())
            .or_default()
            .insert(at.as_millis());
    }
}

/// Every pending deadline of `state`, the `timeout` at `timeout_at` included, soonest first, ties
/// by field name; a pair in `reached` is not pending.
pub fn pending<P: ProcessState>(
    state: &P,
    timeout_at: Option<Instant>,
    reached: &Reached,
) -> Vec<DueDeadline> {
    let mut pending: Vec<DueDeadline> = P::DEADLINES
        .iter()
        .filter_map(|field| {
            (field.get)(state).moment().map(|at| DueDeadline {
                at,
                field: field.name,
            })
        })
        .chain(timeout_at.map(|at| DueDeadline { at, field: TIMEOUT }))
        .filter(|due| !reached.contains(due.field, due.at))
        .collect();
    pending.sort_unstable();
    pending
}

/// The earliest pending deadline, where the instance's one scheduler entry belongs.
pub fn next<P: ProcessState>(
    state: &P,
    timeout_at: Option<Instant>,
    reached: &Reached,
) -> Option<DueDeadline> {
    pending(state, timeout_at, reached).into_iter().next()
}

/// The deadline to run at `now`: the earliest pending one if its moment is at or before `now`.
/// A moment already past is due at once; none is ever due early.
pub fn due<P: ProcessState>(
    state: &P,
    timeout_at: Option<Instant>,
    reached: &Reached,
    now: Instant,
) -> Option<DueDeadline> {
    next(state, timeout_at, reached).filter(|deadline| deadline.at <= now)
}
