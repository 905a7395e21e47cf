//! The schema and table prefix the tables live under, checked once, so every statement can
//! name them without quoting.

use bounda::store::StoreError;

/// Where the tables are: `<schema>.<prefix>events`, and so on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Names {
    schema: String,
    prefix: String,
}

impl Names {
    /// Refuses a schema or prefix that is not a plain lowercase identifier, naming it.
    pub(crate) fn new(schema: &str, prefix: &str) -> Result<Names, StoreError> {
        check("schema", schema, false)?;
        check("table prefix", prefix, true)?;
        Ok(Names {
            schema: schema.to_owned(),
            prefix: prefix.to_owned(),
        })
    }

    /// The schema, quoted: a name like `user` or `order` is a keyword unquoted.
    pub(crate) fn schema(&self) -> String {
        format!("\"{}\"", self.schema)
    }

    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `"schema".prefix`, to put before a table's name.
    pub(crate) fn tables(&self) -> String {
        format!("{}.{}", self.schema(), self.prefix)
    }

    /// `template` with every `{t}` naming these tables: `{t}events` is `"schema".prefix_events`.
    pub(crate) fn sql(&self, template: &str) -> String {
        template.replace("{t}", &self.tables())
    }

    /// The channel appends to these tables notify: `bounda_` and a hash of the names, short
    /// enough for any names (a channel is cut at 63 bytes) and distinct for distinct ones.
    pub(crate) fn channel(&self) -> String {
        format!("bounda_{:016x}", self.lock_key() as u64)
    }

    /// The advisory lock of these tables' migrations: the same number for the same names on
    /// every machine (FNV-1a).
    pub(crate) fn lock_key(&self) -> i64 {
        let mut hash = 0xcbf2_9ce4_8422_2325_u64;
        for byte in format!("{}\0{}", self.schema, self.prefix).bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        hash as i64
    }
}

/// A lowercase identifier: a letter or `_`, then letters, digits or `_`, at most 40 bytes; a
/// prefix may be empty.
fn check(what: &str, name: &str, may_be_empty: bool) -> Result<(), StoreError> {
    if what == "schema" && name.starts_with("pg_") {
        return Err(StoreError::new(format!(
            "the schema `{name}` begins with `pg_`, which PostgreSQL keeps for itself: choose one like `bounda`"
        )));
    }
    let valid = (may_be_empty && name.is_empty())
        || (name.len() <= 40
            && name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'));
    if valid {
        Ok(())
    } else {
        Err(StoreError::new(format!(
            "the {what} `{name}` is not a plain lowercase identifier (a letter or `_`, then letters, digits or `_`, at most 40): choose one like `bounda`"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_identifiers_and_errors_name_them() {
        assert_eq!(Names::new("bounda", "").unwrap().tables(), "\"bounda\".");
        assert_eq!(
            Names::new("user", "shop_").unwrap().tables(),
            "\"user\".shop_"
        );
        assert!(Names::new("pg_catalog", "").is_err());
        let long = "a".repeat(40);
        assert!(Names::new(&long, &long).unwrap().channel().len() < 64);
        assert_ne!(
            Names::new("a_b", "").unwrap().channel(),
            Names::new("a", "b_").unwrap().channel()
        );
        for (schema, prefix) in [("", "x_"), ("Bounda", ""), ("a;drop", ""), ("a", "x y")] {
            let error = Names::new(schema, prefix).unwrap_err().to_string();
            assert!(
                error.contains("not a plain lowercase identifier"),
                "{error}"
            );
        }
        assert_ne!(
            Names::new("a", "x_").unwrap().lock_key(),
            Names::new("b", "x_").unwrap().lock_key()
        );
        assert_ne!(
            Names::new("a_b", "").unwrap().channel(),
            Names::new("a", "b_").unwrap().channel()
        );
    }
}
