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
