//! Limits' windows (`bounda::store::limits`): permits taken at once for every runner on the
//! tables, and the condition under which a due entry waits for its limit's window to end.

use bounda::store::{LimitKey, LimitKind, LimitWindow, StoreError};

use crate::rows;

/// The condition that the scheduler row aliased `s` is paced by the limit row aliased `l`: a
/// deadline of its process, a delayed run of its policy, an entry of its command.
macro_rules! paced_by {
    () => {
        "((l.kind = 'process' AND s.command_type = 'bounda.ProcessDeadline'
            AND l.name = s.payload->>'process')
        OR (l.kind = 'policy' AND s.command_type = 'bounda.PolicyRun'
            AND l.name = s.payload->>'policy')
        OR (l.kind = 'command' AND l.name = s.command_type))"
    };
}

/// The condition that the scheduler row aliased `s` waits at `$1` for its limit's window to end:
/// its process's, policy's or command's permits are used up. With no limit, one read of an
/// empty table.
pub(crate) const LIMITED: &str = concat!(
    "EXISTS (SELECT 1 FROM {t}limits l WHERE l.ends > $1 AND l.taken >= l.cap AND ",
    paced_by!(),
    ")"
);

/// For each limit used up at `$1`, how many due entries it holds back (free of claims).
pub(crate) const HELD: &str = concat!(
    "SELECT l.kind, l.name,
         (SELECT count(*) FROM {t}scheduled_commands s
          WHERE s.execute_at <= $1 AND s.claimed_at IS NULL AND ",
    paced_by!(),
    ")
     FROM {t}limits l WHERE l.ends > $1 AND l.taken >= l.cap
     ORDER BY l.kind, l.name"
);

/// Takes up to `$5` of key (`$1`, `$2`)'s permits in its window of `$6` ms ending at `$3` (of
/// `$4`), in one statement: the row is locked by the upsert, which reads its old values. The
/// stored window is counted into when it is this one or the next (ending by `$7`) of the same
/// length; otherwise this one replaces it.
pub(crate) const TAKE: &str = concat!(
    "INSERT INTO {t}limits AS l (kind, name, ends, per_ms, cap, taken, granted)
    VALUES ($1, $2, $3, $6::bigint, $4::integer, LEAST($4::integer, $5::integer),
        LEAST($4::integer, $5::integer))
    ON CONFLICT (kind, name) DO UPDATE SET
        granted = CASE WHEN ",
    same_window!(),
    " THEN GREATEST(0, LEAST(EXCLUDED.cap - l.taken, $5::integer)) ELSE EXCLUDED.granted END,
        taken = CASE WHEN ",
    same_window!(),
    " THEN l.taken + GREATEST(0, LEAST(EXCLUDED.cap - l.taken, $5::integer))
            ELSE EXCLUDED.taken END,
        ends = CASE WHEN ",
    same_window!(),
    " THEN l.ends ELSE EXCLUDED.ends END,
        per_ms = EXCLUDED.per_ms,
        cap = EXCLUDED.cap
    RETURNING granted"
);

/// The condition, in [`TAKE`], that the stored window is the one asked for or the next one, of
/// the same length.
macro_rules! same_window {
    () => {
        "(l.per_ms = EXCLUDED.per_ms AND l.ends >= EXCLUDED.ends AND l.ends <= $7::timestamptz)"
    };
}
use same_window;

/// Gives back `$4` permits of key (`$1`, `$2`)'s window ending at `$3`.
pub(crate) const GIVE_BACK: &str = "UPDATE {t}limits SET taken = GREATEST(0, taken - $4::integer)
    WHERE kind = $1 AND name = $2 AND ends = $3";

/// Forgets key (`$1`, `$2`)'s window.
pub(crate) const DROP: &str = "DELETE FROM {t}limits WHERE kind = $1 AND name = $2";

/// The windows not yet ended at `$1`, by kind and name.
pub(crate) const WINDOWS: &str = "SELECT kind, name, ends, cap, taken FROM {t}limits
    WHERE ends > $1 ORDER BY kind, name";

/// A count as the tables keep it (`INTEGER`): one past its range is kept at its largest.
pub(crate) fn count(value: u32) -> i32 {
    i32::try_from(value).unwrap_or(i32::MAX)
}

/// The key in a row's first two columns, as stored.
pub(crate) fn key(row: &tokio_postgres::Row) -> Result<LimitKey, StoreError> {
    let kind: String = rows::get(row, 0)?;
    let kind = LimitKind::parse(&kind)
        .ok_or_else(|| StoreError::new(format!("a limit of kind `{kind}` does not read")))?;
    Ok(LimitKey {
        kind,
        name: rows::get(row, 1)?,
    })
}

/// A window as read by [`WINDOWS`].
pub(crate) fn window(row: &tokio_postgres::Row) -> Result<LimitWindow, StoreError> {
    let cap: i32 = rows::get(row, 3)?;
    let taken: i32 = rows::get(row, 4)?;
    Ok(LimitWindow {
        key: key(row)?,
        ends: rows::instant(row, 2)?,
        cap: u32::try_from(cap).unwrap_or(0),
        taken: u32::try_from(taken).unwrap_or(0),
    })
}
