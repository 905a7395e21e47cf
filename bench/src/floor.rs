//! The floors: the least plain rusqlite can do to make the same writes bounda makes, on the
//! same tables (made by bounda-sqlite's migrations), in the same journal mode, committing every `per_tx` units of work. bounda's
//! rate divided by a floor's is the benchmark's figure (`PERFORMANCE.md`).

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, params};

use crate::Mode;

/// The simulated start, as bounda writes moments: ISO 8601, milliseconds, `Z`.
const START: &str = "2026-01-01T00:00:00.000Z";
/// An hour after the start: when the floor's deadlines are due.
const DUE: &str = "2026-01-01T01:00:00.000Z";
/// When the floor's firings happen.
const NOW: &str = "2026-01-01T02:00:00.000Z";
/// Where a fired deadline's row moves: the instance's timeout, a year on.
const TIMEOUT: &str = "2027-01-01T00:00:00.000Z";
/// Where the pending deadlines sit: after everything the benchmark makes come due.
pub const FAR_FUTURE: &str = "2030-01-01T00:00:00.000Z";
/// Metadata shaped like what bounda stores with each event.
const METADATA: &str = r#"{"correlationId":"id-000000001","causationId":"id-000000001","depth":0,"schemaVersion":1,"system":false}"#;

/// Opens a fresh database at `path` as bounda-sqlite does (WAL, `synchronous` per `mode`, a
/// 5 s busy timeout), with bounda's own tables: bounda-sqlite's migrations make them, so the
/// floor writes the same layout whatever it becomes.
pub fn open(path: &Path, mode: Mode) -> Connection {
    let options = bounda_sqlite::Options {
        synchronous: mode.synchronous(),
        ..bounda_sqlite::Options::default()
    };
    drop(
        bounda_sqlite::SqliteStore::open_with(path, options)
            .expect("bounda-sqlite cannot create its tables for the floor"),
    );
    let conn = Connection::open(path).expect("the floor cannot open its database file");
    configure(&conn, mode);
    conn
}

/// Sets the pragmas bounda-sqlite sets on a file.
pub fn configure(conn: &Connection, mode: Mode) {
    conn.busy_timeout(Duration::from_secs(5))
        .expect("cannot set the busy timeout");
    let journal: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
        .expect("cannot switch to WAL");
    assert!(
        journal.eq_ignore_ascii_case("wal"),
        "the database would not switch to WAL (journal_mode is `{journal}`)"
    );
    conn.pragma_update(None, "synchronous", mode.pragma())
        .expect("cannot set synchronous");
    // As bounda's connection: a statement whose plan could depend on a bound value (`position
    // > ?`, `LIMIT ?`) keeps its plan rather than being prepared again at each new value.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .expect("cannot enable query planner stability");
}

/// Moves everything in the WAL into the database file and empties the WAL, so that what setup
/// wrote is not checkpointed during the timed part. Tried again while another checkpoint (the
/// store's own thread) runs; panics if it is still held back after a few seconds.
pub fn checkpoint(conn: &Connection) {
    for _ in 0..500 {
        let busy: i64 = conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get(0))
            .expect("cannot checkpoint the WAL");
        if busy == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the WAL checkpoint was held back for 5 s, by a reader or another checkpoint");
}

/// A key that starts like bounda's derived ids (UUID v5: 64 bits in hex, spread over the key
/// space), from `bits`, and ends in a readable `<prefix><n>` that says what the row is.
fn uuid_like(bits: u64, prefix: &str, n: usize) -> String {
    format!(
        "{:08x}-{:04x}-{:04x}-{prefix}{n}",
        bits >> 32,
        (bits >> 16) & 0xffff,
        bits & 0xffff
    )
}

