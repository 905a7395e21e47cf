//! The instances index (`bounda::store::instances`) in `{t}instances`: its writes, its queries
//! (each answered through one of the table's indexes, ordered as the index is, so a page reads
//! about as many index entries as it lists), and its filling from the log when the table is
//! made.

use bounda::Instant;
use bounda::store::instances::{Bound, ChangeShape, StoredStep, deadline_key};
use bounda::store::{
    InstanceChange, InstanceCounts, InstanceQuery, InstanceRow, InstanceStatus, NextDue, StoreError,
};
use chrono::{DateTime, Utc};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::names::Names;
use crate::pipeline::{Owned, owned};
use crate::rows;
use crate::sql::{Session, Tx, execute, failed, query, query_one};

/// The columns [`row`] reads, in order.
const COLUMNS: &str =
    "process, instance_id, status, correlation_id, started_at, updated_at, next_due";

/// A row of [`COLUMNS`].
fn row(row: &Row) -> Result<InstanceRow, StoreError> {
    let status: String = rows::get(row, 2)?;
    let status = InstanceStatus::parse(&status)
        .ok_or_else(|| StoreError::new(format!("an instance's status `{status}` does not read")))?;
    Ok(InstanceRow {
        process: rows::get(row, 0)?,
        instance_id: rows::get(row, 1)?,
        status,
        correlation_id: rows::get(row, 3)?,
        started_at: rows::instant(row, 4)?,
        updated_at: rows::instant(row, 5)?,
        next_due: rows::optional_instant(row, 6)?,
    })
}

/// The statements that write `changes` (no two of one instance), `{t}` naming the tables, each
/// with its parameters and the rows it is foreseen to write: one per shape of change (which
/// columns it sets, and whether it starts its instance), so an index on a column a change
/// leaves is not rewritten. A start makes its row from the stream's first event, written
/// before it in the same transaction ([`MADE`]); a later step updates its row in place
/// ([`UPDATED`]), which spares it the first event's lookup and the row lock an upsert takes
/// before it updates. A shape that sets the deadline brings the rows' `{t}pending_deadlines`
/// to what they now hold, in the same statement. A change that changes nothing has none.
pub(crate) fn index(changes: &[&InstanceChange]) -> Vec<(String, Owned, u64)> {
    ChangeShape::group(changes.iter().copied())
        .into_iter()
        .map(|(shape, changes)| {
            let pend = match shape.starts {
                true => PEND_MADE,
                false => PEND_UPDATED,
            };
            let write = written(shape)
                .replace(
                    "{set_c}",
                    &shape.assignments(|column| format!("c.{column}")),
                )
                .replace(
                    "{set_excluded}",
                    &shape.assignments(|column| format!("excluded.{column}")),
                );
            // A row made takes the change's deadline, which is none when the shape sets none:
            // only a shape that sets it moves a pending deadline.
            let statement = match shape.next_due {
                true => format!("{write}, {pend}, {GONE} SELECT 1 FROM written"),
                false => format!("{write} SELECT 1 FROM written"),
            };
            let column = |value: fn(&InstanceChange) -> Option<String>| -> Vec<Option<String>> {
                changes.iter().map(|change| value(change)).collect()
            };
            let moment = |value: fn(&InstanceChange) -> Option<Instant>| {
                changes
                    .iter()
                    .map(|change| value(change).map(Instant::to_chrono))
                    .collect::<Vec<Option<DateTime<Utc>>>>()
            };
            let params = owned![
                column(|change| Some(change.process.clone())),
                column(|change| Some(change.instance_id.clone())),
                moment(|change| change.at),
                column(|change| change.status.map(|status| status.as_str().to_owned())),
                moment(|change| match change.next_due {
                    NextDue::At(at) => Some(at),
                    NextDue::Keep | NextDue::Clear => None,
                }),
            ];
            (statement, params, changes.len() as u64)
        })
        .collect()
}

/// The changes, as `c`, their columns named as the instance rows' (`updated_at` is the moment
/// of the change).
const CHANGES: &str = "c AS (
        SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[],
            $5::timestamptz[]) AS c (process, instance_id, updated_at, status, next_due))";

/// The rows the changes `{made_from}` make, from their streams' first events; a row made
/// already (a start written again) is updated as the change says (`{set_excluded}`). Answers
/// each row written (process, instance id, the deadline now held) as `made`.
const MADE: &str = "made AS (
        INSERT INTO {t}instances AS i (process, instance_id, status, correlation_id, started_at,
            updated_at, next_due)
        SELECT c.process, c.instance_id, COALESCE(c.status, 'running'),
            e.metadata->>'correlationId', e.timestamp, COALESCE(c.updated_at, e.timestamp),
            c.next_due
        FROM {made_from} c
        JOIN {t}events e ON e.aggregate_type = 'process:' || c.process
            AND e.aggregate_id = c.instance_id AND e.version = 1
        ON CONFLICT (process, instance_id) DO UPDATE SET {set_excluded}
        RETURNING i.process, i.instance_id, i.next_due)";

