//! A read model's statements in SQL, for either store: one renderer, so both stores write the
//! same rows for the same calls. A store supplies the table's name and binds the values.

use crate::hash::fnv1a;
use crate::read_model::declaration::{Change, ColumnDef, TableDef};
use crate::read_model::filter::{Condition, Op, Selection};
use crate::read_model::value::{SqlType, SqlValue};

/// The SQL a store speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// SQLite: `?1` placeholders; moments as RFC 3339 text, booleans as 0 and 1, JSON as text.
    Sqlite,
    /// PostgreSQL: `$1` placeholders; `TIMESTAMPTZ`, `BOOLEAN`, `JSONB`.
    Postgres,
}

impl Dialect {
    /// The column type a store declares for `sql_type`.
    pub fn type_name(self, sql_type: SqlType) -> &'static str {
        match (self, sql_type) {
            (_, SqlType::Text) => "TEXT",
            (Dialect::Sqlite, SqlType::Integer | SqlType::Boolean) => "INTEGER",
            (Dialect::Sqlite, SqlType::Real) => "REAL",
            (Dialect::Sqlite, SqlType::Timestamp | SqlType::Json) => "TEXT",
            (Dialect::Postgres, SqlType::Integer) => "BIGINT",
            (Dialect::Postgres, SqlType::Real) => "DOUBLE PRECISION",
            (Dialect::Postgres, SqlType::Boolean) => "BOOLEAN",
            (Dialect::Postgres, SqlType::Timestamp) => "TIMESTAMPTZ",
            (Dialect::Postgres, SqlType::Json) => "JSONB",
        }
    }

    fn placeholder(self, n: usize) -> String {
        match self {
            Dialect::Sqlite => format!("?{n}"),
            Dialect::Postgres => format!("${n}"),
        }
    }

    /// The value a column of a type that is not an `Option` takes in the rows there are when
    /// it is added; `None` for a type with no such value.
    fn zero(self, sql_type: SqlType) -> Option<&'static str> {
        match (self, sql_type) {
            (_, SqlType::Text) => Some("''"),
            (_, SqlType::Integer | SqlType::Real) => Some("0"),
            (Dialect::Sqlite, SqlType::Boolean) => Some("0"),
            (Dialect::Postgres, SqlType::Boolean) => Some("FALSE"),
            (_, SqlType::Timestamp | SqlType::Json) => None,
        }
    }
}

/// Where a read model's rows are: its table as the store names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The table, quoted and qualified as statements name it (`"bounda"."read_orders"`).
    pub table: String,
    /// Its bare name (`read_orders`), which its indexes' names start with.
    pub bare: String,
    /// The schema the table is in, quoted and followed by a dot (`"bounda".`), or empty: what
    /// names an index to drop.
    pub schema: String,
}

/// One statement and the values it binds, in placeholder order.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    /// The SQL: shared, so a statement made again and again for new values (a projection's
    /// upsert) is rendered once.
    pub sql: std::sync::Arc<str>,
    /// The values.
    pub params: Vec<SqlValue>,
}

/// `name` quoted as an SQL identifier.
pub fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `name` as an identifier PostgreSQL keeps whole (63 bytes at most, where it would cut a
/// longer one without a word): a long one keeps its start and a hash of the whole, so two
/// names never become one.
pub fn identifier(name: String) -> String {
    if name.len() <= 63 {
        return name;
    }
    let mut cut = 46;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}_{:016x}", &name[..cut], fnv1a(&name))
}

/// The name of the index on `column` of the table `bare`: the table's name, the column's, and
/// a hash of the pair, so that table `order` with column `line_total` and table `order_line`
/// with column `total` have indexes of their own.
fn index_name(bare: &str, column: &str, unique: bool) -> String {
    let kind = if unique { "key" } else { "idx" };
    let pair = fnv1a(&format!("{bare}\0{column}")) & 0xff_ffff;
    identifier(format!("{bare}_{column}_{pair:06x}_{kind}"))
}

/// The name of table `bare`'s primary key: named by bounda, not left to the database, so a
/// swap renames it whatever the table's length.
fn key_index_name(bare: &str) -> String {
    identifier(format!("{bare}_pkey"))
}

