//! What a store keeps beyond the core every app needs to run: each capability is a trait of its
//! own, and a store says which it has in [`Store::capabilities`](super::Store::capabilities).
//! What uses a capability the store lacks is refused before it changes anything, naming the
//! capability, rather than answered with nothing.

use super::copy::CopyStore;
use super::error::StoreError;
use super::ingress::IngressStore;
use super::instances::InstanceIndex;
use super::limits::LimitStore;
use super::pauses::PauseStore;
use super::read_models::ReadModelStore;
use super::wake_ups::WakeUps;

/// Where every capability but wake-ups is kept.
const EVERY_STORE: &str = "a SQLite file or a PostgreSQL schema";

/// The capabilities a store has beyond the core: each one it keeps, or `None`; and the store's
/// name, for the refusals.
#[derive(Clone, Copy, Default)]
#[non_exhaustive]
pub struct Capabilities<'a> {
    /// What the refusal of a capability calls the store ("the SQLite store"); "this store"
    /// when `None`.
    pub store: Option<&'a str>,
    /// Pauses, kept for every runner on the store ([`PauseStore`]).
    pub pauses: Option<&'a dyn PauseStore>,
    /// Limits' permits, counted for every runner on the store ([`LimitStore`]).
    pub limits: Option<&'a dyn LimitStore>,
    /// The index of process instances, by process, status and next deadline
    /// ([`InstanceIndex`]).
    pub instances: Option<&'a dyn InstanceIndex>,
    /// Copies: read page by page as a copy's source, written as a copy's target, and marked
    /// as one ([`CopyStore`]).
    pub copies: Option<&'a dyn CopyStore>,
    /// Read models' tables, kept beside the events ([`ReadModelStore`]).
    pub read_models: Option<&'a dyn ReadModelStore>,
    /// The record of commands that arrived from other services, by idempotency key
    /// ([`IngressStore`]).
    pub ingress: Option<&'a dyn IngressStore>,
    /// Wake-ups from other processes' writes ([`WakeUps`]); without them, runners poll.
    pub wake_ups: Option<&'a dyn WakeUps>,
    /// Whether a worker under load prepares its next batch (claims it and runs its first
    /// handlers) while the store commits the last, rather than claiming it in that commit.
    /// Worth it where a commit is a round trip to a server, which works while the worker would
    /// wait; a store that commits in the worker's own process gains nothing by it.
    pub pipelined_batches: bool,
}

impl std::fmt::Debug for Capabilities<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capabilities")
            .field("store", &self.store)
            .field("pauses", &self.pauses.is_some())
            .field("limits", &self.limits.is_some())
            .field("instances", &self.instances.is_some())
            .field("copies", &self.copies.is_some())
            .field("read_models", &self.read_models.is_some())
            .field("ingress", &self.ingress.is_some())
            .field("wake_ups", &self.wake_ups.is_some())
            .field("pipelined_batches", &self.pipelined_batches)
            .finish()
    }
}

impl<'a> Capabilities<'a> {
    /// None beyond the core.
    pub fn core() -> Capabilities<'a> {
        Capabilities::default()
    }

    /// Naming the store `name` in the refusals ("the SQLite store").
    pub fn named(self, name: &'a str) -> Capabilities<'a> {
        Capabilities {
            store: Some(name),
            ..self
        }
    }

    /// With pauses, kept by `store`.
    pub fn with_pauses(self, store: &'a dyn PauseStore) -> Capabilities<'a> {
        Capabilities {
            pauses: Some(store),
            ..self
        }
    }

    /// With limits, counted by `store`.
    pub fn with_limits(self, store: &'a dyn LimitStore) -> Capabilities<'a> {
        Capabilities {
            limits: Some(store),
            ..self
        }
    }

    /// With the instances index, kept by `store`.
    pub fn with_instances(self, store: &'a dyn InstanceIndex) -> Capabilities<'a> {
        Capabilities {
            instances: Some(store),
            ..self
        }
    }

    /// With copies, kept by `store`.
    pub fn with_copies(self, store: &'a dyn CopyStore) -> Capabilities<'a> {
        Capabilities {
            copies: Some(store),
            ..self
        }
    }

    /// With read models' tables, kept by `store`.
    pub fn with_read_models(self, store: &'a dyn ReadModelStore) -> Capabilities<'a> {
        Capabilities {
            read_models: Some(store),
            ..self
        }
    }

    /// With the record of arrived commands, kept by `store`.
    pub fn with_ingress(self, store: &'a dyn IngressStore) -> Capabilities<'a> {
        Capabilities {
            ingress: Some(store),
            ..self
        }
    }

    /// With wake-ups, heard by `store`.
    pub fn with_wake_ups(self, store: &'a dyn WakeUps) -> Capabilities<'a> {
        Capabilities {
            wake_ups: Some(store),
            ..self
        }
    }

    /// With a worker's next batch prepared while the last commits.
    pub fn with_pipelined_batches(self) -> Capabilities<'a> {
        Capabilities {
            pipelined_batches: true,
            ..self
        }
    }

    /// The store's pauses, or the refusal of what needs them.
    pub fn pauses(&self) -> Result<&'a dyn PauseStore, StoreError> {
        self.pauses
            .ok_or_else(|| self.lacking("pauses", EVERY_STORE))
    }

    /// The store's instances index, or the refusal of what needs it.
    pub fn instances(&self) -> Result<&'a dyn InstanceIndex, StoreError> {
        self.instances
            .ok_or_else(|| self.lacking("instances index", EVERY_STORE))
    }

    /// The store's copies, or the refusal of what needs them.
    pub fn copies(&self) -> Result<&'a dyn CopyStore, StoreError> {
        self.copies
            .ok_or_else(|| self.lacking("copies", EVERY_STORE))
    }

    /// The store's read models' tables, or the refusal of what needs them.
    pub fn read_models(&self) -> Result<&'a dyn ReadModelStore, StoreError> {
        self.read_models
            .ok_or_else(|| self.lacking("read models", EVERY_STORE))
    }

    /// The store's limits, or the refusal of what needs them.
    pub fn limits(&self) -> Result<&'a dyn LimitStore, StoreError> {
        self.limits
            .ok_or_else(|| self.lacking("limits", EVERY_STORE))
    }

    /// The store's record of arrived commands, or the refusal of what needs it.
    pub fn ingress(&self) -> Result<&'a dyn IngressStore, StoreError> {
        self.ingress
            .ok_or_else(|| self.lacking("record of arrived commands", EVERY_STORE))
    }

    /// The store's wake-ups, or the refusal of what needs them.
    pub fn wake_ups(&self) -> Result<&'a dyn WakeUps, StoreError> {
        self.wake_ups.ok_or_else(|| {
            self.lacking(
                "wake-ups",
                "a PostgreSQL schema with a listening connection",
            )
        })
    }

    /// The refusal of what needs `capability` on a store without it, naming both and the
    /// stores that keep it.
    fn lacking(&self, capability: &str, kept_by: &str) -> StoreError {
        StoreError::new(format!(
            "{} keeps no {capability}: use {kept_by}",
            self.store.unwrap_or("this store")
        ))
    }
}
