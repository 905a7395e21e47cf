//! Claims: taking an inbox pair or due scheduler entries for one runner, fenced by a claim id
//! and a lease, so a runner whose lease lapsed cannot settle what another took over. Due entries
//! are claimed in batches with `FOR UPDATE SKIP LOCKED`, so workers take different entries
//! without waiting on each other.

use bounda::store::{InboxClaim, ScheduledEntry, StoreError};
use bounda::{Duration, Instant};
use deadpool_postgres::GenericClient;

use crate::names::Names;
use crate::rows;
use crate::sql::{failed, query, query_one, query_opt};

/// The condition under which a row's claim may be taken at `$now` (a parameter): it has none,
/// or its lease has passed (a claim that ends now has not passed yet). A claim written before
/// claims kept their end lapses on the reader's lease: taken before `$before` (`now - lease`).
/// `$row` qualifies the columns (`i.`) where a statement needs it.
#[rustfmt::skip] // on two lines, as the condition reads
macro_rules! free_claim {
    ($row:literal, $now:literal, $before:literal) => {
        concat!(
            "(", $row, "claimed_at IS NULL OR ", $row, "lease_until < ", $now,
            " OR (", $row, "lease_until IS NULL AND ", $row, "claimed_at < ", $before, "))"
        )
    };
}
pub(crate) use free_claim;

/// Claims one inbox pair: a new pair, a lapsed claim, a released one or a failure whose retry
/// is due is taken; anything else is reported as it stands. `attempts` counts the runs that
/// failed, so a claim that lapsed (its runner killed) spends none. A pair another dispatcher is
/// claiming at this moment is waited for, then answered as it stands.
pub(crate) async fn claim_one(
    client: &impl GenericClient,
    names: &Names,
    handler: &str,
    event_id: &str,
    claim_id: &str,
    now: Instant,
    lease: Duration,
) -> Result<InboxClaim, StoreError> {
    let claimed = query_opt(
        client,
        &names.sql(concat!(
            "INSERT INTO {t}inbox AS i
                 (handler, event_id, status, attempts, claimed_at, lease_until, claim_id)
             VALUES ($1, $2, 'pending', 0, $3, $6, $4)
             ON CONFLICT (handler, event_id) DO UPDATE SET
                 status = 'pending', claimed_at = excluded.claimed_at,
                 lease_until = excluded.lease_until, claim_id = excluded.claim_id, retry_at = NULL
             WHERE (i.status = 'pending' AND ",
            free_claim!("i.", "$3", "$5"),
            ")
                OR (i.status = 'failed' AND i.retry_at <= $3)
             RETURNING i.attempts + 1"
        )),
        &[
            &handler,
            &event_id,
            &now.to_chrono(),
            &claim_id,
            &(now - lease).to_chrono(),
            &(now + lease).to_chrono(),
        ],
    )
    .await
    .map_err(failed("cannot claim an inbox entry"))?;
    if let Some(row) = claimed {
        return Ok(InboxClaim::Claimed {
            attempt: rows::count(&row, 0)?,
        });
    }
    let row = query_one(
        client,
        &names.sql("SELECT status, retry_at FROM {t}inbox WHERE handler = $1 AND event_id = $2"),
        &[&handler, &event_id],
    )
    .await
    .map_err(failed("cannot read an inbox entry"))?;
    let status: String = rows::get(&row, 0)?;
    Ok(match (status.as_str(), rows::optional_instant(&row, 1)?) {
        ("succeeded", _) => InboxClaim::Succeeded,
        ("dead", _) => InboxClaim::DeadLettered,
        ("failed", Some(retry_at)) => InboxClaim::Waiting { retry_at },
        _ => InboxClaim::Held,
    })
}

/// Claims up to `limit` entries due at `now`, free or with a lapsed claim, under `claim_id` until
/// `now + lease`, in due order: rows another worker is claiming at this moment are skipped, not
/// waited for.
pub(crate) async fn claim(
    client: &impl GenericClient,
    names: &Names,
    claim_id: &str,
    now: Instant,
    lease: Duration,
    limit: usize,
) -> Result<Vec<ScheduledEntry>, StoreError> {
    let rows = query(
        client,
        &names.sql(&format!(
            "WITH due AS (
                 SELECT dedupe_key FROM {{t}}scheduled_commands
                 WHERE execute_at <= $1 AND {}
                 ORDER BY execute_at, dedupe_key
                 LIMIT $4
                 FOR UPDATE SKIP LOCKED)
             UPDATE {{t}}scheduled_commands s
             SET claimed_at = $1, lease_until = $5, claim_id = $2, rescheduled = FALSE
             FROM due WHERE s.dedupe_key = due.dedupe_key
             RETURNING {}",
            free_claim!("", "$1", "$3"),
            rows::SCHEDULED_COLUMNS
        )),
        &[
            &now.to_chrono(),
            &claim_id,
            &(now - lease).to_chrono(),
            &rows::limit(limit),
            &(now + lease).to_chrono(),
        ],
    )
    .await
    .map_err(failed("cannot claim due entries"))?;
    let mut entries = rows
        .iter()
        .map(rows::scheduled)
        .collect::<Result<Vec<_>, _>>()?;
    entries.sort_by(|a, b| (a.execute_at, &a.dedupe_key).cmp(&(b.execute_at, &b.dedupe_key)));
    Ok(entries)
}
