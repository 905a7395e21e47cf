//! What a process or policy declares of the app's ports (a notifier, a payment gateway): their
//! types, which the app is checked against when it is built.

use std::any::{TypeId, type_name};

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
