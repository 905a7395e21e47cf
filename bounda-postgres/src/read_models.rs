//! Read models on PostgreSQL: their tables beside the log's (`<schema>.<prefix>read_<name>`), a
//! batch's rows written with its checkpoint in one transaction, by one process at a time per
//! read model: another that finds it busy skips it.

use std::sync::Arc;

use bounda::Instant;
use bounda::read_model::render::{self, Dialect, Statement, Target};
use bounda::read_model::{Declaration, SqlRow, SqlType, SqlValue, TableDef, plan};
use bounda::store::StoreError;
use bounda::store::read_models::{
    Batch, Held, ProjectError, Projected, Projector, ReadModelStore, Rows, shadow_suffix,
};
use bytes::BytesMut;
use chrono::{DateTime, NaiveDateTime, Utc};
use tokio_postgres::Row;
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};

use crate::PostgresStore;
use crate::sql::{self, Session, Tx, failed};

#[bounda::store::async_trait]
impl ReadModelStore for PostgresStore {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn target(&self, table: &TableDef, shadow: Option<&str>) -> Target {
        // Within PostgreSQL's 63 bytes whatever the prefix, and the shadow's name never the
        // live one's.
        let bare = render::identifier(match shadow {
            Some(shadow) => format!("{}{}__{shadow}", self.names.prefix(), table.table_name()),
            None => format!("{}{}", self.names.prefix(), table.table_name()),
        });
        let schema = format!("{}.", self.names.schema());
        Target {
            table: format!("{schema}{}", render::quote(&bare)),
            bare,
            schema,
        }
    }

