//! Opening a store from an address: a SQLite file's path or a PostgreSQL server's address, as an
//! operator writes it in `--db`. Each store crate opens its own kind ([`Opener`]); a service
//! takes one opener, which may hand what it does not open to another.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::store::{Store, StoreError};

/// Where a store is: a file's path, or a database server's address. `postgres://…`
/// (`postgresql://…`) and PostgreSQL's `key=value` form (`host=db.internal dbname=shop`) are a
/// server; anything else is a path. Shown without its password.
#[derive(Clone, PartialEq, Eq)]
pub enum Address {
    /// A file.
    File(PathBuf),
    /// A server, by its address.
    Server(String),
}

impl std::str::FromStr for Address {
    type Err = std::convert::Infallible;

    fn from_str(text: &str) -> Result<Address, Self::Err> {
        let server = text.starts_with("postgres://")
            || text.starts_with("postgresql://")
            || is_key_value(text);
        Ok(match server {
            true => Address::Server(text.to_owned()),
            false => Address::File(PathBuf::from(text)),
        })
    }
}

impl fmt::Display for Address {
    /// The file's path, or the server's address with its password replaced by `***`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::File(path) => write!(f, "{}", path.display()),
            Address::Server(address) => f.write_str(&without_password(address)),
        }
    }
}

impl fmt::Debug for Address {
    /// As [`Display`](fmt::Display) shows it: a password never reaches a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Whether `text` is PostgreSQL's `key=value` form: words, each a key (letters and `_`) and a
/// value; the server's client checks the keys when it connects. A path never looks like this.
fn is_key_value(text: &str) -> bool {
    !text.trim().is_empty()
        && text.split_whitespace().all(|pair| {
            pair.split_once('=').is_some_and(|(key, _)| {
                !key.is_empty() && key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
            })
        })
}

/// `address` with any password replaced by `***`: the user part's (`user:secret@`, up to the
/// last `@` before the query, so a `/` in it does not hide it), a `password=` parameter, or a
/// `password=` pair of the `key=value` form.
fn without_password(address: &str) -> String {
    let masked_pairs = |text: &str, separator: char| -> String {
        text.split(separator)
            .map(|pair| match pair.split_once('=') {
                Some(("password", _)) => "password=***".to_owned(),
                _ => pair.to_owned(),
            })
            .collect::<Vec<_>>()
            .join(&separator.to_string())
    };
    let Some((scheme, rest)) = address.split_once("://") else {
        return masked_pairs(address, ' ');
    };
    let (host, query) = match rest.split_once('?') {
        Some((host, query)) => (host, Some(masked_pairs(query, '&'))),
        None => (rest, None),
    };
    let host = match host.rfind('@') {
        Some(at) => match host[..at].split_once(':') {
            Some((user, _)) => format!("{user}:***{}", &host[at..]),
            None => host.to_owned(),
        },
        None => host.to_owned(),
    };
    match query {
        Some(query) => format!("{scheme}://{host}?{query}"),
        None => format!("{scheme}://{host}"),
    }
}

/// Where on a server a store's tables go: a schema, and a prefix to their names (two apps on
/// one schema). A file ignores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The schema, created if missing.
    pub schema: String,
    /// The prefix of every table's name (`shop_`), or none.
    pub prefix: String,
}

/// How a store is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    /// Created if missing, brought to this build's schema: what a runner (and `migrate`) opens.
    Create,
    /// One that exists already at this build's schema, to write to: an operator's command never
    /// creates or upgrades a database.
    Existing,
    /// One that exists already at this build's schema, read-only and never changed: what a
    /// command that only reads opens (`lag`, `check`, a copy's or a preview's source), so the
    /// build in production can still open it afterwards, and a backup on a read-only mount can
    /// be inspected.
    AsIs,
}

/// How a service opens its stores. `bounda_sqlite::Files` opens files; `bounda_postgres`'s
/// opener opens servers and hands files to another.
#[crate::store::async_trait]
pub trait Opener: Send + Sync {
    /// The store at `address`, opened as `opening` says; `place` says where a server's tables go.
    async fn open(
        &self,
        address: &Address,
        place: &Place,
        opening: Opening,
    ) -> Result<Arc<dyn Store>, StoreError>;

    /// A new file at `path` to copy a store into.
    async fn new_file(&self, path: &Path) -> Result<Arc<dyn Store>, StoreError>;

    /// A copy of `from` in memory, to run a preview on; `source` names it in the copy's mark.
    async fn scratch_copy(
        &self,
        from: &dyn Store,
        source: &str,
    ) -> Result<Arc<dyn Store>, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Address {
        match text.parse() {
            Ok(address) => address,
            Err(never) => match never {},
        }
    }

    #[test]
    fn a_server_address_is_told_from_a_path_and_shown_without_its_password() {
        let server = read("postgres://shop:s3cret@db.internal:5432/shop");
        assert!(matches!(server, Address::Server(_)));
        assert_eq!(
            server.to_string(),
            "postgres://shop:***@db.internal:5432/shop"
        );
        assert_eq!(format!("{server:?}"), server.to_string());
        let plain = read("postgresql://shop@db/shop");
        assert_eq!(plain.to_string(), "postgresql://shop@db/shop");
        let slash = read("postgres://shop:a/b@db/shop?sslmode=disable&password=x");
        assert_eq!(
            slash.to_string(),
            "postgres://shop:***@db/shop?sslmode=disable&password=***"
        );
        let pairs = read("host=db.internal dbname=shop password=s3cret");
        assert!(matches!(pairs, Address::Server(_)));
        assert_eq!(
            pairs.to_string(),
            "host=db.internal dbname=shop password=***"
        );
        let file = read("data/storefront.db");
        assert_eq!(file, Address::File(PathBuf::from("data/storefront.db")));
        let tls = read("host=db dbname=shop sslmode=require");
        assert!(
            matches!(tls, Address::Server(_)),
            "every key is the client's to check"
        );
        assert!(matches!(read("data/shop.db"), Address::File(_)));
        assert!(
            matches!(read("shop v2.db"), Address::File(_)),
            "words without `=`"
        );
    }
}
