//! Wake-ups: hearing what other processes write that may be work for this one (an event
//! appended, an entry scheduled), so a runner waiting between polls wakes at once. A store
//! without them is polled.

use crate::store::StoreError;

/// A store's wake-ups from other processes' writes. A capability: a store that hears them says so
/// in [`Store::capabilities`](crate::store::Store::capabilities); runners on another poll.
#[async_trait::async_trait]
pub trait WakeUps: Send + Sync {
    /// Starts hearing other processes' writes. It should return without waiting for the
    /// network: the listener connects, and connects again, on its own.
    async fn listen(&self) -> Result<Box<dyn Listener>, StoreError>;
}

/// Wake-ups from other processes' writes; see [`WakeUps::listen`]. A wake-up may be spurious,
/// and one lost (a dropped connection) costs a poll interval, never work: runners keep polling.
pub trait Listener: Send + Sync {
    /// Completes at the next wake-up after the last call, or at once if one came since.
    fn next(&self) -> futures_util::future::BoxFuture<'_, ()>;
}
