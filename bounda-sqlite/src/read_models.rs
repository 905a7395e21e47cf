//! Read models on SQLite: their tables in the same file as the log (`bounda_read_<name>`), a
//! batch's rows written with its checkpoint in one write transaction.

use std::sync::Arc;

use bounda::Instant;
use bounda::read_model::render::{self, Dialect, Statement, Target};
use bounda::read_model::{Declaration, SqlRow, SqlType, SqlValue, TableDef, plan};
use bounda::store::StoreError;
use bounda::store::read_models::{
    Batch, Held, ProjectError, Projected, Projector, ReadModelStore, Rows, shadow_suffix,
};
use rusqlite::types::{ToSqlOutput, Value, ValueRef};
use rusqlite::{Connection, OptionalExtension, ToSql, params, params_from_iter};

use crate::{SqliteStore, sql};

#[bounda::store::async_trait]
impl ReadModelStore for SqliteStore {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn target(&self, table: &TableDef, shadow: Option<&str>) -> Target {
        let bare = render::identifier(match shadow {
            Some(shadow) => format!("bounda_{}__{shadow}", table.table_name()),
            None => format!("bounda_{}", table.table_name()),
        });
        Target {
            table: render::quote(&bare),
            bare,
            schema: String::new(),
        }
    }

    async fn ensure(&self, table: &TableDef) -> Result<(), bounda::Error> {
        let mut conn = self.lock()?;
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(sql("cannot start a read model's table"))?;
        let stored = declaration(&tx, table.name)?;
        let changes = plan(table, stored.as_ref())
            .map_err(|message| bounda::Error::Configuration { message })?;
        if changes.is_empty() {
            return Ok(());
        }
        let target = self.target(table, None);
        for statement in
            render::changes(Dialect::Sqlite, &target, table, &changes).map_err(StoreError::new)?
        {
            tx.execute_batch(&statement).map_err(|e| {
                StoreError::with_source(
                    format!("cannot make read model `{}`'s table", table.name),
                    e,
                )
            })?;
        }
        let declaration = serde_json::to_string(&table.declaration())
            .map_err(|e| StoreError::with_source("cannot write a read model's declaration", e))?;
        tx.execute(
            "INSERT INTO bounda_read_models (name, table_name, declaration, declared)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (name) DO UPDATE SET table_name = excluded.table_name,
                                              declaration = excluded.declaration,
                                              declared = excluded.declared",
            params![table.name, target.bare, declaration, table.declared()],
        )
        .map_err(sql("cannot keep a read model's declaration"))?;
        tx.commit()
            .map_err(sql("cannot commit a read model's table"))?;
        Ok(())
    }

    async fn project(
        &self,
        batch: &Batch<'_>,
        projector: &mut dyn Projector,
    ) -> Result<Projected, ProjectError> {
        let mut conn = self.lock()?;
        conn.execute_batch("BEGIN IMMEDIATE")
            .map_err(sql("cannot start a read model's batch"))?;
        let shadow = batch.rebuild.map(shadow_suffix);
        let target = self.target(batch.table, shadow.as_deref());
        let result = write_batch(&mut conn, target, batch, projector);
        let end = match &result {
            Ok(Projected::Applied) => "COMMIT",
            _ => "ROLLBACK",
        };
        if let Err(error) = conn.execute_batch(end) {
            // A failed COMMIT leaves the transaction open: end it, so the connection is usable.
            if !conn.is_autocommit() {
                let _ = conn.execute_batch("ROLLBACK");
            }
            // A failed ROLLBACK after a failure keeps the failure: it says which event.
            if let Err(failure) = result {
                return Err(failure);
            }
            return Err(
                StoreError::with_source("cannot commit a read model's batch", error).into(),
            );
        }
        result
    }

    async fn query(
        &self,
        statement: &Statement,
        columns: &[SqlType],
    ) -> Result<Vec<Vec<SqlValue>>, StoreError> {
        let conn = self.lock()?;
        query(&conn, statement, columns.len())
    }

