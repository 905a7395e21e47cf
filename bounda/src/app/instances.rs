//! Finding process instances: listed and counted by process, status, what is due, correlation
//! and id, a page at a time, from the store's instances index.

use crate::Error;
use crate::app::App;
use crate::store::{InstanceCounts, InstanceCursor, InstanceQuery, InstanceRow};

/// The page a listing takes when its query names none.
const DEFAULT_PAGE: usize = 50;

/// The longest page a listing takes.
const MAX_PAGE: usize = 1_000;

/// A page of instances, and where the next one starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstancePage {
    /// The instances, in the query's order.
    pub rows: Vec<InstanceRow>,
    /// The cursor of the next page, when there are more: put it in the query's `after`.
    pub next: Option<InstanceCursor>,
}

impl App {
    /// A page of the instances `query` matches, in its order, after its cursor: `limit` of them
    /// (50 when it names none, at most 1,000). Read through the store's indexes, so a page costs
    /// about the same among millions of instances as among fifty.
    ///
    /// ```
    /// # use bounda::store::{InstanceQuery, InstanceStatus, InstanceOrder};
    /// # async fn example(app: &bounda::App) -> Result<(), bounda::Error> {
    /// // Overdue instances of `OrderPayment`, the most overdue first.
    /// let overdue = InstanceQuery {
    ///     process: Some("OrderPayment".to_owned()),
    ///     status: Some(InstanceStatus::Running),
    ///     due_until: Some(app.clock().now()),
    ///     order: InstanceOrder::Soonest,
    ///     ..InstanceQuery::default()
    /// };
    /// let page = app.instances(&overdue).await?;
    /// for row in &page.rows {
    ///     println!("{} due at {:?}", row.instance_id, row.next_due);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn instances(&self, query: &InstanceQuery) -> Result<InstancePage, Error> {
        let limit = match query.limit {
            0 => DEFAULT_PAGE,
            limit => limit.min(MAX_PAGE),
        };
        // One more than the page says whether another follows.
        let ask = InstanceQuery {
            limit: limit + 1,
            ..query.clone()
        };
        let mut rows = self
            .store()
            .capabilities()
            .instances()?
            .instances(&ask)
            .await?;
        let next = match rows.len() > limit {
            true => {
                rows.truncate(limit);
                rows.last().map(|row| row.cursor(query.order))
            }
            false => None,
        };
        Ok(InstancePage { rows, next })
    }

    /// How many instances `query` matches (its order, cursor and limit aside).
    pub async fn count_instances(&self, query: &InstanceQuery) -> Result<u64, Error> {
        Ok(self
            .store()
            .capabilities()
            .instances()?
            .count_instances(query)
            .await?)
    }

    /// For each process with instances, by name: its instances by status, and its running
    /// ones with a deadline pending and overdue now, with the oldest overdue moment.
    pub async fn instance_counts(&self) -> Result<Vec<InstanceCounts>, Error> {
        Ok(self
            .store()
            .capabilities()
            .instances()?
            .instance_counts(self.clock().now())
            .await?)
    }
}
