//! The app's read models: each its own subscriber of the log, a batch of events written with its
//! checkpoint in one transaction; and the queries that read them.

use std::marker::PhantomData;

use futures_util::future::BoxFuture;

use crate::aggregate::EventKey;
use crate::app::App;
use crate::read_model::query::read_models;
use crate::read_model::{Projections, ReadTable, SqlRow, SqlValue, Table, TableDef};
use crate::store::read_models::{
    Batch, Held, ProjectError, Projected, Projector, ReadModelStore, Rows,
};
use crate::{Error, RecordedEvent};

/// One read model, as the app runs it.
pub(crate) trait ReadModelRunner: Send + Sync {
    /// Its name.
    fn name(&self) -> &'static str;
    /// Its subscriber's name, `read-model:<name>`.
    fn subscriber(&self) -> &str;
    /// Its table.
    fn table(&self) -> &'static TableDef;
    /// The event types it projects.
    fn events(&self) -> &'static [EventKey];
    /// Whether it projects `event`.
    fn projects(&self, event: &RecordedEvent) -> bool {
        self.events().iter().any(|key| event.has_key(*key))
    }
    /// Its Rust type, to name it.
    fn type_name(&self) -> &'static str;
    /// A hash of its table's declaration and its projections' code: what a rebuild is keyed
    /// by, so changed code starts afresh. Made once.
    fn fingerprint(&self) -> &str;
    /// The hash of its table's declaration, which every live batch's store checks. Made once.
    fn declared(&self) -> &str;
    /// What projects `events` into its rows.
    fn projector<'e>(&self, events: &'e [RecordedEvent]) -> Box<dyn Projector + 'e>;
}

/// Why a build does not project read model `name`: another build declared its table since.
fn outdated(name: &str) -> Error {
    Error::Configuration {
        message: format!(
            "read model `{name}`'s table is declared otherwise by another build, which changed or rebuilt it since this one started: this build no longer writes it; run the same build everywhere"
        ),
    }
}

/// The runner of read model `R`.
pub(crate) struct ReadModelEntry<R> {
    subscriber: String,
    declared: String,
    fingerprint: String,
    marker: PhantomData<fn() -> R>,
}

impl<R: Projections> ReadModelEntry<R> {
    pub(crate) fn new() -> ReadModelEntry<R> {
        let declared = R::TABLE.declared();
        let code = format!("{declared}\0{}", R::CODE);
        ReadModelEntry {
            subscriber: crate::read_model::subscriber(R::NAME),
            fingerprint: format!("{:016x}", crate::hash::fnv1a(&code)),
            declared,
            marker: PhantomData,
        }
    }
}

impl<R: Projections> ReadModelRunner for ReadModelEntry<R> {
    fn name(&self) -> &'static str {
        R::NAME
    }

    fn subscriber(&self) -> &str {
        &self.subscriber
    }

    fn table(&self) -> &'static TableDef {
        R::TABLE
    }

    fn events(&self) -> &'static [EventKey] {
        R::EVENTS
    }

    fn type_name(&self) -> &'static str {
        std::any::type_name::<R>()
    }

    fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    fn declared(&self) -> &str {
        &self.declared
    }

    fn projector<'e>(&self, events: &'e [RecordedEvent]) -> Box<dyn Projector + 'e> {
        Box::new(EventsOf::<R> {
            events,
            marker: PhantomData,
        })
    }
}

/// `R`'s projections over a batch's events, in order.
struct EventsOf<'e, R> {
    events: &'e [RecordedEvent],
    marker: PhantomData<fn() -> R>,
}

impl<R: Projections> Projector for EventsOf<'_, R> {
    fn apply<'t>(&'t mut self, rows: &'t mut dyn Rows) -> BoxFuture<'t, Result<(), ProjectError>> {
        Box::pin(async move {
            let mut table = Table::<R>::new(rows);
            for (index, event) in self.events.iter().enumerate() {
                let Some(projecting) = R::project(event, &mut table) else {
                    continue;
                };
                let projected = projecting.await;
                if let Err(error) = &projected
                    && let Some(Error::Store(store)) = error.downcast_ref::<Error>()
                    && store.is_unavailable()
                {
                    // The database out of reach is the store's failure, waited out, not the
                    // projection's.
                    return Err(ProjectError::Store(store.flattened()));
                }
                let failed = match projected {
                    Err(error) => Some(crate::error::chain(&*error)),
                    Ok(()) => table.failed().map(|statement| {
                        format!(
                            "a statement failed and the projection went on without it: {statement}"
                        )
                    }),
                };
                if let Some(message) = failed {
                    return Err(ProjectError::Failed {
                        event: index,
                        message,
                    });
                }
            }
            Ok(())
        })
    }
}

