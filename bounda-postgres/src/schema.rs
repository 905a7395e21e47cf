//! The tables and their migrations, versioned in a table of their own.
//!
//! Migrations are an append-only list; the `<prefix>schema` table holds how many have run. A
//! database whose version is beyond this list was written by a newer bounda and is refused
//! before anything is written to it. Every statement names its tables through `{t}` (the schema
//! and table prefix, `bounda.shop_`) and its indexes through `{p}` (the prefix: an index lives
//! in its table's schema), so one database can hold several apps' tables.
//!
//! Global order: positions come from a one-row counter (`{t}head`) that each appending
//! transaction updates and holds locked until it commits. Appenders are serialised, so a
//! position is visible only after every smaller one is: a subscriber reading past its
//! checkpoint never skips an event that commits later with a smaller position.

use bounda::store::StoreError;

use crate::names::Names;
use crate::sql::{Conn, Tx, failed as sql, transaction};

/// Every migration, in order. Never edit one that has shipped; append a new one.
const MIGRATIONS: &[&str] = &[
    // 1: the storage tables, as bounda-sqlite has them after its seventh migration. Payloads are
    // `JSON`, kept as written: `JSONB` refuses a string holding U+0000, which SQLite stores, and
    // nothing queries inside them.
    "
    CREATE TABLE {t}head (
        id       INTEGER PRIMARY KEY CHECK (id = 1),
        position BIGINT  NOT NULL
    );
    INSERT INTO {t}head (id, position) VALUES (1, 0);
    CREATE TABLE {t}events (
        position       BIGINT      PRIMARY KEY,
        id             TEXT        NOT NULL UNIQUE,
        aggregate_type TEXT        NOT NULL,
        aggregate_id   TEXT        NOT NULL,
        version        BIGINT      NOT NULL,
        type           TEXT        NOT NULL,
        payload        JSON        NOT NULL,
        timestamp      TIMESTAMPTZ NOT NULL,
        metadata       JSON        NOT NULL,
        UNIQUE (aggregate_type, aggregate_id, version)
    );
    CREATE TABLE {t}checkpoints (
        subscriber TEXT   PRIMARY KEY,
        position   BIGINT NOT NULL
    );
    CREATE TABLE {t}inbox (
        handler         TEXT        NOT NULL,
        event_id        TEXT        NOT NULL,
        status          TEXT        NOT NULL,
        attempts        INTEGER     NOT NULL,
        claimed_at      TIMESTAMPTZ,
        claim_id        TEXT,
        last_error      TEXT,
        retry_at        TIMESTAMPTZ,
        first_failed_at TIMESTAMPTZ,
        PRIMARY KEY (handler, event_id)
    );
    CREATE INDEX {p}inbox_retry ON {t}inbox (handler, retry_at) WHERE status = 'failed';
    CREATE TABLE {t}scheduled_commands (
        dedupe_key      TEXT        PRIMARY KEY,
        command_type    TEXT        NOT NULL,
        aggregate_id    TEXT        NOT NULL,
        payload         JSON        NOT NULL,
        execute_at      TIMESTAMPTZ NOT NULL,
        context         JSON        NOT NULL,
        attempts        INTEGER     NOT NULL DEFAULT 0,
        claimed_at      TIMESTAMPTZ,
        last_error      TEXT,
        revision        BIGINT      NOT NULL DEFAULT 0,
        claim_id        TEXT,
        first_failed_at TIMESTAMPTZ,
        rescheduled     BOOLEAN     NOT NULL DEFAULT FALSE
    );
    CREATE INDEX {p}scheduled_due ON {t}scheduled_commands (execute_at, dedupe_key);
    CREATE INDEX {p}scheduled_claimed ON {t}scheduled_commands (claimed_at)
        WHERE claimed_at IS NOT NULL;
    CREATE INDEX {p}scheduled_retries ON {t}scheduled_commands (execute_at)
        WHERE attempts > 0 AND claimed_at IS NULL;
    CREATE TABLE {t}dead_letters (
        id              TEXT        PRIMARY KEY,
        kind            TEXT        NOT NULL,
        handler         TEXT        NOT NULL,
        event_id        TEXT,
        event_type      TEXT,
        aggregate_type  TEXT,
        aggregate_id    TEXT,
        error_type      TEXT        NOT NULL,
        error_message   TEXT        NOT NULL,
        error_stack     TEXT,
        attempts        INTEGER     NOT NULL,
        first_failed_at TIMESTAMPTZ NOT NULL,
        last_failed_at  TIMESTAMPTZ NOT NULL,
        status          TEXT        NOT NULL,
        payload         JSON,
        seq             BIGSERIAL,
        claim_id        TEXT,
        claimed_at      TIMESTAMPTZ
    );
    CREATE INDEX {p}dead_letters_status ON {t}dead_letters (status, kind, seq);
    CREATE TABLE {t}snapshots (
        aggregate_type TEXT   NOT NULL,
        aggregate_id   TEXT   NOT NULL,
        version        BIGINT NOT NULL,
        state          JSON   NOT NULL,
        PRIMARY KEY (aggregate_type, aggregate_id)
    );
    ",
    // 2: a claim keeps its end, so it lapses on the lease it was taken with, not on the lease of
    // whoever reads it. A claim taken before has none and lapses on the reader's lease; the
    // idle check reads the ends and those few claims from an index each.
    "
    ALTER TABLE {t}inbox ADD COLUMN lease_until TIMESTAMPTZ;
    ALTER TABLE {t}scheduled_commands ADD COLUMN lease_until TIMESTAMPTZ;
    ALTER TABLE {t}dead_letters ADD COLUMN lease_until TIMESTAMPTZ;
    DROP INDEX {t}scheduled_claimed;
    CREATE INDEX {p}scheduled_lease ON {t}scheduled_commands (lease_until)
        WHERE lease_until IS NOT NULL;
    CREATE INDEX {p}scheduled_unended ON {t}scheduled_commands (claimed_at)
        WHERE claimed_at IS NOT NULL AND lease_until IS NULL;
    ",
    // 3: a schema copied from another store says so, and when: a preview of a deploy runs only
    // on a copy, from the moment it was taken.
    "
    CREATE TABLE {t}copy (
        copied_at TIMESTAMPTZ NOT NULL,
        source    TEXT        NOT NULL,
        head      BIGINT      NOT NULL
    );
    ",
    // 4: appends do not wait for each other. An event is inserted at a placeholder position,
    // the negative of a number taken at its insert (`{t}placeholder`); once it has committed,
    // `{t}place` gives it the next position after the head, in the order of the placeholders,
    // under the head row's lock. A position is given only to committed events, by one placer at
    // a time, so positions appear without holes and in order; a transaction still open holds no
    // lock anyone else needs, and its events are placed after it commits.
    "
    CREATE SEQUENCE {t}placeholder;
    ALTER TABLE {t}events ALTER COLUMN position SET DEFAULT -nextval('{t}placeholder');
    CREATE INDEX {p}events_unplaced ON {t}events (position) WHERE position < 0;
    CREATE FUNCTION {t}place(mine TEXT[], skip TEXT[])
    RETURNS TABLE (event_id TEXT, event_position BIGINT)
    LANGUAGE plpgsql AS $$
    DECLARE
        head_position BIGINT;
        given BIGINT;
        first_mine BIGINT;
        last_mine BIGINT;
    BEGIN
        -- What this transaction writes is durable once anything that read it is: a later
        -- commit's flush flushes this one too. So it does not wait for the disk itself.
        PERFORM set_config('synchronous_commit', 'off', true);
        LOOP
            EXIT WHEN NOT EXISTS (SELECT 1 FROM {t}events e WHERE e.position < 0);
            -- Each statement reads what committed before it: after the lock, every event an
            -- earlier placer placed is seen placed.
            SELECT h.position INTO head_position FROM {t}head h WHERE h.id = 1 FOR UPDATE;
            WITH waiting AS (
                SELECT e.position AS placeholder,
                       head_position + row_number() OVER (ORDER BY e.position DESC) AS assigned
                FROM {t}events e WHERE e.position < 0
                ORDER BY e.position DESC LIMIT 10000)
            UPDATE {t}events e SET position = waiting.assigned FROM waiting
            WHERE e.position = waiting.placeholder;
            GET DIAGNOSTICS given = ROW_COUNT;
            UPDATE {t}head h SET position = head_position + given WHERE h.id = 1;
            EXIT WHEN given < 10000;
        END LOOP;
        IF cardinality(mine) > 0 THEN
            SELECT min(e.position), max(e.position) INTO first_mine, last_mine
            FROM {t}events e WHERE e.id = ANY(mine);
            -- Subscribers that take none of these events, standing just before them, move past
            -- them, if no one else's events are among them.
            IF cardinality(skip) > 0 AND first_mine > 0
                AND last_mine - first_mine + 1 = cardinality(mine) THEN
                UPDATE {t}checkpoints c SET position = last_mine
                WHERE c.subscriber = ANY(skip) AND c.position = first_mine - 1;
            END IF;
            RETURN QUERY SELECT e.id, e.position FROM {t}events e WHERE e.id = ANY(mine);
        END IF;
    END
    $$;
    ",
    // 5: read models: each one's table declaration as it was made (and its hash, which every
    // batch checks), where a failing projection holds it, and the rebuild under way (its fingerprint and how far it has come).
    "
    CREATE TABLE {t}read_models (
        name            TEXT        PRIMARY KEY,
        table_name      TEXT        NOT NULL,
        declaration     JSONB       NOT NULL,
        declared        TEXT        NOT NULL,
        held_position   BIGINT,
        held_event_id   TEXT,
        held_event_type TEXT,
        held_message    TEXT,
        held_attempts   INTEGER,
        held_failed_at  TIMESTAMPTZ,
        held_retry_at   TIMESTAMPTZ,
        rebuild         TEXT,
        rebuild_position BIGINT
    );
    ",
    // 6: the instances index, one row per process instance, written with each step; filled from
    // the log when it is made (see `then`). Each listing reads one index in its order: newest
    // first (of all, of a process, of a status, of both), soonest due first, by correlation, by
    // id prefix. One index of the next deadline, not one per process too: a firing moves its
    // instance's deadline, and each index of it costs every firing a write. A process's soonest
    // are read along it, skipping the other processes' rows. Names and ids order by code point, as bounda-sqlite
    // orders them, whatever the database's collation: a page's cursor reads the same on both.
    "
    CREATE TABLE {t}instances (
        process        TEXT COLLATE \"C\" NOT NULL,
        instance_id    TEXT COLLATE \"C\" NOT NULL,
        status         TEXT        NOT NULL,
        correlation_id TEXT        NOT NULL,
        started_at     TIMESTAMPTZ NOT NULL,
        updated_at     TIMESTAMPTZ NOT NULL,
        next_due       TIMESTAMPTZ,
        PRIMARY KEY (process, instance_id)
    );
    CREATE INDEX {p}instances_newest ON {t}instances (started_at, process, instance_id);
    CREATE INDEX {p}instances_process ON {t}instances (process, started_at, instance_id);
    CREATE INDEX {p}instances_status ON {t}instances (status, started_at, process, instance_id);
    CREATE INDEX {p}instances_process_status
        ON {t}instances (process, status, started_at, instance_id);
    CREATE INDEX {p}instances_due ON {t}instances (next_due, process, instance_id)
        WHERE next_due IS NOT NULL;
    CREATE INDEX {p}instances_correlation ON {t}instances (correlation_id);
    CREATE INDEX {p}instances_id ON {t}instances (instance_id);
    ",
    // 7: what operators paused (a process, an instance, a policy, a subscriber), which every
    // runner on the tables obeys; the claim of due entries reads it (`claims::PAUSED`).
    "
    CREATE TABLE {t}pauses (
        kind     TEXT        NOT NULL,
        name     TEXT        NOT NULL,
        instance TEXT        NOT NULL,
        since    TIMESTAMPTZ NOT NULL,
        by_whom  TEXT        NOT NULL,
        reason   TEXT,
        PRIMARY KEY (kind, name, instance)
    );
    ",
    // 8: each limit's current window (a process, a policy, a command type): how many runs it
    // allows and how many started, shared by every runner on the tables; the claim of due
    // entries leaves a used-up limit's entries until the window ends (`limits::LIMITED`).
    "
    CREATE TABLE {t}limits (
        kind    TEXT        NOT NULL,
        name    TEXT        NOT NULL,
        ends    TIMESTAMPTZ NOT NULL,
        per_ms  BIGINT      NOT NULL,
        cap     INTEGER     NOT NULL,
        taken   INTEGER     NOT NULL,
        granted INTEGER     NOT NULL,
        PRIMARY KEY (kind, name)
    );
    ",
    // 9: where a subscriber's checkpoint passed the events of a held handler (or of one lane
    // of it, its lane then not empty), moved with the checkpoint (`bookmarks.rs`).
    "
    CREATE TABLE {t}bookmarks (
        subscriber TEXT   NOT NULL,
        handler    TEXT   NOT NULL,
        lane       TEXT   NOT NULL,
        position   BIGINT NOT NULL,
        PRIMARY KEY (subscriber, handler, lane)
    );
    ",
    // 10: retries operators asked the workers for: who asked, when, and what the retry did;
    // the request itself waits as a scheduler entry.
    "
    CREATE TABLE {t}retry_requests (
        id           TEXT        PRIMARY KEY,
        letter       TEXT        NOT NULL,
        by_whom      TEXT        NOT NULL,
        requested_at TIMESTAMPTZ NOT NULL,
        finished_at  TIMESTAMPTZ,
        outcome      TEXT
    );
    CREATE INDEX {p}retry_requests_letter ON {t}retry_requests (letter, requested_at);
    ",
    // 11: the keys commands from other services were decided under, with the answer each got,
    // written with the command's events.
    "
    CREATE TABLE {t}ingress (
        key         TEXT        PRIMARY KEY,
        fingerprint TEXT        NOT NULL,
        answer      JSONB       NOT NULL,
        decided_at  TIMESTAMPTZ NOT NULL
    );
    ",
    // 12: placing reads its own events by id alone. Its plans are kept for the connection's
    // life, and were made when the log was small: the events it had just placed were found by
    // scanning the whole log (the first and last of them by walking the positions from the
    // first), a scan a wave paid on every commit, longer as the log grew. Its events are now
    // read once, their first and last positions taken from that read, and no plan of it scans
    // a table (`enable_seqscan` is off while it runs: each of its reads has an index). What
    // it writes, and when, is as before.
    "
    CREATE OR REPLACE FUNCTION {t}place(mine TEXT[], skip TEXT[])
    RETURNS TABLE (event_id TEXT, event_position BIGINT)
    LANGUAGE plpgsql
    SET enable_seqscan = off
    AS $$
    DECLARE
        head_position BIGINT;
        given BIGINT;
        ids TEXT[];
        positions BIGINT[];
        first_mine BIGINT;
        last_mine BIGINT;
    BEGIN
        -- What this transaction writes is durable once anything that read it is: a later
        -- commit's flush flushes this one too. So it does not wait for the disk itself.
        PERFORM set_config('synchronous_commit', 'off', true);
        LOOP
            EXIT WHEN NOT EXISTS (SELECT 1 FROM {t}events e WHERE e.position < 0);
            -- Each statement reads what committed before it: after the lock, every event an
            -- earlier placer placed is seen placed.
            SELECT h.position INTO head_position FROM {t}head h WHERE h.id = 1 FOR UPDATE;
            WITH waiting AS (
                SELECT e.position AS placeholder,
                       head_position + row_number() OVER (ORDER BY e.position DESC) AS assigned
                FROM {t}events e WHERE e.position < 0
                ORDER BY e.position DESC LIMIT 10000)
            UPDATE {t}events e SET position = waiting.assigned FROM waiting
            WHERE e.position = waiting.placeholder;
            GET DIAGNOSTICS given = ROW_COUNT;
            UPDATE {t}head h SET position = head_position + given WHERE h.id = 1;
            EXIT WHEN given < 10000;
        END LOOP;
        IF cardinality(mine) > 0 THEN
            -- With the arrays beside them, the first and last are not read along the positions.
            SELECT array_agg(e.id), array_agg(e.position), min(e.position), max(e.position)
            INTO ids, positions, first_mine, last_mine
            FROM {t}events e WHERE e.id = ANY(mine);
            -- Subscribers that take none of these events, standing just before them, move past
            -- them, if no one else's events are among them.
            IF cardinality(skip) > 0 AND first_mine > 0
                AND last_mine - first_mine + 1 = cardinality(mine) THEN
                UPDATE {t}checkpoints c SET position = last_mine
                WHERE c.subscriber = ANY(skip) AND c.position = first_mine - 1;
            END IF;
            RETURN QUERY SELECT * FROM unnest(ids, positions);
        END IF;
    END
    $$
    ",
    // 13: each running instance's next deadline, while one is pending, in a narrow table of its
    // own, which the listings soonest first and the counts of what is pending read. A firing
    // moves its instance's deadline: while the instance row held the only index of it, every
    // firing rewrote the row with an entry in each of its eight indexes. Now the row keeps the
    // moment unindexed (a step's update of it stays in place, with no index entry), and the
    // narrow row with its two indexes is what a moved deadline rewrites. Filled from the
    // instance rows, and the instance row's index of the moment dropped, by `then`.
    "
    CREATE TABLE {t}pending_deadlines (
        process     TEXT COLLATE \"C\" NOT NULL,
        instance_id TEXT COLLATE \"C\" NOT NULL,
        next_due    TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (process, instance_id)
    );
    CREATE INDEX {p}pending_deadlines_due
        ON {t}pending_deadlines (next_due, process, instance_id);
    ",
    // 14: no index reads the columns a claim or a success writes, so taking a scheduler entry
    // and settling an inbox pair as handled rewrite their rows in their pages with no index
    // entry (heap-only updates). A claim was a new row version with an entry in each of three
    // indexes, and a firing claims its entry and moves it; a success changed the status the
    // retries' index was limited by. The idle check finds claims along the due moments instead
    // (a claimed entry was due when it was taken, so claims sit before the first free entry:
    // `next_due_at`); the scheduler's retries' index lists every entry that has failed, claimed
    // or not, and the inbox's every pair waiting for its retry. Pages keep room for the rows'
    // new versions. (Taken back to an older schema, tables keep these indexes, which the older
    // build reads the same.)
    "
    DROP INDEX IF EXISTS {t}scheduled_lease;
    DROP INDEX IF EXISTS {t}scheduled_unended;
    DROP INDEX IF EXISTS {t}scheduled_retries;
    CREATE INDEX {p}scheduled_retries ON {t}scheduled_commands (execute_at) WHERE attempts > 0;
    DROP INDEX IF EXISTS {t}inbox_retry;
    CREATE INDEX {p}inbox_retry ON {t}inbox (handler, retry_at) WHERE retry_at IS NOT NULL;
    ALTER TABLE {t}inbox SET (fillfactor = 80);
    ALTER TABLE {t}scheduled_commands SET (fillfactor = 80);
    ",
];

