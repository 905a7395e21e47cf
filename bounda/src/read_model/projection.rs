//! What a projection gets: the event with where it stands in the log ([`Projected`]), and its
//! read model's table inside the batch's transaction ([`Table`]).

use std::marker::PhantomData;

use crate::read_model::filter::{Filter, Select, Set};
use crate::read_model::render;
use crate::read_model::rows::{count_of, decode, types};
use crate::read_model::value::SqlArg;
use crate::read_model::{Column, ReadModel};
use crate::store::read_models::Rows;
use crate::{Error, Instant, RecordedEvent};

/// One event as a projection gets it: its payload (through `Deref`), and its stream, position
/// and time.
#[derive(Debug)]
pub struct Projected<'a, E> {
    event: E,
    recorded: &'a RecordedEvent,
}

impl<'a, E> Projected<'a, E> {
    /// The event `event` read from `recorded`. Made by the runtime.
    pub fn new(recorded: &'a RecordedEvent, event: E) -> Projected<'a, E> {
        Projected { event, recorded }
    }

    /// The payload.
    pub fn event(&self) -> &E {
        &self.event
    }

    /// The payload, taken.
    pub fn into_event(self) -> E {
        self.event
    }

    /// The aggregate instance whose stream holds it.
    pub fn aggregate_id(&self) -> &str {
        &self.recorded.aggregate_id
    }

    /// When it was stored.
    pub fn at(&self) -> Instant {
        self.recorded.timestamp
    }

    /// Its place in the log.
    pub fn position(&self) -> u64 {
        self.recorded.position
    }

    /// The event as stored.
    pub fn recorded(&self) -> &RecordedEvent {
        self.recorded
    }
}

impl<E> std::ops::Deref for Projected<'_, E> {
    type Target = E;

    fn deref(&self) -> &E {
        &self.event
    }
}

/// Read model `R`'s table inside one batch's transaction: what a projection writes, and reads
/// back with the batch's earlier writes in it. Every write is idempotent (an upsert, an insert
/// that ignores a key already there, an update or delete where), so a batch that runs again
/// after a rollback writes the same rows.
pub struct Table<'t, R> {
    rows: &'t mut dyn Rows,
    /// The upsert's and the insert's SQL, rendered at their first use in the batch.
    upsert: Option<std::sync::Arc<str>>,
    insert: Option<std::sync::Arc<str>>,
    /// The first statement of the batch that failed, with why: a projection that goes on
    /// after it fails the batch all the same (PostgreSQL could not commit it anyway).
    failed: Option<String>,
    marker: PhantomData<fn() -> R>,
}

impl<R> std::fmt::Debug for Table<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("target", self.rows.target())
            .finish()
    }
}

impl<'t, R: ReadModel> Table<'t, R> {
    /// The table of the transaction `rows`. Made by the runtime.
    pub fn new(rows: &'t mut dyn Rows) -> Table<'t, R> {
        Table {
            rows,
            upsert: None,
            insert: None,
            failed: None,
            marker: PhantomData,
        }
    }

    /// The first statement of the batch that failed, if one did.
    pub(crate) fn failed(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// `result`, its error kept as the batch's first failure.
    fn noted<T>(
        &mut self,
        result: Result<T, crate::store::StoreError>,
    ) -> Result<T, crate::store::StoreError> {
        if let Err(error) = &result
            && self.failed.is_none()
        {
            self.failed = Some(error.flattened().to_string());
        }
        result
    }

    async fn execute(&mut self, statement: render::Statement) -> Result<u64, Error> {
        let changed = self.rows.execute(&statement).await;
        Ok(self.noted(changed)?)
    }

    async fn query(
        &mut self,
        statement: &render::Statement,
        columns: &[crate::read_model::SqlType],
    ) -> Result<Vec<Vec<crate::read_model::SqlValue>>, Error> {
        let rows = self.rows.query(statement, columns).await;
        Ok(self.noted(rows)?)
    }

    /// Writes `row`, replacing the row with its key if there is one.
    pub async fn upsert(&mut self, row: &R) -> Result<(), Error> {
        let sql = self
            .upsert
            .get_or_insert_with(|| {
                render::upsert_sql(self.rows.dialect(), self.rows.target(), R::TABLE)
            })
            .clone();
        let statement = render::Statement {
            sql,
            params: row.to_row(),
        };
        self.execute(statement).await.map(drop)
    }

    /// Writes `row` unless a row has its key; answers whether it was written. A row that
    /// shares a unique column's value with another is still refused.
    pub async fn insert(&mut self, row: &R) -> Result<bool, Error> {
        let sql = self
            .insert
            .get_or_insert_with(|| {
                render::insert_ignore_sql(self.rows.dialect(), self.rows.target(), R::TABLE)
            })
            .clone();
        let statement = render::Statement {
            sql,
            params: row.to_row(),
        };
        Ok(self.execute(statement).await? > 0)
    }

    /// Sets `sets` on the rows `filter` holds for; answers how many.
    pub async fn update(
        &mut self,
        filter: Filter<R>,
        sets: impl IntoIterator<Item = Set<R>>,
    ) -> Result<u64, Error> {
        let sets: Vec<(&'static str, crate::read_model::SqlValue)> = sets
            .into_iter()
            .map(|set| {
                let (column, value) = set.parts();
                (column, value.clone())
            })
            .collect();
        if sets.is_empty() {
            return Ok(0);
        }
        let statement = render::update(
            self.rows.dialect(),
            self.rows.target(),
            &sets,
            filter.condition(),
        );
        self.execute(statement).await
    }

    /// Deletes the rows `filter` holds for; answers how many.
    pub async fn delete(&mut self, filter: Filter<R>) -> Result<u64, Error> {
        let statement = render::delete(self.rows.dialect(), self.rows.target(), filter.condition());
        self.execute(statement).await
    }

    /// The row with key `key`, as this batch has left it.
    pub async fn get(&mut self, key: impl SqlArg<R::Key>) -> Result<Option<R>, Error> {
        let column = Column::<R, R::Key>::new(R::TABLE.key().name);
        self.find_one(column.eq(key)).await
    }

    /// The first row `filter` holds for, in key order.
    pub async fn find_one(&mut self, filter: Filter<R>) -> Result<Option<R>, Error> {
        Ok(self.find(Select::filter(filter).limit(1)).await?.pop())
    }

    /// The rows `select` picks.
    pub async fn find(&mut self, select: impl Into<Select<R>>) -> Result<Vec<R>, Error> {
        let statement = render::select(
            self.rows.dialect(),
            self.rows.target(),
            R::TABLE,
            select.into().selection(),
        );
        let rows = self.query(&statement, &types::<R>()).await?;
        decode(rows)
    }

    /// How many rows `filter` holds for.
    pub async fn count(&mut self, filter: Filter<R>) -> Result<u64, Error> {
        let statement = render::count(self.rows.dialect(), self.rows.target(), filter.condition());
        let rows = self
            .query(&statement, &[crate::read_model::SqlType::Integer])
            .await?;
        count_of(R::NAME, rows)
    }
}