    async fn sql(&self, sql_text: &str, params: &[SqlValue]) -> Result<Vec<SqlRow>, StoreError> {
        let conn = self.lock()?;
        let mut statement = conn
            .prepare(&positional(sql_text))
            .map_err(sql("cannot prepare the SQL"))?;
        let columns: Arc<[String]> = statement.column_names().map(str::to_owned).collect();
        let width = columns.len();
        let mut rows = statement
            .query(params_from_iter(params.iter().map(Bind)))
            .map_err(sql("cannot run the SQL"))?;
        let mut answer = Vec::new();
        while let Some(row) = rows.next().map_err(sql("cannot read the SQL's rows"))? {
            answer.push(SqlRow::new(Arc::clone(&columns), values(row, width)?));
        }
        Ok(answer)
    }

    async fn start_rebuild(&self, table: &TableDef, fingerprint: &str) -> Result<u64, StoreError> {
        let mut conn = self.lock()?;
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(sql("cannot start a rebuild"))?;
        let under_way = rebuild_of(&tx, table.name)?;
        if let Some((current, position)) = &under_way
            && current == fingerprint
        {
            return Ok(*position);
        }
        if let Some((other, _)) = &under_way {
            let old = self.target(table, Some(&shadow_suffix(other)));
            tx.execute_batch(&render::drop_table(&old))
                .map_err(sql("cannot drop a superseded rebuild's table"))?;
        }
        let shadow = self.target(table, Some(&shadow_suffix(fingerprint)));
        let mut statements = vec![render::drop_table(&shadow)];
        statements.extend(render::create(Dialect::Sqlite, &shadow, table));
        for statement in statements {
            tx.execute_batch(&statement)
                .map_err(sql("cannot make a rebuild's table"))?;
        }
        tx.execute(
            "UPDATE bounda_read_models SET rebuild = ?2, rebuild_position = 0 WHERE name = ?1",
            params![table.name, fingerprint],
        )
        .map_err(sql("cannot start a rebuild"))?;
        tx.commit().map_err(sql("cannot start a rebuild"))?;
        Ok(0)
    }

    async fn rebuilding(&self, name: &str) -> Result<Option<(String, u64)>, StoreError> {
        let conn = self.lock()?;
        rebuild_of(&conn, name)
    }

    async fn finish_rebuild(
        &self,
        table: &TableDef,
        fingerprint: &str,
    ) -> Result<bool, StoreError> {
        let mut conn = self.lock()?;
        // The swap makes the new table's indexes again (SQLite cannot rename one), sorting every
        // row: in temporary files, so its memory stays within the page cache however long the
        // log, and back in memory for the group commits after.
        conn.pragma_update(None, "temp_store", "FILE")
            .map_err(sql("cannot set temp_store"))?;
        let swapped = swap(self, &mut conn, table, fingerprint);
        conn.pragma_update(None, "temp_store", "MEMORY")
            .map_err(sql("cannot set temp_store"))?;
        swapped
    }

    async fn abandon_rebuild(&self, table: &TableDef, fingerprint: &str) -> Result<(), StoreError> {
        let mut conn = self.lock()?;
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(sql("cannot abandon a rebuild"))?;
        if rebuild_of(&tx, table.name)?.is_some_and(|(current, _)| current == fingerprint) {
            let shadow = self.target(table, Some(&shadow_suffix(fingerprint)));
            tx.execute_batch(&render::drop_table(&shadow))
                .and_then(|()| {
                    tx.execute(
                        "UPDATE bounda_read_models SET rebuild = NULL, rebuild_position = NULL
                         WHERE name = ?1",
                        [table.name],
                    )
                })
                .map_err(sql("cannot abandon a rebuild"))?;
        }
        tx.commit().map_err(sql("cannot abandon a rebuild"))?;
        Ok(())
    }

