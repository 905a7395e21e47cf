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

/// The deadline field `field` of `state` as it holds it, or `None` for `timeout` and a name
/// that is no deadline field.
pub fn deadline_of<'s, P: ProcessState>(state: &'s P, field: &str) -> Option<&'s crate::Deadline> {
    P::DEADLINES
        .iter()
        .find(|deadline| deadline.name == field)
        .map(|deadline| (deadline.get)(state))
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

/// A pending deadline as operators read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    /// Which field, and when.
    pub due: DueDeadline,
    /// For a deadline set on the calendar, its local time and zone:
    /// `2026-03-30 09:00 Europe/Paris (07:00Z)`.
    pub local: Option<String>,
}

/// Every pending deadline of `state` as [`pending`] lists them, each with its local time when it
/// was set on the calendar.
pub fn described<P: ProcessState>(
    state: &P,
    timeout_at: Option<Instant>,
    reached: &Reached,
) -> Vec<Described> {
    pending(state, timeout_at, reached)
        .into_iter()
        .map(|due| Described {
            due,
            local: deadline_of(state, due.field)
                .and_then(crate::Deadline::on_calendar)
                .map(|civil| civil.zone().describe(due.at)),
        })
        .collect()
}

/// A pending deadline set on the calendar whose wall-clock reading the zone rules of this build
/// put at another instant than the one it holds: the zone's rules changed in a newer zone
/// database. It keeps its instant until a handler sets the field again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rezoned {
    /// Which field, and the instant it holds.
    pub due: DueDeadline,
    /// The wall-clock reading it was set at: `2026-07-01T09:00:00+01:00[Europe/Paris]`.
    pub local: String,
    /// Where this build's zone rules put that reading.
    pub resolved: Instant,
}

/// The pending deadlines of `state` that this build's zone rules would place elsewhere.
pub fn rezoned<P: ProcessState>(
    state: &P,
    timeout_at: Option<Instant>,
    reached: &Reached,
) -> Vec<Rezoned> {
    pending(state, timeout_at, reached)
        .into_iter()
        .filter_map(|due| {
            let civil = deadline_of(state, due.field)?.on_calendar()?;
            // A reading that no longer resolves at all is past what an instant holds: it keeps
            // its instant, as any other does.
            let resolved = civil.resolved().ok()?;
            (resolved != due.at).then(|| Rezoned {
                due,
                local: civil.local().to_owned(),
                resolved,
            })
        })
        .collect()
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