    async fn ensure(&self, table: &TableDef) -> Result<(), bounda::Error> {
        let mut client = self.client().await?;
        let tx = sql::transaction(&mut client).await?;
        // Processes starting at once take turns: the second finds the first's change made.
        let (class, object) = self.read_model_lock(table.name);
        sql::execute(
            &tx,
            "SELECT pg_advisory_xact_lock($1, $2)",
            &[&class, &object],
        )
        .await
        .map_err(failed("cannot lock a read model's table"))?;
        let stored = sql::query_opt(
            &tx,
            &self
                .names
                .sql("SELECT declaration FROM {t}read_models WHERE name = $1"),
            &[&table.name],
        )
        .await
        .map_err(failed("cannot read a read model's declaration"))?;
        let stored: Option<Declaration> = stored
            .map(|row| row.try_get::<_, serde_json::Value>(0))
            .transpose()
            .map_err(failed("cannot read a read model's declaration"))?
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| {
                StoreError::with_source(
                    format!("read model `{}`'s kept declaration is invalid", table.name),
                    e,
                )
            })?;
        let changes = plan(table, stored.as_ref())
            .map_err(|message| bounda::Error::Configuration { message })?;
        if changes.is_empty() {
            return Ok(());
        }
        let target = self.target(table, None);
        for statement in
            render::changes(Dialect::Postgres, &target, table, &changes).map_err(StoreError::new)?
        {
            tx.batch_execute(&statement)
                .await
                .map_err(failed("cannot make a read model's table"))?;
        }
        let declaration = serde_json::to_value(table.declaration())
            .map_err(|e| StoreError::with_source("cannot write a read model's declaration", e))?;
        sql::execute(
            &tx,
            &self.names.sql(
                "INSERT INTO {t}read_models (name, table_name, declaration, declared)
                 VALUES ($1, $2, $3, $4)
                 ON CONFLICT (name) DO UPDATE SET table_name = excluded.table_name,
                                                  declaration = excluded.declaration,
                                                  declared = excluded.declared",
            ),
            &[&table.name, &target.bare, &declaration, &table.declared()],
        )
        .await
        .map_err(failed("cannot keep a read model's declaration"))?;
        tx.commit()
            .await
            .map_err(failed("cannot commit a read model's table"))?;
        Ok(())
    }

    async fn project(
        &self,
        batch: &Batch<'_>,
        projector: &mut dyn Projector,
    ) -> Result<Projected, ProjectError> {
        let mut client = self.client().await?;
        let tx = sql::transaction(&mut client).await?;
        // A rebuild's slices take a lock of their own: they go on while live batches do.
        let (class, object) = match batch.rebuild {
            None => self.read_model_lock(batch.table.name),
            Some(_) => self.read_model_lock(&rebuild_lock(batch.table.name)),
        };
        let locked: bool = sql::query_one(
            &tx,
            "SELECT pg_try_advisory_xact_lock($1, $2)",
            &[&class, &object],
        )
        .await
        .and_then(|row| row.try_get(0))
        .map_err(failed("cannot lock a read model"))?;
        if !locked {
            // Another process is writing this read model's batch.
            rollback(tx).await?;
            return Ok(Projected::Busy);
        }
        let (from, to) = (position(batch.from)?, position(batch.to)?);
        let declared = batch.declared;
        let moved = match batch.rebuild {
            None => {
                sql::execute(
                    &tx,
                    &self.names.sql(
                        "UPDATE {t}checkpoints SET position = $3
                     WHERE subscriber = $1 AND position = $2
                       AND EXISTS (SELECT 1 FROM {t}read_models WHERE name = $4 AND declared = $5)",
                    ),
                    &[&batch.subscriber, &from, &to, &batch.table.name, &declared],
                )
                .await
            }
            Some(fingerprint) => {
                sql::execute(
                    &tx,
                    &self.names.sql(
                        "UPDATE {t}read_models SET rebuild_position = $3
                     WHERE name = $1 AND rebuild = $4 AND rebuild_position = $2",
                    ),
                    &[&batch.table.name, &from, &to, &fingerprint],
                )
                .await
            }
        }
        .map_err(failed("cannot move a read model's checkpoint"))?;
        if moved == 0 {
            let answer = match batch.rebuild {
                Some(fingerprint) => match self.rebuild_of(&tx, batch.table.name).await? {
                    Some((current, _)) if current == fingerprint => Projected::Moved,
                    _ => Projected::Superseded,
                },
                None => match self.declared_of(&tx, batch.table.name).await? {
                    Some(stored) if stored == declared => Projected::Moved,
                    _ => Projected::Outdated,
                },
            };
            rollback(tx).await?;
            return Ok(answer);
        }
        let shadow = batch.rebuild.map(shadow_suffix);
        let mut rows = PgRows {
            tx: &tx,
            target: self.target(batch.table, shadow.as_deref()),
        };
        if let Err(error) = projector.apply(&mut rows).await {
            // Rolled back now, not when the connection goes back to the pool: the lock is free
            // for the batch that writes what came before the failing event.
            rollback(tx).await?;
            return Err(error);
        }
        tx.commit()
            .await
            .map_err(failed("cannot commit a read model's batch"))?;
        Ok(Projected::Applied)
    }

    async fn query(
        &self,
        statement: &Statement,
        columns: &[SqlType],
    ) -> Result<Vec<Vec<SqlValue>>, StoreError> {
        let client = self.client().await?;
        query(&client, statement, columns).await
    }

    async fn sql(&self, sql_text: &str, params: &[SqlValue]) -> Result<Vec<SqlRow>, StoreError> {
        let client = self.client().await?;
        // Through a pooler a text with parameters has its types learnt by preparing it, where a
        // second statement would run: it must be one.
        let pooled = matches!(client.route(), sql::Route::Pooled(_));
        if pooled && !params.is_empty() && !sql::one_statement(sql_text) {
            return Err(StoreError::new(
                "through a connection pooler, plain SQL with parameters runs as one statement, \
                 and this text holds a `;` before its end (one in a quote or a comment counts \
                 too): run each statement on its own, and pass a value holding a `;` as a \
                 parameter",
            ));
        }
        let binds: Vec<Bind<'_>> = params.iter().map(Bind).collect();
        let refs: Vec<&(dyn ToSql + Sync)> =
            binds.iter().map(|b| b as &(dyn ToSql + Sync)).collect();
        let rows = sql::query_once(&client, sql_text, &refs)
            .await
            .map_err(failed("cannot run the SQL"))?;
        let Some(first) = rows.first() else {
            return Ok(Vec::new());
        };
        let columns: Arc<[String]> = first
            .columns()
            .iter()
            .map(|column| column.name().to_owned())
            .collect();
        rows.iter()
            .map(|row| {
                let values = (0..row.len())
                    .map(|i| dynamic(row, i))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(SqlRow::new(Arc::clone(&columns), values))
            })
            .collect()
    }

    async fn start_rebuild(&self, table: &TableDef, fingerprint: &str) -> Result<u64, StoreError> {
        let mut client = self.client().await?;
        let tx = sql::transaction(&mut client).await?;
        self.lock_read_model(&tx, table.name).await?;
        let under_way = self.rebuild_of(&tx, table.name).await?;
        if let Some((current, position)) = &under_way
            && current == fingerprint
        {
            return Ok(*position);
        }
        let mut statements = Vec::new();
        if let Some((other, _)) = &under_way {
            statements.push(render::drop_table(
                &self.target(table, Some(&shadow_suffix(other))),
            ));
        }
        let shadow = self.target(table, Some(&shadow_suffix(fingerprint)));
        statements.push(render::drop_table(&shadow));
        statements.extend(render::create(Dialect::Postgres, &shadow, table));
        for statement in statements {
            tx.batch_execute(&statement)
                .await
                .map_err(failed("cannot make a rebuild's table"))?;
        }
        sql::execute(
            &tx,
            &self.names.sql(
                "UPDATE {t}read_models SET rebuild = $2, rebuild_position = 0 WHERE name = $1",
            ),
            &[&table.name, &fingerprint],
        )
        .await
        .map_err(failed("cannot start a rebuild"))?;
        tx.commit()
            .await
            .map_err(failed("cannot start a rebuild"))?;
        Ok(0)
    }

    async fn rebuilding(&self, name: &str) -> Result<Option<(String, u64)>, StoreError> {
        let client = self.client().await?;
        self.rebuild_of(&client, name).await
    }

    async fn finish_rebuild(
        &self,
        table: &TableDef,
        fingerprint: &str,
    ) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = sql::transaction(&mut client).await?;
        // The live batches of this read model wait for the swap, and then find its checkpoint;
        // so do the rebuild's own slices, so the position read here is the last.
        self.lock_read_model(&tx, table.name).await?;
        self.lock_read_model(&tx, &rebuild_lock(table.name)).await?;
        let Some((current, reached)) = self.rebuild_of(&tx, table.name).await? else {
            return Ok(false);
        };
        if current != fingerprint {
            return Ok(false);
        }
        let live = self.target(table, None);
        let shadow = self.target(table, Some(&shadow_suffix(fingerprint)));
        for statement in render::swap(Dialect::Postgres, &shadow, &live, table) {
            tx.batch_execute(&statement)
                .await
                .map_err(failed("cannot swap a rebuilt table"))?;
        }
        let declaration = serde_json::to_value(table.declaration())
            .map_err(|e| StoreError::with_source("cannot write a read model's declaration", e))?;
        let reached = position(reached)?;
        sql::execute(
            &tx,
            &self.names.sql(
                "INSERT INTO {t}checkpoints (subscriber, position) VALUES ($1, $2)
                 ON CONFLICT (subscriber) DO UPDATE SET position = excluded.position",
            ),
            &[&bounda::read_model::subscriber(table.name), &reached],
        )
        .await
        .map_err(failed("cannot swap a rebuilt table"))?;
        sql::execute(
            &tx,
            &self.names.sql(
                "UPDATE {t}read_models SET declaration = $2, table_name = $3, declared = $4,
                     rebuild = NULL,
                     rebuild_position = NULL, held_position = NULL, held_event_id = NULL,
                     held_event_type = NULL, held_message = NULL, held_attempts = NULL,
                     held_failed_at = NULL, held_retry_at = NULL
                 WHERE name = $1",
            ),
            &[&table.name, &declaration, &live.bare, &table.declared()],
        )
        .await
        .map_err(failed("cannot swap a rebuilt table"))?;
        tx.commit()
            .await
            .map_err(failed("cannot swap a rebuilt table"))?;
        Ok(true)
    }

    async fn abandon_rebuild(&self, table: &TableDef, fingerprint: &str) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = sql::transaction(&mut client).await?;
        if self
            .rebuild_of(&tx, table.name)
            .await?
            .is_some_and(|(current, _)| current == fingerprint)
        {
            let shadow = self.target(table, Some(&shadow_suffix(fingerprint)));
            tx.batch_execute(&render::drop_table(&shadow))
                .await
                .map_err(failed("cannot abandon a rebuild"))?;
            sql::execute(
                &tx,
                &self.names.sql(
                    "UPDATE {t}read_models SET rebuild = NULL, rebuild_position = NULL WHERE name = $1",
                ),
                &[&table.name],
            )
            .await
            .map_err(failed("cannot abandon a rebuild"))?;
        }
        tx.commit()
            .await
            .map_err(failed("cannot abandon a rebuild"))?;
        Ok(())
    }

    async fn hold(&self, held: &Held) -> Result<(), StoreError> {
        let client = self.client().await?;
        let at = position(held.position)?;
        let attempts = i32::try_from(held.attempts).unwrap_or(i32::MAX);
        sql::execute(
            &client,
            &self.names.sql(
                "UPDATE {t}read_models SET
                     held_attempts = CASE WHEN held_position = $2 THEN held_attempts + 1 ELSE $7 END,
                     held_position = $2, held_event_id = $3, held_event_type = $4,
                     held_message = $5, held_failed_at = $6, held_retry_at = $8
                 WHERE name = $1",
            ),
            &[
                &held.read_model,
                &at,
                &held.event_id,
                &held.event_type,
                &held.message,
                &held.failed_at.to_chrono(),
                &attempts,
                &held.retry_at.to_chrono(),
            ],
        )
        .await
        .map_err(failed("cannot hold a read model"))?;
        Ok(())
    }

    async fn holds(&self) -> Result<Vec<Held>, StoreError> {
        let client = self.client().await?;
        let rows = sql::query(
            &client,
            &self.names.sql(
                "SELECT name, held_position, held_event_id, held_event_type, held_message,
                        held_attempts, held_failed_at, held_retry_at
                 FROM {t}read_models WHERE held_position IS NOT NULL ORDER BY name",
            ),
            &[],
        )
        .await
        .map_err(failed("cannot read the read models' holds"))?;
        rows.iter()
            .map(|row| {
                let held = || -> Result<Held, tokio_postgres::Error> {
                    Ok(Held {
                        read_model: row.try_get(0)?,
                        position: row.try_get::<_, i64>(1)?.max(0) as u64,
                        event_id: row.try_get(2)?,
                        event_type: row.try_get(3)?,
                        message: row.try_get(4)?,
                        attempts: row.try_get::<_, i32>(5)?.max(0) as u32,
                        failed_at: Instant::from(row.try_get::<_, DateTime<Utc>>(6)?),
                        retry_at: Instant::from(row.try_get::<_, DateTime<Utc>>(7)?),
                    })
                };
                held().map_err(failed("cannot read the read models' holds"))
            })
            .collect()
    }
}

