//! Limits: how many runs of a process, a policy or a scheduled command may start in each window
//! of time, counted in the store so that every runner on it shares one count.
//!
//! A runner takes permits for the runs it claimed ([`LimitStore::take_permits`])
//! in the window holding the moment it runs them; the runs it got none for are given back unrun.
//! Once a window's permits are used up, the store's claim of due entries leaves the entries of
//! that process, policy or command until the window ends, and
//! [`next_due_at`](super::Store::next_due_at) answers the window's end, so no runner spins on
//! them; a subscriber holds that handler's events (their order kept) until then.

use std::fmt;

use serde::Serialize;

use crate::store::StoreError;
use crate::{Duration, Instant};

/// A store's limits: the permits of each limit's window, counted at once for every runner on it.
/// A capability: a store that keeps it says so in
/// [`Store::capabilities`](crate::store::Store::capabilities).
#[async_trait::async_trait]
pub trait LimitStore: Send + Sync {
    /// Takes up to `wanted` of `key`'s permits in its window of length `per` ending at `ends`,
    /// which allows `cap` runs, and answers how many it took: at once for every runner on the
    /// store, so two runners together take no more than `cap`. The stored window is counted into
    /// when it is this one, or the next (taken by a runner whose clock is ahead), of the same
    /// length; any other (an older one, one of another length after the rate changed) is
    /// replaced by this one. Once a window is used up, the claim of due entries
    /// ([`claim_due`](crate::store::Store::claim_due), [`ClaimDue`](crate::store::ClaimDue))
    /// leaves the key's entries until it ends (see the module).
    async fn take_permits(
        &self,
        key: &LimitKey,
        ends: Instant,
        per: Duration,
        cap: u32,
        wanted: u32,
    ) -> Result<u32, StoreError>;

    /// Gives back `count` permits of `key`'s window ending at `ends`, taken for runs that did not
    /// run (deferred, held, or stopped); nothing when that window is gone.
    async fn return_permits(
        &self,
        key: &LimitKey,
        ends: Instant,
        count: u32,
    ) -> Result<(), StoreError>;

    /// Forgets `key`'s window: a limit the configuration no longer has holds nothing.
    async fn drop_limit(&self, key: &LimitKey) -> Result<(), StoreError>;

    /// The limits' windows not yet ended at `now`, by kind and name.
    async fn limit_windows(&self, now: Instant) -> Result<Vec<LimitWindow>, StoreError>;

    /// For each limit whose window's permits are used up at `now`, by kind and name, how many
    /// scheduler entries due at `now` it holds back (those no runner holds a claim on).
    async fn held_by_limits(&self, now: Instant) -> Result<Vec<(LimitKey, u64)>, StoreError>;
}

/// What a limit paces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// A process's steps: its events and its deadlines.
    Process,
    /// A policy's runs: on its events, and delayed.
    Policy,
    /// A scheduled command's runs, by command type.
    Command,
    /// A relay's publishes.
    Relay,
    /// The commands a source of commands from other services takes.
    Ingress,
}

impl LimitKind {
    /// The kind, as stored: `process`, `policy`, `command`, `relay` or `ingress`.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitKind::Process => "process",
            LimitKind::Policy => "policy",
            LimitKind::Command => "command",
            LimitKind::Relay => "relay",
            LimitKind::Ingress => "ingress",
        }
    }

    /// What paces a run whose handler is of `kind`, as the runtime names handlers: a
    /// `process`'s, a `policy`'s, or a `scheduled` command's.
    pub(crate) fn of_handler(kind: &str) -> Option<LimitKind> {
        match kind {
            "process" => Some(LimitKind::Process),
            "policy" => Some(LimitKind::Policy),
            "scheduled" => Some(LimitKind::Command),
            "relay" => Some(LimitKind::Relay),
            _ => None,
        }
    }

    /// The kind stored as `text`, if it reads as one.
    pub fn parse(text: &str) -> Option<LimitKind> {
        match text {
            "process" => Some(LimitKind::Process),
            "policy" => Some(LimitKind::Policy),
            "command" => Some(LimitKind::Command),
            "relay" => Some(LimitKind::Relay),
            "ingress" => Some(LimitKind::Ingress),
            _ => None,
        }
    }
}

/// One limit: a kind and the name of what it paces.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct LimitKey {
    /// What it paces.
    pub kind: LimitKind,
    /// The process's, policy's or relay's name, or the command's type.
    pub name: String,
}

impl fmt::Display for LimitKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} `{}`", self.kind.as_str(), self.name)
    }
}

/// A limit's current window, as the store counts it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LimitWindow {
    /// The limit.
    pub key: LimitKey,
    /// When the window ends, and its permits come back.
    pub ends: Instant,
    /// How many runs the window allows.
    pub cap: u32,
    /// How many it has started.
    pub taken: u32,
}

impl LimitWindow {
    /// Whether the window's permits are used up: its work waits for its end.
    pub fn used_up(&self) -> bool {
        self.taken >= self.cap
    }
}
