//! Loading an aggregate: its stream, folded into its state.

use crate::aggregate::{Aggregate, EventSet};
use crate::{Error, RecordedEvent};

/// An aggregate instance as loaded: its state and the version it was folded to.
#[derive(Debug)]
pub struct Loaded<A> {
    /// The state.
    pub state: A,
    /// How many events it was folded from: the version a decision on it appends at.
    pub version: u64,
}

/// Folds `events`, oldest first, into `A`'s state. An event the aggregate cannot read is a typed
/// error naming it, and nothing is decided on a state that skipped it. Each event is read at the
/// version it was stored at, through its upcasts.
pub fn fold<A: Aggregate>(events: &[RecordedEvent]) -> Result<Loaded<A>, Error> {
    let mut state = A::default();
    let mut version = 0;
    for event in events {
        let decoded = A::Event::read(event)?;
        state.apply(&decoded);
        version = event.version;
    }
    Ok(Loaded { state, version })
}
