//! The scheduler's claims: due entries are claimed in batches with `FOR UPDATE SKIP LOCKED`, so
//! workers on several machines take different entries without waiting on each other, and each
//! claim is fenced by its id: a worker whose lease lapsed cannot complete what another took over.

use bounda::store::{ScheduledEntry, StoreError};
use bounda::{Duration, Instant};

use crate::PostgresStore;
use crate::sql::{failed, transaction};

/// The columns of an entry, in the order `entry` reads them.
const COLUMNS: &str = "s.dedupe_key, s.command_type, s.aggregate_id, s.payload, s.execute_at, \
     s.context, s.attempts, s.last_error, s.revision, s.claim_id, s.claimed_at";

fn entry(row: &tokio_postgres::Row) -> ScheduledEntry {
    let at = |index: usize| -> Option<Instant> {
        row.get::<_, Option<chrono::DateTime<chrono::Utc>>>(index)
            .map(Instant::from)
    };
    ScheduledEntry {
        dedupe_key: row.get(0),
        command_type: row.get(1),
        aggregate_id: row.get(2),
        payload: row.get(3),
        execute_at: Instant::from(row.get::<_, chrono::DateTime<chrono::Utc>>(4)),
        context: row.get(5),
        attempts: row.get::<_, i32>(6) as u32,
        last_error: row.get(7),
        revision: row.get::<_, i64>(8) as u64,
        claim_id: row.get(9),
        claimed_at: at(10),
    }
}

impl PostgresStore {
    /// Stores `entry` to run at its moment, replacing an entry of the same key that differs:
    /// its failures are forgotten, and one a worker holds keeps the claim, marked rescheduled,
    /// so the holder's completion gives the claim back and keeps the new schedule.
    pub async fn schedule(&self, entry: &ScheduledEntry) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                &format!(
                    "INSERT INTO {t}scheduled_commands AS s
                        (dedupe_key, command_type, aggregate_id, payload, execute_at, context)
                     VALUES ($1, $2, $3, $4, $5, $6)
                     ON CONFLICT (dedupe_key) DO UPDATE SET
                        command_type = excluded.command_type,
                        aggregate_id = excluded.aggregate_id, payload = excluded.payload,
                        execute_at = excluded.execute_at, context = excluded.context,
                        attempts = 0, last_error = NULL, first_failed_at = NULL,
                        rescheduled = (s.claim_id IS NOT NULL), revision = s.revision + 1
                     WHERE (s.command_type, s.aggregate_id, s.payload, s.execute_at, s.context)
                        IS DISTINCT FROM (excluded.command_type, excluded.aggregate_id,
                            excluded.payload, excluded.execute_at, excluded.context)",
                    t = self.names.tables()
                ),
                &[
                    &entry.dedupe_key,
                    &entry.command_type,
                    &entry.aggregate_id,
                    &entry.payload,
                    &entry.execute_at.to_chrono(),
                    &entry.context,
                ],
            )
            .await
            .map_err(failed("cannot schedule an entry"))?;
        Ok(())
    }

    /// Claims up to `limit` entries due at `now`, free or with a claim older than `lease`, under
    /// `claim_id`: rows another worker is claiming at this moment are skipped, not waited for.
    pub async fn claim_due(
        &self,
        claim_id: &str,
        now: Instant,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<ScheduledEntry>, StoreError> {
        let client = self.client().await?;
        let t = self.names.tables();
        let rows = client
            .query(
                &format!(
                    "WITH due AS (
                        SELECT dedupe_key FROM {t}scheduled_commands
                        WHERE execute_at <= $1 AND (claimed_at IS NULL OR claimed_at < $3)
                        ORDER BY execute_at, dedupe_key
                        LIMIT $4
                        FOR UPDATE SKIP LOCKED)
                     UPDATE {t}scheduled_commands s
                     SET claimed_at = $1, claim_id = $2, rescheduled = FALSE
                     FROM due WHERE s.dedupe_key = due.dedupe_key
                     RETURNING {COLUMNS}"
                ),
                &[
                    &now.to_chrono(),
                    &claim_id,
                    &(now - lease).to_chrono(),
                    &i64::try_from(limit).unwrap_or(i64::MAX),
                ],
            )
            .await
            .map_err(failed("cannot claim due entries"))?;
        let mut entries: Vec<ScheduledEntry> = rows.iter().map(entry).collect();
        entries.sort_by(|a, b| (a.execute_at, &a.dedupe_key).cmp(&(b.execute_at, &b.dedupe_key)));
        Ok(entries)
    }

    /// Settles entry `dedupe_key` once its run is done, if `claim_id` still holds it: removed,
    /// or, if it was rescheduled meanwhile, given back with its new schedule. Whether the claim
    /// was still held: a worker whose lease lapsed and was taken over is fenced.
    pub async fn complete(&self, dedupe_key: &str, claim_id: &str) -> Result<bool, StoreError> {
        let t = self.names.tables();
        let mut client = self.client().await?;
        let tx = transaction(&mut client).await?;
        let mut settled = tx
            .execute(
                &format!(
                    "DELETE FROM {t}scheduled_commands
                     WHERE dedupe_key = $1 AND claim_id = $2 AND NOT rescheduled"
                ),
                &[&dedupe_key, &claim_id],
            )
            .await
            .map_err(failed("cannot complete an entry"))?;
        if settled == 0 {
            settled = tx
                .execute(
                    &format!(
                        "UPDATE {t}scheduled_commands
                         SET claimed_at = NULL, claim_id = NULL, rescheduled = FALSE
                         WHERE dedupe_key = $1 AND claim_id = $2"
                    ),
                    &[&dedupe_key, &claim_id],
                )
                .await
                .map_err(failed("cannot give back a claim"))?;
        }
        tx.commit().await.map_err(failed("cannot commit"))?;
        Ok(settled == 1)
    }
}