    async fn hold(&self, held: &Held) -> Result<(), StoreError> {
        let conn = self.lock()?;
        conn.prepare_cached(
            "UPDATE bounda_read_models SET
                 held_attempts = CASE WHEN held_position = ?2 THEN held_attempts + 1 ELSE ?7 END,
                 held_position = ?2, held_event_id = ?3, held_event_type = ?4, held_message = ?5,
                 held_failed_at = ?6, held_retry_at = ?8
             WHERE name = ?1",
        )
        .and_then(|mut s| {
            s.execute(params![
                held.read_model,
                held.position,
                held.event_id,
                held.event_type,
                held.message,
                held.failed_at.to_string(),
                held.attempts,
                held.retry_at.to_string(),
            ])
        })
        .map_err(sql("cannot hold a read model"))?;
        Ok(())
    }

    async fn holds(&self) -> Result<Vec<Held>, StoreError> {
        let conn = self.lock()?;
        let mut statement = conn
            .prepare_cached(
                "SELECT name, held_position, held_event_id, held_event_type, held_message,
                        held_attempts, held_failed_at, held_retry_at
                 FROM bounda_read_models WHERE held_position IS NOT NULL ORDER BY name",
            )
            .map_err(sql("cannot read the read models' holds"))?;
        let rows = statement
            .query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, u64>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, String>(3)?,
                    row.get::<_, String>(4)?,
                    row.get::<_, u32>(5)?,
                    row.get::<_, String>(6)?,
                    row.get::<_, String>(7)?,
                ))
            })
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(sql("cannot read the read models' holds"))?;
        rows.into_iter()
            .map(
                |(read_model, position, event_id, event_type, message, attempts, failed, retry)| {
                    Ok(Held {
                        read_model,
                        position,
                        event_id,
                        event_type,
                        message,
                        attempts,
                        failed_at: moment(&failed)?,
                        retry_at: moment(&retry)?,
                    })
                },
            )
            .collect()
    }
}

/// `sql` with PostgreSQL's placeholders (`$1`) written as SQLite's (`?1`), so plain SQL reads
/// the same on either store; what is quoted is left as it is.
fn positional(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(open), _) if c == open => quote = None,
            (None, '$') if chars.peek().is_some_and(char::is_ascii_digit) => {
                out.push('?');
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    out
}

fn moment(text: &str) -> Result<Instant, StoreError> {
    Instant::parse(text).map_err(|e| StoreError::with_source("a stored moment is invalid", e))
}

/// The declaration kept for read model `name`, if any.
fn declaration(conn: &Connection, name: &str) -> Result<Option<Declaration>, StoreError> {
    let text: Option<String> = conn
        .query_row(
            "SELECT declaration FROM bounda_read_models WHERE name = ?1",
            [name],
            |row| row.get(0),
        )
        .optional()
        .map_err(sql("cannot read a read model's declaration"))?;
    text.map(|text| serde_json::from_str(&text))
        .transpose()
        .map_err(|e| {
            StoreError::with_source(
                format!("read model `{name}`'s kept declaration is invalid"),
                e,
            )
        })
}