/// The statements that create `table` at `target` with its indexes, if it is not there.
pub fn create(dialect: Dialect, target: &Target, table: &TableDef) -> Vec<String> {
    let columns: Vec<String> = table
        .columns
        .iter()
        .map(|column| {
            let mut sql = format!(
                "{} {}",
                quote(column.name),
                dialect.type_name(column.sql_type)
            );
            if column.key {
                // Named, so PostgreSQL's index of it has a name bounda knows.
                sql.push_str(&format!(
                    " CONSTRAINT {} PRIMARY KEY",
                    quote(&key_index_name(&target.bare))
                ));
            } else if !column.nullable {
                sql.push_str(" NOT NULL");
            }
            sql
        })
        .collect();
    let mut statements = vec![format!(
        "CREATE TABLE IF NOT EXISTS {} ({})",
        target.table,
        columns.join(", ")
    )];
    for column in table.columns.iter().filter(|column| !column.key) {
        if column.unique {
            statements.push(add_index(target, column, true));
        }
        if column.index {
            statements.push(add_index(target, column, false));
        }
    }
    statements
}

/// The statements that make `changes` (from [`plan`](crate::read_model::plan)) to the table
/// at `target`; an error for a change a table cannot take, which `plan` never lists.
pub fn changes(
    dialect: Dialect,
    target: &Target,
    table: &TableDef,
    changes: &[Change],
) -> Result<Vec<String>, String> {
    let mut statements = Vec::new();
    for change in changes {
        match change {
            Change::Create => statements.extend(create(dialect, target, table)),
            Change::AddColumn(column) => {
                statements.push(add_column(dialect, target, column).ok_or_else(|| {
                    format!(
                        "column `{}` has no value to give the rows there are",
                        column.name
                    )
                })?)
            }
            Change::AddIndex(column) => statements.push(add_index(target, column, false)),
            Change::AddUnique(column) => statements.push(add_index(target, column, true)),
            Change::DropIndex(column) => statements.push(drop_index(target, column)),
        }
    }
    Ok(statements)
}

/// The statement that adds `column` to the table at `target`: `NULL` in the rows there are,
/// or its type's zero for a column that may not be `NULL`.
pub fn add_column(dialect: Dialect, target: &Target, column: &ColumnDef) -> Option<String> {
    let mut sql = format!(
        "ALTER TABLE {} ADD COLUMN {} {}",
        target.table,
        quote(column.name),
        dialect.type_name(column.sql_type)
    );
    if !column.nullable {
        sql.push_str(" NOT NULL DEFAULT ");
        sql.push_str(dialect.zero(column.sql_type)?);
    }
    Some(sql)
}

/// The statement that adds an index (a unique one when `unique`) on `column`.
pub fn add_index(target: &Target, column: &ColumnDef, unique: bool) -> String {
    format!(
        "CREATE {}INDEX IF NOT EXISTS {} ON {} ({})",
        if unique { "UNIQUE " } else { "" },
        quote(&index_name(&target.bare, column.name, unique)),
        target.table,
        quote(column.name)
    )
}

/// The statement that drops the index on `column`.
pub fn drop_index(target: &Target, column: &str) -> String {
    format!(
        "DROP INDEX IF EXISTS {}{}",
        target.schema,
        quote(&index_name(&target.bare, column, false))
    )
}

/// The statement that drops the table at `target`, if it is there.
pub fn drop_table(target: &Target) -> String {
    format!("DROP TABLE IF EXISTS {}", target.table)
}

