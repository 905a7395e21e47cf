//! What the binary holds: every `#[process]`, `#[policy]`, `#[command]` and `#[read_model]` registers itself at
//! link time, so an app built on it runs them without a list that can be forgotten.

use crate::aggregate::Command;
use crate::app::{AppBuilder, Policy};
use crate::process::Process;

/// What a registration adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    Command,
    Policy,
    Process,
    ReadModel,
}

/// One process, policy or command of the binary, written by its attribute. Not public API.
#[derive(Debug)]
pub struct Registration {
    pub(crate) kind: Kind,
    /// Where it is declared (`storefront::lifecycle::OrderLifecycle`), to order registrations
    /// and to name both sides of a clash.
    pub(crate) path: &'static str,
    pub(crate) add: fn(AppBuilder) -> AppBuilder,
}

impl Registration {
    /// Registers process `P`, declared at `path`.
    pub const fn process<P: Process>(path: &'static str) -> Registration {
        Registration {
            kind: Kind::Process,
            path,
            add: AppBuilder::process::<P>,
        }
    }

    /// Registers policy `P`, declared at `path`.
    pub const fn policy<P: Policy>(path: &'static str) -> Registration {
        Registration {
            kind: Kind::Policy,
            path,
            add: AppBuilder::policy::<P>,
        }
    }

    /// Registers read model `R`, declared at `path`.
    pub const fn read_model<R: crate::read_model::Projections>(path: &'static str) -> Registration {
        Registration {
            kind: Kind::ReadModel,
            path,
            add: AppBuilder::read_model::<R>,
        }
    }

    /// Registers command `C`, declared at `path`.
    pub const fn command<C: Command>(path: &'static str) -> Registration {
        Registration {
            kind: Kind::Command,
            path,
            add: AppBuilder::command::<C>,
        }
    }
}

inventory::collect!(Registration);

/// Every registration of the binary, in a stable order (by kind, then path).
pub(crate) fn all() -> Vec<&'static Registration> {
    let mut all: Vec<&'static Registration> = inventory::iter::<Registration>.into_iter().collect();
    all.sort_by_key(|registration| (registration.kind, registration.path));
    all
}
