//! A wave's reads made before its handlers run: the streams its runs will load (a process
//! instance, the aggregate it follows), read in one read of the store per stream type
//! ([`Store::read_tails`](crate::store::Store::read_tails)), and the scheduler entries they will
//! read (a process instance's, which its step arms), in one read
//! ([`Store::scheduled_many`](crate::store::Store::scheduled_many)), instead of a round trip or
//! two per run in turn. Each stream or entry read ahead is taken once, by the first read of it
//! inside the wave; a later read goes to the store again. Reading a moment earlier changes
//! nothing a run relies on: what it writes is fenced on the stream versions it read, as when it
//! reads for itself, and an instance's entry changes only with a step that moves its stream.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::app::App;
use crate::store::{ScheduledEntry, StreamTail};

tokio::task_local! {
    /// The streams read ahead for the wave running in this task.
    static READ_AHEAD: Arc<ReadAhead>;
}

/// Streams read ahead, by type and id, and scheduler entries, by key (`None`: there is none),
/// each until a read takes it.
#[derive(Debug, Default)]
pub(crate) struct ReadAhead {
    tails: Mutex<HashMap<(String, String), StreamTail>>,
    entries: Mutex<HashMap<String, Option<ScheduledEntry>>>,
}

impl ReadAhead {
    /// Reads `streams` (type and id), a read per type, and the entries keyed `keys`, in one
    /// read, all at once. What cannot be read ahead is left for its run to read itself, which
    /// meets the store's error there.
    pub(crate) async fn read(
        app: &App,
        streams: Vec<(String, String)>,
        mut keys: Vec<String>,
    ) -> ReadAhead {
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
        keys.sort_unstable();
        keys.dedup();
        let entries = async {
            if keys.is_empty() {
                return HashMap::new();
            }
            let Ok(found) = app.store().scheduled_many(&keys).await else {
                return HashMap::new();
            };
            let mut entries: HashMap<String, Option<ScheduledEntry>> =
                keys.into_iter().map(|key| (key, None)).collect();
            entries.extend(
                found
                    .into_iter()
                    .map(|entry| (entry.dedupe_key.clone(), Some(entry))),
            );
            entries
        };
        let (read, entries) =
            futures_util::future::join(futures_util::future::join_all(reads), entries).await;
        let mut tails = HashMap::new();
        for (stream_type, read) in read {
            for tail in read.into_iter().flatten() {
                tails.insert((stream_type.clone(), tail.aggregate_id.clone()), tail);
            }
        }
        ReadAhead {
            tails: Mutex::new(tails),
            entries: Mutex::new(entries),
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

/// The scheduler entry keyed `key` as read ahead for the wave this task runs (`Some(None)`:
/// there was none), if it was and no read has taken it yet.
pub(crate) fn take_entry(key: &str) -> Option<Option<ScheduledEntry>> {
    READ_AHEAD
        .try_with(|ahead| {
            ahead
                .entries
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(key)
        })
        .ok()
        .flatten()
}
