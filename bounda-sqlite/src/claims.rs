//! Claims: taking an inbox pair or due scheduler entries for one runner, fenced by a claim id
//! and a lease, so a runner whose lease lapsed cannot settle what another took over.

use bounda::store::{InboxClaim, ScheduledEntry, StoreError};
use bounda::{Duration, Instant};
use rusqlite::{Connection, OptionalExtension, params};

use crate::limits::limited;
use crate::{rows, sql};

/// The condition under which a row's claim may be taken at `$now` (a parameter): it has none,
/// or its lease has passed (a claim that ends now has not passed yet). A claim written before
/// claims kept their end lapses on the reader's lease: taken before `$before`, from
/// [`expired_before`].
#[rustfmt::skip] // on two lines, as the condition reads
macro_rules! free_claim {
    ($now:literal, $before:literal) => {
        concat!(
            "(claimed_at IS NULL OR lease_until < ", $now,
            " OR (lease_until IS NULL AND claimed_at < ", $before, "))"
        )
    };
}
pub(crate) use free_claim;

/// The condition that the scheduler row aliased `s` is held by a pause: a process deadline of a
/// paused process or instance, a delayed run of a paused policy (`bounda::store::pauses`). With
/// no pause, one read of an empty table.
pub(crate) const PAUSED: &str = concat!(
    "EXISTS (SELECT 1 FROM bounda_pauses p WHERE
    (s.command_type = 'bounda.ProcessDeadline' AND p.name = ",
    json_field!("s.payload", "$.process"),
    "
        AND (p.kind = 'process' OR (p.kind = 'instance' AND p.instance = s.aggregate_id)))
    OR (s.command_type = 'bounda.PolicyRun' AND p.kind = 'policy'
        AND p.name = ",
    json_field!("s.payload", "$.policy"),
    "))"
);

/// `now - lease`: a claim written without its end and taken before it has lapsed on the reader's
/// lease; one taken at it ends now, and is taken over only once the lease has passed.
pub(crate) fn expired_before(now: Instant, lease: Duration) -> String {
    // Saturates: a lease longer than the calendar expires nothing.
    (now - lease).to_string()
}

/// `now + lease`: when a claim taken or renewed now ends.
pub(crate) fn lease_until(now: Instant, lease: Duration) -> String {
    // Saturates: a lease longer than the calendar ends at the last moment, and never passes.
    (now + lease).to_string()
}

/// Claims one inbox pair on `conn`: a new pair, a lapsed claim, a released one or
/// a failure whose retry is due is taken; anything else is reported as it stands. `attempts`
/// counts the runs that failed, so a claim that lapsed (its runner killed) spends none.
pub(crate) fn claim_one(
    conn: &Connection,
    handler: &str,
    event_id: &str,
    claim_id: &str,
    now: Instant,
    lease: Duration,
) -> Result<InboxClaim, StoreError> {
    let now_text = now.to_string();
    let claimed: Option<u32> = conn
        .prepare_cached(concat!(
            "INSERT INTO bounda_inbox
                 (handler, event_id, status, attempts, claimed_at, lease_until, claim_id)
             VALUES (?1, ?2, 'pending', 0, ?3, ?6, ?4)
             ON CONFLICT (handler, event_id) DO UPDATE SET
                 status = 'pending', claimed_at = excluded.claimed_at,
                 lease_until = excluded.lease_until, claim_id = excluded.claim_id, retry_at = NULL
             WHERE (status = 'pending' AND ",
            free_claim!("?3", "?5"),
            ")
                OR (status = 'failed' AND retry_at <= ?3)
             RETURNING attempts + 1"
        ))
        .and_then(|mut s| {
            s.query_row(
                params![
                    handler,
                    event_id,
                    now_text,
                    claim_id,
                    expired_before(now, lease),
                    lease_until(now, lease)
                ],
                |row| row.get(0),
            )
            .optional()
        })
        .map_err(sql("cannot claim an inbox entry"))?;
    if let Some(attempt) = claimed {
        return Ok(InboxClaim::Claimed { attempt });
    }
    let (status, retry_at): (String, Option<String>) = conn
        .prepare_cached(
            "SELECT status, retry_at FROM bounda_inbox WHERE handler = ?1 AND event_id = ?2",
        )
        .and_then(|mut s| {
            s.query_row(params![handler, event_id], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
        })
        .map_err(sql("cannot read an inbox entry"))?;
    Ok(match (status.as_str(), retry_at) {
        ("succeeded", _) => InboxClaim::Succeeded,
        ("dead", _) => InboxClaim::DeadLettered,
        ("failed", Some(retry_at)) => InboxClaim::Waiting {
            retry_at: Instant::parse(&retry_at)
                .map_err(|e| StoreError::with_source("unreadable retry moment", e))?,
        },
        _ => InboxClaim::Held,
    })
}

/// Claims up to `limit` entries due at `now` on `conn`, in due order.
pub(crate) fn claim(
    conn: &Connection,
    claim_id: &str,
    now: Instant,
    lease: Duration,
    limit: usize,
) -> Result<Vec<ScheduledEntry>, StoreError> {
    let mut statement = conn
        .prepare_cached(&format!(
            "UPDATE bounda_scheduled_commands
             SET claimed_at = ?1, lease_until = ?5, claim_id = ?2, rescheduled = 0
             WHERE dedupe_key IN (
                 SELECT dedupe_key FROM bounda_scheduled_commands s
                 WHERE execute_at <= ?1 AND {} AND NOT {PAUSED} AND NOT {}
                 ORDER BY execute_at, dedupe_key LIMIT ?4)
             RETURNING {}",
            free_claim!("?1", "?3"),
            limited!("?1"),
            rows::SCHEDULED_COLUMNS
        ))
        .map_err(sql("cannot prepare a claim"))?;
    let mut entries: Vec<ScheduledEntry> = statement
        .query_map(
            params![
                now.to_string(),
                claim_id,
                expired_before(now, lease),
                rows::limit(limit),
                lease_until(now, lease)
            ],
            rows::scheduled,
        )
        .and_then(Iterator::collect)
        .map_err(sql("cannot claim due entries"))?;
    entries.sort_by(|a, b| (a.execute_at, &a.dedupe_key).cmp(&(b.execute_at, &b.dedupe_key)));
    Ok(entries)
}
