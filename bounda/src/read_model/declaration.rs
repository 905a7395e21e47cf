//! What a read model declares of its table: its columns, its key, its indexes and unique
//! columns; and what a store does at start when the stored declaration differs from this
//! build's ([`plan`]).

use serde::{Deserialize, Serialize};

use crate::read_model::value::SqlType;

/// A read model's table as its code declares it. Written by `#[read_model]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableDef {
    /// The read model's name (`order-summary`).
    pub name: &'static str,
    /// The columns, in field order.
    pub columns: &'static [ColumnDef],
}

/// One column of a read model's table: one field of its row type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnDef {
    /// The column's name, the field's.
    pub name: &'static str,
    /// Its SQL type.
    #[serde(rename = "type")]
    pub sql_type: SqlType,
    /// Whether it may be `NULL` (an `Option` field).
    pub nullable: bool,
    /// Whether it is the primary key (`#[key]`).
    pub key: bool,
    /// Whether its values are unique (`#[unique]`).
    pub unique: bool,
    /// Whether it has an index of its own (`#[index]`).
    pub index: bool,
}

impl TableDef {
    /// The primary key's column: exactly one, which `#[read_model]` checks when it compiles.
    pub fn key(&self) -> &'static ColumnDef {
        let columns: &'static [ColumnDef] = self.columns;
        columns
            .iter()
            .find(|column| column.key)
            .unwrap_or(&columns[0])
    }

    /// The name of its table without the store's schema or prefix: `read_` and the read
    /// model's name in snake case (`read_order_summary`).
    pub fn table_name(&self) -> String {
        let snake: String = self
            .name
            .chars()
            .map(|c| match c {
                'a'..='z' | '0'..='9' | '_' => c,
                'A'..='Z' => c.to_ascii_lowercase(),
                _ => '_',
            })
            .collect();
        format!("read_{snake}")
    }

    /// A hash of the declaration: what a store keeps beside the table so that a batch of a
    /// build that declares it otherwise is refused (a process of the previous build during a
    /// deploy), not written into a table it no longer knows.
    pub fn declared(&self) -> String {
        let text = serde_json::to_string(&self.declaration()).unwrap_or_default();
        format!("{:016x}", crate::hash::fnv1a(&text))
    }

    /// The declaration a store keeps beside the table, to compare the next build's with.
    pub fn declaration(&self) -> Declaration {
        Declaration {
            columns: self.columns.iter().map(StoredColumn::from).collect(),
        }
    }
}

/// A declaration as a store keeps it (JSON in its read models' table).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Declaration {
    /// The columns, in the order they were declared.
    pub columns: Vec<StoredColumn>,
}

/// A column as a store keeps its declaration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredColumn {
    /// Its name.
    pub name: String,
    /// Its SQL type.
    #[serde(rename = "type")]
    pub sql_type: SqlType,
    /// Whether it may be `NULL`.
    pub nullable: bool,
    /// Whether it is the primary key.
    pub key: bool,
    /// Whether its values are unique.
    pub unique: bool,
    /// Whether it has an index.
    pub index: bool,
}

impl From<&ColumnDef> for StoredColumn {
    fn from(column: &ColumnDef) -> StoredColumn {
        StoredColumn {
            name: column.name.to_owned(),
            sql_type: column.sql_type,
            nullable: column.nullable,
            key: column.key,
            unique: column.unique,
            index: column.index,
        }
    }
}

