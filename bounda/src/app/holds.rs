//! What holds a subscriber's handlers as one pass reads it: operators' pauses of its processes,
//! policies and instances, and the limits used up in this window. The pass leaves their pairs
//! unclaimed and its checkpoint passes them, leaving a bookmark (`store::bookmarks`) it returns
//! to once the hold is over.

use std::collections::{HashMap, HashSet};

use crate::app::App;
use crate::store::{Bookmark, InOrder, PauseTarget, Paused};
use crate::{Error, Instant};

/// The handlers and lanes held in one pass of a subscriber.
#[derive(Debug, Default)]
pub(crate) struct Holds {
    handlers: HashSet<String>,
    /// Lanes held on their own, by handler.
    lanes: HashMap<String, HashSet<String>>,
    /// The handlers whose pair waiting for its retry holds only its lane: relays, whose
    /// streams go on while one waits.
    by_lane: HashSet<String>,
}

impl App {
    /// What holds the handlers of `kind` (`process` or `policy`) at `now`: the pauses in
    /// `paused` of its handlers and instances, and the limits used up in this window.
    pub(crate) async fn holds(
        &self,
        kind: &str,
        now: Instant,
        paused: &Paused,
    ) -> Result<Holds, Error> {
        // Only what this app runs is held: a pause of a handler since removed from the code
        // keeps no bookmark, which is returned to and found to have nothing left to run.
        let runs = |name: &str| match kind {
            "process" => self.processes().any(|p| p.name() == name),
            "relay" => self.relays().any(|r| r.name() == name),
            _ => self.policies().any(|p| p.name() == name),
        };
        let mut holds = Holds::default();
        if kind == "relay" {
            holds.by_lane = self.relays().map(|relay| relay.name().to_owned()).collect();
        }
        for pause in paused.all() {
            match (&pause.target, kind) {
                (PauseTarget::Process { name }, "process")
                | (PauseTarget::Policy { name }, "policy")
                | (PauseTarget::Relay { name }, "relay")
                    if runs(name) =>
                {
                    holds.handlers.insert(name.clone());
                }
                (PauseTarget::Instance { process, id }, "process") if runs(process) => {
                    holds
                        .lanes
                        .entry(process.clone())
                        .or_default()
                        .insert(id.clone());
                }
                _ => {}
            }
        }
        // A handler whose limit is used up in this window waits for the next, its events in
        // order behind the first.
        for window in self.used_up_limits(kind, now).await? {
            holds.handlers.insert(window.key.name);
        }
        Ok(holds)
    }
}

impl Holds {
    /// An order of claims of at most `limit` pairs that leaves the held ones.
    pub(crate) fn order(&self, limit: usize) -> InOrder {
        let mut order = InOrder::new(limit);
        for handler in &self.by_lane {
            order.wait_by_lane(handler);
        }
        for handler in &self.handlers {
            order.hold_handler(handler);
        }
        for (handler, lanes) in &self.lanes {
            for lane in lanes {
                order.hold_lane(handler, lane);
            }
        }
        order
    }

    /// What holds `handler`'s pair of `lane`, if anything does: the whole handler (`Some(None)`)
    /// or that lane alone (`Some(Some(lane))`). What the bookmark a pass leaves for it names.
    pub(crate) fn holder<'l>(&self, handler: &str, lane: &'l str) -> Option<Option<&'l str>> {
        if self.handlers.contains(handler) {
            Some(None)
        } else if self.holds_lane(handler, lane) {
            Some(Some(lane))
        } else {
            None
        }
    }

    /// Whether the hold that left `bookmark` still stands: its pairs are still held.
    pub(crate) fn keeps(&self, bookmark: &Bookmark) -> bool {
        self.handlers.contains(&bookmark.handler)
            || bookmark
                .lane
                .as_ref()
                .is_some_and(|lane| self.holds_lane(&bookmark.handler, lane))
    }

    fn holds_lane(&self, handler: &str, lane: &str) -> bool {
        self.lanes
            .get(handler)
            .is_some_and(|lanes| lanes.contains(lane))
    }
}
