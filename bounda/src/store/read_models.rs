//! What a store does for read models ([`mod@crate::read_model`]): make and mend their tables at
//! start, write a batch's rows with its checkpoint in one transaction, and answer queries.
//!
//! A store renders nothing itself: statements come rendered by
//! [`read_model::render`](crate::read_model::render) in its [`Dialect`]; it binds their values
//! and runs them.

use async_trait::async_trait;
use futures_util::future::BoxFuture;

use crate::Instant;
use crate::read_model::declaration::TableDef;
use crate::read_model::render::{Dialect, Statement, Target};
use crate::read_model::sql_row::SqlRow;
use crate::read_model::value::{SqlType, SqlValue};
use crate::store::StoreError;

/// A store's read model tables: a capability, which a store that has them names in
/// [`Store::capabilities`](crate::store::Store::capabilities).
#[async_trait]
pub trait ReadModelStore: Send + Sync {
    /// The SQL it speaks.
    fn dialect(&self) -> Dialect;

    /// Where read model `table`'s rows are: its live table, or the shadow a rebuild fills.
    fn target(&self, table: &TableDef, shadow: Option<&str>) -> Target;

    /// Creates the read model's table, or brings it to `table` as
    /// [`plan`](crate::read_model::plan) says, and keeps the declaration; refuses a change the
    /// table cannot take in place ([`crate::Error::Configuration`], naming the rebuild). Two
    /// processes starting at once make one change.
    async fn ensure(&self, table: &TableDef) -> Result<(), crate::Error>;

    /// Moves `batch.subscriber`'s checkpoint from `batch.from` to `batch.to` and runs
    /// `projector` on the read model's rows, in one transaction: both or neither. Answers
    /// [`Projected::Moved`], writing nothing, when the checkpoint is not at `from`, and
    /// [`Projected::Busy`] when another process is projecting this read model; a projection's
    /// failure rolls everything back. A live batch whose build declares the table otherwise than
    /// the stored declaration answers [`Projected::Outdated`], writing nothing. A batch of a
    /// rebuild (`batch.rebuild`) writes its shadow
    /// table and moves the rebuild's position instead, or answers [`Projected::Superseded`]
    /// when another rebuild has taken its place.
    async fn project(
        &self,
        batch: &Batch<'_>,
        projector: &mut dyn Projector,
    ) -> Result<Projected, ProjectError>;

    /// Runs a read outside any transaction: rows of `columns`' types.
    async fn query(
        &self,
        statement: &Statement,
        columns: &[SqlType],
    ) -> Result<Vec<Vec<SqlValue>>, StoreError>;

    /// Runs plain SQL with `params` on the store's connection and answers its rows, each value
    /// typed by what the database says it is.
    async fn sql(&self, sql: &str, params: &[SqlValue]) -> Result<Vec<SqlRow>, StoreError>;

    /// Starts rebuilding `table` into a fresh shadow table under `fingerprint`, or resumes the
    /// rebuild under way with the same fingerprint: answers the position it has reached. A
    /// rebuild under another fingerprint is superseded: its shadow is dropped.
    async fn start_rebuild(&self, table: &TableDef, fingerprint: &str) -> Result<u64, StoreError>;

    /// The rebuild under way of read model `name`, if any: its fingerprint and position.
    async fn rebuilding(&self, name: &str) -> Result<Option<(String, u64)>, StoreError>;

    /// Swaps the shadow table of the rebuild `fingerprint` in for the live one, in one
    /// transaction: the live table dropped, the shadow renamed with its indexes, the read
    /// model's checkpoint set to where the rebuild reached, its declaration and holds reset.
    /// `false`, changing nothing, when that rebuild is no longer under way.
    async fn finish_rebuild(&self, table: &TableDef, fingerprint: &str)
    -> Result<bool, StoreError>;

    /// Drops the shadow table of the rebuild `fingerprint` and forgets it, if it is still the
    /// one under way; the live table is left as it is.
    async fn abandon_rebuild(&self, table: &TableDef, fingerprint: &str) -> Result<(), StoreError>;

    /// Records that a read model is held by a failing projection: one record per read model,
    /// its attempts counted while it stays at the same event.
    async fn hold(&self, held: &Held) -> Result<(), StoreError>;

    /// Every read model's last hold. One whose checkpoint has passed its event is no longer
    /// held.
    async fn holds(&self) -> Result<Vec<Held>, StoreError>;
}

/// One batch of a read model's events, as a store writes it.
#[derive(Debug, Clone, Copy)]
pub struct Batch<'a> {
    /// The read model's table.
    pub table: &'a TableDef,
    /// Its subscriber (`read-model:<name>`).
    pub subscriber: &'a str,
    /// Its checkpoint before the batch.
    pub from: u64,
    /// Its checkpoint after.
    pub to: u64,
    /// The hash of its table's declaration ([`TableDef::declared`]), which the stored one must
    /// be for a live batch to be written.
    pub declared: &'a str,
    /// The fingerprint of the rebuild it belongs to, if it fills a shadow table.
    pub rebuild: Option<&'a str>,
}

/// How a batch went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Projected {
    /// Written, with the checkpoint.
    Applied,
    /// The checkpoint was not where the batch began: another process wrote it first.
    Moved,
    /// Another process is projecting this read model now (PostgreSQL).
    Busy,
    /// The rebuild this batch belongs to is no longer the one under way: a newer one has
    /// taken its place.
    Superseded,
    /// The table is declared otherwise than this batch's build declares it: another build
    /// changed or rebuilt it.
    Outdated,
}

/// The shadow table's suffix for the rebuild `fingerprint`: short, so the table's name stays
/// within what PostgreSQL keeps.
pub fn shadow_suffix(fingerprint: &str) -> String {
    let short: String = fingerprint.chars().take(8).collect();
    format!("r{short}")
}

/// Why a batch was not written.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    /// A projection failed on the batch's event `event` (its index in the batch).
    #[error("the projection of event {event} of the batch failed: {message}")]
    Failed {
        /// The event's index in the batch.
        event: usize,
        /// Why, with its causes.
        message: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A read model's rows inside the transaction of one batch.
#[async_trait]
pub trait Rows: Send {
    /// The SQL the store speaks.
    fn dialect(&self) -> Dialect;

    /// The table written.
    fn target(&self) -> &Target;

    /// Runs a write; answers the rows it changed.
    async fn execute(&mut self, statement: &Statement) -> Result<u64, StoreError>;

    /// Runs a read: rows of `columns`' types.
    async fn query(
        &mut self,
        statement: &Statement,
        columns: &[SqlType],
    ) -> Result<Vec<Vec<SqlValue>>, StoreError>;
}

/// What writes a batch's rows: the runtime's projections over the batch's events.
pub trait Projector: Send {
    /// Projects the batch's events into `rows`; a failure names the event.
    fn apply<'t>(&'t mut self, rows: &'t mut dyn Rows) -> BoxFuture<'t, Result<(), ProjectError>>;
}

/// A read model held by a failing projection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The read model.
    pub read_model: String,
    /// The event's position: the checkpoint waits just before it.
    pub position: u64,
    /// The event's id.
    pub event_id: String,
    /// The event's type.
    pub event_type: String,
    /// The last failure, with its causes.
    pub message: String,
    /// Failures at this event so far.
    pub attempts: u32,
    /// When it failed last.
    pub failed_at: Instant,
    /// When it is tried again.
    pub retry_at: Instant,
}
