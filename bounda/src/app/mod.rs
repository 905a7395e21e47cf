//! The app: a store, a clock and ids, and the commands dispatched on them.

mod fold;
mod outcome;

use std::sync::Arc;

pub use fold::{Loaded, fold};
pub use outcome::{Decided, DispatchError};

use crate::aggregate::{Aggregate, Command, EventSet};
use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::ids::{IdGenerator, UuidV7};
use crate::store::{Append, CommitError, Metadata, NewEvent, Store, WriteSet};
use crate::{Error, RecordedEvent};

/// A running bounda application. Cheap to clone: clones share everything.
#[derive(Clone)]
pub struct App {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    config: Config,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

/// Builds an [`App`].
pub struct AppBuilder {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    config: Config,
}

impl std::fmt::Debug for AppBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppBuilder")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl AppBuilder {
    /// Reads time from `clock` instead of the system clock.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> AppBuilder {
        self.clock = clock;
        self
    }

    /// Takes new ids from `ids` instead of UUID v7.
    pub fn ids(mut self, ids: Arc<dyn IdGenerator>) -> AppBuilder {
        self.ids = ids;
        self
    }

    /// Uses `config` instead of the defaults.
    pub fn config(mut self, config: Config) -> AppBuilder {
        self.config = config;
        self
    }

    /// The app.
    pub fn build(self) -> App {
        App {
            inner: Arc::new(Inner {
                store: self.store,
                clock: self.clock,
                ids: self.ids,
                config: self.config,
            }),
        }
    }
}

impl App {
    /// An app on `store`, with the system clock, UUID v7 ids and the default configuration.
    pub fn builder(store: impl Store) -> AppBuilder {
        AppBuilder {
            store: Arc::new(store),
            clock: Arc::new(SystemClock),
            ids: Arc::new(UuidV7),
            config: Config::default(),
        }
    }

    /// The store.
    pub fn store(&self) -> &dyn Store {
        &*self.inner.store
    }

    /// The clock.
    pub fn clock(&self) -> &dyn Clock {
        &*self.inner.clock
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// A new id.
    pub fn next_id(&self) -> String {
        self.inner.ids.next_id()
    }

    /// The events of aggregate instance `id`, oldest first.
    pub fn events_of<A: Aggregate>(&self, id: &str) -> Result<Vec<RecordedEvent>, Error> {
        Ok(self.store().read_stream(A::NAME, id)?)
    }

    /// Aggregate instance `id`, folded from its events.
    pub fn load<A: Aggregate>(&self, id: &str) -> Result<Loaded<A>, Error> {
        fold(&self.events_of::<A>(id)?)
    }

    /// Runs `command` from outside the runtime: a new command id, its own correlation, depth 0
    /// (spec 143). Decides on the instance's current state and appends at the version it saw; if
    /// the stream moved meanwhile, loads it again and decides again, up to
    /// `commands.concurrencyRetries` times (spec 7). A rejection stores nothing and is returned
    /// typed (spec 18–19).
    pub async fn dispatch<C: Command>(
        &self,
        command: C,
    ) -> Result<Decided, DispatchError<C::Rejection>> {
        let command_id = self.next_id();
        let metadata = Metadata::of_command(&command_id);
        let aggregate = <C::Aggregate as Aggregate>::NAME;
        let id = command.aggregate_id().to_owned();
        let retries = self.config().for_aggregate(aggregate).concurrency_retries;
        let mut run = 0;
        loop {
            let loaded = self.load::<C::Aggregate>(&id)?;
            let events = command
                .decide(&loaded.state)
                .map_err(DispatchError::Rejected)?;
            if events.is_empty() {
                return Ok(Decided {
                    aggregate_type: aggregate,
                    aggregate_id: id,
                    version: loaded.version,
                    event_ids: Vec::new(),
                    event_types: Vec::new(),
                    position: None,
                });
            }
            let append = self.new_events(aggregate, &id, loaded.version, &events, &metadata)?;
            let event_types = events.iter().map(EventSet::type_name).collect();
            let writes = WriteSet {
                appends: vec![append],
                ..WriteSet::default()
            };
            match self.store().commit(&writes) {
                Ok(committed) => {
                    let last = committed.events.last();
                    return Ok(Decided {
                        aggregate_type: aggregate,
                        aggregate_id: id,
                        version: last.map_or(loaded.version, |event| event.version),
                        event_ids: committed.events.iter().map(|e| e.id.clone()).collect(),
                        event_types,
                        position: last.map(|event| event.position),
                    });
                }
                Err(CommitError::StreamMoved {
                    expected_version,
                    actual_version,
                    ..
                }) => {
                    if run >= retries {
                        return Err(DispatchError::Failed(Error::Concurrency {
                            aggregate_type: aggregate.to_owned(),
                            aggregate_id: id,
                            expected_version,
                            actual_version,
                        }));
                    }
                    run += 1;
                }
                Err(CommitError::Store(error)) => return Err(error.into()),
                Err(other) => {
                    return Err(Error::Store(crate::store::StoreError::with_source(
                        "a command's write set was refused",
                        other,
                    ))
                    .into());
                }
            }
        }
    }

    /// Events ready to append: ids, the clock's time, and `metadata`.
    fn new_events<E: EventSet>(
        &self,
        aggregate: &str,
        id: &str,
        expected_version: u64,
        events: &[E],
        metadata: &Metadata,
    ) -> Result<Append, Error> {
        let now = self.clock().now();
        let events = events
            .iter()
            .map(|event| {
                let payload = event.to_json().map_err(|source| Error::Encode {
                    type_name: event.type_name().to_owned(),
                    source,
                })?;
                Ok(NewEvent {
                    id: self.next_id(),
                    event_type: event.type_name().to_owned(),
                    payload,
                    timestamp: now,
                    metadata: metadata.clone(),
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Append {
            aggregate_type: aggregate.to_owned(),
            aggregate_id: id.to_owned(),
            expected_version,
            events,
        })
    }
}
