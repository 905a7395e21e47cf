//! Where the storefront keeps its data: a SQLite file (one machine), or a PostgreSQL server
//! (several machines), chosen by the form of `--db`.

use std::path::PathBuf;
use std::sync::Arc;

use bounda::store::Store;

/// A `--db`: `postgres://…` (or `postgresql://…`), or PostgreSQL's `key=value` form
/// (`host=db.internal dbname=shop`), is a server; anything else a file path.
#[derive(Debug, Clone)]
pub enum Database {
    /// A SQLite file.
    File(PathBuf),
    /// A PostgreSQL server, by its address.
    Postgres(String),
}

impl std::str::FromStr for Database {
    type Err = std::convert::Infallible;

    fn from_str(text: &str) -> Result<Database, Self::Err> {
        Ok(
            match text.starts_with("postgres://")
                || text.starts_with("postgresql://")
                || is_key_value(text)
            {
                true => Database::Postgres(text.to_owned()),
                false => Database::File(PathBuf::from(text)),
            },
        )
    }
}

impl std::fmt::Display for Database {
    /// The file's path, or the server's address without its password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Database::File(path) => write!(f, "{}", path.display()),
            Database::Postgres(url) => f.write_str(&without_password(url)),
        }
    }
}

/// Whether `text` is PostgreSQL's `key=value` form: words, each a known key and a value.
fn is_key_value(text: &str) -> bool {
    const KEYS: [&str; 6] = ["host", "hostaddr", "port", "dbname", "user", "password"];
    text.split_whitespace().all(|pair| {
        pair.split_once('=')
            .is_some_and(|(key, _)| KEYS.contains(&key) || key == "options")
    }) && !text.trim().is_empty()
}

/// `url` with any password replaced by `***`: the user part's (`user:secret@`, up to the last
/// `@` before the query, so a `/` in it does not hide it), a `password=` parameter, or a
/// `password=` pair of the `key=value` form.
fn without_password(url: &str) -> String {
    let masked_pairs = |text: &str, separator: char| -> String {
        text.split(separator)
            .map(|pair| match pair.split_once('=') {
                Some(("password", _)) => "password=***".to_owned(),
                _ => pair.to_owned(),
            })
            .collect::<Vec<_>>()
            .join(&separator.to_string())
    };
    let Some((scheme, rest)) = url.split_once("://") else {
        return masked_pairs(url, ' ');
    };
    let (address, query) = match rest.split_once('?') {
        Some((address, query)) => (address, Some(masked_pairs(query, '&'))),
        None => (rest, None),
    };
    let address = match address.rfind('@') {
        Some(at) => match address[..at].split_once(':') {
            Some((user, _)) => format!("{user}:***{}", &address[at..]),
            None => address.to_owned(),
        },
        None => address.to_owned(),
    };
    match query {
        Some(query) => format!("{scheme}://{address}?{query}"),
        None => format!("{scheme}://{address}"),
    }
}

impl Database {
    /// A store on it; with `existing`, one that must be there already (an operator's command
    /// never creates a database). `schema` is where a server's tables go.
    pub async fn open(&self, existing: bool, schema: &str) -> anyhow::Result<Arc<dyn Store>> {
        Ok(match self {
            Database::File(path) => Arc::new(match existing {
                true => bounda_sqlite::SqliteStore::open_existing(path)?,
                false => bounda_sqlite::SqliteStore::open(path)?,
            }),
            Database::Postgres(url) => {
                let options = bounda_postgres::Options {
                    schema: schema.to_owned(),
                    ..bounda_postgres::Options::default()
                };
                Arc::new(match existing {
                    true => bounda_postgres::PostgresStore::connect_existing(url, options).await?,
                    false => bounda_postgres::PostgresStore::connect(url, options).await?,
                })
            }
        })
    }
}

impl Database {
    /// A store on it as it is, never migrated: what `copy` and `preview` read production
    /// through, so the build in production can still open it afterwards.
    pub async fn open_as_is(&self, schema: &str) -> anyhow::Result<Arc<dyn Store>> {
        Ok(match self {
            Database::File(path) => Arc::new(bounda_sqlite::SqliteStore::open_as_is(path)?),
            Database::Postgres(url) => {
                let options = bounda_postgres::Options {
                    schema: schema.to_owned(),
                    ..bounda_postgres::Options::default()
                };
                Arc::new(bounda_postgres::PostgresStore::connect_as_is(url, options).await?)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_address_is_told_from_a_path_and_shown_without_its_password() {
        let server: Database = "postgres://shop:s3cret@db.internal:5432/shop"
            .parse()
            .unwrap();
        assert!(matches!(server, Database::Postgres(_)));
        assert_eq!(
            server.to_string(),
            "postgres://shop:***@db.internal:5432/shop"
        );
        let plain: Database = "postgresql://shop@db/shop".parse().unwrap();
        assert_eq!(plain.to_string(), "postgresql://shop@db/shop");
        let slash: Database = "postgres://shop:a/b@db/shop?sslmode=disable&password=x"
            .parse()
            .unwrap();
        assert_eq!(
            slash.to_string(),
            "postgres://shop:***@db/shop?sslmode=disable&password=***"
        );
        let pairs: Database = "host=db.internal dbname=shop password=s3cret"
            .parse()
            .unwrap();
        assert!(matches!(pairs, Database::Postgres(_)));
        assert_eq!(
            pairs.to_string(),
            "host=db.internal dbname=shop password=***"
        );
        let file: Database = "data/storefront.db".parse().unwrap();
        assert!(
            matches!(file, Database::File(path) if path == std::path::Path::new("data/storefront.db"))
        );
    }
}
