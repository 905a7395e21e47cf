//! The instances index (`bounda::store::instances`) in `bounda_instances`: its writes, its
//! queries (each answered through one of the table's indexes, ordered as the index is, so a page
//! reads about as many index entries as it lists), and its filling from the log when the table
//! is made.

use bounda::Instant;
use bounda::store::instances::{Bound, ChangeShape, StoredStep, deadline_key};
use bounda::store::{
    InstanceChange, InstanceCounts, InstanceQuery, InstanceRow, InstanceStatus, NextDue, StoreError,
};
use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, Row, params, params_from_iter};

use crate::{rows, sql};

/// The columns [`row`] reads, in order.
const COLUMNS: &str =
    "process, instance_id, status, correlation_id, started_at, updated_at, next_due";

/// A row of [`COLUMNS`].
fn row(row: &Row<'_>) -> rusqlite::Result<InstanceRow> {
    let status: String = row.get(2)?;
    let Some(status) = InstanceStatus::parse(&status) else {
        return Err(rusqlite::Error::InvalidColumnType(
            2,
            status,
            rusqlite::types::Type::Text,
        ));
    };
    Ok(InstanceRow {
        process: row.get(0)?,
        instance_id: row.get(1)?,
        status,
        correlation_id: row.get(3)?,
        started_at: rows::instant(row, 4)?,
        updated_at: rows::instant(row, 5)?,
        next_due: rows::optional_instant(row, 6)?,
    })
}

/// Writes `change`: only the columns it changes, so an index on a column it leaves is not
/// rewritten. A step updates its row in place; a row that is not kept yet (the instance starts
/// here, or its row is missing) is made from the stream's first event, written before it in
/// the same transaction. Answers the rows written: 0 when it changes nothing, or when a new
/// row finds no first event to be made from.
pub(crate) fn index(conn: &Connection, change: &InstanceChange) -> Result<u64, StoreError> {
    // The columns it changes, with their values, numbered after the row's key (?1, ?2).
    let mut set: Vec<(&str, Value)> = Vec::new();
    if let Some(at) = change.at {
        set.push(("updated_at", Value::Text(at.to_string())));
    }
    if let Some(status) = change.status {
        set.push(("status", Value::Text(status.as_str().to_owned())));
    }
    match change.next_due {
        NextDue::Keep => {}
        NextDue::At(at) => set.push(("next_due", Value::Text(at.to_string()))),
        NextDue::Clear => set.push(("next_due", Value::Null)),
    }
    if set.is_empty() {
        return Ok(0);
    }
    // Each value by its place after the row's key (?1, ?2).
    let place = |name: &str| {
        set.iter()
            .position(|(column, _)| *column == name)
            .map(|n| format!("?{}", n + 3))
    };
    let assignments = ChangeShape::of(change)
        .assignments(|column| place(column).unwrap_or_else(|| "NULL".to_owned()));
    let key = [
        Value::Text(change.process.clone()),
        Value::Text(change.instance_id.clone()),
    ];
    let values = || {
        key.iter()
            .cloned()
            .chain(set.iter().map(|(_, v)| v.clone()))
    };
    let run = |statement: &str, values: Vec<Value>| {
        conn.prepare_cached(statement)
            .and_then(|mut s| s.execute(params_from_iter(values)))
            .map_err(sql("cannot write the instances index"))
            .map(|changed| changed as u64)
    };
    // A step of a running instance finds its row: one write, no read of its stream.
    let updated = change.started.is_none()
        && run(
            &format!(
                "UPDATE bounda_instances AS i SET {assignments}
                 WHERE process = ?1 AND instance_id = ?2"
            ),
            values().collect(),
        )? > 0;
    if updated {
        return Ok(1);
    }
    // A new row, from the stream's first event and what the change sets.
    let column = |name: &str, default: &str| place(name).unwrap_or_else(|| default.to_owned());
    let stream = set.len() + 3;
    let mut all: Vec<Value> = values().collect();
    all.push(Value::Text(format!("process:{}", change.process)));
    run(
        &format!(
            "INSERT INTO bounda_instances AS i ({COLUMNS})
             SELECT ?1, ?2, {}, {}, timestamp, {}, {}
             FROM bounda_events WHERE aggregate_type = ?{stream} AND aggregate_id = ?2
                 AND version = 1
             ON CONFLICT (process, instance_id) DO UPDATE SET {assignments}",
            column("status", "'running'"),
            json_field!("metadata", "$.correlationId"),
            column("updated_at", "timestamp"),
            column("next_due", "NULL"),
        ),
        all,
    )
}

/// The SQL of `query` on `bounda_instances`, with its values bound as SQLite takes them
/// (moments as their fixed-width UTC text, which orders as time does).
fn clauses(query: &InstanceQuery, paged: bool) -> (String, &'static str, Vec<Value>) {
    let sql = query.sql(paged, |n| format!("?{n}"), true);
    let values = sql
        .values
        .into_iter()
        .map(|value| match value {
            Bound::Text(text) => Value::Text(text),
            Bound::Moment(at) => Value::Text(at.to_string()),
        })
        .collect();
    (sql.clause, sql.order, values)
}