/// The swap of `finish_rebuild`, on the locked connection.
fn swap(
    store: &SqliteStore,
    conn: &mut Connection,
    table: &TableDef,
    fingerprint: &str,
) -> Result<bool, StoreError> {
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(sql("cannot swap a rebuilt table"))?;
    let Some((current, position)) = rebuild_of(&tx, table.name)? else {
        return Ok(false);
    };
    if current != fingerprint {
        return Ok(false);
    }
    let live = store.target(table, None);
    let shadow = store.target(table, Some(&shadow_suffix(fingerprint)));
    for statement in render::swap(Dialect::Sqlite, &shadow, &live, table) {
        tx.execute_batch(&statement)
            .map_err(sql("cannot swap a rebuilt table"))?;
    }
    let declaration = serde_json::to_string(&table.declaration())
        .map_err(|e| StoreError::with_source("cannot write a read model's declaration", e))?;
    tx.execute(
        "INSERT INTO bounda_checkpoints (subscriber, position) VALUES (?1, ?2)
         ON CONFLICT (subscriber) DO UPDATE SET position = excluded.position",
        params![bounda::read_model::subscriber(table.name), position],
    )
    .and_then(|_| {
        tx.execute(
            "UPDATE bounda_read_models SET declaration = ?2, table_name = ?3, declared = ?4,
                 rebuild = NULL,
                 rebuild_position = NULL, held_position = NULL, held_event_id = NULL,
                 held_event_type = NULL, held_message = NULL, held_attempts = NULL,
                 held_failed_at = NULL, held_retry_at = NULL
             WHERE name = ?1",
            params![table.name, declaration, live.bare, table.declared()],
        )
    })
    .map_err(sql("cannot swap a rebuilt table"))?;
    tx.commit().map_err(sql("cannot swap a rebuilt table"))?;
    Ok(true)
}

/// The hash of read model `name`'s stored declaration, if it has a table.
fn declared_of(conn: &Connection, name: &str) -> Result<Option<String>, StoreError> {
    conn.prepare_cached("SELECT declared FROM bounda_read_models WHERE name = ?1")
        .and_then(|mut s| s.query_row([name], |row| row.get(0)).optional())
        .map_err(sql("cannot read a read model's declaration"))
}

/// The rebuild under way of read model `name`: its fingerprint and position.
fn rebuild_of(conn: &Connection, name: &str) -> Result<Option<(String, u64)>, StoreError> {
    conn.query_row(
        "SELECT rebuild, rebuild_position FROM bounda_read_models
         WHERE name = ?1 AND rebuild IS NOT NULL",
        [name],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .optional()
    .map_err(sql("cannot read a read model's rebuild"))
}

/// Moves the checkpoint (or the rebuild's position) and projects, inside the open transaction.
fn write_batch(
    conn: &mut Connection,
    target: Target,
    batch: &Batch<'_>,
    projector: &mut dyn Projector,
) -> Result<Projected, ProjectError> {
    let declared = batch.declared;
    let moved = match batch.rebuild {
        None => conn
            .prepare_cached(
                "UPDATE bounda_checkpoints SET position = ?3
                 WHERE subscriber = ?1 AND position = ?2
                   AND EXISTS (SELECT 1 FROM bounda_read_models WHERE name = ?4 AND declared = ?5)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    batch.subscriber,
                    batch.from,
                    batch.to,
                    batch.table.name,
                    declared
                ])
            }),
        Some(fingerprint) => conn
            .prepare_cached(
                "UPDATE bounda_read_models SET rebuild_position = ?3
                 WHERE name = ?1 AND rebuild = ?4 AND rebuild_position = ?2",
            )
            .and_then(|mut s| {
                s.execute(params![batch.table.name, batch.from, batch.to, fingerprint])
            }),
    }
    .map_err(sql("cannot move a read model's checkpoint"))?;
    if moved == 0 {
        return Ok(match batch.rebuild {
            Some(fingerprint) => match rebuild_of(conn, batch.table.name)? {
                Some((current, _)) if current == fingerprint => Projected::Moved,
                _ => Projected::Superseded,
            },
            None => match declared_of(conn, batch.table.name)? {
                Some(stored) if stored == declared => Projected::Moved,
                _ => Projected::Outdated,
            },
        });
    }
    let mut rows = SqliteRows { conn, target };
    // SQLite answers at once, so the projections finish in one poll; one that waits on
    // something else has called out, which a projection may not.
    match bounda::store::protocol::at_once(projector.apply(&mut rows)) {
        Some(result) => result.map(|()| Projected::Applied),
        None => Err(ProjectError::Failed {
            event: 0,
            message:
                "a projection waited on something other than its table; projections call no one: \
                      fetch what they need when the command decides, and put it in the event"
                    .into(),
        }),
    }
}