/// The key of due deadline `n`: scattered, as derived ids are.
fn scramble_key(prefix: &str, n: usize) -> String {
    // splitmix64: a cheap, fixed scattering of `n` over 64 bits.
    let mut z = (n as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    uuid_like(z, prefix, n)
}

/// The key of pending deadline `n` of `count`: evenly spaced over the key space and rising
/// with `n`, so a million rows insert in key order (quickly, with SQLite's small default cache)
/// yet end up spread between the due rows as random ids would.
fn spaced_key(prefix: &str, n: usize, count: usize) -> String {
    let step = u64::MAX / (count.max(1) as u64);
    uuid_like(step.wrapping_mul(n as u64), prefix, n)
}

/// An event id shaped like time-ordered ids (UUID v7 in production, `id-N` in tests): each
/// new one sorts after the last.
fn event_id(n: u64) -> String {
    format!("ev-{n:012}")
}

/// Appends one event with the next position; the caller keeps `next` counting.
fn insert_event(
    conn: &Connection,
    next: &mut u64,
    aggregate_type: &str,
    aggregate_id: &str,
    version: u64,
    event_type: &str,
) {
    *next += 1;
    let payload = format!(r#"{{"ticket_id":"{aggregate_id}"}}"#);
    conn.prepare_cached(
        "INSERT INTO bounda_events
             (id, aggregate_type, aggregate_id, version, type, payload, timestamp, metadata)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )
    .and_then(|mut statement| {
        statement.execute(params![
            event_id(*next),
            aggregate_type,
            aggregate_id,
            version,
            event_type,
            payload,
            NOW,
            METADATA
        ])
    })
    .expect("the floor cannot append an event");
}

/// Stores `count` events of `count` tickets, one transaction: what the timed work reads or
/// follows. Returns the last event number used.
pub fn prefill_events(conn: &mut Connection, count: usize) -> u64 {
    let tx = conn.transaction().expect("cannot begin the prefill");
    let mut next = 0;
    for n in 0..count {
        insert_event(&tx, &mut next, "Ticket", &ticket(n), 1, "TicketOpened");
    }
    tx.commit().expect("cannot commit the prefill");
    next
}

/// The id of ticket `n`.
pub fn ticket(n: usize) -> String {
    format!("t-{n}")
}

/// Inserts `count` scheduler rows of process deadlines due at `FAR_FUTURE` into bounda's
/// scheduler table on `conn`, in one transaction with one prepared statement. Their keys are
/// spread over the key space like bounda's own and end in `pending-<n>` (`spaced_key`).
pub fn insert_pending(conn: &mut Connection, count: usize) {
    insert_deadlines(conn, "pending-", count, FAR_FUTURE, |n| {
        spaced_key("pending-", n, count)
    });
}

/// Inserts `count` process-deadline rows due at `at`, keyed by `key(n)`, instances
/// `<prefix><n>`.
fn insert_deadlines(
    conn: &mut Connection,
    prefix: &str,
    count: usize,
    at: &str,
    key: impl Fn(usize) -> String,
) {
    let tx = conn
        .transaction()
        .expect("cannot begin inserting deadlines");
    {
        let mut statement = tx
            .prepare(
                "INSERT INTO bounda_scheduled_commands
                     (dedupe_key, command_type, aggregate_id, payload, execute_at, context)
                 VALUES (?1, 'bounda.ProcessDeadline', ?2, ?3, ?4, '{}')",
            )
            .expect("cannot prepare the deadline insert");
        for n in 0..count {
            let instance = format!("{prefix}{n}");
            let payload =
                format!(r#"{{"at":1893456000000,"instance":"{instance}","process":"Expiry"}}"#);
            statement
                .execute(params![key(n), instance, payload, at])
                .expect("cannot insert a deadline");
        }
    }
    tx.commit().expect("cannot commit the deadlines");
}

/// How a floor's statements carry its writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    /// A statement per row: what a loop over the units does.
    PerRow,
    /// A statement per table for each transaction's units: multi-row `INSERT`s and `UPDATE`s
    /// of a list of keys, the least the server can be asked to do for the same rows.
    PerTable,
}

/// Where a floor's WAL checkpoints run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checkpoints {
    /// In the commit that takes the WAL past a thousand pages: SQLite's default.
    Inline,
    /// Not during the timed run (`wal_autocheckpoint = 0`): the most a floor could gain from
    /// checkpoints off its thread, as bounda's are at `NORMAL`.
    Deferred,
}

/// Runs `units` units of work on `conn`, `per_tx` to a transaction, and returns the rate in
/// units per second: `work` does the units of one transaction. Only this loop is timed.
fn timed(
    conn: &mut Connection,
    units: usize,
    per_tx: usize,
    mut work: impl FnMut(&Connection, std::ops::Range<usize>),
) -> f64 {
    let start = Instant::now();
    let mut done = 0;
    while done < units {
        let tx = conn.transaction().expect("the floor cannot begin");
        let end = (done + per_tx).min(units);
        work(&tx, done..end);
        tx.commit().expect("the floor cannot commit");
        done = end;
    }
    units as f64 / start.elapsed().as_secs_f64()
}

/// `rows` tuples of `columns` anonymous parameters: `(?, ?), (?, ?)`.
fn tuples(rows: usize, columns: usize) -> String {
    let tuple = format!("({})", vec!["?"; columns].join(", "));
    vec![tuple; rows].join(", ")
}

/// Appends one event per `(aggregate_id, number)` of `rows` in one statement, numbering them
/// on from `next`, as [`insert_event`] does one.
fn insert_events(
    conn: &Connection,
    next: &mut u64,
    aggregate_type: &str,
    rows: &[String],
    version: u64,
    event_type: &str,
) {
    let mut values: Vec<rusqlite::types::Value> = Vec::with_capacity(rows.len() * 8);
    for aggregate_id in rows {
        *next += 1;
        values.extend(
            [
                event_id(*next),
                aggregate_type.to_owned(),
                aggregate_id.clone(),
                version.to_string(),
                event_type.to_owned(),
                format!(r#"{{"ticket_id":"{aggregate_id}"}}"#),
                NOW.to_owned(),
                METADATA.to_owned(),
            ]
            .map(rusqlite::types::Value::Text),
        );
    }
    conn.prepare_cached(&format!(
        "INSERT INTO bounda_events
             (id, aggregate_type, aggregate_id, version, type, payload, timestamp, metadata)
         VALUES {}",
        tuples(rows.len(), 8)
    ))
    .and_then(|mut statement| statement.execute(rusqlite::params_from_iter(values)))
    .expect("the floor cannot append its events");
}

/// Deadline firings, on a file that may hold pending instances already (see `pending`): per
/// firing, select the first due row, append one event, move the row to the instance's next
/// moment (as bounda re-arms it at the timeout).
pub fn deadline_firings(
    path: &Path,
    mode: Mode,
    units: usize,
    per_tx: usize,
    way: Way,
    checkpoints: Checkpoints,
) -> f64 {
    let mut conn = open(path, mode);
    if checkpoints == Checkpoints::Deferred {
        conn.pragma_update(None, "wal_autocheckpoint", 0)
            .expect("cannot defer the checkpoints");
    }
    // What bounda's file holds before its firings: each ticket's `TicketOpened` and each
    // instance's `ProcessStarted`, one scheduler row per instance, and the pending rows.
    let mut next = prefill_events(&mut conn, units * 2);
    insert_deadlines(&mut conn, "due-", units, DUE, |n| scramble_key("due-", n));
    checkpoint(&conn);
    let fired = timed(&mut conn, units, per_tx, |conn, batch| {
        if way == Way::PerTable {
            return fire_per_table(conn, &mut next, batch.len());
        }
        for _ in batch {
            let (key, instance): (String, String) = conn
                .prepare_cached(
                    "SELECT dedupe_key, aggregate_id FROM bounda_scheduled_commands
                 WHERE execute_at <= ?1 AND claimed_at IS NULL
                 ORDER BY execute_at, dedupe_key LIMIT 1",
                )
                .and_then(|mut statement| {
                    statement.query_row([NOW], |row| Ok((row.get(0)?, row.get(1)?)))
                })
                .expect("the floor found no due deadline");
            insert_event(
                conn,
                &mut next,
                "process:Expiry",
                &instance,
                2,
                "ProcessDeadlineReached",
            );
            conn.prepare_cached(
                "UPDATE bounda_scheduled_commands SET execute_at = ?2 WHERE dedupe_key = ?1",
            )
            .and_then(|mut statement| statement.execute(params![key, TIMEOUT]))
            .expect("the floor cannot move a deadline");
        }
    });
    let left: u64 = conn
        .query_row(
            "SELECT COUNT(*) FROM bounda_scheduled_commands WHERE execute_at <= ?1",
            [NOW],
            |row| row.get(0),
        )
        .expect("cannot count what is left due");
    assert_eq!(left, 0, "the floor left deadlines due");
    fired
}

/// A transaction's `count` firings in a statement per table: the first due rows read, their
/// events appended, their rows moved to the timeout.
fn fire_per_table(conn: &Connection, next: &mut u64, count: usize) {
    let due: Vec<(String, String)> = conn
        .prepare_cached(
            "SELECT dedupe_key, aggregate_id FROM bounda_scheduled_commands
             WHERE execute_at <= ?1 AND claimed_at IS NULL
             ORDER BY execute_at, dedupe_key LIMIT ?2",
        )
        .and_then(|mut statement| {
            statement
                .query_map(params![NOW, count as i64], |row| {
                    Ok((row.get(0)?, row.get(1)?))
                })?
                .collect()
        })
        .expect("the floor found no due deadlines");
    assert_eq!(due.len(), count, "the floor found too few due deadlines");
    let instances: Vec<String> = due.iter().map(|(_, instance)| instance.clone()).collect();
    insert_events(
        conn,
        next,
        "process:Expiry",
        &instances,
        2,
        "ProcessDeadlineReached",
    );
    let mut values: Vec<String> = vec![TIMEOUT.to_owned()];
    values.extend(due.into_iter().map(|(key, _)| key));
    conn.prepare_cached(&format!(
        "UPDATE bounda_scheduled_commands SET execute_at = ? WHERE dedupe_key IN ({})",
        vec!["?"; count].join(", ")
    ))
    .and_then(|mut statement| statement.execute(rusqlite::params_from_iter(values)))
    .expect("the floor cannot move its deadlines");
}

/// Reactions: per reaction, mark the event done in the inbox and append the command's event.
pub fn reactions(path: &Path, mode: Mode, units: usize, per_tx: usize, way: Way) -> f64 {
    let mut conn = open(path, mode);
    let mut next = prefill_events(&mut conn, units);
    checkpoint(&conn);
    timed(&mut conn, units, per_tx, |conn, batch| {
        if way == Way::PerTable {
            let mut values: Vec<String> = Vec::with_capacity(batch.len());
            for unit in batch.clone() {
                values.push(event_id(unit as u64 + 1));
            }
            conn.prepare_cached(&format!(
                "INSERT INTO bounda_inbox (handler, event_id, status, attempts, claimed_at, claim_id)
                 VALUES {}",
                vec![format!("('acknowledge_on_ticket_opened', ?, 'done', 1, '{START}', 'claim')"); batch.len()].join(", ")
            ))
            .and_then(|mut statement| statement.execute(rusqlite::params_from_iter(values)))
            .expect("the floor cannot mark the inbox");
            let tickets: Vec<String> = batch.map(ticket).collect();
            insert_events(conn, &mut next, "Ticket", &tickets, 2, "TicketAcknowledged");
            return;
        }
        for unit in batch {
            conn.prepare_cached(
            "INSERT INTO bounda_inbox (handler, event_id, status, attempts, claimed_at, claim_id)
             VALUES ('acknowledge_on_ticket_opened', ?1, 'done', 1, ?2, ?3)",
        )
        .and_then(|mut statement| {
            statement.execute(params![event_id(unit as u64 + 1), START, "claim"])
        })
        .expect("the floor cannot mark the inbox");
            insert_event(
                conn,
                &mut next,
                "Ticket",
                &ticket(unit),
                2,
                "TicketAcknowledged",
            );
        }
    })
}

/// Commands: per command, append one event to a new instance.
pub fn commands(path: &Path, mode: Mode, units: usize, per_tx: usize) -> f64 {
    let mut conn = open(path, mode);
    let mut next = 0;
    checkpoint(&conn);
    timed(&mut conn, units, per_tx, |conn, batch| {
        for unit in batch {
            insert_event(conn, &mut next, "Ticket", &ticket(unit), 1, "TicketOpened");
        }
    })
}

/// Projections: per event of the log, one upsert of its row into the read model's table (as
/// bounda lays it out), and per transaction the read of its events and the checkpoint's
/// compare-and-set, `per_tx` events a transaction. The events are prefilled untimed; the floor
/// reads each one's id and time, as the row needs, and decodes nothing else.
pub fn projections(path: &Path, mode: Mode, units: usize, per_tx: usize) -> f64 {
    let mut conn = open(path, mode);
    prefill_events(&mut conn, units);
    conn.execute_batch(
        "CREATE TABLE floor_read_tickets (ticket_id TEXT PRIMARY KEY, status TEXT NOT NULL,
                                          opened_at TEXT NOT NULL);
         CREATE INDEX floor_read_tickets_status ON floor_read_tickets (status);
         INSERT INTO bounda_checkpoints (subscriber, position) VALUES ('read-model:floor', 0);",
    )
    .expect("the floor cannot make its table");
    checkpoint(&conn);
    let start = Instant::now();
    let mut at = 0u64;
    loop {
        let tx = conn.transaction().expect("the floor cannot begin");
        let events: Vec<(u64, String, String)> = tx
            .prepare_cached(
                "SELECT position, aggregate_id, timestamp FROM bounda_events
                 WHERE position > ?1 ORDER BY position LIMIT ?2",
            )
            .and_then(|mut s| {
                s.query_map(params![at, per_tx as i64], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                })?
                .collect()
            })
            .expect("the floor cannot read the log");
        let Some(&(last, _, _)) = events.last() else {
            break;
        };
        for (_, ticket, timestamp) in &events {
            tx.prepare_cached(
                "INSERT INTO floor_read_tickets (ticket_id, status, opened_at) VALUES (?1, 'open', ?2)
                 ON CONFLICT (ticket_id) DO UPDATE SET status = excluded.status,
                                                      opened_at = excluded.opened_at",
            )
            .and_then(|mut s| s.execute(params![ticket, timestamp]))
            .expect("the floor cannot upsert");
        }
        let moved = tx
            .prepare_cached(
                "UPDATE bounda_checkpoints SET position = ?2
                 WHERE subscriber = 'read-model:floor' AND position = ?1",
            )
            .and_then(|mut s| s.execute(params![at, last]))
            .expect("the floor cannot move its checkpoint");
        assert_eq!(moved, 1, "the floor's checkpoint moved under it");
        tx.commit().expect("the floor cannot commit");
        at = last;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let rows: usize = conn
        .query_row("SELECT COUNT(*) FROM floor_read_tickets", [], |row| {
            row.get(0)
        })
        .expect("the floor's rows");
    assert_eq!(rows, units, "the floor did not project every event");
    units as f64 / elapsed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_floor_does_its_work() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        for (n, per_tx) in [(1, 1), (7, 3)] {
            let name = |what: &str| dir.path().join(format!("{what}-{n}.db"));
            for way in [Way::PerRow, Way::PerTable] {
                let name = |what: &str| dir.path().join(format!("{what}-{n}-{way:?}.db"));
                let checkpoints = match way {
                    Way::PerRow => Checkpoints::Deferred,
                    Way::PerTable => Checkpoints::Inline,
                };
                assert!(
                    deadline_firings(&name("d"), Mode::Normal, 5, per_tx, way, checkpoints) > 0.0
                );
                assert!(reactions(&name("r"), Mode::Normal, 5, per_tx, way) > 0.0);
            }
            assert!(commands(&name("c"), Mode::Normal, 5, per_tx) > 0.0);
            assert!(projections(&name("p"), Mode::Normal, 5, per_tx) > 0.0);
        }
        for way in ["PerRow", "PerTable"] {
            let conn = Connection::open(dir.path().join(format!("d-7-{way}.db")))
                .expect("the floor's file");
            let (events, left, moved): (u64, u64, u64) = conn
                .query_row(
                    "SELECT (SELECT COUNT(*) FROM bounda_events
                             WHERE type = 'ProcessDeadlineReached'),
                            (SELECT COUNT(*) FROM bounda_scheduled_commands),
                            (SELECT COUNT(*) FROM bounda_scheduled_commands
                             WHERE execute_at = ?1)",
                    [TIMEOUT],
                    |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
                )
                .expect("counts");
            assert_eq!(
                (events, left, moved),
                (5, 5, 5),
                "{way}: five fired and moved on"
            );
        }
    }

    #[test]
    fn scheduler_keys_are_distinct_and_spread() {
        for key in [
            |n| scramble_key("pending-", n),
            |n| spaced_key("pending-", n, 1000),
        ] {
            let keys: std::collections::BTreeSet<String> = (0..1000).map(key).collect();
            assert_eq!(keys.len(), 1000);
            assert!(key(7).ends_with("-pending-7"));
            let leading: std::collections::BTreeSet<char> =
                keys.iter().filter_map(|key| key.chars().next()).collect();
            assert_eq!(leading.len(), 16, "spread over every leading hex digit");
        }
        let spaced: Vec<String> = (0..1000).map(|n| spaced_key("p-", n, 1000)).collect();
        assert!(spaced.is_sorted(), "pending keys rise with n");
    }
}
