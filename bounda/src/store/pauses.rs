//! Pauses: what an operator stopped for a while (a process, a policy, a subscriber, or one
//! process instance), kept in the store so that every runner on it obeys them. A paused
//! subscriber makes no pass; a paused policy or process takes no event (the subscriber's
//! checkpoint passes its events, [bookmarked](super::bookmarks), and returns to them on
//! resume); a paused process or instance runs no deadline, and a paused policy no delayed run:
//! the store's claim of due entries leaves them, so they run in order, late, once resumed.

use std::fmt;

use serde::Serialize;

use crate::Instant;
use crate::store::instances::{DeadlinePayload, PROCESS_DEADLINE};
use crate::store::{ScheduledEntry, StoreError};

/// A store's pauses: kept for every runner on it, and obeyed by its claim of due entries. A
/// capability: a store that keeps them says so in [`Store::capabilities`](super::Store::capabilities).
#[async_trait::async_trait]
pub trait PauseStore: Send + Sync {
    /// Pauses `pause.target` as `pause` says; `false`, changing nothing, when it is paused
    /// already. From then on the store's claim of due entries
    /// ([`claim_due`](super::Store::claim_due), [`ClaimDue`](super::ClaimDue)) leaves the
    /// entries it holds (see the module), and [`next_due_at`](super::Store::next_due_at) does
    /// not count them.
    async fn pause(&self, pause: &Pause) -> Result<bool, StoreError>;

    /// Resumes `target`; `false` when it was not paused.
    async fn resume(&self, target: &PauseTarget) -> Result<bool, StoreError>;

    /// Every pause, by kind, name and instance.
    async fn pauses(&self) -> Result<Vec<Pause>, StoreError>;
}

/// What a delayed policy run's scheduler entry is: its type.
pub(crate) const POLICY_RUN: &str = "bounda.PolicyRun";

/// What is paused. With the feature `cli`, it is also the `pause` and `resume` commands' target.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[cfg_attr(feature = "cli", derive(clap::Subcommand))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PauseTarget {
    /// A process: its events wait, and its instances' deadlines.
    Process {
        /// The process's name.
        name: String,
    },
    /// One instance of a process: its events wait, and its deadline.
    Instance {
        /// The process's name.
        process: String,
        /// The instance's id.
        id: String,
    },
    /// A policy: its events wait, and its delayed runs.
    Policy {
        /// The policy's name.
        name: String,
    },
    /// A relay: its events wait unpublished, each stream in order, while the other relays go
    /// on.
    Relay {
        /// The relay's name.
        name: String,
    },
    /// A source of commands from other services: its messages wait at the broker.
    Ingress {
        /// The source's name (`nats:PAYMENTS/shop`).
        name: String,
    },
    /// A subscriber (`policies`, `processes`, `read-model:<name>`): it makes no pass.
    Subscriber {
        /// The subscriber's name.
        name: String,
    },
}

impl PauseTarget {
    /// The kind, as stored: `process`, `instance`, `policy`, `relay`, `ingress` or
    /// `subscriber`.
    pub fn kind(&self) -> &'static str {
        match self {
            PauseTarget::Process { .. } => "process",
            PauseTarget::Instance { .. } => "instance",
            PauseTarget::Policy { .. } => "policy",
            PauseTarget::Relay { .. } => "relay",
            PauseTarget::Ingress { .. } => "ingress",
            PauseTarget::Subscriber { .. } => "subscriber",
        }
    }

    /// The name, as stored: the process, policy or subscriber (an instance's process).
    pub fn name(&self) -> &str {
        match self {
            PauseTarget::Process { name }
            | PauseTarget::Policy { name }
            | PauseTarget::Relay { name }
            | PauseTarget::Ingress { name }
            | PauseTarget::Subscriber { name } => name,
            PauseTarget::Instance { process, .. } => process,
        }
    }

    /// The instance, as stored: empty but for an instance.
    pub fn instance(&self) -> &str {
        match self {
            PauseTarget::Instance { id, .. } => id,
            _ => "",
        }
    }

    /// The target stored as `kind`, `name` and `instance`, if it reads as one.
    pub fn from_parts(kind: &str, name: &str, instance: &str) -> Option<PauseTarget> {
        let name = name.to_owned();
        Some(match kind {
            "process" => PauseTarget::Process { name },
            "instance" => PauseTarget::Instance {
                process: name,
                id: instance.to_owned(),
            },
            "policy" => PauseTarget::Policy { name },
            "relay" => PauseTarget::Relay { name },
            "ingress" => PauseTarget::Ingress { name },
            "subscriber" => PauseTarget::Subscriber { name },
            _ => return None,
        })
    }
}

