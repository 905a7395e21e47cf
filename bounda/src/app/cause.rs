//! Where a reaction's commands come from: the correlation they join, what caused them, and how
//! deep their chain is.

use serde::{Deserialize, Serialize};

use crate::RecordedEvent;
use crate::store::Metadata;

/// Where a reaction's commands come from: the correlation they join, what caused
/// them, how deep their chain is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cause {
    /// The correlation the commands join.
    pub correlation_id: String,
    /// What caused them: the event handled.
    pub causation_id: String,
    /// The depth the commands' events get: one deeper than the event handled, or
    /// 0 for a deadline, which starts a chain of its own.
    pub depth: u32,
}

impl Cause {
    /// The cause of commands a reaction to `event` sends: its correlation, the event itself, one
    /// hop deeper.
    pub fn of_event(event: &RecordedEvent) -> Cause {
        Cause {
            correlation_id: event.metadata.correlation_id.clone(),
            causation_id: event.id.clone(),
            depth: event.metadata.depth + 1,
        }
    }

    /// The metadata of events decided under this cause.
    pub(crate) fn metadata(&self) -> Metadata {
        Metadata {
            correlation_id: self.correlation_id.clone(),
            causation_id: self.causation_id.clone(),
            depth: self.depth,
            schema_version: 1,
            system: false,
        }
    }
}