impl PostgresStore {
    /// Waits for read model `name`'s lock, held until the transaction ends.
    async fn lock_read_model(&self, tx: &Tx<'_>, name: &str) -> Result<(), StoreError> {
        let (class, object) = self.read_model_lock(name);
        sql::execute(
            tx,
            "SELECT pg_advisory_xact_lock($1, $2)",
            &[&class, &object],
        )
        .await
        .map_err(failed("cannot lock a read model"))?;
        Ok(())
    }

    /// The hash of read model `name`'s stored declaration, if it has a table.
    async fn declared_of(
        &self,
        client: &impl Session,
        name: &str,
    ) -> Result<Option<String>, StoreError> {
        sql::query_opt(
            client,
            &self
                .names
                .sql("SELECT declared FROM {t}read_models WHERE name = $1"),
            &[&name],
        )
        .await
        .and_then(|row| row.map(|row| row.try_get(0)).transpose())
        .map_err(failed("cannot read a read model's declaration"))
    }

    /// The rebuild under way of read model `name`: its fingerprint and position.
    async fn rebuild_of(
        &self,
        client: &impl Session,
        name: &str,
    ) -> Result<Option<(String, u64)>, StoreError> {
        let row = sql::query_opt(
            client,
            &self.names.sql(
                "SELECT rebuild, rebuild_position FROM {t}read_models
                 WHERE name = $1 AND rebuild IS NOT NULL",
            ),
            &[&name],
        )
        .await
        .map_err(failed("cannot read a read model's rebuild"))?;
        row.map(|row| {
            Ok((
                row.try_get::<_, String>(0)?,
                row.try_get::<_, i64>(1)?.max(0) as u64,
            ))
        })
        .transpose()
        .map_err(failed("cannot read a read model's rebuild"))
    }

