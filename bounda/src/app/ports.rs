//! Ports: the app's ways out to the world (a notifier, a payment gateway), found by type.

use std::any::{Any, TypeId, type_name};
use std::collections::HashMap;
use std::sync::Arc;

use crate::Error;
pub use crate::port::PortDecl;

/// The ports of an app, one per type.
#[derive(Default, Clone)]
pub(crate) struct Ports {
    by_type: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl Ports {
    pub(crate) fn insert<T: Send + Sync + 'static>(&mut self, port: T) {
        self.by_type.insert(TypeId::of::<T>(), Arc::new(port));
    }

    /// Whether the app has a port of the type `id` names.
    pub(crate) fn has(&self, id: TypeId) -> bool {
        self.by_type.contains_key(&id)
    }

    /// The port of type `T`, or the error that names the missing type.
    pub(crate) fn get<T: Send + Sync + 'static>(&self) -> Result<&T, Error> {
        self.by_type
            .get(&TypeId::of::<T>())
            .and_then(|port| port.downcast_ref::<T>())
            .ok_or_else(|| Error::MissingPort {
                port: type_name::<T>().to_owned(),
            })
    }
}

impl std::fmt::Debug for Ports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ports")
            .field("count", &self.by_type.len())
            .finish()
    }
}

/// The ports a handler may read: those its process or policy declares.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Declared {
    /// `process `OrderLifecycle``, `policy `welcome``: what declares them, as errors name it.
    pub(crate) kind: &'static str,
    /// Its name.
    pub(crate) name: &'static str,
    /// The ports.
    pub(crate) ports: &'static [PortDecl],
}

impl Declared {
    /// The port of type `T` from `ports`, if it is declared; a port the handler does not
    /// declare is an error naming it, whether or not the app has one.
    pub(crate) fn read<'p, T: Send + Sync + 'static>(
        &self,
        ports: &'p Ports,
    ) -> Result<&'p T, Error> {
        if !self.ports.iter().any(|port| port.id() == TypeId::of::<T>()) {
            return Err(Error::UndeclaredPort {
                handler: format!("{} `{}`", self.kind, self.name),
                port: type_name::<T>().to_owned(),
            });
        }
        ports.get::<T>()
    }

    /// The declared ports the app lacks, by name.
    pub(crate) fn missing(&self, ports: &Ports) -> Vec<&'static str> {
        self.ports
            .iter()
            .filter(|port| !ports.has(port.id()))
            .map(PortDecl::name)
            .collect()
    }
}