/// The instances `query` lists.
pub(crate) fn list(
    conn: &Connection,
    query: &InstanceQuery,
) -> Result<Vec<InstanceRow>, StoreError> {
    let (clause, order, mut values) = clauses(query, true);
    values.push(Value::Integer(rows::limit(query.limit)));
    let statement = format!(
        "SELECT {COLUMNS} FROM bounda_instances {clause} {order} LIMIT ?{}",
        values.len()
    );
    conn.prepare_cached(&statement)
        .and_then(|mut s| {
            s.query_map(params_from_iter(values), row)?
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(sql("cannot list instances"))
}

/// How many instances `query` matches.
pub(crate) fn count(conn: &Connection, query: &InstanceQuery) -> Result<u64, StoreError> {
    let (clause, _, values) = clauses(query, false);
    conn.prepare_cached(&format!("SELECT COUNT(*) FROM bounda_instances {clause}"))
        .and_then(|mut s| s.query_row(params_from_iter(values), |row| row.get(0)))
        .map_err(sql("cannot count instances"))
}

/// Each process's instances counted by status, and what is pending and overdue at `now`.
pub(crate) fn counts(conn: &Connection, now: Instant) -> Result<Vec<InstanceCounts>, StoreError> {
    let mut by_process: std::collections::BTreeMap<String, InstanceCounts> = Default::default();
    let mut statement = conn
        .prepare_cached(
            "SELECT process, status, COUNT(*) FROM bounda_instances GROUP BY process, status",
        )
        .map_err(sql("cannot count instances"))?;
    let counted = statement
        .query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, u64>(2)?,
            ))
        })
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(sql("cannot count instances"))?;
    for (process, status, count) in counted {
        let counts = by_process
            .entry(process.clone())
            .or_insert_with(|| InstanceCounts {
                process,
                ..InstanceCounts::default()
            });
        if let Some(status) = InstanceStatus::parse(&status) {
            counts.add(status, count);
        }
    }
    let mut statement = conn
        .prepare_cached(
            "SELECT process, COUNT(*), SUM(next_due <= ?1), MIN(next_due) FROM bounda_instances
             WHERE next_due IS NOT NULL GROUP BY process",
        )
        .map_err(sql("cannot count pending deadlines"))?;
    let pending = statement
        .query_map([now.to_string()], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, u64>(1)?,
                row.get::<_, u64>(2)?,
                rows::optional_instant(row, 3)?,
            ))
        })
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(sql("cannot count pending deadlines"))?;
    for (process, pending, overdue, earliest) in pending {
        if let Some(counts) = by_process.get_mut(&process) {
            counts.pending = pending;
            counts.overdue = overdue;
            counts.oldest_overdue = earliest.filter(|_| overdue > 0);
        }
    }
    Ok(by_process.into_values().collect())
}

/// Fills the index from the log: a row for every process instance's stream, as its lifecycle
/// events and its deadline entry leave it. Run once, by the migration that makes the table,
/// inside its transaction; reads one stream's events at a time.
pub(crate) fn fill(conn: &Connection) -> rusqlite::Result<()> {
    let mut events = conn.prepare(concat!(
        "SELECT aggregate_type, aggregate_id, type, timestamp, ",
        json_field!("metadata", "$.correlationId"),
        "
         FROM bounda_events WHERE aggregate_type >= 'process:' AND aggregate_type < 'process;'
         ORDER BY aggregate_type, aggregate_id, version"
    ))?;
    let mut entry = conn.prepare(&format!(
        "SELECT {} FROM bounda_scheduled_commands WHERE dedupe_key = ?1",
        rows::SCHEDULED_COLUMNS
    ))?;
    let mut insert = conn.prepare(&format!(
        "INSERT INTO bounda_instances ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
    ))?;
    let mut write = |stream: &str, id: &str, steps: &[StoredStep]| -> rusqlite::Result<()> {
        let process = stream.strip_prefix("process:").unwrap_or(stream);
        let entry = entry
            .query_row([deadline_key(process, id)], rows::scheduled)
            .optional()?;
        if let Some(row) = InstanceRow::of_stream(process, id, steps, entry.as_ref()) {
            insert.execute(params![
                row.process,
                row.instance_id,
                row.status.as_str(),
                row.correlation_id,
                row.started_at.to_string(),
                row.updated_at.to_string(),
                row.next_due.map(|at| at.to_string()),
            ])?;
        }
        Ok(())
    };
    let mut rows_read = events.query([])?;
    let mut current: Option<(String, String)> = None;
    let mut steps = Vec::new();
    while let Some(event) = rows_read.next()? {
        let stream: String = event.get(0)?;
        let id: String = event.get(1)?;
        if current
            .as_ref()
            .is_some_and(|(s, i)| (s, i) != (&stream, &id))
        {
            if let Some((stream, id)) = current.take() {
                write(&stream, &id, &steps)?;
            }
            steps.clear();
        }
        current.get_or_insert((stream, id));
        steps.push(StoredStep {
            event_type: event.get(2)?,
            timestamp: rows::instant(event, 3)?,
            correlation_id: event.get::<_, Option<String>>(4)?.unwrap_or_default(),
        });
    }
    if let Some((stream, id)) = current {
        write(&stream, &id, &steps)?;
    }
    Ok(())
}