/// The statements that put the filled `shadow` in `live`'s place, with `live`'s index names:
/// the live table dropped, the shadow renamed, its indexes renamed (PostgreSQL) or made again
/// (SQLite, which cannot rename one).
pub fn swap(dialect: Dialect, shadow: &Target, live: &Target, table: &TableDef) -> Vec<String> {
    let mut statements = vec![
        drop_table(live),
        format!(
            "ALTER TABLE {} RENAME TO {}",
            shadow.table,
            quote(&live.bare)
        ),
    ];
    if dialect == Dialect::Postgres {
        // The key's index keeps the shadow's name otherwise, and a later shadow of the same
        // name could not be made.
        statements.push(format!(
            "ALTER INDEX {}{} RENAME TO {}",
            shadow.schema,
            quote(&key_index_name(&shadow.bare)),
            quote(&key_index_name(&live.bare))
        ));
    }
    for column in table.columns.iter().filter(|column| !column.key) {
        for (unique, declared) in [(true, column.unique), (false, column.index)] {
            if !declared {
                continue;
            }
            let old = index_name(&shadow.bare, column.name, unique);
            let new = index_name(&live.bare, column.name, unique);
            match dialect {
                Dialect::Postgres => statements.push(format!(
                    "ALTER INDEX {}{} RENAME TO {}",
                    shadow.schema,
                    quote(&old),
                    quote(&new)
                )),
                Dialect::Sqlite => {
                    statements.push(format!("DROP INDEX IF EXISTS {}", quote(&old)));
                    statements.push(add_index(live, column, unique));
                }
            }
        }
    }
    statements
}

/// Builds a statement's SQL and values, numbering placeholders.
struct Builder {
    dialect: Dialect,
    sql: String,
    params: Vec<SqlValue>,
}

impl Builder {
    fn new(dialect: Dialect) -> Builder {
        Builder {
            dialect,
            sql: String::new(),
            params: Vec::new(),
        }
    }

    fn push(&mut self, sql: &str) {
        self.sql.push_str(sql);
    }

    fn bind(&mut self, value: SqlValue) {
        self.params.push(value);
        let placeholder = self.dialect.placeholder(self.params.len());
        self.sql.push_str(&placeholder);
    }

    fn condition(&mut self, condition: &Condition) {
        match condition {
            Condition::All => self.push("1 = 1"),
            Condition::Compare {
                column,
                op,
                value: SqlValue::Null,
            } => match op {
                Op::Eq => self.push(&format!("{} IS NULL", quote(column))),
                Op::Ne => self.push(&format!("{} IS NOT NULL", quote(column))),
                // Nothing is smaller or larger than NULL.
                _ => self.push("1 = 0"),
            },
            Condition::Compare { column, op, value } => {
                let op = match op {
                    Op::Eq => "=",
                    Op::Ne => "<>",
                    Op::Lt => "<",
                    Op::Le => "<=",
                    Op::Gt => ">",
                    Op::Ge => ">=",
                };
                self.push(&format!("{} {op} ", quote(column)));
                self.bind(value.clone());
            }
            Condition::In { values, .. } if values.is_empty() => self.push("1 = 0"),
            Condition::In { column, values } => {
                self.push(&format!("{} IN (", quote(column)));
                for (i, value) in values.iter().enumerate() {
                    if i > 0 {
                        self.push(", ");
                    }
                    self.bind(value.clone());
                }
                self.push(")");
            }
            Condition::StartsWith { column, prefix } => {
                // A comparison of the first characters, not LIKE: SQLite's LIKE ignores case,
                // and a prefix's `%` and `_` are plain characters here.
                let function = match self.dialect {
                    Dialect::Sqlite => "substr",
                    Dialect::Postgres => "substring",
                };
                self.push(&format!(
                    "{function}({}, 1, {}) = ",
                    quote(column),
                    prefix.chars().count()
                ));
                self.bind(SqlValue::Text(prefix.clone()));
            }
            Condition::And(all) | Condition::Or(all) if all.is_empty() => {
                let empty = matches!(condition, Condition::And(_));
                self.push(if empty { "1 = 1" } else { "1 = 0" });
            }
            Condition::And(all) | Condition::Or(all) => {
                let joint = match condition {
                    Condition::And(_) => " AND ",
                    _ => " OR ",
                };
                self.push("(");
                for (i, condition) in all.iter().enumerate() {
                    if i > 0 {
                        self.push(joint);
                    }
                    self.condition(condition);
                }
                self.push(")");
            }
            Condition::Not(condition) => {
                self.push("NOT (");
                self.condition(condition);
                self.push(")");
            }
        }
    }

    fn done(self) -> Statement {
        Statement {
            sql: self.sql.into(),
            params: self.params,
        }
    }
}

fn column_list(table: &TableDef) -> String {
    let names: Vec<String> = table.columns.iter().map(|c| quote(c.name)).collect();
    names.join(", ")
}

