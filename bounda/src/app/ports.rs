//! Ports: the app's ways out to the world (a notifier, a payment gateway), found by type.

use std::any::{Any, TypeId, type_name};
use std::collections::HashMap;
use std::sync::Arc;

use crate::Error;

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

/// A port a process or policy declares it reads (`ports = [..]` in its attribute): an app
/// built without it is refused, and its handlers may read no other.
#[derive(Clone, Copy)]
pub struct PortDecl {
    id: fn() -> TypeId,
    name: fn() -> &'static str,
}

impl PortDecl {
    /// The declaration of port type `T`. Written by the macros.
    pub const fn of<T: Send + Sync + 'static>() -> PortDecl {
        PortDecl {
            id: TypeId::of::<T>,
            name: type_name::<T>,
        }
    }

    /// The port's type.
    pub(crate) fn id(&self) -> TypeId {
        (self.id)()
    }

    /// The port type's name.
    pub(crate) fn name(&self) -> &'static str {
        (self.name)()
    }
}

impl std::fmt::Debug for PortDecl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
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