/// A change a store makes to a read model's table at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The table is new: create it with its indexes.
    Create,
    /// A new field: add its column, `NULL` in the rows there are (or its type's zero, for a
    /// field that is not an `Option`).
    AddColumn(&'static ColumnDef),
    /// A new index on a column.
    AddIndex(&'static ColumnDef),
    /// A new unique column: its unique index (refused by the database if rows already share a
    /// value).
    AddUnique(&'static ColumnDef),
    /// An index the code no longer declares.
    DropIndex(&'static str),
}

/// The changes that bring a table declared as `stored` (none: no table yet) to `table`, or why
/// they cannot be made in place: a removed or retyped field, a moved key, a dropped unique, or a
/// new field that has no value to give the rows there are. Such a change needs a rebuild, which
/// the refusal names.
pub fn plan(table: &TableDef, stored: Option<&Declaration>) -> Result<Vec<Change>, String> {
    let Some(stored) = stored else {
        return Ok(vec![Change::Create]);
    };
    let mut changes = Vec::new();
    let mut problems = Vec::new();
    for old in &stored.columns {
        let Some(new) = table.columns.iter().find(|column| column.name == old.name) else {
            problems.push(format!("field `{}` was removed", old.name));
            continue;
        };
        if new.sql_type != old.sql_type || new.nullable != old.nullable {
            problems.push(format!(
                "field `{}` was {} and is now {}",
                old.name,
                describe(old.sql_type, old.nullable),
                describe(new.sql_type, new.nullable)
            ));
        }
        if new.key != old.key {
            problems.push(format!(
                "the primary key moved {} `{}`",
                if new.key { "to" } else { "from" },
                old.name
            ));
        }
        if old.unique && !new.unique {
            problems.push(format!("field `{}` is no longer unique", old.name));
        }
        if new.unique && !old.unique && !new.key {
            changes.push(Change::AddUnique(new));
        }
        if new.index && !old.index {
            changes.push(Change::AddIndex(new));
        }
        if old.index && !new.index {
            changes.push(Change::DropIndex(new.name));
        }
    }
    for new in table.columns {
        if stored.columns.iter().any(|old| old.name == new.name) {
            continue;
        }
        if new.key {
            problems.push(format!("the primary key moved to new field `{}`", new.name));
            continue;
        }
        if !new.nullable && matches!(new.sql_type, SqlType::Timestamp | SqlType::Json) {
            problems.push(format!(
                "new field `{}` ({}) has no value for the rows there are; make it an `Option`",
                new.name,
                new.sql_type.name()
            ));
            continue;
        }
        if new.unique && !new.nullable {
            problems.push(format!(
                "new unique field `{}` would give every row there is the same value; make it an `Option`",
                new.name
            ));
            continue;
        }
        changes.push(Change::AddColumn(new));
        if new.unique {
            changes.push(Change::AddUnique(new));
        }
        if new.index {
            changes.push(Change::AddIndex(new));
        }
    }
    if problems.is_empty() {
        Ok(changes)
    } else {
        Err(format!(
            "read model `{}` cannot keep its table: {}. Rebuild it from the log with `rebuild {}`, \
             which fills a new table beside the old one and swaps them",
            table.name,
            problems.join("; "),
            table.name
        ))
    }
}

fn describe(sql_type: SqlType, nullable: bool) -> String {
    match nullable {
        true => format!("an optional {}", sql_type.name()),
        false => sql_type.name().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn column(name: &'static str, sql_type: SqlType) -> ColumnDef {
        ColumnDef {
            name,
            sql_type,
            nullable: false,
            key: false,
            unique: false,
            index: false,
        }
    }

    const ID: ColumnDef = ColumnDef {
        key: true,
        ..column("id", SqlType::Text)
    };
    const TOTAL: ColumnDef = column("total", SqlType::Integer);
    const V1: TableDef = TableDef {
        name: "order-summary",
        columns: &[ID, TOTAL],
    };

    #[test]
    fn a_new_table_is_created_and_the_same_one_left_alone() {
        assert_eq!(plan(&V1, None), Ok(vec![Change::Create]));
        assert_eq!(plan(&V1, Some(&V1.declaration())), Ok(vec![]));
        assert_eq!(V1.table_name(), "read_order_summary");
    }

    #[test]
    fn new_fields_and_indexes_are_added_in_place() {
        const NOTE: ColumnDef = ColumnDef {
            nullable: true,
            index: true,
            ..column("note", SqlType::Text)
        };
        const INDEXED_TOTAL: ColumnDef = ColumnDef {
            index: true,
            ..TOTAL
        };
        let v2 = TableDef {
            name: "order-summary",
            columns: &[ID, INDEXED_TOTAL, NOTE],
        };
        assert_eq!(
            plan(&v2, Some(&V1.declaration())),
            Ok(vec![
                Change::AddIndex(&v2.columns[1]),
                Change::AddColumn(&v2.columns[2]),
                Change::AddIndex(&v2.columns[2]),
            ])
        );
    }

    #[test]
    fn what_the_table_cannot_become_in_place_is_refused_naming_the_rebuild() {
        const CUSTOMER: ColumnDef = column("customer", SqlType::Text);
        const TOTAL_REAL: ColumnDef = column("total", SqlType::Real);
        const KEYED_CUSTOMER: ColumnDef = ColumnDef {
            key: true,
            ..CUSTOMER
        };
        const PLAIN_ID: ColumnDef = column("id", SqlType::Text);
        let cases: [(&[ColumnDef], &str); 3] = [
            (&[ID], "field `total` was removed"),
            (
                &[ID, TOTAL_REAL],
                "field `total` was integer and is now real",
            ),
            (
                &[PLAIN_ID, TOTAL, KEYED_CUSTOMER],
                "the primary key moved from `id`",
            ),
        ];
        for (columns, problem) in cases {
            let table = TableDef {
                name: "order-summary",
                columns,
            };
            let refusal = plan(&table, Some(&V1.declaration())).unwrap_err();
            assert!(refusal.contains(problem), "{refusal}");
            assert!(refusal.contains("`rebuild order-summary`"), "{refusal}");
        }
        let unique = TableDef {
            name: "order-summary",
            columns: &[
                ID,
                ColumnDef {
                    unique: true,
                    ..TOTAL
                },
            ],
        };
        let refusal = plan(&V1, Some(&unique.declaration())).unwrap_err();
        assert!(refusal.contains("`total` is no longer unique"), "{refusal}");
    }
}
