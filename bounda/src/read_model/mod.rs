//! Read models: tables kept from events, for what a page or an API asks ("this customer's
//! orders, newest first") without folding the log on every request.
//!
//! A read model is a row type declared with `#[read_model(name = "..")]`: each field is a real
//! column of its table in the store's database (`read_<name>`, under the store's schema or
//! prefix), so an operator can query it with SQL. `#[key]` marks its one primary key,
//! `#[index]` and `#[unique]` the columns to index. Its projections, in a
//! `#[read_model] impl` block, are `async fn on_<event>(event: Projected<'_, E>, table: &mut
//! Table<'_, Self>)`: one event of any aggregate in, idempotent writes to the table out.
//!
//! Each read model is its own subscriber of the log, with its own checkpoint: a batch of events
//! writes its rows and moves the checkpoint in one transaction, so each event counts once, on
//! either store. A projection that fails holds its read model just before the event and is tried
//! again with the dispatcher's back-off; `lag` says where it is held and why. Projections call
//! no one: a batch that rolls back runs again, and a rebuild replays the whole history.
//!
//! Queries read through [`App::read`](crate::App::read): `get`, `find` with a [`Select`],
//! `count` and `page`; plain SQL on the store's connection says what they cannot
//! ([`App::read_sql`](crate::App::read_sql)).

pub(crate) mod declaration;
mod filter;
mod projection;
pub(crate) mod query;
pub mod render;
mod rows;
pub(crate) mod sql_row;
pub(crate) mod value;

pub use declaration::{Change, ColumnDef, Declaration, StoredColumn, TableDef, plan};
pub use filter::{Column, Condition, Filter, Op, OrderBy, Select, Selection, Set};
pub use projection::{Projected, Table};
pub use query::{Page, ReadTable};
pub use sql_row::SqlRow;
pub use value::{ColumnError, ColumnType, Json, SqlArg, SqlType, SqlValue};

use crate::RecordedEvent;
use crate::aggregate::EventKey;

/// A read model's row type and its table. Written by `#[read_model(name = "..")]` on a struct.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a read model",
    label = "not a read model",
    note = "declare it with `#[read_model(name = \"..\")]` on its row struct"
)]
pub trait ReadModel: Sized + Send + Sync + 'static {
    /// Its name (`order-summary`): its subscriber is `read-model:<name>`, its table
    /// `read_<name>` in snake case.
    const NAME: &'static str;
    /// Its table's declaration.
    const TABLE: &'static TableDef;
    /// The type of its primary key's field.
    type Key: ColumnType;

    /// The row's values, in column order.
    fn to_row(&self) -> Vec<SqlValue>;

    /// A row from its values, in column order.
    fn from_row(values: Vec<SqlValue>) -> Result<Self, ColumnError>;
}

/// What a projection's future is.
pub type ProjectionFuture<'a> = futures_util::future::BoxFuture<'a, anyhow::Result<()>>;

/// A read model's projections. Written by `#[read_model]` on the `impl` block holding its
/// `on_<event>` functions.
#[diagnostic::on_unimplemented(
    message = "read model `{Self}` has no projections",
    label = "no `#[read_model] impl` for it",
    note = "write its projections: `#[read_model] impl {Self} {{ async fn on_<event>(event: Projected<'_, Event>, table: &mut Table<'_, Self>) -> Result<()> {{ .. }} }}`"
)]
pub trait Projections: ReadModel {
    /// The event types it projects.
    const EVENTS: &'static [EventKey];
    /// The event types of the aggregates of those events, so that events stored under an older
    /// name or shape read as today's.
    const SHAPES: &'static [&'static [crate::EventShape]];
    /// A hash of its projections' code: with its table's declaration, what tells a rebuild
    /// started by other code from one to resume.
    const CODE: &'static str;

    /// Projects `event` into `table`; `None` for an event it does not project.
    fn project<'a>(
        event: &'a RecordedEvent,
        table: &'a mut Table<'_, Self>,
    ) -> Option<ProjectionFuture<'a>>;
}

/// What every read model's subscriber name starts with.
pub const SUBSCRIBER_PREFIX: &str = "read-model:";

/// The subscriber name of read model `name`.
pub fn subscriber(name: &str) -> String {
    format!("{SUBSCRIBER_PREFIX}{name}")
}
