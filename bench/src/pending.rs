//! Pending deadlines as an app that has them stores them: per pending instance its ticket's
//! event, its process stream, its instances-index row and its scheduler entry, due far in the
//! future. One instance is written by bounda itself (the template), then cloned in SQL under
//! new ids, so every table a pending instance touches grows as it would in production, whatever
//! bounda's rows look like, and a base file of ten million takes minutes, not hours. Each
//! measurement runs on the base file, and [`Base::reset`] then takes out what it added (its
//! events, instances, entries and marks, the checkpoints put back): a copy per measurement of
//! a file of gigabytes would cost more than the measurement.

use rusqlite::functions::FunctionFlags;
use rusqlite::{Connection, params};
use std::path::Path;

use crate::Mode;
use crate::domain::OpenTicket;
use crate::domain::expiry::Expiry;
use crate::floor;

/// The process the pending instances are of.
const PROCESS: &str = "Expiry";
/// The template's ticket: a name no measured row uses.
const TEMPLATE: &str = "tpl-0";
/// When the pending instances' deadline comes due: after every firing the benchmark times,
/// before the instances' timeout (a year after the start), so it is their entry's moment.
const PENDING_AT: &str = "2026-07-01T00:00:00.000Z";
/// `PENDING_AT` in epoch milliseconds, as entries' payloads carry moments.
const PENDING_AT_MS: &str = "1782864000000";
/// Instances cloned per transaction: the WAL of one stays small.
const PER_TX: usize = 500_000;

/// A file of pending instances, and what it held once written.
pub struct Base {
    path: std::path::PathBuf,
    /// The last position of its events.
    last_position: i64,
    /// Each subscriber's checkpoint.
    checkpoints: Vec<(String, i64)>,
    /// The tables the pending instances leave empty.
    empty: Vec<String>,
    /// How many pending instances it holds.
    count: usize,
}

