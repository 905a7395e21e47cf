//! What a database address says beyond what `tokio_postgres` reads, taken out of it: its TLS
//! (`sslmode`, `sslrootcert`, as libpq reads them) and whether it is a pooler in transaction
//! mode (`pool_mode=transaction`, PgBouncer's own name for it). Both forms of address:
//! `postgres://..?sslmode=..&..` and `key=value` pairs separated by spaces.

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
}

/// Splits `url` into what `tokio_postgres` reads and the store's own settings.
pub(crate) fn split(url: &str) -> Result<Address, StoreError> {
    let mut tls = tls::Settings::default();
    let mut pooled = false;
    let mut take = |key: &str, value: &str| -> Result<bool, StoreError> {
        if key == "pool_mode" {
            pooled = match value {
                "transaction" => true,
                "session" => false,
                other => {
                    return Err(StoreError::new(format!(
                        "`pool_mode={other}` in the database address is not a mode: use \
                         `transaction` for a pooler in transaction mode, or leave it out"
                    )));
                }
            };
            return Ok(true);
        }
        tls.take(key, value)
    };
    let rest = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        match url.split_once('?') {
            None => url.to_owned(),
            Some((base, query)) => {
                let mut kept = Vec::new();
                for pair in query.split('&') {
                    let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                    let value = percent_encoding::percent_decode_str(value).decode_utf8_lossy();
                    if !take(key, &value)? {
                        kept.push(pair);
                    }
                }
                match kept.is_empty() {
                    true => base.to_owned(),
                    false => format!("{base}?{}", kept.join("&")),
                }
            }
        }
    } else {
        let mut kept = Vec::new();
        for pair in url.split_whitespace() {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            if !take(key.trim(), value.trim_matches('\'').trim())? {
                kept.push(pair);
            }
        }
        kept.join(" ")
    };
    Ok(Address { rest, tls, pooled })
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