    /// The advisory lock of read model `name` on these tables: two 32-bit keys, a space apart
    /// from the one 64-bit key of the migrations' lock.
    fn read_model_lock(&self, name: &str) -> (i32, i32) {
        let key = format!("{}\0{}\0{name}", self.names.schema(), self.names.prefix());
        let hash = bounda::hash::fnv1a(&key);
        ((hash >> 32) as i32, hash as i32)
    }
}

/// What a rebuild of read model `name` locks: apart from its live batches.
fn rebuild_lock(name: &str) -> String {
    format!("{name}\0rebuild")
}

/// Ends `tx` at once, rolled back.
async fn rollback(tx: Tx<'_>) -> Result<(), StoreError> {
    tx.rollback()
        .await
        .map_err(failed("cannot roll back a read model's batch"))
}

/// A position as PostgreSQL's `BIGINT`.
fn position(position: u64) -> Result<i64, StoreError> {
    i64::try_from(position)
        .map_err(|_| StoreError::new(format!("position {position} is out of range")))
}

/// A batch's rows: its transaction.
struct PgRows<'a, 'c> {
    tx: &'a Tx<'c>,
    target: Target,
}

#[bounda::store::async_trait]
impl Rows for PgRows<'_, '_> {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn target(&self) -> &Target {
        &self.target
    }

