//! Limits' windows (`bounda::store::limits`): permits taken at once for every runner on the file,
//! and the condition under which a due entry waits for its limit's window to end.

use bounda::store::{LimitKey, LimitKind, LimitWindow, StoreError};
use bounda::{Duration, Instant};
use rusqlite::{Connection, params};

use crate::{rows, sql};

/// The condition that the scheduler row aliased `s` is paced by the limit row aliased `l`: a
/// deadline of its process, a delayed run of its policy, an entry of its command.
#[rustfmt::skip] // as the condition reads
macro_rules! paced_by {
    () => {
        concat!(
            "((l.kind = 'process' AND s.command_type = 'bounda.ProcessDeadline'
            AND l.name = ", json_field!("s.payload", "$.process"), ")
        OR (l.kind = 'policy' AND s.command_type = 'bounda.PolicyRun'
            AND l.name = ", json_field!("s.payload", "$.policy"), ")
        OR (l.kind = 'command' AND l.name = s.command_type))"
        )
    };
}

/// The condition that the scheduler row aliased `s` waits at `$now` (a parameter) for its
/// limit's window to end: its process's, policy's or command's permits are used up. With no
/// limit, one read of an empty table.
#[rustfmt::skip] // as the condition reads
macro_rules! limited {
    ($now:literal) => {
        concat!(
            "EXISTS (SELECT 1 FROM bounda_limits l WHERE l.ends > ", $now,
            " AND l.taken >= l.cap AND ", $crate::limits::paced_by!(), ")"
        )
    };
}
pub(crate) use {limited, paced_by};

/// Takes up to `wanted` of `key`'s permits in its window of `per` ending at `ends` (of `cap`),
/// in one statement: the file has one writer, and the row's old values are read by the update
/// itself. The stored window is counted into when it is this one or the next of the same
/// length; otherwise this one replaces it.
pub(crate) fn take(
    conn: &Connection,
    key: &LimitKey,
    ends: Instant,
    per: Duration,
    cap: u32,
    wanted: u32,
) -> Result<u32, StoreError> {
    let per_ms = i64::try_from(per.as_millis()).unwrap_or(i64::MAX);
    conn.prepare_cached(concat!(
        "INSERT INTO bounda_limits (kind, name, ends, per_ms, cap, taken, granted)
         VALUES (?1, ?2, ?3, ?6, ?4, min(?4, ?5), min(?4, ?5))
         ON CONFLICT (kind, name) DO UPDATE SET
             granted = CASE WHEN ",
        same_window!(),
        " THEN max(0, min(excluded.cap - taken, ?5)) ELSE excluded.granted END,
             taken = CASE WHEN ",
        same_window!(),
        " THEN taken + max(0, min(excluded.cap - taken, ?5)) ELSE excluded.taken END,
             ends = CASE WHEN ",
        same_window!(),
        " THEN ends ELSE excluded.ends END,
             per_ms = excluded.per_ms,
             cap = excluded.cap
         RETURNING granted"
    ))
    .and_then(|mut s| {
        s.query_row(
            params![
                key.kind.as_str(),
                key.name,
                ends.to_string(),
                cap,
                wanted,
                per_ms,
                (ends + per).to_string()
            ],
            |row| row.get(0),
        )
    })
    .map_err(sql("cannot take a limit's permits"))
}

/// The condition, in the upsert of [`take`], that the stored window is the one asked for or the
/// next one (`?7` being the end of the next), of the same length.
macro_rules! same_window {
    () => {
        "(per_ms = excluded.per_ms AND ends >= excluded.ends AND ends <= ?7)"
    };
}
use same_window;

/// Gives back `count` permits of `key`'s window ending at `ends`.
pub(crate) fn give_back(
    conn: &Connection,
    key: &LimitKey,
    ends: Instant,
    count: u32,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "UPDATE bounda_limits SET taken = max(0, taken - ?4)
         WHERE kind = ?1 AND name = ?2 AND ends = ?3",
    )
    .and_then(|mut s| {
        s.execute(params![
            key.kind.as_str(),
            key.name,
            ends.to_string(),
            count
        ])
    })
    .map(|_| ())
    .map_err(sql("cannot give back a limit's permits"))
}

/// Forgets `key`'s window.
pub(crate) fn drop(conn: &Connection, key: &LimitKey) -> Result<(), StoreError> {
    conn.prepare_cached("DELETE FROM bounda_limits WHERE kind = ?1 AND name = ?2")
        .and_then(|mut s| s.execute(params![key.kind.as_str(), key.name]))
        .map(|_| ())
        .map_err(sql("cannot forget a limit's window"))
}

/// The windows not yet ended at `now`, by kind and name.
pub(crate) fn windows(conn: &Connection, now: Instant) -> Result<Vec<LimitWindow>, StoreError> {
    let mut statement = conn
        .prepare_cached(
            "SELECT kind, name, ends, cap, taken FROM bounda_limits WHERE ends > ?1
             ORDER BY kind, name",
        )
        .map_err(sql("cannot prepare a read of the limits"))?;
    let read = statement
        .query_map(params![now.to_string()], |row| {
            let kind: String = row.get(0)?;
            Ok((
                kind,
                row.get::<_, String>(1)?,
                rows::instant(row, 2)?,
                row.get::<_, u32>(3)?,
                row.get::<_, u32>(4)?,
            ))
        })
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(sql("cannot read the limits"))?;
    read.into_iter()
        .map(|(kind, name, ends, cap, taken)| {
            Ok(LimitWindow {
                key: key(&kind, name)?,
                ends,
                cap,
                taken,
            })
        })
        .collect()
}

/// For each limit used up at `now`, how many due entries it holds back (free of claims).
pub(crate) fn held(conn: &Connection, now: Instant) -> Result<Vec<(LimitKey, u64)>, StoreError> {
    let mut statement = conn
        .prepare_cached(concat!(
            "SELECT l.kind, l.name,
                 (SELECT count(*) FROM bounda_scheduled_commands s
                  WHERE s.execute_at <= ?1 AND s.claimed_at IS NULL AND ",
            paced_by!(),
            ")
             FROM bounda_limits l WHERE l.ends > ?1 AND l.taken >= l.cap
             ORDER BY l.kind, l.name"
        ))
        .map_err(sql("cannot prepare a read of what the limits hold"))?;
    let read = statement
        .query_map(params![now.to_string()], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, u64>(2)?,
            ))
        })
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(sql("cannot read what the limits hold"))?;
    read.into_iter()
        .map(|(kind, name, count)| Ok((key(&kind, name)?, count)))
        .collect()
}

/// The key stored as `kind` and `name`.
fn key(kind: &str, name: String) -> Result<LimitKey, StoreError> {
    let kind = LimitKind::parse(kind)
        .ok_or_else(|| StoreError::new(format!("a limit of kind `{kind}` does not read")))?;
    Ok(LimitKey { kind, name })
}