/// `INSERT .. VALUES ($1, ..) ON CONFLICT (key) ` for a row of every column.
fn insert(dialect: Dialect, target: &Target, table: &TableDef) -> String {
    let placeholders: Vec<String> = (1..=table.columns.len())
        .map(|n| dialect.placeholder(n))
        .collect();
    format!(
        "INSERT INTO {} ({}) VALUES ({}) ON CONFLICT ({}) ",
        target.table,
        column_list(table),
        placeholders.join(", "),
        quote(table.key().name)
    )
}

/// The SQL of [`upsert`], the same for every row: a projection renders it once.
pub fn upsert_sql(dialect: Dialect, target: &Target, table: &TableDef) -> std::sync::Arc<str> {
    let sets: Vec<String> = table
        .columns
        .iter()
        .filter(|column| !column.key)
        .map(|column| format!("{0} = excluded.{0}", quote(column.name)))
        .collect();
    let conflict = match sets.is_empty() {
        true => "DO NOTHING".to_owned(),
        false => format!("DO UPDATE SET {}", sets.join(", ")),
    };
    format!("{}{conflict}", insert(dialect, target, table)).into()
}

/// The SQL of [`insert_ignore`], the same for every row.
pub fn insert_ignore_sql(
    dialect: Dialect,
    target: &Target,
    table: &TableDef,
) -> std::sync::Arc<str> {
    format!("{}DO NOTHING", insert(dialect, target, table)).into()
}

/// Inserts `row` (values in column order), or replaces the row with its key.
pub fn upsert(
    dialect: Dialect,
    target: &Target,
    table: &TableDef,
    row: Vec<SqlValue>,
) -> Statement {
    Statement {
        sql: upsert_sql(dialect, target, table),
        params: row,
    }
}

/// Inserts `row` unless a row has its key; a row that shares a unique value with another
/// is still refused.
pub fn insert_ignore(
    dialect: Dialect,
    target: &Target,
    table: &TableDef,
    row: Vec<SqlValue>,
) -> Statement {
    Statement {
        sql: insert_ignore_sql(dialect, target, table),
        params: row,
    }
}