    async fn execute(&mut self, statement: &Statement) -> Result<u64, StoreError> {
        let binds: Vec<Bind<'_>> = statement.params.iter().map(Bind).collect();
        let refs: Vec<&(dyn ToSql + Sync)> =
            binds.iter().map(|b| b as &(dyn ToSql + Sync)).collect();
        sql::execute(self.tx, &statement.sql, &refs)
            .await
            .map_err(failed("cannot write to a read model's table"))
    }

    async fn query(
        &mut self,
        statement: &Statement,
        columns: &[SqlType],
    ) -> Result<Vec<Vec<SqlValue>>, StoreError> {
        query(self.tx, statement, columns).await
    }
}

/// Runs a read: rows of `columns`' types.
async fn query(
    client: &impl Session,
    statement: &Statement,
    columns: &[SqlType],
) -> Result<Vec<Vec<SqlValue>>, StoreError> {
    let binds: Vec<Bind<'_>> = statement.params.iter().map(Bind).collect();
    let refs: Vec<&(dyn ToSql + Sync)> = binds.iter().map(|b| b as &(dyn ToSql + Sync)).collect();
    let rows = sql::query(client, &statement.sql, &refs)
        .await
        .map_err(failed("cannot query a read model"))?;
    rows.iter()
        .map(|row| {
            columns
                .iter()
                .enumerate()
                .map(|(i, sql_type)| typed(row, i, *sql_type))
                .collect::<Result<Vec<_>, _>>()
                .map_err(failed("cannot read a read model's row"))
        })
        .collect()
}