impl fmt::Display for PauseTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PauseTarget::Instance { process, id } => write!(f, "instance {process} {id}"),
            other => write!(f, "{} {}", other.kind(), other.name()),
        }
    }
}

/// A pause: what, since when, by whom, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pause {
    /// What is paused.
    pub target: PauseTarget,
    /// When it was paused.
    pub since: Instant,
    /// Who paused it: the operator's name.
    pub by: String,
    /// Why, if they said.
    pub reason: Option<String>,
}

impl fmt::Display for Pause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} paused since {} by {}",
            self.target, self.since, self.by
        )?;
        match &self.reason {
            Some(reason) => write!(f, ": {reason}"),
            None => Ok(()),
        }
    }
}

/// The pauses a pass obeys, read once at its start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Paused {
    pauses: Vec<Pause>,
}

impl Paused {
    /// These pauses.
    pub fn new(pauses: Vec<Pause>) -> Paused {
        Paused { pauses }
    }

    /// Every pause.
    pub fn all(&self) -> &[Pause] {
        &self.pauses
    }

    fn find(&self, matches: impl Fn(&PauseTarget) -> bool) -> Option<&Pause> {
        self.pauses.iter().find(|pause| matches(&pause.target))
    }

    /// The pause of subscriber `name`, if it is paused.
    pub fn subscriber(&self, name: &str) -> Option<&Pause> {
        self.find(|t| matches!(t, PauseTarget::Subscriber { name: n } if n == name))
    }

    /// The pause of a policy, process or relay named `handler` as a whole, if it is paused.
    pub fn handler(&self, handler: &str) -> Option<&Pause> {
        self.find(|t| {
            matches!(t, PauseTarget::Policy { name } | PauseTarget::Process { name } | PauseTarget::Relay { name } if name == handler)
        })
    }

    /// The pause of source of commands `name`, if it is paused.
    pub fn ingress(&self, name: &str) -> Option<&Pause> {
        self.find(|t| matches!(t, PauseTarget::Ingress { name: n } if n == name))
    }

    /// The pause of policy `name`, if it is paused.
    pub fn policy(&self, name: &str) -> Option<&Pause> {
        self.find(|t| matches!(t, PauseTarget::Policy { name: n } if n == name))
    }

    /// The pause that holds instance `id` of process `process`: the process's or its own.
    pub fn instance(&self, process: &str, id: &str) -> Option<&Pause> {
        self.find(|t| matches!(t, PauseTarget::Process { name } if name == process))
            .or_else(|| {
                self.find(|t| {
                    matches!(t, PauseTarget::Instance { process: p, id: i } if p == process && i == id)
                })
            })
    }

    /// The instances paused one by one, by process.
    pub fn instances(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pauses.iter().filter_map(|pause| match &pause.target {
            PauseTarget::Instance { process, id } => Some((process.as_str(), id.as_str())),
            _ => None,
        })
    }

    /// The pause that holds scheduler entry `entry`, if one does: a process deadline's process
    /// or instance, a delayed policy run's policy. What a store's claim of due entries leaves.
    pub fn entry(&self, entry: &ScheduledEntry) -> Option<&Pause> {
        match entry.command_type.as_str() {
            PROCESS_DEADLINE => {
                let payload = DeadlinePayload::of(entry)?;
                self.instance(&payload.process, &payload.instance)
            }
            POLICY_RUN => self.policy(entry.payload.get("policy")?.as_str()?),
            _ => None,
        }
    }
}