/// Sets `sets` on the rows `filter` holds for.
pub fn update(
    dialect: Dialect,
    target: &Target,
    sets: &[(&'static str, SqlValue)],
    filter: &Condition,
) -> Statement {
    let mut sql = Builder::new(dialect);
    sql.push(&format!("UPDATE {} SET ", target.table));
    for (i, (column, value)) in sets.iter().enumerate() {
        if i > 0 {
            sql.push(", ");
        }
        sql.push(&format!("{} = ", quote(column)));
        sql.bind(value.clone());
    }
    sql.push(" WHERE ");
    sql.condition(filter);
    sql.done()
}

/// Deletes the rows `filter` holds for.
pub fn delete(dialect: Dialect, target: &Target, filter: &Condition) -> Statement {
    let mut sql = Builder::new(dialect);
    sql.push(&format!("DELETE FROM {} WHERE ", target.table));
    sql.condition(filter);
    sql.done()
}

/// Reads the rows `selection` picks, every column in declaration order.
pub fn select(
    dialect: Dialect,
    target: &Target,
    table: &TableDef,
    selection: &Selection,
) -> Statement {
    let mut sql = Builder::new(dialect);
    sql.push(&format!(
        "SELECT {} FROM {} WHERE ",
        column_list(table),
        target.table
    ));
    sql.condition(&selection.filter);
    let key = table.key().name;
    let mut order: Vec<String> = selection
        .order
        .iter()
        .map(|order| {
            format!(
                "{} {}",
                quote(order.column),
                if order.descending { "DESC" } else { "ASC" }
            )
        })
        .collect();
    if !selection.order.iter().any(|order| order.column == key) {
        order.push(format!("{} ASC", quote(key)));
    }
    sql.push(&format!(" ORDER BY {}", order.join(", ")));
    if let Some(limit) = selection.limit {
        sql.push(" LIMIT ");
        sql.bind(SqlValue::Unsigned(limit));
    }
    if selection.offset > 0 {
        if selection.limit.is_none() && dialect == Dialect::Sqlite {
            // SQLite has no OFFSET without a LIMIT.
            sql.push(" LIMIT -1");
        }
        sql.push(" OFFSET ");
        sql.bind(SqlValue::Unsigned(selection.offset));
    }
    sql.done()
}

/// Counts the rows `filter` holds for.
pub fn count(dialect: Dialect, target: &Target, filter: &Condition) -> Statement {
    let mut sql = Builder::new(dialect);
    sql.push(&format!("SELECT COUNT(*) FROM {} WHERE ", target.table));
    sql.condition(filter);
    sql.done()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read_model::declaration::ColumnDef;

    const TABLE: TableDef = TableDef {
        name: "orders",
        columns: &[
            ColumnDef {
                name: "id",
                sql_type: SqlType::Text,
                nullable: false,
                key: true,
                unique: false,
                index: false,
            },
            ColumnDef {
                name: "customer",
                sql_type: SqlType::Text,
                nullable: true,
                key: false,
                unique: false,
                index: true,
            },
        ],
    };

    fn target() -> Target {
        Target {
            table: "\"s\".\"read_orders\"".into(),
            bare: "read_orders".into(),
            schema: "\"s\".".into(),
        }
    }

    #[test]
    fn a_table_is_created_with_its_key_and_indexes() {
        let index = index_name("read_orders", "customer", false);
        assert!(index.starts_with("read_orders_customer_") && index.ends_with("_idx"));
        assert_eq!(
            create(Dialect::Postgres, &target(), &TABLE),
            [
                "CREATE TABLE IF NOT EXISTS \"s\".\"read_orders\" (\"id\" TEXT CONSTRAINT \"read_orders_pkey\" PRIMARY KEY, \"customer\" TEXT)".to_owned(),
                format!("CREATE INDEX IF NOT EXISTS \"{index}\" ON \"s\".\"read_orders\" (\"customer\")"),
            ]
        );
    }

    #[test]
    fn tables_and_columns_that_read_alike_have_indexes_of_their_own() {
        assert_ne!(
            index_name("read_order", "line_total", false),
            index_name("read_order_line", "total", false)
        );
    }

    #[test]
    fn an_upsert_replaces_every_column_but_the_key() {
        let statement = upsert(
            Dialect::Sqlite,
            &target(),
            &TABLE,
            vec![SqlValue::Text("o-1".into()), SqlValue::Null],
        );
        assert_eq!(
            &*statement.sql,
            "INSERT INTO \"s\".\"read_orders\" (\"id\", \"customer\") VALUES (?1, ?2) ON CONFLICT (\"id\") DO UPDATE SET \"customer\" = excluded.\"customer\""
        );
    }

    #[test]
    fn a_selection_pages_in_key_order_among_equals() {
        let selection = Selection {
            filter: Condition::And(vec![
                Condition::Compare {
                    column: "customer",
                    op: Op::Eq,
                    value: SqlValue::Null,
                },
                Condition::In {
                    column: "id",
                    values: vec![SqlValue::Text("a".into()), SqlValue::Text("b".into())],
                },
            ]),
            order: vec![crate::read_model::filter::OrderBy {
                column: "customer",
                descending: true,
            }],
            limit: Some(10),
            offset: 20,
        };
        let statement = select(Dialect::Postgres, &target(), &TABLE, &selection);
        assert_eq!(
            &*statement.sql,
            "SELECT \"id\", \"customer\" FROM \"s\".\"read_orders\" WHERE (\"customer\" IS NULL AND \"id\" IN ($1, $2)) ORDER BY \"customer\" DESC, \"id\" ASC LIMIT $3 OFFSET $4"
        );
        assert_eq!(statement.params.len(), 4);
    }

    #[test]
    fn a_long_name_is_cut_to_what_postgres_keeps_and_stays_its_own() {
        let long = index_name(&"x".repeat(60), "column", false);
        assert!(long.len() <= 63, "{long}");
        assert_ne!(long, index_name(&"x".repeat(61), "column", false));
        let (live, shadow) = (
            identifier("p".repeat(40) + "read_order_summary_of_the_week"),
            identifier("p".repeat(40) + "read_order_summary_of_the_week__r01234567"),
        );
        assert!(live.len() <= 63 && shadow.len() <= 63);
        assert_ne!(live, shadow);
        assert!(key_index_name(&shadow).len() <= 63);
    }
}