impl App {
    /// Read model `R`'s table, to query: `app.read::<OrderSummary>().get("o-1")`.
    pub fn read<R: crate::read_model::ReadModel>(&self) -> ReadTable<'_, R> {
        ReadTable::new(self)
    }

    /// Runs plain SQL on the store's connection, for what [`read`](App::read) cannot say (a
    /// join, a sum): placeholders are `$1`, `$2`, .. on either store (`params` as
    /// `&["c-1".into()]`); a read model's table is named as
    /// [`read_table_name`](App::read_table_name) says. Through a connection pooler, a text with
    /// parameters must be one statement, with no `;` before its end.
    pub async fn read_sql(&self, sql: &str, params: &[SqlValue]) -> Result<Vec<SqlRow>, Error> {
        Ok(read_models(self)?.sql(sql, params).await?)
    }

    /// The name of read model `R`'s table as SQL names it on this store, quoted and qualified.
    pub fn read_table_name<R: crate::read_model::ReadModel>(&self) -> Result<String, Error> {
        Ok(read_models(self)?.target(R::TABLE, None).table)
    }

    /// The app's read models.
    pub(crate) fn read_models(&self) -> impl Iterator<Item = &std::sync::Arc<dyn ReadModelRunner>> {
        self.inner.read_models.iter()
    }

    /// One batch of `model`'s events: written with its checkpoint, or held just before the
    /// event whose projection failed, with what came before it written. Answers whether it
    /// moved.
    pub(crate) async fn read_model_pass(&self, model: &dyn ReadModelRunner) -> Result<bool, Error> {
        let refused = self
            .refused_read_models()
            .iter()
            .find(|(name, _)| *name == model.name())
            .map(|(_, message)| message.clone());
        if let Some(message) = refused {
            return Err(Error::Configuration { message });
        }
        let store = read_models(self)?;
        let subscriber = model.subscriber();
        let from = self.store().checkpoint(subscriber).await?.unwrap_or(0);
        let batch_size = self.config().dispatcher.batch_size.max(1);
        let mut events = self.store().read_all(from, batch_size).await?;
        let Some(last) = events.last() else {
            return Ok(false);
        };
        // A read model an operator paused makes no pass (asked once there are events).
        if self.paused().await?.subscriber(subscriber).is_some() {
            return Ok(false);
        }
        let to = last.position;
        for event in &mut events {
            self.inner.shapes.bring_up(event);
        }
        if !events.iter().any(|event| model.projects(event)) {
            return Ok(self
                .store()
                .move_checkpoint(subscriber, Some(from), to)
                .await?);
        }
        let batch = Batch {
            table: model.table(),
            subscriber,
            from,
            to,
            declared: model.declared(),
            rebuild: None,
        };
        let (index, message) = match store.project(&batch, &mut *model.projector(&events)).await {
            Ok(Projected::Outdated) => return Err(outdated(model.name())),
            Ok(projected) => return Ok(projected == Projected::Applied),
            Err(ProjectError::Store(error)) => return Err(error.into()),
            Err(ProjectError::Failed { event, message }) => (event, message),
        };
        // Write what came before the failing event, which projected the first time.
        if index > 0 {
            let before = &events[..index];
            let batch = Batch {
                to: before[index - 1].position,
                ..batch
            };
            match store.project(&batch, &mut *model.projector(before)).await {
                Ok(_) | Err(ProjectError::Failed { .. }) => {}
                Err(ProjectError::Store(error)) => return Err(error.into()),
            }
        }
        let failing = &events[index];
        self.hold(store, model, failing, &message).await?;
        Err(Error::Projection {
            read_model: model.name().to_owned(),
            event_type: failing.event_type.clone(),
            event_id: failing.id.clone(),
            position: failing.position,
            message,
        })
    }

    /// Records that `model` is held at `failing`, and until when.
    async fn hold(
        &self,
        store: &dyn ReadModelStore,
        model: &dyn ReadModelRunner,
        failing: &RecordedEvent,
        message: &str,
    ) -> Result<(), Error> {
        let now = self.clock().now();
        let held = Held {
            read_model: model.name().to_owned(),
            position: failing.position,
            event_id: failing.id.clone(),
            event_type: failing.event_type.clone(),
            message: message.to_owned(),
            attempts: 1,
            failed_at: now,
            retry_at: now + self.next_backoff(model.subscriber()),
        };
        Ok(store.hold(&held).await?)
    }

    /// Makes or mends each read model's table and starts its checkpoint at the log's
    /// beginning, so it projects the whole history. Answers the read models whose table cannot
    /// take this build's declaration, with why: the app builds (an operator's command can
    /// rebuild them), and refuses to run until they are rebuilt.
    pub(crate) async fn ensure_read_models(
        store: &dyn crate::store::Store,
        models: &[std::sync::Arc<dyn ReadModelRunner>],
    ) -> Result<Vec<(&'static str, String)>, Error> {
        if models.is_empty() {
            return Ok(Vec::new());
        }
        let tables = store.capabilities().read_models().map_err(|lacking| {
            let names: Vec<&str> = models.iter().map(|model| model.name()).collect();
            Error::Configuration {
                message: format!(
                    "the app has read models ({}), and {lacking}: run it on a store that keeps them",
                    names.join(", ")
                ),
            }
        })?;
        let mut refused = Vec::new();
        for model in models {
            match tables.ensure(model.table()).await {
                Ok(()) => {}
                Err(Error::Configuration { message }) => refused.push((model.name(), message)),
                Err(error) => return Err(error),
            }
            if store.checkpoint(model.subscriber()).await?.is_none() {
                store.move_checkpoint(model.subscriber(), None, 0).await?;
            }
        }
        Ok(refused)
    }

    /// Why the app does not run: read models whose table cannot take this build's declaration.
    pub(crate) fn read_model_refusal(&self) -> Option<Error> {
        let refused = self.refused_read_models();
        if refused.is_empty() {
            return None;
        }
        let reasons: Vec<&str> = refused
            .iter()
            .map(|(_, message)| message.as_str())
            .collect();
        Some(Error::Configuration {
            message: reasons.join("; "),
        })
    }

    /// The read models whose table could not take this build's declaration, until rebuilt.
    fn refused_read_models(&self) -> std::sync::MutexGuard<'_, Vec<(&'static str, String)>> {
        self.inner
            .refused_read_models
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Read model `name` was rebuilt to this build's declaration: no longer refused.
    pub(crate) fn rebuilt(&self, name: &str) {
        self.refused_read_models()
            .retain(|(refused, _)| *refused != name);
    }
}