/// A batch's rows: the connection inside the batch's transaction.
struct SqliteRows<'c> {
    conn: &'c mut Connection,
    target: Target,
}

#[bounda::store::async_trait]
impl Rows for SqliteRows<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn target(&self) -> &Target {
        &self.target
    }

    async fn execute(&mut self, statement: &Statement) -> Result<u64, StoreError> {
        self.conn
            .prepare_cached(&statement.sql)
            .and_then(|mut s| s.execute(params_from_iter(statement.params.iter().map(Bind))))
            .map(|changed| changed as u64)
            .map_err(|e| {
                StoreError::with_source(format!("cannot write to `{}`", self.target.bare), e)
            })
    }

    async fn query(
        &mut self,
        statement: &Statement,
        columns: &[SqlType],
    ) -> Result<Vec<Vec<SqlValue>>, StoreError> {
        query(self.conn, statement, columns.len())
    }
}

/// Runs a read; its rows of `width` columns.
fn query(
    conn: &Connection,
    statement: &Statement,
    width: usize,
) -> Result<Vec<Vec<SqlValue>>, StoreError> {
    let mut prepared = conn
        .prepare_cached(&statement.sql)
        .map_err(sql("cannot prepare a read model's query"))?;
    let mut rows = prepared
        .query(params_from_iter(statement.params.iter().map(Bind)))
        .map_err(sql("cannot query a read model"))?;
    let mut answer = Vec::new();
    while let Some(row) = rows
        .next()
        .map_err(sql("cannot read a read model's rows"))?
    {
        answer.push(values(row, width)?);
    }
    Ok(answer)
}

/// A row's values as SQLite typed them; a column type reads its own from them.
fn values(row: &rusqlite::Row<'_>, width: usize) -> Result<Vec<SqlValue>, StoreError> {
    (0..width)
        .map(|i| {
            let value = row.get_ref(i).map_err(sql("cannot read a column"))?;
            Ok(match value {
                ValueRef::Null => SqlValue::Null,
                ValueRef::Integer(n) => SqlValue::Integer(n),
                ValueRef::Real(x) => SqlValue::Real(x),
                ValueRef::Text(text) => SqlValue::Text(String::from_utf8_lossy(text).into_owned()),
                ValueRef::Blob(_) => {
                    return Err(StoreError::new(format!(
                        "column {i} holds a blob, which no column type reads"
                    )));
                }
            })
        })
        .collect()
}

/// A value bound to a SQLite statement.
struct Bind<'a>(&'a SqlValue);

impl ToSql for Bind<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self.0 {
            SqlValue::Null => ToSqlOutput::Owned(Value::Null),
            SqlValue::Text(text) => ToSqlOutput::Borrowed(ValueRef::Text(text.as_bytes())),
            SqlValue::Integer(n) => ToSqlOutput::Owned(Value::Integer(*n)),
            SqlValue::Unsigned(_) | SqlValue::Boolean(_) => {
                let n = self
                    .0
                    .to_i64()
                    .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
                ToSqlOutput::Owned(Value::Integer(n.unwrap_or_default()))
            }
            SqlValue::Real(x) => ToSqlOutput::Owned(Value::Real(*x)),
            SqlValue::Timestamp(at) => ToSqlOutput::Owned(Value::Text(at.to_string())),
            SqlValue::Json(json) => ToSqlOutput::Owned(Value::Text(json.to_string())),
            SqlValue::Unwritable(why) => {
                return Err(rusqlite::Error::ToSqlConversionFailure(why.clone().into()));
            }
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn postgres_placeholders_read_as_sqlite_ones_outside_quotes() {
        assert_eq!(
            super::positional("SELECT '$1', \"$2\" FROM t WHERE a = $1 AND b > $12"),
            "SELECT '$1', \"$2\" FROM t WHERE a = ?1 AND b > ?12"
        );
    }
}