impl Base {
    /// Writes `count` pending instances into a fresh file at `path`. Panics if the template's
    /// rows are not all cloned (a table bounda added that this does not know would make the
    /// pending instances smaller than production's).
    pub async fn write(path: &Path, count: usize) -> Base {
        write(path, count).await;
        let conn = Connection::open(path).expect("cannot open the base file");
        let last_position = conn
            .query_row("SELECT MAX(position) FROM bounda_events", [], |row| {
                row.get(0)
            })
            .expect("cannot read the last position");
        let checkpoints = conn
            .prepare("SELECT subscriber, position FROM bounda_checkpoints")
            .and_then(|mut statement| {
                statement
                    .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
                    .collect::<Result<_, _>>()
            })
            .expect("cannot read the checkpoints");
        let empty = empty(&conn, tables(&conn));
        Base {
            path: path.to_owned(),
            last_position,
            checkpoints,
            empty,
            count,
        }
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Takes out what a measurement added to the file: the events after the base's last, what
    /// marks them, the instances and entries that are not the pending ones, the rows of every
    /// other table; and puts the checkpoints and the position counter back. Checks that the
    /// pending instances are all still there.
    pub fn reset(&self) {
        let mut conn = Connection::open(&self.path).expect("cannot open the base file");
        floor::configure(&conn, Mode::Normal);
        let tx = conn.transaction().expect("cannot begin the reset");
        tx.execute(
            "DELETE FROM bounda_inbox WHERE event_id IN
                 (SELECT id FROM bounda_events WHERE position > ?1)",
            [self.last_position],
        )
        .expect("cannot reset the inbox");
        tx.execute(
            "DELETE FROM bounda_events WHERE position > ?1",
            [self.last_position],
        )
        .expect("cannot reset the events");
        tx.execute(
            "UPDATE sqlite_sequence SET seq = ?1 WHERE name = 'bounda_events'",
            [self.last_position],
        )
        .expect("cannot reset the position counter");
        for (table, column) in [
            ("bounda_instances", "instance_id"),
            ("bounda_scheduled_commands", "aggregate_id"),
            ("bounda_snapshots", "aggregate_id"),
        ] {
            tx.execute(
                &format!("DELETE FROM {table} WHERE {column} NOT LIKE 'p-%'"),
                [],
            )
            .expect("cannot reset a table");
        }
        for table in &self.empty {
            tx.execute(&format!("DELETE FROM {table}"), [])
                .expect("cannot empty a table");
        }
        tx.execute("DELETE FROM bounda_checkpoints", [])
            .expect("cannot reset the checkpoints");
        for (subscriber, position) in &self.checkpoints {
            tx.execute(
                "INSERT INTO bounda_checkpoints (subscriber, position) VALUES (?1, ?2)",
                params![subscriber, position],
            )
            .expect("cannot put a checkpoint back");
        }
        // A runner's start that found the pending instances' entries wrong would have armed
        // them again: each still has its one entry, due far ahead.
        let entries: i64 = tx
            .query_row(
                "SELECT COUNT(*) FROM bounda_scheduled_commands WHERE execute_at = ?1",
                [PENDING_AT],
                |row| row.get(0),
            )
            .expect("cannot count the pending entries");
        if usize::try_from(entries).unwrap_or_default() != self.count {
            let moments: Vec<(String, i64)> = tx
                .prepare(
                    "SELECT execute_at, COUNT(*) FROM bounda_scheduled_commands
                     GROUP BY execute_at ORDER BY 2 DESC LIMIT 5",
                )
                .and_then(|mut statement| {
                    statement
                        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
                        .collect::<Result<_, _>>()
                })
                .expect("cannot read the entries' moments");
            panic!(
                "the pending instances' entries changed under the measurement: {entries} of {} \
                 due at {PENDING_AT}; the most common moments: {moments:?}",
                self.count
            );
        }
        tx.commit().expect("cannot commit the reset");
        floor::checkpoint(&conn);
    }
}

/// bounda's tables in the file on `conn`.
fn tables(conn: &Connection) -> Vec<String> {
    conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'bounda_%'")
        .and_then(|mut statement| {
            statement
                .query_map([], |row| row.get(0))?
                .collect::<Result<_, _>>()
        })
        .expect("cannot list the tables")
}

/// Of `tables`, those without a row.
fn empty(conn: &Connection, tables: Vec<String>) -> Vec<String> {
    tables
        .into_iter()
        .filter(|table| {
            conn.query_row(
                &format!("SELECT NOT EXISTS (SELECT 1 FROM {table})"),
                [],
                |row| row.get(0),
            )
            .expect("cannot look into a table")
        })
        .collect()
}

/// Writes `count` pending instances into a fresh file at `path`.
async fn write(path: &Path, count: usize) {
    template(path).await;
    let mut conn = Connection::open(path).expect("cannot open the base file");
    floor::configure(&conn, Mode::Normal);
    conn.create_scalar_function(
        "deadline_key",
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |context| {
            let (process, instance): (String, String) = (context.get(0)?, context.get(1)?);
            Ok(bounda::store::instances::deadline_key(&process, &instance))
        },
    )
    .expect("cannot add the key function");
    let moment = template_moment(&conn);
    let ids = template_ids(&conn);
    let mut done = 0;
    while done < count {
        let end = (done + PER_TX).min(count);
        let tx = conn.transaction().expect("cannot begin cloning");
        clone_range(&tx, &moment, &ids, done, end);
        tx.commit().expect("cannot commit the clones");
        done = end;
    }
    remove_template(&conn, &ids);
    // Every subscriber has passed what is stored, as in the app the instances came from.
    conn.execute(
        "UPDATE bounda_checkpoints SET position = (SELECT MAX(position) FROM bounda_events)",
        [],
    )
    .expect("cannot move the checkpoints past the clones");
    floor::checkpoint(&conn);
}

/// The template: one `Expiry` instance, written by the app.
async fn template(path: &Path) {
    let store = std::sync::Arc::new(
        bounda_sqlite::SqliteStore::open(path).expect("cannot open the base file's store"),
    );
    let app = bounda::testing::TestApp::new(
        bounda::App::builder_shared(store as std::sync::Arc<dyn bounda::store::Store>)
            .only_listed()
            .process::<Expiry>(),
    )
    .await
    .expect("cannot build the template app");
    app.dispatch(OpenTicket {
        ticket_id: TEMPLATE.into(),
    })
    .await
    .expect("the template ticket was not opened");
    crate::measure::settle(&app, "writing the template instance").await;
}

/// The template deadline's moment as the entry stores it (text) and in milliseconds.
struct Moment {
    text: String,
    millis: String,
}

fn template_moment(conn: &Connection) -> Moment {
    let (text, payload): (String, String) = conn
        .query_row(
            "SELECT execute_at, payload FROM bounda_scheduled_commands WHERE aggregate_id = ?1",
            [TEMPLATE],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .expect("the template has no scheduler entry");
    let payload: serde_json::Value =
        serde_json::from_str(&payload).expect("the template's entry payload is JSON");
    let millis = payload["at"].to_string();
    assert!(
        millis.parse::<i64>().is_ok(),
        "the template's entry payload has no moment in milliseconds: {payload}"
    );
    Moment { text, millis }
}

/// The ids the template's rows carry and a clone's must not share: its events' ids and
/// their correlation and causation ids.
fn template_ids(conn: &Connection) -> Vec<String> {
    let mut ids: Vec<String> = conn
        .prepare(
            "SELECT id FROM bounda_events WHERE aggregate_id = ?1
             UNION SELECT json_extract(metadata, '$.correlationId') FROM bounda_events
                   WHERE aggregate_id = ?1
             UNION SELECT json_extract(metadata, '$.causationId') FROM bounda_events
                   WHERE aggregate_id = ?1",
        )
        .and_then(|mut statement| {
            statement
                .query_map([TEMPLATE], |row| row.get(0))?
                .collect::<Result<_, _>>()
        })
        .expect("cannot read the template's ids");
    ids.retain(|id| !id.is_empty());
    ids
}

/// An SQL expression: `column` with the template's instance, its ids (`ids`, as JSON strings)
/// and its deadline's moment those of clone `x`.
fn cloned(column: &str, ids: &[String]) -> String {
    let mut expression = format!(
        "replace(replace(replace({column}, '{TEMPLATE}', printf('p-%09d', x)), :moment_text, \
         '{PENDING_AT}'), :moment_ms, '{PENDING_AT_MS}')"
    );
    for id in ids {
        expression = format!("replace({expression}, '\"{id}\"', printf('\"{id}-%09d\"', x))");
    }
    expression
}

/// An SQL expression: id `column` as clone `x` has it.
fn cloned_id(column: &str) -> String {
    format!("{column} || printf('-%09d', x)")
}

/// Clones the template into instances `from..to`.
fn clone_range(conn: &Connection, moment: &Moment, ids: &[String], from: usize, to: usize) {
    let cloned = |column: &str| cloned(column, ids);
    let numbers = "WITH RECURSIVE n(x) AS (SELECT :from UNION ALL SELECT x + 1 FROM n \
                   WHERE x + 1 < :to)";
    let events = format!(
        "{numbers}
         INSERT INTO bounda_events
             (id, aggregate_type, aggregate_id, version, type, payload, timestamp, metadata)
         SELECT {id}, e.aggregate_type, {aggregate_id}, e.version, e.type,
                {payload}, e.timestamp, {metadata}
         FROM n, (SELECT * FROM bounda_events WHERE aggregate_id = '{TEMPLATE}') e
         ORDER BY x, e.position",
        id = cloned_id("e.id"),
        aggregate_id = cloned("e.aggregate_id"),
        payload = cloned("e.payload"),
        metadata = cloned("e.metadata"),
    );
    let instances = format!(
        "{numbers}
         INSERT INTO bounda_instances
             (process, instance_id, status, correlation_id, started_at, updated_at, next_due)
         SELECT i.process, {instance_id}, i.status, {correlation_id},
                i.started_at, i.updated_at, {next_due}
         FROM n, (SELECT * FROM bounda_instances WHERE instance_id = '{TEMPLATE}') i",
        instance_id = cloned("i.instance_id"),
        correlation_id = cloned_id("i.correlation_id"),
        next_due = cloned("i.next_due"),
    );
    // Each entry under the key the runtime gives its instance's deadlines, or the runner's
    // start would find every instance without its entry and arm it again.
    let entries = format!(
        "{numbers}
         INSERT INTO bounda_scheduled_commands
             (dedupe_key, command_type, aggregate_id, payload, execute_at, context)
         SELECT deadline_key('{PROCESS}', {aggregate_id}), s.command_type, {aggregate_id},
                {payload}, '{PENDING_AT}', s.context
         FROM n, (SELECT * FROM bounda_scheduled_commands WHERE aggregate_id = '{TEMPLATE}') s
         ORDER BY 1",
        aggregate_id = cloned("s.aggregate_id"),
        payload = cloned("s.payload"),
    );
    // What the runs the template's events went through marked done.
    let inbox = format!(
        "{numbers}
         INSERT INTO bounda_inbox
             (handler, event_id, status, attempts, claimed_at, claim_id, last_error, retry_at)
         SELECT b.handler, {event_id}, b.status, b.attempts, b.claimed_at, b.claim_id,
                b.last_error, b.retry_at
         FROM n, (SELECT * FROM bounda_inbox WHERE event_id IN
                  (SELECT id FROM bounda_events WHERE aggregate_id = '{TEMPLATE}')) b",
        event_id = cloned_id("b.event_id"),
    );
    for sql in [inbox, events, instances, entries] {
        conn.prepare(&sql)
            .and_then(|mut statement| {
                let names = statement.parameter_count();
                let mut bound = 0;
                let (from, to) = (from as i64, to as i64);
                let values: [(&str, &dyn rusqlite::ToSql); 4] = [
                    (":from", &from),
                    (":to", &to),
                    (":moment_text", &moment.text),
                    (":moment_ms", &moment.millis),
                ];
                for (name, value) in values {
                    if let Some(index) = statement.parameter_index(name)? {
                        statement.raw_bind_parameter(index, value)?;
                        bound += 1;
                    }
                }
                assert_eq!(bound, names, "a clone statement has an unbound parameter");
                statement.raw_execute()
            })
            .unwrap_or_else(|error| panic!("cannot clone the template: {error}\n{sql}"));
    }
}

/// Deletes the template's own rows, after checking that the clones cover every table it has
/// rows in: each row naming its instance or one of its ids (`ids`).
fn remove_template(conn: &Connection, ids: &[String]) {
    conn.execute(
        "DELETE FROM bounda_inbox WHERE event_id IN
             (SELECT id FROM bounda_events WHERE aggregate_id = ?1)",
        [TEMPLATE],
    )
    .expect("cannot remove the template's inbox rows");
    let cloned = [
        "bounda_events",
        "bounda_instances",
        "bounda_scheduled_commands",
    ];
    // The checkpoints name no instance: they are moved past the clones.
    for table in tables(conn) {
        let columns: Vec<String> = conn
            .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
            .and_then(|mut statement| {
                statement
                    .query_map([], |row| row.get(0))?
                    .collect::<Result<_, _>>()
            })
            .expect("cannot list a table's columns");
        let mentions = columns
            .iter()
            .flat_map(|column| {
                let text = format!("CAST(\"{column}\" AS TEXT)");
                let like = format!("{text} LIKE '%{TEMPLATE}%'");
                let named = ids.iter().map(move |id| format!("{text} = '{id}'"));
                std::iter::once(like).chain(named)
            })
            .collect::<Vec<_>>()
            .join(" OR ");
        let found: i64 = conn
            .query_row(
                &format!("SELECT COUNT(*) FROM \"{table}\" WHERE {mentions}"),
                [],
                |row| row.get(0),
            )
            .expect("cannot look for the template's rows");
        if found == 0 {
            continue;
        }
        assert!(
            cloned.contains(&table.as_str()),
            "the template has {found} rows in `{table}`, which the clones leave out"
        );
        let key = match table.as_str() {
            "bounda_events" => "aggregate_id",
            "bounda_instances" => "instance_id",
            _ => "aggregate_id",
        };
        conn.execute(
            &format!("DELETE FROM {table} WHERE {key} = ?1"),
            params![TEMPLATE],
        )
        .expect("cannot remove the template");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(path: &Path, sql: &str) -> i64 {
        let conn = Connection::open(path).expect("the base file");
        conn.query_row(sql, [], |row| row.get(0)).expect("a count")
    }

    // The pending instances are stored as the app stores them (the runner's start finds
    // nothing to arm again: `reset` checks it), and a reset takes out what a measurement added.
    #[tokio::test(flavor = "current_thread")]
    async fn a_base_holds_its_instances_and_a_reset_takes_a_measurement_out() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("base.db");
        let base = Base::write(&path, 7).await;
        let events = "SELECT COUNT(*) FROM bounda_events";
        let stored = count(&path, events);
        assert_eq!(
            stored,
            7 * 3,
            "each instance's ticket event and two lifecycle events"
        );
        assert_eq!(count(&path, "SELECT COUNT(*) FROM bounda_instances"), 7);
        base.reset();
        let fired = crate::measure::deadline_firings(&path, Mode::Normal, 4, 100).await;
        assert_eq!(fired.units, 4);
        assert!(count(&path, events) > stored);
        base.reset();
        assert_eq!(count(&path, events), stored);
        assert_eq!(count(&path, "SELECT COUNT(*) FROM bounda_instances"), 7);
        assert_eq!(
            count(&path, "SELECT COUNT(*) FROM bounda_scheduled_commands"),
            7
        );
    }
}
