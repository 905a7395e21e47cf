//! What the app's ports were asked during a preview. A double that records and succeeds writes
//! each call here; the report lists them, so a preview says which messages would go out and
//! which payments would be refunded, not only which events would be written.

use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};

/// One call a port double received.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PortCall {
    /// The port (`Notifier`).
    pub port: String,
    /// What it was asked (`notify`).
    pub call: String,
    /// The idempotency key it was given, if any: repeats under one key are one effect for a
    /// provider that drops repeats.
    pub key: Option<String>,
    /// What it was given, as the double chose to show it.
    pub detail: serde_json::Value,
}

/// The calls of a preview's port doubles, shared by the doubles and the report: register it as
/// a port (`builder.port(calls.clone())`) and give the doubles a clone.
#[derive(Debug, Clone, Default)]
pub struct PortCalls {
    calls: Arc<Mutex<Vec<PortCall>>>,
}

impl PortCalls {
    /// Records that `port` was asked `call` under `key` with `detail`.
    pub fn record(&self, port: &str, call: &str, key: Option<&str>, detail: serde_json::Value) {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(PortCall {
                port: port.to_owned(),
                call: call.to_owned(),
                key: key.map(str::to_owned),
                detail,
            });
    }

    /// Every call recorded, in order.
    pub fn calls(&self) -> Vec<PortCall> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many calls are recorded.
    pub fn len(&self) -> usize {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