/// A later step's changes whose instance has no row yet, to be made as a start's: those the
/// statement's snapshot lacks, which are the rows [`UPDATED`] did not find. Looked up in the
/// table's key, and before the first events are (`OFFSET 0` keeps the lookup first): an
/// anti-join against `updated` itself would compare every change with every row updated, its
/// planning kept to loops of lookups (`wave::PLANNING`), and look up every first event before.
const UNINDEXED: &str = "(SELECT * FROM c WHERE NOT EXISTS (SELECT 1 FROM {t}instances x
            WHERE x.process = c.process AND x.instance_id = c.instance_id) OFFSET 0)";

/// A later step's rows kept already, updated in place (`{set_c}`), as `updated`.
const UPDATED: &str = "updated AS (
        UPDATE {t}instances AS i SET {set_c} FROM c
        WHERE i.process = c.process AND i.instance_id = c.instance_id
        RETURNING i.process, i.instance_id, i.next_due)";

/// The rows a shape of change writes, as `written`: a start's made ([`MADE`]); a later step's
/// updated in place ([`UPDATED`]), and one the index lacks made as a start's.
fn written(shape: ChangeShape) -> String {
    match shape.starts {
        true => format!(
            "WITH {CHANGES}, {},
            written AS (SELECT process, instance_id, next_due FROM made)",
            MADE.replace("{made_from}", "c")
        ),
        false => format!(
            "WITH {CHANGES}, {UPDATED}, {},
            written AS (SELECT process, instance_id, next_due FROM updated
                UNION ALL SELECT process, instance_id, next_due FROM made)",
            MADE.replace("{made_from}", UNINDEXED)
        ),
    }
}

/// A start's row of `{t}pending_deadlines`, made at the deadline its row now holds.
const PEND_MADE: &str = "
    kept AS (
        INSERT INTO {t}pending_deadlines AS d (process, instance_id, next_due)
        SELECT process, instance_id, next_due FROM written WHERE next_due IS NOT NULL
        ON CONFLICT (process, instance_id) DO UPDATE SET next_due = excluded.next_due
            WHERE d.next_due <> excluded.next_due)";

/// A later step's row of `{t}pending_deadlines`, moved to the deadline its row now holds (not
/// rewritten when it is the same), or made when there was none.
const PEND_UPDATED: &str = "
    moved AS (
        UPDATE {t}pending_deadlines d SET next_due = w.next_due FROM written w
        WHERE d.process = w.process AND d.instance_id = w.instance_id
            AND w.next_due IS NOT NULL AND d.next_due <> w.next_due),
    kept AS (
        INSERT INTO {t}pending_deadlines AS d (process, instance_id, next_due)
        SELECT w.process, w.instance_id, w.next_due FROM written w
        WHERE w.next_due IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {t}pending_deadlines p
            WHERE p.process = w.process AND p.instance_id = w.instance_id)
        ON CONFLICT (process, instance_id) DO UPDATE SET next_due = excluded.next_due
            WHERE d.next_due <> excluded.next_due)";

/// The rows of `{t}pending_deadlines` of rows written that now hold no deadline, gone.
const GONE: &str = "
    gone AS (
        DELETE FROM {t}pending_deadlines d USING written w
        WHERE d.process = w.process AND d.instance_id = w.instance_id AND w.next_due IS NULL)";

/// Fills `{t}pending_deadlines` from the instance rows, in the migration's transaction `tx`,
/// and drops the instance rows' own index of their deadlines, which it replaces. The instance
/// rows are left room on their pages (`fillfactor`), so a step's update of one stays on its
/// page, with no new index entry.
pub(crate) async fn pend(tx: &Tx<'_>, names: &Names) -> Result<(), StoreError> {
    tx.batch_execute(&names.sql(
        "INSERT INTO {t}pending_deadlines (process, instance_id, next_due)
             SELECT process, instance_id, next_due FROM {t}instances WHERE next_due IS NOT NULL;
         DROP INDEX IF EXISTS {t}instances_due;
         ALTER TABLE {t}instances SET (fillfactor = 80);",
    ))
    .await
    .map_err(failed("cannot fill the pending deadlines"))
}

/// Parameters built with a query.
type Values = Vec<Box<dyn ToSql + Sync + Send>>;

