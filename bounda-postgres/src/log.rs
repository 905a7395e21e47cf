//! The event log: appends at the end in global order, and reads from a position.

use bounda::store::{Append, Appended, CommitError, Metadata, StoreError};
use bounda::{Instant, RecordedEvent};

use crate::PostgresStore;
use crate::sql::{bigint, failed, transaction};

impl PostgresStore {
    /// Appends each stream's events at its expected version, in one transaction: all or none.
    /// Positions come from the one-row counter, locked first and until the commit, so appends
    /// are serialised: a position is visible only after every smaller one, and two appends to
    /// one stream meet as a stale version (`StreamMoved`), never as a store failure.
    pub async fn append(&self, appends: &[Append]) -> Result<Vec<Appended>, CommitError> {
        let t = self.names.tables();
        let mut client = self.client().await?;
        let tx = transaction(&mut client).await?;
        // The counter first: appenders queue here, so the versions read next are current.
        let head: i64 = tx
            .query_one(
                &format!("SELECT position FROM {t}head WHERE id = 1 FOR UPDATE"),
                &[],
            )
            .await
            .map_err(failed("cannot take positions"))?
            .get(0);
        let mut next = head;
        let mut appended = Vec::new();
        for append in appends {
            let version: i64 = tx
                .query_one(
                    &format!(
                        "SELECT coalesce(max(version), 0) FROM {t}events
                         WHERE aggregate_type = $1 AND aggregate_id = $2"
                    ),
                    &[&append.aggregate_type, &append.aggregate_id],
                )
                .await
                .map_err(failed("cannot read a stream's version"))?
                .get(0);
            if version as u64 != append.expected_version {
                return Err(CommitError::StreamMoved {
                    aggregate_type: append.aggregate_type.clone(),
                    aggregate_id: append.aggregate_id.clone(),
                    expected_version: append.expected_version,
                    actual_version: version as u64,
                });
            }
            let insert = format!(
                "INSERT INTO {t}events (position, id, aggregate_type, aggregate_id, version, type,
                    payload, timestamp, metadata)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
            );
            for (index, event) in append.events.iter().enumerate() {
                next += 1;
                let position = next;
                let version = version + 1 + index as i64;
                let metadata = serde_json::to_value(&event.metadata).map_err(|e| {
                    CommitError::Store(StoreError::with_source("cannot write metadata", e))
                })?;
                tx.execute(
                    &insert,
                    &[
                        &position,
                        &event.id,
                        &append.aggregate_type,
                        &append.aggregate_id,
                        &version,
                        &event.event_type,
                        &event.payload,
                        &event.timestamp.to_chrono(),
                        &metadata,
                    ],
                )
                .await
                .map_err(failed("cannot append an event"))?;
                appended.push(Appended {
                    id: event.id.clone(),
                    position: position as u64,
                    version: version as u64,
                });
            }
        }
        if !appended.is_empty() {
            tx.execute(&format!("UPDATE {t}head SET position = $1"), &[&next])
                .await
                .map_err(failed("cannot take positions"))?;
            // Delivered at the commit, to every process listening on these tables.
            tx.execute("SELECT pg_notify($1, '')", &[&self.names.channel()])
                .await
                .map_err(failed("cannot notify the listeners"))?;
        }
        tx.commit().await.map_err(failed("cannot commit"))?;
        Ok(appended)
    }

    /// Up to `limit` events after position `after`, in order.
    pub async fn read_all(
        &self,
        after: u64,
        limit: usize,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                &format!(
                    "SELECT position, id, aggregate_type, aggregate_id, version, type, payload,
                        timestamp, metadata
                     FROM {}events WHERE position > $1 ORDER BY position LIMIT $2",
                    self.names.tables()
                ),
                &[
                    &bigint("a position", after)?,
                    &i64::try_from(limit).unwrap_or(i64::MAX),
                ],
            )
            .await
            .map_err(failed("cannot read events"))?;
        rows.iter()
            .map(|row| {
                let metadata: Metadata = serde_json::from_value(row.get(8))
                    .map_err(|e| StoreError::with_source("an event's metadata does not read", e))?;
                let timestamp: chrono::DateTime<chrono::Utc> = row.get(7);
                Ok(RecordedEvent {
                    position: row.get::<_, i64>(0) as u64,
                    id: row.get(1),
                    aggregate_type: row.get(2),
                    aggregate_id: row.get(3),
                    version: row.get::<_, i64>(4) as u64,
                    event_type: row.get(5),
                    payload: row.get(6),
                    timestamp: Instant::from(timestamp),
                    metadata,
                })
            })
            .collect()
    }
}