/// What a migration does besides its statements, by the version it brings the tables to, in
/// the same transaction: filling what it made, and dropping what that replaces. (Taking tables
/// back to an older schema, which tests do, drops the tables later migrations made and leaves
/// such a drop as it is: it changes how fast a listing reads, not what it answers.)
async fn then(version: usize, tx: &Tx<'_>, names: &Names) -> Result<(), StoreError> {
    match version {
        6 => crate::instances::fill(tx, names).await,
        13 => crate::instances::pend(tx, names).await,
        _ => Ok(()),
    }
}

/// The schema version this build writes.
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

/// The statements that take tables named by `names` back to schema `version`: drop the tables
/// the later migrations created, and set the version.
#[cfg(feature = "testing")]
pub(crate) fn downgrade(names: &Names, version: i32) -> Result<String, StoreError> {
    let after = usize::try_from(version)
        .map_err(|_| StoreError::new(format!("this build knows no schema {version}")))?;
    let mut statements = String::new();
    for table in bounda::store::migrations::tables_after(MIGRATIONS, after)? {
        statements.push_str(&names.sql(&format!("DROP TABLE {table};\n")));
    }
    statements.push_str(&names.sql(&format!("UPDATE {{t}}schema SET version = {version};")));
    Ok(statements)
}

/// Runs the migrations the database lacks, in one transaction under an advisory lock, so
/// processes starting together see them run once: the others wait for the lock, then find the
/// tables at this version. The version it migrated from, or `None` when there was nothing to
/// do. Refuses a database of a newer bounda, having changed nothing.
pub(crate) async fn migrate(client: &mut Conn, names: &Names) -> Result<Option<i32>, StoreError> {
    // Tables already at this version need nothing, not even a lock: a role that may only read
    // and write them connects.
    if let Some(version) = current_version(client, names).await? {
        if version == SCHEMA_VERSION {
            return Ok(None);
        }
        if version > SCHEMA_VERSION {
            return Err(newer(names, version));
        }
    }
    let tx = transaction(client).await?;
    crate::sql::execute(
        &tx,
        "SELECT pg_advisory_xact_lock($1)",
        &[&names.lock_key()],
    )
    .await
    .map_err(sql("cannot take the migration lock"))?;
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS {schema};
         CREATE TABLE IF NOT EXISTS {t}schema (version INTEGER NOT NULL);",
        schema = names.schema(),
        t = names.tables(),
    ))
    .await
    .map_err(sql("cannot create the schema table"))?;
    let version: i32 = crate::sql::query_opt(
        &tx,
        &format!("SELECT version FROM {}schema", names.tables()),
        &[],
    )
    .await
    .map_err(sql("cannot read the schema version"))?
    .map_or(Ok(0), |row| row.try_get(0))
    .map_err(sql("cannot read the schema version"))?;
    if version > SCHEMA_VERSION {
        return Err(newer(names, version));
    }
    // Another process migrated them while this one waited for the lock.
    if version == SCHEMA_VERSION {
        return Ok(None);
    }
    let Ok(applied) = usize::try_from(version) else {
        return Err(StoreError::new(format!(
            "{}schema holds version {version}, which no bounda wrote; restore the table from a backup",
            names.tables()
        )));
    };
    for (index, migration) in MIGRATIONS.iter().enumerate().skip(applied) {
        let migration = migration
            .replace("{t}", &names.tables())
            .replace("{p}", names.prefix());
        tx.batch_execute(&migration)
            .await
            .map_err(|e| StoreError::with_source(format!("migration {} failed", index + 1), e))?;
        then(index + 1, &tx, names).await?;
    }
    crate::sql::execute(&tx, &format!("DELETE FROM {}schema", names.tables()), &[])
        .await
        .map_err(sql("cannot record the schema version"))?;
    crate::sql::execute(
        &tx,
        &format!("INSERT INTO {}schema (version) VALUES ($1)", names.tables()),
        &[&SCHEMA_VERSION],
    )
    .await
    .map_err(sql("cannot record the schema version"))?;
    tx.commit()
        .await
        .map_err(sql("cannot commit the migrations"))?;
    tracing::info!(
        tables = %names.tables(),
        "migrated the tables from schema version {version} to {SCHEMA_VERSION}"
    );
    Ok(Some(version))
}