/// The SQL of `query` on `{t}instances`, with its values bound as PostgreSQL takes them. Its
/// planner reads the due index for a question about deadlines by itself.
fn clauses(query: &InstanceQuery, paged: bool) -> (String, &'static str, Values) {
    let sql = query.sql(paged, |n| format!("${n}"), false);
    let values = sql
        .values
        .into_iter()
        .map(|value| -> Box<dyn ToSql + Sync + Send> {
            match value {
                Bound::Text(text) => Box::new(text),
                Bound::Moment(at) => Box::new(at.to_chrono()),
            }
        })
        .collect();
    (sql.clause, sql.order, values)
}

fn borrowed(values: &Values) -> Vec<&(dyn ToSql + Sync)> {
    values
        .iter()
        .map(|value| value.as_ref() as &(dyn ToSql + Sync))
        .collect()
}

/// What `query` reads: the instance rows, or for a question about deadlines the pending ones
/// joined to their rows, read along their index in its order.
fn source(query: &InstanceQuery) -> &'static str {
    match query.asks_due() {
        false => "{t}instances",
        true => {
            "(SELECT d.process, d.instance_id, i.status, i.correlation_id, i.started_at,
                 i.updated_at, d.next_due
             FROM {t}pending_deadlines d
             JOIN {t}instances i ON i.process = d.process AND i.instance_id = d.instance_id) AS i"
        }
    }
}

/// The instances `query` lists.
pub(crate) async fn list(
    client: &impl Session,
    names: &Names,
    instances: &InstanceQuery,
) -> Result<Vec<InstanceRow>, StoreError> {
    let (clause, order, mut values) = clauses(instances, true);
    values.push(Box::new(rows::limit(instances.limit)));
    let statement = names.sql(&format!(
        "SELECT {COLUMNS} FROM {} {clause} {order} LIMIT ${}",
        source(instances),
        values.len()
    ));
    query(client, &statement, &borrowed(&values))
        .await
        .map_err(failed("cannot list instances"))?
        .iter()
        .map(row)
        .collect()
}

/// How many instances `query` matches.
pub(crate) async fn count(
    client: &impl Session,
    names: &Names,
    instances: &InstanceQuery,
) -> Result<u64, StoreError> {
    let (clause, _, values) = clauses(instances, false);
    let statement = names.sql(&format!(
        "SELECT count(*) FROM {} {clause}",
        source(instances)
    ));
    let counted = query_one(client, &statement, &borrowed(&values))
        .await
        .map_err(failed("cannot count instances"))?;
    rows::unsigned(&counted, 0)
}

/// Each process's instances counted by status, and what is pending and overdue at `now`.
pub(crate) async fn counts(
    client: &impl Session,
    names: &Names,
    now: Instant,
) -> Result<Vec<InstanceCounts>, StoreError> {
    let mut by_process: std::collections::BTreeMap<String, InstanceCounts> = Default::default();
    let counted = query(
        client,
        &names.sql("SELECT process, status, count(*) FROM {t}instances GROUP BY process, status"),
        &[],
    )
    .await
    .map_err(failed("cannot count instances"))?;
    for counted in &counted {
        let process: String = rows::get(counted, 0)?;
        let status: String = rows::get(counted, 1)?;
        let counts = by_process
            .entry(process.clone())
            .or_insert_with(|| InstanceCounts {
                process,
                ..InstanceCounts::default()
            });
        if let Some(status) = InstanceStatus::parse(&status) {
            counts.add(status, rows::unsigned(counted, 2)?);
        }
    }
    let pending = query(
        client,
        &names.sql(
            "SELECT process, count(*), count(*) FILTER (WHERE next_due <= $1), min(next_due)
             FROM {t}pending_deadlines GROUP BY process",
        ),
        &[&now.to_chrono()],
    )
    .await
    .map_err(failed("cannot count pending deadlines"))?;
    for pending in &pending {
        let process: String = rows::get(pending, 0)?;
        if let Some(counts) = by_process.get_mut(&process) {
            counts.pending = rows::unsigned(pending, 1)?;
            counts.overdue = rows::unsigned(pending, 2)?;
            counts.oldest_overdue =
                rows::optional_instant(pending, 3)?.filter(|_| counts.overdue > 0);
        }
    }
    Ok(by_process.into_values().collect())
}

