//! What a database address says beyond what `tokio_postgres` reads, taken out of it: its TLS
//! (`sslmode`, `sslrootcert`, as libpq reads them), whether it is a pooler in transaction mode
//! (`pool_mode=transaction`, PgBouncer's own name for it), and where the listening connection
//! goes past the pooler (`listen_host`, `listen_port`: the same address, at the server's host
//! and port). Both forms of address: `postgres://..?sslmode=..&..` and `key=value` pairs
//! separated by spaces.

use bounda::store::StoreError;

use crate::tls;

/// An address, split into what `tokio_postgres` reads and what the store reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Address {
    /// The address without the store's own settings.
    pub(crate) rest: String,
    /// Its TLS settings.
    pub(crate) tls: tls::Settings,
    /// Whether it names a pooler in transaction mode: `pool_mode=transaction`.
    pub(crate) pooled: bool,
    /// The address of the listening connection, when `listen_host` or `listen_port` names
    /// one: this address at that host (this one's by default) and port (5432 by default), its
    /// other settings kept.
    pub(crate) listen: Option<String>,
}

/// Splits `url` into what `tokio_postgres` reads and the store's own settings.
pub(crate) fn split(url: &str) -> Result<Address, StoreError> {
    let mut tls = tls::Settings::default();
    let mut pooled = false;
    let (mut listen_host, mut listen_port) = (None, None);
    // Whose each setting is: the TLS settings go with the listening address too.
    let mut take = |key: &str, value: &str| -> Result<Whose, StoreError> {
        match key {
            "listen_host" => listen_host = Some(value.to_owned()),
            "listen_port" => {
                listen_port = Some(value.parse::<u16>().map_err(|_| {
                    StoreError::new(format!(
                        "`listen_port={value}` in the database address is not a port"
                    ))
                })?)
            }
            "pool_mode" => {
                pooled = match value {
                    "transaction" => true,
                    "session" => false,
                    other => {
                        return Err(StoreError::new(format!(
                            "`pool_mode={other}` in the database address is not a mode: use \
                             `transaction` for a pooler in transaction mode, or leave it out"
                        )));
                    }
                }
            }
            _ => {
                return Ok(match tls.take(key, value)? {
                    true => Whose::Tls,
                    false => Whose::Theirs,
                });
            }
        }
        Ok(Whose::Pooling)
    };
    let url_form = url.starts_with("postgres://") || url.starts_with("postgresql://");
    let (base, pairs): (&str, Vec<&str>) = match url_form {
        true => match url.split_once('?') {
            None => (url, Vec::new()),
            Some((base, query)) => (base, query.split('&').collect()),
        },
        false => ("", url.split_whitespace().collect()),
    };
    let (mut theirs, mut with_tls) = (Vec::new(), Vec::new());
    for pair in pairs {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let whose = match url_form {
            true => take(
                key,
                &percent_encoding::percent_decode_str(value).decode_utf8_lossy(),
            )?,
            false => take(key.trim(), value.trim_matches('\'').trim())?,
        };
        if whose != Whose::Pooling {
            with_tls.push(pair);
        }
        if whose == Whose::Theirs {
            theirs.push(pair);
        }
    }
    let join = |pairs: &[&str]| match (url_form, pairs.is_empty()) {
        (true, true) => base.to_owned(),
        (true, false) => format!("{base}?{}", pairs.join("&")),
        (false, _) => pairs.join(" "),
    };
    let listen = match (listen_host, listen_port) {
        (None, None) => None,
        (host, port) => Some(elsewhere(
            &join(&with_tls),
            host.as_deref(),
            port.unwrap_or(5432),
        )),
    };
    Ok(Address {
        rest: join(&theirs),
        tls,
        pooled,
        listen,
    })
}

/// Whose a setting of an address is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Whose {
    /// The store's TLS: the listening connection's too.
    Tls,
    /// The store's pooler and listening settings.
    Pooling,
    /// `tokio_postgres`'s.
    Theirs,
}

