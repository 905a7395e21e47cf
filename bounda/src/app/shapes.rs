//! The shapes of the app's event types. Every event the runtime reads from the store to route,
//! run or show is brought up here to today's name and payload, so a process's correlation, a
//! policy's routing and an operator's story all see what the code declares today. The store is
//! never rewritten.

use std::collections::HashMap;

use crate::aggregate::{Aggregate, EventSet};
use crate::app::App;
use crate::event::EventShape;
use crate::{Error, RecordedEvent};

/// Each event type of the app's aggregates, by aggregate and by every name it was stored under.
#[derive(Debug, Default)]
pub(crate) struct Shapes {
    by_stored: HashMap<&'static str, HashMap<&'static str, &'static EventShape>>,
}

impl Shapes {
    /// Adds the event types of aggregate `A`.
    pub(crate) fn add<A: Aggregate>(&mut self) {
        self.add_shapes(<A::Event as EventSet>::SHAPES);
    }

    /// Adds `shapes`, event types of one aggregate.
    pub(crate) fn add_shapes(&mut self, shapes: &'static [EventShape]) {
        for shape in shapes {
            let names = self.by_stored.entry(shape.aggregate).or_default();
            names.insert(shape.name, shape);
            for old in shape.renamed_from {
                names.insert(old, shape);
            }
        }
    }

    /// Whether the app has aggregate `aggregate`.
    pub(crate) fn has_aggregate(&self, aggregate: &str) -> bool {
        self.by_stored.contains_key(aggregate)
    }

    /// The shape of events stored as `event_type` of `aggregate`, if the app has it.
    pub(crate) fn of(&self, aggregate: &str, event_type: &str) -> Option<&'static EventShape> {
        self.by_stored.get(aggregate)?.get(event_type).copied()
    }

    /// `event` under today's name and, where its upcasts read it, with today's payload and
    /// version. A payload that does not read is left as stored, at its version: the step that
    /// decodes it fails with the reason, naming the event.
    pub(crate) fn bring_up(&self, event: &mut RecordedEvent) {
        let Some(shape) = self.of(&event.aggregate_type, &event.event_type) else {
            return;
        };
        if event.unreadable.is_some() {
            // Left as read: whatever decodes it fails naming the row.
            return;
        }
        if event.event_type != shape.name {
            shape.name.clone_into(&mut event.event_type);
        }
        let stored = event.metadata.schema_version;
        if stored < shape.version {
            match (shape.bring_up)(stored, event.payload.clone()) {
                Ok(payload) => {
                    event.payload = payload;
                    event.metadata.schema_version = shape.version;
                }
                // Routing reads the payload before any step decodes it: a process that finds
                // its instance by a field the upcast would have given cannot find it.
                Err(error) => tracing::warn!(
                    event = %event.id,
                    "an event does not read through its upcasts, so it is left as stored: {}",
                    crate::error::chain(&event.shape_error(error))
                ),
            }
        }
    }
}

impl App {
    /// Up to `limit` events after position `after`, each brought up to today's shape.
    pub(crate) async fn read_all(
        &self,
        after: u64,
        limit: usize,
    ) -> Result<Vec<RecordedEvent>, Error> {
        let mut events = self.store().read_all(after, limit).await?;
        for event in &mut events {
            self.inner.shapes.bring_up(event);
        }
        Ok(events)
    }

    /// Event `id`, brought up to today's shape.
    pub(crate) async fn read_event(&self, id: &str) -> Result<Option<RecordedEvent>, Error> {
        let mut event = self.store().read_event(id).await?;
        if let Some(event) = &mut event {
            self.inner.shapes.bring_up(event);
        }
        Ok(event)
    }
}
