//! The tables and their migrations, keyed on `PRAGMA user_version`.
//!
//! Migrations are an append-only list: the database's `user_version` is how many have run. A
//! database whose version is beyond this list was written by a newer bounda and is refused
//! before anything is written to it.

use std::path::Path;

use crate::Access;
use rusqlite::Connection;

use bounda::store::StoreError;

/// Every migration, in order. Never edit one that has shipped; append a new one.
const MIGRATIONS: &[&str] = &[
    // 1: the five storage tables.
    "
    CREATE TABLE bounda_events (
        position       INTEGER PRIMARY KEY AUTOINCREMENT,
        id             TEXT    NOT NULL UNIQUE,
        aggregate_type TEXT    NOT NULL,
        aggregate_id   TEXT    NOT NULL,
        version        INTEGER NOT NULL,
        type           TEXT    NOT NULL,
        payload        TEXT    NOT NULL,
        timestamp      TEXT    NOT NULL,
        metadata       TEXT    NOT NULL,
        UNIQUE (aggregate_type, aggregate_id, version)
    );
    CREATE TABLE bounda_checkpoints (
        subscriber TEXT    PRIMARY KEY,
        position   INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE bounda_inbox (
        handler    TEXT    NOT NULL,
        event_id   TEXT    NOT NULL,
        status     TEXT    NOT NULL,
        attempts   INTEGER NOT NULL,
        claimed_at TEXT,
        claim_id   TEXT,
        last_error TEXT,
        retry_at   TEXT,
        PRIMARY KEY (handler, event_id)
    ) WITHOUT ROWID;
    CREATE INDEX bounda_inbox_retry ON bounda_inbox (handler, retry_at) WHERE status = 'failed';
    CREATE TABLE bounda_scheduled_commands (
        dedupe_key   TEXT    PRIMARY KEY,
        command_type TEXT    NOT NULL,
        aggregate_id TEXT    NOT NULL,
        payload      TEXT    NOT NULL,
        execute_at   TEXT    NOT NULL,
        context      TEXT    NOT NULL,
        attempts     INTEGER NOT NULL DEFAULT 0,
        claimed_at   TEXT,
        last_error   TEXT,
        revision     INTEGER NOT NULL DEFAULT 0,
        claim_id     TEXT
    ) WITHOUT ROWID;
    CREATE INDEX bounda_scheduled_due ON bounda_scheduled_commands (execute_at, dedupe_key);
    CREATE TABLE bounda_dead_letters (
        id              TEXT    PRIMARY KEY,
        kind            TEXT    NOT NULL,
        handler         TEXT    NOT NULL,
        event_id        TEXT,
        event_type      TEXT,
        aggregate_type  TEXT,
        aggregate_id    TEXT,
        error_type      TEXT    NOT NULL,
        error_message   TEXT    NOT NULL,
        error_stack     TEXT,
        attempts        INTEGER NOT NULL,
        first_failed_at TEXT    NOT NULL,
        last_failed_at  TEXT    NOT NULL,
        status          TEXT    NOT NULL,
        payload         TEXT,
        seq             INTEGER NOT NULL
    );
    CREATE INDEX bounda_dead_letters_status ON bounda_dead_letters (status, kind, seq);
    ",
    // 2: what the worker's idle checks ask, answered from small partial indexes instead of a
    // scan of every pending entry.
    "
    CREATE INDEX bounda_scheduled_claimed ON bounda_scheduled_commands (claimed_at)
        WHERE claimed_at IS NOT NULL;
    CREATE INDEX bounda_scheduled_retries ON bounda_scheduled_commands (execute_at)
        WHERE attempts > 0 AND claimed_at IS NULL;
    ",
    // 3: what the runtime folded from a stream, so a process instance is loaded from its latest
    // state and the few events after it.
    "
    CREATE TABLE bounda_snapshots (
        aggregate_type TEXT    NOT NULL,
        aggregate_id   TEXT    NOT NULL,
        version        INTEGER NOT NULL,
        state          TEXT    NOT NULL,
        PRIMARY KEY (aggregate_type, aggregate_id)
    ) WITHOUT ROWID;
    ",
    // 4: the scheduler as a rowid table: an entry keeps its row when it is claimed, released or
    // moved, so firing a deadline rewrites its row and the due-moment index and leaves the key
    // index alone; entries of instances started together sit together, however many others
    // are pending.
    "
    CREATE TABLE bounda_scheduled (
        dedupe_key   TEXT    NOT NULL UNIQUE,
        command_type TEXT    NOT NULL,
        aggregate_id TEXT    NOT NULL,
        payload      TEXT    NOT NULL,
        execute_at   TEXT    NOT NULL,
        context      TEXT    NOT NULL,
        attempts     INTEGER NOT NULL DEFAULT 0,
        claimed_at   TEXT,
        last_error   TEXT,
        revision     INTEGER NOT NULL DEFAULT 0,
        claim_id     TEXT
    );
    INSERT INTO bounda_scheduled (dedupe_key, command_type, aggregate_id, payload, execute_at,
        context, attempts, claimed_at, last_error, revision, claim_id)
        SELECT dedupe_key, command_type, aggregate_id, payload, execute_at, context, attempts,
            claimed_at, last_error, revision, claim_id
        FROM bounda_scheduled_commands;
    DROP TABLE bounda_scheduled_commands;
    ALTER TABLE bounda_scheduled RENAME TO bounda_scheduled_commands;
    CREATE INDEX bounda_scheduled_due ON bounda_scheduled_commands (execute_at, dedupe_key);
    CREATE INDEX bounda_scheduled_claimed ON bounda_scheduled_commands (claimed_at)
        WHERE claimed_at IS NOT NULL;
    CREATE INDEX bounda_scheduled_retries ON bounda_scheduled_commands (execute_at)
        WHERE attempts > 0 AND claimed_at IS NULL;
    ",
    // 5: when a run first failed, kept on its claim for the letter it may end as.
    "
    ALTER TABLE bounda_inbox ADD COLUMN first_failed_at TEXT;
    ALTER TABLE bounda_scheduled_commands ADD COLUMN first_failed_at TEXT;
    ",
    // 6: an operator's retry claims its letter, so two retries at once run it once.
    "
    ALTER TABLE bounda_dead_letters ADD COLUMN claim_id TEXT;
    ALTER TABLE bounda_dead_letters ADD COLUMN claimed_at TEXT;
    ",
    // 7: an entry rescheduled while a worker holds it keeps the claim and says so, so the
    // holder's completion releases it instead of removing the new schedule.
    "
    ALTER TABLE bounda_scheduled_commands ADD COLUMN rescheduled INTEGER NOT NULL DEFAULT 0;
    ",
    // 8: a claim keeps its end, so it lapses on the lease it was taken with, not on the lease of
    // whoever reads it. A claim taken before has none and lapses on the reader's lease; the
    // idle check reads the ends and those few claims from an index each.
    "
    ALTER TABLE bounda_inbox ADD COLUMN lease_until TEXT;
    ALTER TABLE bounda_scheduled_commands ADD COLUMN lease_until TEXT;
    ALTER TABLE bounda_dead_letters ADD COLUMN lease_until TEXT;
    DROP INDEX bounda_scheduled_claimed;
    CREATE INDEX bounda_scheduled_lease ON bounda_scheduled_commands (lease_until)
        WHERE lease_until IS NOT NULL;
    CREATE INDEX bounda_scheduled_unended ON bounda_scheduled_commands (claimed_at)
        WHERE claimed_at IS NOT NULL AND lease_until IS NULL;
    ",
    // 9: a file copied from another store says so, and when: a preview of a deploy runs only on
    // a copy, from the moment it was taken.
    "
    CREATE TABLE bounda_copy (
        copied_at TEXT    NOT NULL,
        source    TEXT    NOT NULL,
        head      INTEGER NOT NULL
    );
    ",
    // 10: read models: each one's table declaration as it was made (and its hash, which every
    // batch checks), where a failing projection holds it, and the rebuild under way (its fingerprint and how far it has come).
    "
    CREATE TABLE bounda_read_models (
        name            TEXT    PRIMARY KEY,
        table_name      TEXT    NOT NULL,
        declaration     TEXT    NOT NULL,
        declared        TEXT    NOT NULL,
        held_position   INTEGER,
        held_event_id   TEXT,
        held_event_type TEXT,
        held_message    TEXT,
        held_attempts   INTEGER,
        held_failed_at  TEXT,
        held_retry_at   TEXT,
        rebuild         TEXT,
        rebuild_position INTEGER
    ) WITHOUT ROWID;
    ",
    // 11: the instances index, one row per process instance, written with each step; filled
    // from the log when it is made (see `then`). Each listing reads one index in its order:
    // newest first (of all, of a process, of a status, of both), soonest due first, by
    // correlation, by id prefix. One index of the next deadline, not one per process too: a
    // firing moves its instance's deadline, and each index of it costs every firing a write.
    // A process's soonest are read along it, skipping the other processes' rows.
    "
    CREATE TABLE bounda_instances (
        process        TEXT NOT NULL,
        instance_id    TEXT NOT NULL,
        status         TEXT NOT NULL,
        correlation_id TEXT NOT NULL,
        started_at     TEXT NOT NULL,
        updated_at     TEXT NOT NULL,
        next_due       TEXT,
        PRIMARY KEY (process, instance_id)
    ) WITHOUT ROWID;
    CREATE INDEX bounda_instances_newest ON bounda_instances (started_at, process);
    CREATE INDEX bounda_instances_process ON bounda_instances (process, started_at);
    CREATE INDEX bounda_instances_status ON bounda_instances (status, started_at, process);
    CREATE INDEX bounda_instances_process_status
        ON bounda_instances (process, status, started_at);
    CREATE INDEX bounda_instances_due ON bounda_instances (next_due, process)
        WHERE next_due IS NOT NULL;
    CREATE INDEX bounda_instances_correlation ON bounda_instances (correlation_id);
    CREATE INDEX bounda_instances_id ON bounda_instances (instance_id);
    ",
    // 12: what operators paused (a process, an instance, a policy, a subscriber), which every
    // runner on the file obeys; the claim of due entries reads it (`claims::PAUSED`).
    "
    CREATE TABLE bounda_pauses (
        kind     TEXT NOT NULL,
        name     TEXT NOT NULL,
        instance TEXT NOT NULL,
        since    TEXT NOT NULL,
        by       TEXT NOT NULL,
        reason   TEXT,
        PRIMARY KEY (kind, name, instance)
    ) WITHOUT ROWID;
    ",
    // 13: each limit's current window (a process, a policy, a command type): how many runs it
    // allows and how many started, shared by every runner on the file; the claim of due
    // entries leaves a used-up limit's entries until the window ends (`limits::limited`).
    "
    CREATE TABLE bounda_limits (
        kind    TEXT    NOT NULL,
        name    TEXT    NOT NULL,
        ends    TEXT    NOT NULL,
        per_ms  INTEGER NOT NULL,
        cap     INTEGER NOT NULL,
        taken   INTEGER NOT NULL,
        granted INTEGER NOT NULL,
        PRIMARY KEY (kind, name)
    ) WITHOUT ROWID;
    ",
    // 14: where a subscriber's checkpoint passed the events of a held handler (or of one lane
    // of it, its lane then not empty), moved with the checkpoint (`bookmarks.rs`).
    "
    CREATE TABLE bounda_bookmarks (
        subscriber TEXT    NOT NULL,
        handler    TEXT    NOT NULL,
        lane       TEXT    NOT NULL,
        position   INTEGER NOT NULL,
        PRIMARY KEY (subscriber, handler, lane)
    ) WITHOUT ROWID;
    ",
    // 15: retries operators asked the workers for: who asked, when, and what the retry did
    // (`retry_requests.rs`); the request itself waits as a scheduler entry.
    "
    CREATE TABLE bounda_retry_requests (
        id           TEXT NOT NULL PRIMARY KEY,
        letter       TEXT NOT NULL,
        by           TEXT NOT NULL,
        requested_at TEXT NOT NULL,
        finished_at  TEXT,
        outcome      TEXT
    ) WITHOUT ROWID;
    CREATE INDEX bounda_retry_requests_letter ON bounda_retry_requests (letter, requested_at);
    ",
    // 16: the keys commands from other services were decided under, with the answer each got
    // (`ingress.rs`), written with the command's events.
    "
    CREATE TABLE bounda_ingress (
        key         TEXT NOT NULL PRIMARY KEY,
        fingerprint TEXT NOT NULL,
        answer      TEXT NOT NULL,
        decided_at  TEXT NOT NULL
    ) WITHOUT ROWID;
    ",
];

/// What a migration does besides its statements, by the version it brings the database to,
/// in the same transaction.
fn then(version: usize, conn: &Connection) -> rusqlite::Result<()> {
    match version {
        11 => crate::instances::fill(conn),
        _ => Ok(()),
    }
}

/// The schema version this build writes.
pub(crate) const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// Takes the file at `path` back to schema `version`, as a build of that version left it: drops
/// the tables the later migrations created (what they held is lost) and sets its version, so
/// that opening it runs them again. For tests and benchmarks of a migration; refuses when a
/// later migration did more than create tables.
#[cfg(feature = "testing")]
pub fn downgrade(path: &std::path::Path, version: u32) -> Result<(), StoreError> {
    let mut statements = String::new();
    for table in bounda::store::migrations::tables_after(MIGRATIONS, version as usize)? {
        statements.push_str(&format!("DROP TABLE {table};\n"));
    }
    statements.push_str(&format!("PRAGMA user_version = {version};"));
    Connection::open(path)
        .and_then(|conn| conn.execute_batch(&statements))
        .map_err(|e| {
            StoreError::with_source(format!("cannot take the file back to schema {version}"), e)
        })
}

/// What the file at `path` holds, refused as `access` requires, naming the path and what was
/// found: another application's file always (tables, none of them bounda's, or a schema version
/// of its own); an empty one unless it may be created; one of another schema version than this
/// build's unless it may be migrated. Reads only.
pub(crate) fn recognise(conn: &Connection, path: &Path, access: Access) -> Result<(), StoreError> {
    let read = |e| {
        StoreError::with_source(
            format!(
                "cannot read the schema version of `{}`: is it a SQLite database?",
                path.display()
            ),
            e,
        )
    };
    let version: u32 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(read)?;
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
        .and_then(|mut s| s.query_map([], |row| row.get(0))?.collect())
        .map_err(read)?;
    let bounda = tables.iter().any(|table| table.starts_with("bounda_"));
    let path = path.display();
    if !bounda && (version != 0 || !tables.is_empty()) {
        let shown: Vec<&str> = tables.iter().take(8).map(String::as_str).collect();
        let more = if tables.len() > shown.len() {
            ", .."
        } else {
            ""
        };
        return Err(StoreError::new(format!(
            "`{path}` is not a bounda database: it has no bounda tables (its tables: {}{more}; its user_version: {version}); check the path (the file was not changed)",
            if shown.is_empty() {
                "none".to_owned()
            } else {
                shown.join(", ")
            }
        )));
    }
    if access == Access::Create {
        return Ok(());
    }
    if !bounda {
        return Err(StoreError::new(format!(
            "`{path}` is empty, not a bounda database (a failed backup, or a new file?); check the path: only a runner creates a database (the file was not changed)"
        )));
    }
    if version < SCHEMA_VERSION {
        return Err(StoreError::new(format!(
            "`{path}` has schema version {version}, and this build reads version {SCHEMA_VERSION}: an operator's command does not upgrade it. Run `migrate` (or start a runner) with this build first, or inspect a backup of it brought up so (`VACUUM INTO`, then `migrate` on the backup); the file was not changed"
        )));
    }
    check_version(conn).map(|_| ())
}

/// The database's schema version, refusing one newer than this build. Reads only.
pub(crate) fn check_version(conn: &Connection) -> Result<u32, StoreError> {
    let version: u32 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(|e| StoreError::with_source("cannot read the database's schema version", e))?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::new(format!(
            "this database has schema version {version}, written by a newer bounda; this build knows \
             versions up to {SCHEMA_VERSION}: upgrade bounda to open it (the database was not changed)"
        )));
    }
    Ok(version)
}

/// Runs the migrations the database lacks, each in its own write transaction with its version.
/// The version is read again once the write lock is held, so processes opening one new file at
/// once each run a migration once between them.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    if check_version(conn)? == SCHEMA_VERSION {
        return Ok(());
    }
    for (index, sql) in MIGRATIONS.iter().enumerate() {
        let next = index + 1;
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| StoreError::with_source("cannot start a migration", e))?;
        if check_version(&tx)? as usize >= next {
            continue;
        }
        tx.execute_batch(sql)
            .and_then(|()| then(next, &tx))
            .and_then(|()| tx.pragma_update(None, "user_version", next))
            .and_then(|()| tx.commit())
            .map_err(|e| StoreError::with_source(format!("migration {next} failed"), e))?;
    }
    Ok(())
}
