//! Bookmarks: where a subscriber's checkpoint passed the events of a held handler (a paused
//! process or policy, one whose limit is used up) or of a held instance (a paused one), so that
//! a long hold does not hold the subscriber's other handlers.
//!
//! A pass that meets a held pair leaves a bookmark at its position instead of stopping there,
//! written with the checkpoint's move in one transaction
//! ([`Store::pass_checkpoint`](super::Store::pass_checkpoint)). Once the hold is over, a pass
//! returns to the bookmark ([`Store::return_to_bookmarks`](super::Store::return_to_bookmarks)):
//! the checkpoint goes back to just before it as the bookmark is deleted, in one transaction,
//! and the pairs handled meanwhile are found done in the inbox. So every event of a held handler
//! is behind the checkpoint only while a bookmark before it stands.

use serde::Serialize;

/// Where a subscriber's checkpoint passed a held handler's events, or one lane's of them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Bookmark {
    /// The handler (a process or a policy) whose events the checkpoint passed.
    pub handler: String,
    /// The lane whose events it passed (a paused process instance's id), or `None` for all of
    /// the handler's.
    pub lane: Option<String>,
    /// The position of the first event it passed.
    pub position: u64,
}

impl Bookmark {
    /// The lane as stored: empty for all of the handler's.
    pub fn lane_key(&self) -> &str {
        self.lane.as_deref().unwrap_or("")
    }

    /// A bookmark as stored, its lane empty for all of the handler's.
    pub fn from_parts(handler: String, lane: String, position: u64) -> Bookmark {
        Bookmark {
            handler,
            lane: (!lane.is_empty()).then_some(lane),
            position,
        }
    }
}

impl std::fmt::Display for Bookmark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.lane {
            Some(lane) => write!(f, "the events of `{}` for `{lane}`", self.handler)?,
            None => write!(f, "the events of `{}`", self.handler)?,
        }
        write!(f, " from position {}", self.position)
    }
}

/// Where a subscriber stands: its checkpoint, and the bookmarks its passes left.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Cursor {
    /// The checkpoint: every event up to it is handled or behind a bookmark.
    pub checkpoint: u64,
    /// The bookmarks, by handler and lane.
    pub bookmarks: Vec<Bookmark>,
}

impl Cursor {
    /// The position after which events may be unhandled: the checkpoint, or just before the
    /// first bookmark.
    pub fn handled_to(&self) -> u64 {
        before_first(self.checkpoint, &self.bookmarks)
    }
}

/// `position`, or just before the first of `bookmarks` if that comes earlier.
pub(crate) fn before_first(position: u64, bookmarks: &[Bookmark]) -> u64 {
    bookmarks
        .iter()
        .map(|bookmark| bookmark.position.saturating_sub(1))
        .fold(position, u64::min)
}
