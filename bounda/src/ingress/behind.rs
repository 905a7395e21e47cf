//! What waits at a source of commands.

/// What waits at a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Behind {
    /// Messages not yet taken, or taken and not yet acknowledged.
    pub messages: u64,
    /// When the oldest of them was sent.
    pub oldest: Option<crate::Instant>,
}
