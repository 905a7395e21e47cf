//! What the stores' schema migrations share: reading which tables a migration creates, so a
//! test or a benchmark of a migration can take a database back to the schema before it (see
//! `bounda_sqlite::downgrade` and `bounda_postgres::testing::downgrade`).

use crate::store::StoreError;

/// The tables the migrations after schema `version` create, in order: what a database of that
/// version lacks, and what taking one back to it drops. Refuses a version beyond `migrations`,
/// and a later migration that does more than create tables (see [`created_tables`]).
pub fn tables_after(migrations: &[&str], version: usize) -> Result<Vec<String>, StoreError> {
    let later = migrations
        .get(version..)
        .ok_or_else(|| StoreError::new(format!("this build knows no schema {version}")))?;
    let mut tables = Vec::new();
    for migration in later {
        tables.extend(created_tables(migration)?);
    }
    Ok(tables)
}

/// The tables the statements of one migration create, in order, named as written (a store's
/// placeholders kept). Refuses a migration with a statement other than `CREATE TABLE`,
/// `CREATE [UNIQUE] INDEX`, `DROP INDEX IF EXISTS` or `ALTER TABLE … SET (…)`: dropping its
/// tables would not undo it. A migration that only replaces a function with one answering the
/// same creates none. Indexes dropped and storage settings changed are left as they are when a
/// database is taken back: they change how fast a read is, not what it answers, and the
/// migration runs again over them (hence `IF EXISTS`).
pub fn created_tables(migration: &str) -> Result<Vec<String>, StoreError> {
    // A migration that replaces a function (one statement, whose body holds `;`s) creates no
    // table: it changes how the function works, not what it answers, so a database taken back
    // keeps it, and the build before reads it as its own.
    if migration
        .trim_start()
        .starts_with("CREATE OR REPLACE FUNCTION")
    {
        return Ok(Vec::new());
    }
    let mut tables = Vec::new();
    for statement in migration.split(';').map(str::trim) {
        if statement.is_empty() || statement.starts_with("CREATE INDEX") {
            continue;
        }
        if statement.starts_with("CREATE UNIQUE INDEX")
            || statement.starts_with("DROP INDEX IF EXISTS")
            || settings(statement)
        {
            continue;
        }
        let Some(rest) = statement.strip_prefix("CREATE TABLE") else {
            return Err(StoreError::new(format!(
                "a migration does more than create tables and indexes, which dropping its \
                 tables would not undo: `{}`",
                statement.lines().next().unwrap_or(statement)
            )));
        };
        let name: String = rest
            .trim_start()
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != '(')
            .collect();
        tables.push(name);
    }
    Ok(tables)
}

/// Whether `statement` only sets a table's storage parameters: `ALTER TABLE name SET (…)`.
fn settings(statement: &str) -> bool {
    let Some(rest) = statement.strip_prefix("ALTER TABLE") else {
        return false;
    };
    let mut words = rest.split_whitespace();
    let _table = words.next();
    words.next() == Some("SET") && words.next().is_some_and(|word| word.starts_with('('))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_migrations_tables_are_read_and_anything_else_refused() {
        let migration = "
            CREATE TABLE {t}instances (
                process TEXT NOT NULL
            );
            CREATE INDEX {p}instances_newest ON {t}instances (process);
            CREATE TABLE bounda_pauses(kind TEXT);
        ";
        assert_eq!(
            created_tables(migration).unwrap(),
            ["{t}instances", "bounda_pauses"]
        );
        let refused = created_tables("CREATE TABLE a (x); ALTER TABLE b ADD COLUMN y TEXT;")
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("`ALTER TABLE b ADD COLUMN y TEXT`"),
            "{refused}"
        );
        let reindexed = "DROP INDEX IF EXISTS {t}a_x; CREATE INDEX {p}a_x ON {t}a (x) WHERE y;
            ALTER TABLE {t}a SET (fillfactor = 80);";
        assert!(
            created_tables(reindexed).unwrap().is_empty(),
            "indexes replaced and a storage setting create no table"
        );
        for refused in [
            "DROP INDEX {t}a_x",
            "ALTER TABLE a SET NOT NULL",
            "DROP TABLE a",
        ] {
            assert!(created_tables(refused).is_err(), "{refused}");
        }
        let migrations = [
            "CREATE TABLE a (x)",
            "CREATE TABLE b (y)",
            "CREATE TABLE c (z)",
        ];
        assert_eq!(tables_after(&migrations, 1).unwrap(), ["b", "c"]);
        assert!(tables_after(&migrations, 3).unwrap().is_empty());
        let replaced = "CREATE OR REPLACE FUNCTION {t}f() RETURNS INT LANGUAGE plpgsql AS $$
            BEGIN PERFORM 1; RETURN 1; END $$";
        assert!(
            created_tables(replaced).unwrap().is_empty(),
            "a function replaced creates no table, whatever its body holds"
        );
        assert!(
            tables_after(&migrations, 4).is_err(),
            "a schema this build does not know"
        );
    }
}