/// Column `i` as the declared type reads it.
fn typed(row: &Row, i: usize, sql_type: SqlType) -> Result<SqlValue, tokio_postgres::Error> {
    fn or_null<T>(value: Option<T>, wrap: impl FnOnce(T) -> SqlValue) -> SqlValue {
        value.map_or(SqlValue::Null, wrap)
    }
    Ok(match sql_type {
        SqlType::Text => or_null(row.try_get::<_, Option<String>>(i)?, SqlValue::Text),
        SqlType::Integer => or_null(row.try_get::<_, Option<i64>>(i)?, SqlValue::Integer),
        SqlType::Real => or_null(row.try_get::<_, Option<f64>>(i)?, SqlValue::Real),
        SqlType::Boolean => or_null(row.try_get::<_, Option<bool>>(i)?, SqlValue::Boolean),
        SqlType::Timestamp => or_null(row.try_get::<_, Option<DateTime<Utc>>>(i)?, |at| {
            SqlValue::Timestamp(Instant::from(at))
        }),
        SqlType::Json => or_null(
            row.try_get::<_, Option<serde_json::Value>>(i)?,
            SqlValue::Json,
        ),
    })
}

/// Column `i` as the server typed it, for plain SQL.
fn dynamic(row: &Row, i: usize) -> Result<SqlValue, StoreError> {
    let column = &row.columns()[i];
    let read =
        |error| StoreError::with_source(format!("cannot read column `{}`", column.name()), error);
    let value = match *column.type_() {
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => row
            .try_get::<_, Option<String>>(i)
            .map(|v| v.map(SqlValue::Text)),
        Type::INT2 => row
            .try_get::<_, Option<i16>>(i)
            .map(|v| v.map(|n| SqlValue::Integer(n.into()))),
        Type::INT4 => row
            .try_get::<_, Option<i32>>(i)
            .map(|v| v.map(|n| SqlValue::Integer(n.into()))),
        Type::INT8 => row
            .try_get::<_, Option<i64>>(i)
            .map(|v| v.map(SqlValue::Integer)),
        Type::FLOAT4 => row
            .try_get::<_, Option<f32>>(i)
            .map(|v| v.map(|x| SqlValue::Real(x.into()))),
        Type::FLOAT8 => row
            .try_get::<_, Option<f64>>(i)
            .map(|v| v.map(SqlValue::Real)),
        Type::NUMERIC => row.try_get::<_, Option<Numeric>>(i).map(|v| v.map(|n| n.0)),
        Type::BOOL => row
            .try_get::<_, Option<bool>>(i)
            .map(|v| v.map(SqlValue::Boolean)),
        Type::TIMESTAMPTZ => row
            .try_get::<_, Option<DateTime<Utc>>>(i)
            .map(|v| v.map(|at| SqlValue::Timestamp(Instant::from(at)))),
        Type::TIMESTAMP => row
            .try_get::<_, Option<NaiveDateTime>>(i)
            .map(|v| v.map(|at| SqlValue::Timestamp(Instant::from(at.and_utc())))),
        Type::JSON | Type::JSONB => row
            .try_get::<_, Option<serde_json::Value>>(i)
            .map(|v| v.map(SqlValue::Json)),
        ref other => {
            return Err(StoreError::new(format!(
                "column `{}` is of type {other}, which bounda does not read: cast it, like `{}::text`",
                column.name(),
                column.name()
            )));
        }
    };
    Ok(value.map_err(read)?.unwrap_or(SqlValue::Null))
}

/// A `NUMERIC`, as `SUM` and `AVG` answer: an integer when it has no fraction and fits, else a
/// float.
struct Numeric(SqlValue);

