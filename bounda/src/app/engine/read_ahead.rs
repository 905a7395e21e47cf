//! A wave's reads made before its handlers run: the streams its runs will load (a process
//! instance, the aggregate it follows), read in one read of the store per stream type
//! ([`Store::read_tails`](crate::store::Store::read_tails)) instead of a round trip or two per
//! run in turn. Each stream read ahead is taken once, by the first load of it inside the wave;
//! a later load reads the store again. Reading a moment earlier changes nothing a run relies on:
//! what it writes is fenced on the stream versions it read, as when it reads for itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::app::App;
use crate::store::StreamTail;

tokio::task_local! {
    /// The streams read ahead for the wave running in this task.
    static READ_AHEAD: Arc<ReadAhead>;
}

/// Streams read ahead, by type and id, each until a load takes it.
#[derive(Debug, Default)]
pub(crate) struct ReadAhead {
    tails: Mutex<HashMap<(String, String), StreamTail>>,
}

impl ReadAhead {
    /// Reads `streams` (type and id), a read per type, all at once. A stream that cannot be
    /// read ahead is left for its run to read itself, which meets the store's error there.
    pub(crate) async fn read(app: &App, streams: Vec<(String, String)>) -> ReadAhead {
        let mut by_type: HashMap<String, Vec<String>> = HashMap::new();
        for (stream_type, id) in streams {
            let ids = by_type.entry(stream_type).or_default();
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        let reads = by_type.into_iter().map(|(stream_type, ids)| async move {
            let tails = app.store().read_tails(&stream_type, &ids).await;
            (stream_type, tails)
        });
        let mut tails = HashMap::new();
        for (stream_type, read) in futures_util::future::join_all(reads).await {
            for tail in read.into_iter().flatten() {
                tails.insert((stream_type.clone(), tail.aggregate_id.clone()), tail);
            }
        }
        ReadAhead {
            tails: Mutex::new(tails),
        }
    }

    /// Runs `wave` with these streams to take.
    pub(crate) async fn during<T>(self, wave: impl Future<Output = T>) -> T {
        READ_AHEAD.scope(Arc::new(self), wave).await
    }
}

/// Stream `stream_type:id` as read ahead for the wave this task runs, if it was and no load has
/// taken it yet.
pub(crate) fn take(stream_type: &str, id: &str) -> Option<StreamTail> {
    READ_AHEAD
        .try_with(|ahead| {
            ahead
                .tails
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&(stream_type.to_owned(), id.to_owned()))
        })
        .ok()
        .flatten()
}