/// `address` (without the store's settings) at `host` (its own when `None`) and `port`.
fn elsewhere(address: &str, host: Option<&str>, port: u16) -> String {
    if let Some(after) = address
        .strip_prefix("postgres://")
        .map(|after| ("postgres://", after))
        .or_else(|| {
            address
                .strip_prefix("postgresql://")
                .map(|after| ("postgresql://", after))
        })
    {
        let (scheme, after) = after;
        let end = after.find(['/', '?']).unwrap_or(after.len());
        let (authority, path) = after.split_at(end);
        let (user, hosts) = match authority.rsplit_once('@') {
            Some((user, hosts)) => (format!("{user}@"), hosts),
            None => (String::new(), authority),
        };
        // The first of the hosts, without its port (an IPv6 literal keeps its brackets).
        let own = hosts.split(',').next().unwrap_or_default();
        let own = match own.starts_with('[') {
            true => own.split_inclusive(']').next().unwrap_or(own),
            false => own.split(':').next().unwrap_or(own),
        };
        return format!("{scheme}{user}{}:{port}{path}", host.unwrap_or(own));
    }
    let mut own = None;
    let mut kept: Vec<&str> = Vec::new();
    for pair in address.split_whitespace() {
        match pair.split_once('=').map(|(key, value)| (key.trim(), value)) {
            Some(("host", value)) => own = own.or(Some(value)),
            Some(("hostaddr" | "port", _)) => {}
            _ => kept.push(pair),
        }
    }
    let host = host.or(own).unwrap_or("localhost");
    format!("{} host={host} port={port}", kept.join(" "))
        .trim()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::tls::Mode;

    #[test]
    fn the_settings_are_taken_out_of_either_form_of_address() {
        let address = split(
            "postgres://shop@db.internal/shop?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&application_name=w1&pool_mode=transaction",
        )
        .unwrap();
        assert_eq!(
            address.rest,
            "postgres://shop@db.internal/shop?application_name=w1"
        );
        assert_eq!(address.tls.mode, Mode::VerifyFull);
        assert_eq!(address.tls.root.as_deref(), Some(Path::new("/etc/ca.pem")));
        assert!(address.pooled);

        let address =
            split("host=db.internal user=shop sslmode=require sslrootcert=/etc/ca.pem").unwrap();
        assert_eq!(address.rest, "host=db.internal user=shop");
        assert_eq!(address.tls.mode, Mode::Require);
        assert!(!address.pooled);

        let address = split("host=pooler pool_mode=transaction").unwrap();
        assert_eq!(address.rest, "host=pooler");
        assert!(address.pooled);

        let address = split("postgres://shop@db.internal/shop").unwrap();
        assert_eq!(address.rest, "postgres://shop@db.internal/shop");
        assert_eq!(address.tls.mode, Mode::Prefer, "libpq's default");
        assert!(!address.pooled);
    }

    #[test]
    fn the_listening_address_is_the_same_at_the_servers_host_and_port() {
        let address = split(
            "postgres://shop:secret@pgbouncer:6432/shop?sslmode=verify-full&pool_mode=transaction&listen_host=db.internal",
        )
        .unwrap();
        assert_eq!(
            address.listen.as_deref(),
            Some("postgres://shop:secret@db.internal:5432/shop?sslmode=verify-full"),
            "the listening connection keeps the address's TLS"
        );
        let address =
            split("postgres://shop@pgbouncer:6432/shop?listen_port=5433&application_name=w1")
                .unwrap();
        assert_eq!(
            address.listen.as_deref(),
            Some("postgres://shop@pgbouncer:5433/shop?application_name=w1")
        );
        let address = split(
            "host=pgbouncer port=6432 user=shop pool_mode=transaction listen_host=/run/postgresql",
        )
        .unwrap();
        assert_eq!(
            address.listen.as_deref(),
            Some("user=shop host=/run/postgresql port=5432")
        );
        assert_eq!(split("postgres://db/shop").unwrap().listen, None);
        let refused = split("postgres://db/shop?listen_port=six").unwrap_err();
        assert!(
            refused.to_string().contains("`listen_port=six`"),
            "{refused}"
        );
    }

    #[test]
    fn a_mode_that_is_not_one_is_refused_naming_it() {
        let refused = split("postgres://db/shop?sslmode=verify_full").unwrap_err();
        assert!(
            refused.to_string().contains("`sslmode=verify_full`"),
            "{refused}"
        );
        let refused = split("postgres://db/shop?pool_mode=statement").unwrap_err();
        assert!(
            refused.to_string().contains("`pool_mode=statement`"),
            "{refused}"
        );
    }
}
