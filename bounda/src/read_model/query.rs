//! Reading a read model from outside its projections: [`ReadTable`] through the app, pages of
//! rows, and rows of plain SQL.

use std::marker::PhantomData;

use crate::read_model::ReadModel;
use crate::read_model::filter::{Column, Filter, Select};
use crate::read_model::render;
use crate::read_model::rows::{count_of, decode, types};
use crate::read_model::value::{SqlArg, SqlType};
use crate::store::read_models::ReadModelStore;
use crate::{App, Error};

/// The largest page [`ReadTable::page`] reads.
pub const MAX_PAGE_SIZE: u64 = 1_000;

/// Read model `R`'s table, to query: from [`App::read`]. Reads see what the projections have
/// committed; [`App::catch_up`] waits for a command's events to be there first.
pub struct ReadTable<'a, R> {
    store: Result<&'a dyn ReadModelStore, Error>,
    marker: PhantomData<fn() -> R>,
}

impl<R> std::fmt::Debug for ReadTable<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadTable").finish_non_exhaustive()
    }
}

/// One page of rows, and where it stands among them all.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<R> {
    /// The rows of this page.
    pub rows: Vec<R>,
    /// Rows in all, on every page.
    pub total: u64,
    /// This page, from 1.
    pub page: u64,
    /// Rows per page.
    pub page_size: u64,
    /// Pages in all (at least 1).
    pub pages: u64,
}

impl<'a, R: ReadModel> ReadTable<'a, R> {
    pub(crate) fn new(app: &'a App) -> ReadTable<'a, R> {
        // A table the app does not keep may not exist, or stand where a deploy left it: its
        // query is refused naming the read model, not answered by the database's own words.
        let kept = app.read_models().any(|model| model.name() == R::NAME);
        let store = match kept {
            true => read_models(app),
            false => {
                let type_name = std::any::type_name::<R>();
                let short = type_name.rsplit("::").next().unwrap_or(type_name);
                Err(Error::Configuration {
                    message: format!(
                        "read model `{}` is not in this app, so its table is not kept: add \
                         `.read_model::<{short}>()` to the app",
                        R::NAME
                    ),
                })
            }
        };
        ReadTable {
            store,
            marker: PhantomData,
        }
    }

    fn store(&self) -> Result<&'a dyn ReadModelStore, Error> {
        match &self.store {
            Ok(store) => Ok(*store),
            Err(Error::Configuration { message }) => Err(Error::Configuration {
                message: message.clone(),
            }),
            Err(error) => Err(Error::Configuration {
                message: error.to_string(),
            }),
        }
    }

    /// The row with key `key`.
    pub async fn get(&self, key: impl SqlArg<R::Key>) -> Result<Option<R>, Error> {
        let column = Column::<R, R::Key>::new(R::TABLE.key().name);
        self.find_one(column.eq(key)).await
    }

    /// The first row `filter` holds for, in key order.
    pub async fn find_one(&self, filter: Filter<R>) -> Result<Option<R>, Error> {
        Ok(self.find(Select::filter(filter).limit(1)).await?.pop())
    }

    /// The rows `select` picks.
    pub async fn find(&self, select: impl Into<Select<R>>) -> Result<Vec<R>, Error> {
        let store = self.store()?;
        let target = store.target(R::TABLE, None);
        let statement = render::select(
            store.dialect(),
            &target,
            R::TABLE,
            select.into().selection(),
        );
        decode(store.query(&statement, &types::<R>()).await?)
    }

    /// How many rows `filter` holds for.
    pub async fn count(&self, filter: Filter<R>) -> Result<u64, Error> {
        let store = self.store()?;
        let target = store.target(R::TABLE, None);
        let statement = render::count(store.dialect(), &target, filter.condition());
        count_of(R::NAME, store.query(&statement, &[SqlType::Integer]).await?)
    }

    /// Page `page` (from 1; 0 reads as 1) of `page_size` rows (1 to 1,000) of those `select`
    /// picks, in its order, with the total. Its own limit and offset are replaced.
    pub async fn page(
        &self,
        select: impl Into<Select<R>>,
        page: u64,
        page_size: u64,
    ) -> Result<Page<R>, Error> {
        let page = page.max(1);
        let page_size = page_size.clamp(1, MAX_PAGE_SIZE);
        let select = select.into();
        let filter = select.selection().filter.clone();
        let store = self.store()?;
        let target = store.target(R::TABLE, None);
        let statement = render::count(store.dialect(), &target, &filter);
        let total = count_of(R::NAME, store.query(&statement, &[SqlType::Integer]).await?)?;
        let pages = total.div_ceil(page_size).max(1);
        // A page past the last holds no row: it is not asked for, so no offset beyond what
        // the database takes is ever written.
        let rows = match page > pages {
            true => Vec::new(),
            false => {
                self.find(select.limit(page_size).offset((page - 1) * page_size))
                    .await?
            }
        };
        Ok(Page {
            rows,
            total,
            page,
            page_size,
            pages,
        })
    }
}

/// The store's read models, or why it has none.
pub(crate) fn read_models(app: &App) -> Result<&dyn ReadModelStore, Error> {
    Ok(app.store().capabilities().read_models()?)
}
