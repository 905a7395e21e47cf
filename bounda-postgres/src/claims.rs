//! Claims: taking an inbox pair or due scheduler entries for one runner, fenced by a claim id
//! and a lease, so a runner whose lease lapsed cannot settle what another took over. Due entries
//! are claimed in batches with `FOR UPDATE SKIP LOCKED`, so workers take different entries
//! without waiting on each other.

use std::collections::HashMap;

use bounda::store::{InOrder, InboxClaim, InboxPair, ScheduledEntry, StoreError};
use bounda::{Duration, Instant};

use crate::limits::LIMITED;
use crate::names::Names;
use crate::rows;
use crate::sql::{Session, execute, failed, query, unflushed};

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

/// The condition that the scheduler row aliased `s` is held by a pause: a process deadline of a
/// paused process or instance, a delayed run of a paused policy (`bounda::store::pauses`). With
/// no pause, one read of an empty table.
pub(crate) const PAUSED: &str = "EXISTS (SELECT 1 FROM {t}pauses p WHERE
    (s.command_type = 'bounda.ProcessDeadline' AND p.name = s.payload->>'process'
        AND (p.kind = 'process' OR (p.kind = 'instance' AND p.instance = s.aggregate_id)))
    OR (s.command_type = 'bounda.PolicyRun' AND p.kind = 'policy'
        AND p.name = s.payload->>'policy'))";

/// Whether inbox row `i` may be claimed at `$3` (`$4` being `$3` less the lease): pending with
/// a free claim (new, released or lapsed), or failed with its retry due.
#[rustfmt::skip] // on two lines, as the condition reads
macro_rules! claimable {
    () => {
        concat!(
            "((i.status = 'pending' AND ", free_claim!("i.", "$3", "$4"), ")",
            " OR (i.status = 'failed' AND i.retry_at <= $3))"
        )
    };
}

/// Claims one inbox pair: a new pair, a lapsed claim, a released one or a failure whose retry
/// is due is taken; anything else is reported as it stands. A pair another dispatcher is
/// claiming at this moment is waited for, then answered as it stands.
pub(crate) async fn claim_one(
    client: &impl Session,
    names: &Names,
    pair: (&str, &str),
    claim_id: &str,
    now: Instant,
    lease: Duration,
) -> Result<InboxClaim, StoreError> {
    let pairs = Pairs {
        handlers: vec![pair.0],
        events: vec![pair.1],
    };
    if let Some((_, attempt)) = take(client, names, &pairs, claim_id, now, lease)
        .await?
        .pop()
    {
        return Ok(InboxClaim::Claimed { attempt });
    }
    // Not taken: it stands claimed by someone, settled, or waiting (or it lapsed just now, and
    // is answered held until the next claim).
    let standing = standings(client, names, &pairs, now, lease).await?;
    Ok(standing
        .into_iter()
        .next()
        .flatten()
        .unwrap_or(InboxClaim::Held))
}

/// Claims a batch of pairs in `order` in two round trips: one reads where each stands, one
/// claims those `order` takes that are free. A pair another runner claimed between the two
/// is answered held; a later pair of its lane that this claim took meanwhile is given back
/// (a third statement, only then) and answered skipped, so a lane never runs out of order.
pub(crate) async fn claim_batch(
    client: &impl Session,
    names: &Names,
    batch: &[InboxPair<'_>],
    claim_id: &str,
    now: Instant,
    lease: Duration,
    order: &mut InOrder,
) -> Result<Vec<InboxClaim>, StoreError> {
    let all = Pairs::of(batch.iter().map(|pair| (pair.handler, pair.event_id)));
    let standing = standings(client, names, &all, now, lease).await?;
    // Which free pairs the order takes, on a copy: each counts as claimed until it is.
    let before = order.clone();
    let mut candidates = vec![false; batch.len()];
    for ((pair, stands), candidate) in batch.iter().zip(&standing).zip(&mut candidates) {
        let answer = match (order.skips(pair), stands) {
            (true, _) => InboxClaim::Skipped,
            (false, Some(answer)) => answer.clone(),
            (false, None) => {
                *candidate = true;
                InboxClaim::Claimed { attempt: 1 }
            }
        };
        order.saw(pair, &answer);
    }
    let wanted = Pairs::of(
        batch
            .iter()
            .zip(&candidates)
            .filter(|(_, candidate)| **candidate)
            .map(|(pair, _)| (pair.handler, pair.event_id)),
    );
    let taken: HashMap<(String, String), u32> = match wanted.handlers.is_empty() {
        true => HashMap::new(),
        false => take(client, names, &wanted, claim_id, now, lease)
            .await?
            .into_iter()
            .collect(),
    };
    // The answers as they came out, told to the order afresh.
    *order = before;
    let mut answers = Vec::with_capacity(batch.len());
    let mut give_back = Vec::new();
    for ((pair, stands), candidate) in batch.iter().zip(standing).zip(candidates) {
        let attempt = taken
            .get(&(pair.handler.to_owned(), pair.event_id.to_owned()))
            .copied();
        let answer = match (order.skips(pair), stands, attempt) {
            (true, _, attempt) => {
                if attempt.is_some() {
                    give_back.push((pair.handler, pair.event_id));
                }
                InboxClaim::Skipped
            }
            (false, Some(answer), _) => answer,
            (false, None, Some(attempt)) => InboxClaim::Claimed { attempt },
            // Another runner claimed it between the two statements.
            (false, None, None) if candidate => InboxClaim::Held,
            (false, None, None) => InboxClaim::Skipped,
        };
        order.saw(pair, &answer);
        answers.push(answer);
    }
    if !give_back.is_empty() {
        let pairs = Pairs::of(give_back.into_iter());
        execute(
            client,
            &names.sql(
                "UPDATE {t}inbox AS i SET claimed_at = NULL, lease_until = NULL, claim_id = NULL
                 FROM unnest($1::text[], $2::text[]) AS p(handler, event_id)
                 WHERE i.handler = p.handler AND i.event_id = p.event_id
                   AND i.claim_id = $3 AND i.status = 'pending'",
            ),
            &[&pairs.handlers, &pairs.events, &claim_id],
        )
        .await
        .map_err(failed("cannot give back inbox claims"))?;
    }
    Ok(answers)
}

/// Pairs as the two arrays a statement takes.
struct Pairs<'a> {
    handlers: Vec<&'a str>,
    events: Vec<&'a str>,
}

