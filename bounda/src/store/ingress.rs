//! Commands that arrived from other services, kept by their idempotency key with the answer
//! they got: written in the same transaction as the command's events, so a message the broker
//! delivers again, or a request sent again with its key, decides nothing new and is given the
//! first answer.

use serde::{Deserialize, Serialize};

use crate::Instant;
use crate::store::StoreError;

/// A store's record of arrived commands, kept by their idempotency key; the commit of a
/// [`WriteSet`](crate::store::WriteSet) carrying an
/// [`ingress`](crate::store::WriteSet::ingress) record writes it. A capability: a
/// store that keeps it says so in [`Store::capabilities`](crate::store::Store::capabilities).
#[async_trait::async_trait]
pub trait IngressStore: Send + Sync {
    /// The command decided under idempotency key `key` with its answer, if one was.
    async fn ingress_answer(&self, key: &str) -> Result<Option<IngressRecord>, StoreError>;

    /// Up to `limit` keys of arrived commands in key order, after `after` (from the first when
    /// `None`): how a [`copy`](crate::store::copy) reads them a page at a time.
    async fn ingress_page(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<IngressRecord>, StoreError>;
}

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
