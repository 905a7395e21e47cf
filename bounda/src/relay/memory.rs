//! A sink in memory: what a test publishes to, and how it fails on purpose.

use std::sync::{Arc, Mutex, PoisonError};

use crate::relay::{Message, Sink, SinkError};

/// A [`Sink`] that keeps every message it accepts, in the order it accepted them, and fails
/// when told to: down (every publish unavailable), the next publishes unavailable, or messages
/// of a type refused for good. Clones share what it keeps.
#[derive(Debug, Clone, Default)]
pub struct MemorySink {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    published: Vec<Message>,
    down: bool,
    failing: u32,
    failing_streams: Vec<String>,
    refused: Vec<String>,
    attempts: u64,
}

impl MemorySink {
    /// An empty sink that accepts everything.
    pub fn new() -> MemorySink {
        MemorySink::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The messages accepted so far, in order; one published twice is kept twice.
    pub fn published(&self) -> Vec<Message> {
        self.state().published.clone()
    }

    /// How many publishes were tried, failed ones included.
    pub fn attempts(&self) -> u64 {
        self.state().attempts
    }

    /// While `down`, every publish is unavailable.
    pub fn set_down(&self, down: bool) {
        self.state().down = down;
    }

    /// The next `n` publishes are unavailable.
    pub fn fail_next(&self, n: u32) {
        self.state().failing = n;
    }

    /// While failing, every publish of a message of aggregate instance `id` is unavailable.
    pub fn fail_stream(&self, id: &str, failing: bool) {
        let mut state = self.state();
        state.failing_streams.retain(|stream| stream != id);
        if failing {
            state.failing_streams.push(id.to_owned());
        }
    }

    /// Messages of CloudEvents type `ty` are refused for good, until [`accept`](Self::accept).
    pub fn refuse(&self, ty: &str) {
        self.state().refused.push(ty.to_owned());
    }

    /// Accepts every type again.
    pub fn accept(&self) {
        self.state().refused.clear();
    }
}

#[async_trait::async_trait]
impl Sink for MemorySink {
    fn describe(&self) -> String {
        "a sink in memory".to_owned()
    }

    async fn publish(&self, message: &Message) -> Result<(), SinkError> {
        let mut state = self.state();
        state.attempts += 1;
        if state.down {
            return Err(SinkError::Unavailable(anyhow::anyhow!("the sink is down")));
        }
        if state.failing_streams.contains(&message.aggregate_id) {
            return Err(SinkError::Unavailable(anyhow::anyhow!(
                "the sink does not take `{}` now",
                message.aggregate_id
            )));
        }
        if state.failing > 0 {
            state.failing -= 1;
            return Err(SinkError::Unavailable(anyhow::anyhow!(
                "the sink did not answer in time"
            )));
        }
        if state.refused.iter().any(|ty| ty == message.ty()) {
            return Err(SinkError::Refused(anyhow::anyhow!(
                "messages of type `{}` are not accepted",
                message.ty()
            )));
        }
        state.published.push(message.clone());
        Ok(())
    }
}