/// Writes rows as they are, in one statement: a batch of the filling.
async fn insert(
    client: &impl Session,
    names: &Names,
    instances: &[InstanceRow],
) -> Result<(), StoreError> {
    if instances.is_empty() {
        return Ok(());
    }
    let text = |field: fn(&InstanceRow) -> String| instances.iter().map(field).collect::<Vec<_>>();
    let moment = |field: fn(&InstanceRow) -> Option<Instant>| {
        instances
            .iter()
            .map(|row| field(row).map(|at| at.to_chrono()))
            .collect::<Vec<Option<DateTime<Utc>>>>()
    };
    execute(
        client,
        &names.sql(&format!(
            "INSERT INTO {{t}}instances ({COLUMNS})
             SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[],
                 $5::timestamptz[], $6::timestamptz[], $7::timestamptz[])"
        )),
        &[
            &text(|row| row.process.clone()),
            &text(|row| row.instance_id.clone()),
            &text(|row| row.status.as_str().to_owned()),
            &text(|row| row.correlation_id.clone()),
            &moment(|row| Some(row.started_at)),
            &moment(|row| Some(row.updated_at)),
            &moment(|row| row.next_due),
        ],
    )
    .await
    .map_err(failed("cannot copy instances"))?;
    Ok(())
}

/// How many events the filling reads at a time, and how many streams it writes at once.
const FILL_EVENTS: i64 = 10_000;
const FILL_BATCH: usize = 1_000;

/// Fills the index from the log in the migration's transaction `tx`: a row for every process
/// instance's stream, as its lifecycle events and its deadline entry leave it. The events are
/// read a page at a time by their stream and version (each page read whole before the next
/// statement: one connection answers one statement at a time), and the rows written a thousand
/// at a time.
pub(crate) async fn fill(tx: &Tx<'_>, names: &Names) -> Result<(), StoreError> {
    let read = names.sql(
        "SELECT aggregate_type, aggregate_id, version, type, timestamp,
             metadata->>'correlationId'
         FROM {t}events
         WHERE aggregate_type LIKE 'process:%'
             AND (aggregate_type, aggregate_id, version) > ($1, $2, $3)
         ORDER BY aggregate_type, aggregate_id, version LIMIT $4",
    );
    // Complete streams waiting to be written, and the one the last page ended in.
    let mut streams: Vec<(String, String, Vec<StoredStep>)> = Vec::new();
    let mut after = (String::new(), String::new(), 0_i64);
    loop {
        let page = query(tx, &read, &[&after.0, &after.1, &after.2, &FILL_EVENTS])
            .await
            .map_err(failed("cannot read the process streams"))?;
        let Some(last) = page.last() else { break };
        after = (
            rows::get(last, 0)?,
            rows::get(last, 1)?,
            rows::get(last, 2)?,
        );
        for event in &page {
            let stream: String = rows::get(event, 0)?;
            let id: String = rows::get(event, 1)?;
            let step = StoredStep {
                event_type: rows::get(event, 3)?,
                timestamp: rows::instant(event, 4)?,
                correlation_id: rows::get::<Option<String>>(event, 5)?.unwrap_or_default(),
            };
            match streams.last_mut() {
                Some((s, i, steps)) if *s == stream && *i == id => steps.push(step),
                _ => streams.push((stream, id, vec![step])),
            }
        }
        // Every stream but the last is whole: the next page starts after it.
        if streams.len() > FILL_BATCH
            && let Some(open) = streams.pop()
        {
            fill_batch(tx, names, &streams).await?;
            streams = vec![open];
        }
    }
    fill_batch(tx, names, &streams).await
}

/// Writes the rows of `streams`, their deadline entries read in one statement.
async fn fill_batch(
    tx: &Tx<'_>,
    names: &Names,
    streams: &[(String, String, Vec<StoredStep>)],
) -> Result<(), StoreError> {
    let process = |stream: &str| stream.strip_prefix("process:").unwrap_or(stream).to_owned();
    let keys: Vec<String> = streams
        .iter()
        .map(|(stream, id, _)| deadline_key(&process(stream), id))
        .collect();
    let entries = query(
        tx,
        &names.sql(&format!(
            "SELECT {} FROM {{t}}scheduled_commands s WHERE s.dedupe_key = ANY($1)",
            rows::SCHEDULED_COLUMNS
        )),
        &[&keys],
    )
    .await
    .map_err(failed("cannot read the deadline entries"))?
    .iter()
    .map(|entry| rows::scheduled(entry).map(|entry| (entry.dedupe_key.clone(), entry)))
    .collect::<Result<std::collections::HashMap<_, _>, _>>()?;
    let rows: Vec<InstanceRow> = streams
        .iter()
        .zip(&keys)
        .filter_map(|((stream, id, steps), key)| {
            InstanceRow::of_stream(&process(stream), id, steps, entries.get(key))
        })
        .collect();
    insert(tx, names, &rows).await
}