impl<'a> Pairs<'a> {
    fn of(pairs: impl Iterator<Item = (&'a str, &'a str)>) -> Pairs<'a> {
        let (handlers, events) = pairs.unzip();
        Pairs { handlers, events }
    }
}

/// Where each pair stands, in order: `None` for one that may be claimed now. Each pair is looked
/// up in the primary key (a lateral read the planner cannot hash): a join planned while the inbox
/// was small scans all of it once it is not.
async fn standings(
    client: &impl Session,
    names: &Names,
    pairs: &Pairs<'_>,
    now: Instant,
    lease: Duration,
) -> Result<Vec<Option<InboxClaim>>, StoreError> {
    let rows = query(
        client,
        &names.sql(concat!(
            "SELECT i.status, i.retry_at, i.status IS NULL OR coalesce(",
            claimable!(),
            ", FALSE) FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS p(handler, event_id, n)
             LEFT JOIN LATERAL (SELECT * FROM {t}inbox x
                 WHERE x.handler = p.handler AND x.event_id = p.event_id OFFSET 0) i ON TRUE
             ORDER BY p.n"
        )),
        &[
            &pairs.handlers,
            &pairs.events,
            &now.to_chrono(),
            &(now - lease).to_chrono(),
        ],
    )
    .await
    .map_err(failed("cannot read inbox entries"))?;
    rows.iter()
        .map(|row| {
            if rows::get::<bool>(row, 2)? {
                return Ok(None);
            }
            let status: String = rows::get(row, 0)?;
            Ok(Some(
                match (status.as_str(), rows::optional_instant(row, 1)?) {
                    ("succeeded", _) => InboxClaim::Succeeded,
                    ("dead", _) => InboxClaim::DeadLettered,
                    ("failed", Some(retry_at)) => InboxClaim::Waiting { retry_at },
                    _ => InboxClaim::Held,
                },
            ))
        })
        .collect()
}

/// Claims those of `pairs` that are free, in order, under `claim_id` until `now + lease`: the
/// pairs taken, each with its attempt. `attempts` counts the runs that failed, so a claim that
/// lapsed (its runner killed) spends none.
async fn take(
    client: &impl Session,
    names: &Names,
    pairs: &Pairs<'_>,
    claim_id: &str,
    now: Instant,
    lease: Duration,
) -> Result<Vec<((String, String), u32)>, StoreError> {
    let rows = query(
        client,
        &names.sql(concat!(
            "INSERT INTO {t}inbox AS i
                 (handler, event_id, status, attempts, claimed_at, lease_until, claim_id)
             SELECT p.handler, p.event_id, 'pending', 0, $3, $6, $5
             FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS p(handler, event_id, n)
             WHERE ",
            unflushed!(),
            "
             ORDER BY p.n
             ON CONFLICT (handler, event_id) DO UPDATE SET
                 status = 'pending', claimed_at = excluded.claimed_at,
                 lease_until = excluded.lease_until, claim_id = excluded.claim_id, retry_at = NULL
             WHERE ",
            claimable!(),
            " RETURNING i.handler, i.event_id, i.attempts + 1"
        )),
        &[
            &pairs.handlers,
            &pairs.events,
            &now.to_chrono(),
            &(now - lease).to_chrono(),
            &claim_id,
            &(now + lease).to_chrono(),
        ],
    )
    .await
    .map_err(failed("cannot claim inbox entries"))?;
    rows.iter()
        .map(|row| {
            Ok((
                (rows::get(row, 0)?, rows::get(row, 1)?),
                rows::count(row, 2)?,
            ))
        })
        .collect()
}

/// Claims up to `limit` entries due at `now`, free or with a lapsed claim, under `claim_id` until
/// `now + lease`, in due order: rows another worker is claiming at this moment are skipped, not
/// waited for.
pub(crate) async fn claim(
    client: &impl Session,
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
                 SELECT dedupe_key FROM {{t}}scheduled_commands s
                 WHERE execute_at <= $1 AND {} AND NOT {PAUSED} AND NOT {LIMITED}
                 ORDER BY execute_at, dedupe_key
                 LIMIT $4
                 FOR UPDATE OF s SKIP LOCKED)
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
