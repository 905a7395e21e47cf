//! Rebuilding a read model: the whole log replayed into a shadow table while the live one keeps
//! serving and being fed, then swapped in, in one transaction. A slice at a time, so it resumes
//! where it stopped after a crash; keyed by the read model's fingerprint, so changed code starts
//! afresh and supersedes a rebuild of older code.

use crate::Error;
use crate::app::App;
use crate::app::read_models::ReadModelRunner;
use crate::read_model::query::read_models;
use crate::store::read_models::{Batch, ProjectError, Projected};

/// Where a rebuild stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RebuildProgress {
    /// The read model.
    pub read_model: String,
    /// The position in the log the shadow table has reached.
    pub position: u64,
    /// The log's head when this was read.
    pub head: u64,
    /// Whether the shadow has been swapped in: the rebuild is done.
    pub swapped: bool,
}

/// Events a slice of [`App::rebuild`] projects in one transaction.
pub const REBUILD_SLICE: usize = 1_000;

impl App {
    /// Rebuilds read model `name` from the whole log, a slice at a time, then swaps the new table
    /// in; `progress` hears where it stands after each slice. Resumes a rebuild of the same code
    /// that stopped; a rebuild of other code (another fingerprint) under way is superseded, and
    /// its process stops with `REBUILD_SUPERSEDED`. A projection that fails abandons the rebuild
    /// and leaves the live table as it was.
    pub async fn rebuild(
        &self,
        name: &str,
        mut progress: impl FnMut(&RebuildProgress),
    ) -> Result<RebuildProgress, Error> {
        let mut at = self.start_rebuild(name).await?;
        progress(&at);
        loop {
            let step = self.rebuild_slice(name, REBUILD_SLICE).await?;
            progress(&step);
            if step.swapped {
                return Ok(step);
            }
            if step.position == at.position {
                // Another process holds the slice: wait a poll rather than ask again at once.
                let poll: std::time::Duration = self.config().dispatcher.poll_interval.into();
                tokio::time::sleep(poll).await;
            }
            at = step;
        }
    }

    /// Starts a rebuild of read model `name` into a fresh shadow table, or resumes the one of
    /// this code under way where it stopped; one of other code under way is superseded. Then
    /// [`rebuild_slice`](App::rebuild_slice) takes it on.
    pub async fn start_rebuild(&self, name: &str) -> Result<RebuildProgress, Error> {
        let model = self.read_model_named(name)?;
        let position = read_models(self)?
            .start_rebuild(model.table(), model.fingerprint())
            .await?;
        Ok(RebuildProgress {
            read_model: name.to_owned(),
            position,
            head: self.store().head().await?,
            swapped: false,
        })
    }

    /// One slice of the rebuild of read model `name` under way: up to `events` events of the log
    /// projected into its shadow table, or, once the shadow has reached the head, the swap.
    /// Call it until it answers [`swapped`](RebuildProgress::swapped), from one process or
    /// several in turn. A rebuild of other code started since answers `REBUILD_SUPERSEDED`.
    pub async fn rebuild_slice(&self, name: &str, events: usize) -> Result<RebuildProgress, Error> {
        let model = self.read_model_named(name)?;
        let store = read_models(self)?;
        let fingerprint = model.fingerprint().to_owned();
        let from = match store.rebuilding(name).await? {
            Some((current, position)) if current == fingerprint => position,
            Some(_) => return Err(superseded(name)),
            None => {
                return Err(Error::NotFound {
                    what: format!(
                        "a rebuild of read model `{name}` under way (start one first; or it is done)"
                    ),
                });
            }
        };
        let mut batch = self.store().read_all(from, events.max(1)).await?;
        let head = self.store().head().await?;
        let progress = |position, swapped| RebuildProgress {
            read_model: name.to_owned(),
            position,
            head,
            swapped,
        };
        let Some(last) = batch.last() else {
            return match store.finish_rebuild(model.table(), &fingerprint).await? {
                true => {
                    self.rebuilt(name);
                    tracing::info!(
                        read_model = name,
                        position = from,
                        "rebuilt read model swapped in"
                    );
                    Ok(progress(from, true))
                }
                false => Err(superseded(name)),
            };
        };
        let to = last.position;
        for event in &mut batch {
            self.inner.shapes.bring_up(event);
        }
        let slice = Batch {
            table: model.table(),
            subscriber: model.subscriber(),
            from,
            to,
            declared: model.declared(),
            rebuild: Some(&fingerprint),
        };
        match store.project(&slice, &mut *model.projector(&batch)).await {
            Ok(Projected::Applied) => Ok(progress(to, false)),
            // Another process took this slice: go on from where it left.
            Ok(Projected::Moved | Projected::Busy) => Ok(progress(from, false)),
            Ok(Projected::Superseded | Projected::Outdated) => Err(superseded(name)),
            Err(ProjectError::Store(error)) => Err(error.into()),
            Err(ProjectError::Failed { event, message }) => {
                store.abandon_rebuild(model.table(), &fingerprint).await?;
                let failing = &batch[event];
                Err(Error::Projection {
                    read_model: name.to_owned(),
                    event_type: failing.event_type.clone(),
                    event_id: failing.id.clone(),
                    position: failing.position,
                    message: format!(
                        "{message} (the rebuild was abandoned; the live table is as it was)"
                    ),
                })
            }
        }
    }

    /// Abandons the rebuild of read model `name` under way, whatever code started it: its new
    /// table is dropped, the live one stays. What makes a rebuild start afresh after a change
    /// its fingerprint does not see (a function a projection calls, an event's upcast). Answers
    /// whether one was under way.
    pub async fn abandon_rebuild(&self, name: &str) -> Result<bool, Error> {
        let model = self.read_model_named(name)?;
        let store = read_models(self)?;
        let Some((fingerprint, _)) = store.rebuilding(name).await? else {
            return Ok(false);
        };
        store.abandon_rebuild(model.table(), &fingerprint).await?;
        Ok(true)
    }

    /// The read model named `name`, or an error listing those there are.
    fn read_model_named(&self, name: &str) -> Result<&dyn ReadModelRunner, Error> {
        self.read_models()
            .find(|model| model.name() == name)
            .map(|model| model.as_ref())
            .ok_or_else(|| {
                let names: Vec<&str> = self.read_models().map(|model| model.name()).collect();
                Error::NotFound {
                    what: format!(
                        "read model `{name}` (this app has {})",
                        match names.is_empty() {
                            true => "none".to_owned(),
                            false => names.join(", "),
                        }
                    ),
                }
            })
    }
}

fn superseded(name: &str) -> Error {
    Error::RebuildSuperseded {
        read_model: name.to_owned(),
    }
}