impl<'a> FromSql<'a> for Numeric {
    fn from_sql(
        _: &Type,
        raw: &'a [u8],
    ) -> Result<Numeric, Box<dyn std::error::Error + Sync + Send>> {
        // The binary form: digit count, weight, sign, display scale, then base-10000 digits.
        let word = |at: usize| -> Result<u16, Box<dyn std::error::Error + Sync + Send>> {
            raw.get(at..at + 2)
                .map(|b| u16::from_be_bytes([b[0], b[1]]))
                .ok_or_else(|| "a NUMERIC too short".into())
        };
        let (count, weight, sign, scale) = (word(0)?, word(2)? as i16, word(4)?, word(6)?);
        if sign == 0xC000 {
            return Ok(Numeric(SqlValue::Real(f64::NAN)));
        }
        let mut value = 0f64;
        let mut whole: Option<i128> = Some(0);
        for k in 0..usize::from(count) {
            let digit = word(8 + 2 * k)?;
            let power = i32::from(weight) - k as i32;
            value += f64::from(digit) * 10_000f64.powi(power);
            whole = match (whole, power >= 0) {
                (Some(n), true) => u32::try_from(power)
                    .ok()
                    .and_then(|p| 10_000i128.checked_pow(p))
                    .and_then(|scale| n.checked_add(i128::from(digit) * scale)),
                (Some(n), false) if digit == 0 => Some(n),
                _ => None,
            };
        }
        let negative = sign == 0x4000;
        let integer = whole
            .filter(|_| scale == 0)
            .map(|n| if negative { -n } else { n })
            .and_then(|n| i64::try_from(n).ok());
        Ok(Numeric(match integer {
            Some(n) => SqlValue::Integer(n),
            None => SqlValue::Real(if negative { -value } else { value }),
        }))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::NUMERIC
    }
}

/// A value bound to a statement, converted to the type the server expects there.
#[derive(Debug)]
struct Bind<'a>(&'a SqlValue);

type BoxError = Box<dyn std::error::Error + Sync + Send>;

impl ToSql for Bind<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        let mismatch = || -> BoxError {
            format!(
                "a value of {:?} cannot be bound where the server expects {ty}",
                self.0
            )
            .into()
        };
        match self.0 {
            SqlValue::Null => Ok(IsNull::Yes),
            SqlValue::Text(text) => match *ty {
                Type::JSON | Type::JSONB => {
                    serde_json::from_str::<serde_json::Value>(text)?.to_sql(ty, out)
                }
                _ => text.as_str().to_sql(ty, out),
            },
            SqlValue::Boolean(b) if *ty == Type::BOOL => b.to_sql(ty, out),
            SqlValue::Integer(_) | SqlValue::Unsigned(_) | SqlValue::Boolean(_) => {
                let n = self.0.to_i64()?.ok_or_else(mismatch)?;
                match *ty {
                    Type::INT8 => n.to_sql(ty, out),
                    Type::INT4 => i32::try_from(n)?.to_sql(ty, out),
                    Type::INT2 => i16::try_from(n)?.to_sql(ty, out),
                    Type::FLOAT8 => (n as f64).to_sql(ty, out),
                    Type::FLOAT4 => (n as f32).to_sql(ty, out),
                    Type::TEXT | Type::VARCHAR => n.to_string().to_sql(ty, out),
                    _ => Err(mismatch()),
                }
            }
            SqlValue::Real(x) => match *ty {
                Type::FLOAT8 => x.to_sql(ty, out),
                Type::FLOAT4 => (*x as f32).to_sql(ty, out),
                _ => Err(mismatch()),
            },
            SqlValue::Timestamp(at) => match *ty {
                Type::TIMESTAMPTZ => at.to_chrono().to_sql(ty, out),
                Type::TIMESTAMP => at.to_chrono().naive_utc().to_sql(ty, out),
                Type::TEXT | Type::VARCHAR => at.to_string().to_sql(ty, out),
                _ => Err(mismatch()),
            },
            SqlValue::Unwritable(why) => Err(why.clone().into()),
            SqlValue::Json(json) => match *ty {
                Type::TEXT | Type::VARCHAR => json.to_string().to_sql(ty, out),
                _ => json.to_sql(ty, out),
            },
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}