/// The tables' version, if their version table exists.
async fn current_version(client: &Conn, names: &Names) -> Result<Option<i32>, StoreError> {
    let table = format!("{}schema", names.tables());
    let exists: bool =
        crate::sql::query_one(client, "SELECT to_regclass($1) IS NOT NULL", &[&table])
            .await
            .map_err(|e| {
                not_allowed(names, &e)
                    .unwrap_or_else(|| sql("cannot look for the schema version")(e))
            })?
            .try_get(0)
            .map_err(sql("cannot look for the schema version"))?;
    if !exists {
        return Ok(None);
    }
    let row = crate::sql::query_opt(client, &format!("SELECT version FROM {table}"), &[])
        .await
        .map_err(|e| {
            not_allowed(names, &e).unwrap_or_else(|| sql("cannot read the schema version")(e))
        })?;
    row.map(|row| row.try_get(0))
        .transpose()
        .map_err(sql("cannot read the schema version"))
}

/// The refusal of tables the connecting role may not use, when `error` is the server's
/// refusal: another service's schema, or a role not granted its own.
fn not_allowed(names: &Names, error: &tokio_postgres::Error) -> Option<StoreError> {
    (error.code() == Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE)).then(|| {
        let reason = error
            .as_db_error()
            .map_or_else(|| error.to_string(), |db| db.message().to_owned());
        StoreError::new(format!(
            "the role connecting may not use the tables `{tables}*` ({reason}): point it at its \
             own service's schema, or grant it USAGE on schema {schema} and SELECT, INSERT, \
             UPDATE, DELETE on its tables (the deploying guide lists the grants)",
            tables = names.tables(),
            schema = names.schema(),
        ))
    })
}

/// The refusal of tables a newer bounda wrote.
fn newer(names: &Names, version: i32) -> StoreError {
    StoreError::new(format!(
        "the tables `{}*` have schema version {version}, written by a newer bounda; this build knows versions up to {SCHEMA_VERSION}: upgrade bounda to open them (nothing was changed)",
        names.tables()
    ))
}
