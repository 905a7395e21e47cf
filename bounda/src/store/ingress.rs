//! Commands that arrived from other services, kept by their idempotency key with the answer
//! they got: written in the same transaction as the command's events, so a message the broker
//! delivers again, or a request sent again with its key, decides nothing new and is given the
//! first answer.

use serde::{Deserialize, Serialize};

use crate::Instant;

/// One key an arrived command was decided under.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IngressRecord {
    /// The idempotency key: an HTTP request's `Idempotency-Key`, a CloudEvent's `source` and
    /// `id`.
    pub key: String,
    /// What was asked under it (the command's type and payload, hashed): the same key with
    /// another request is refused, not answered with another's answer.
    pub fingerprint: String,
    /// The answer the first delivery got, as the runtime writes it.
    pub answer: serde_json::Value,
    /// When it was decided.
    pub decided_at: Instant,
}
