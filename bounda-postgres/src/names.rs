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

    pub(crate) fn schema(&self) -> &str {
        &self.schema
    }

    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `schema.prefix`, to put before a table's name.
    pub(crate) fn tables(&self) -> String {
        format!("{}.{}", self.schema, self.prefix)
    }

    /// The advisory lock of these tables' migrations: the same number for the same names on
    /// every machine (FNV-1a).
    pub(crate) fn lock_key(&self) -> i64 {
        let mut hash = 0xcbf2_9ce4_8422_2325_u64;
        for byte in self.tables().bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        hash as i64
    }
}

/// A lowercase identifier: a letter or `_`, then letters, digits or `_`, at most 40 bytes; a
/// prefix may be empty.
fn check(what: &str, name: &str, may_be_empty: bool) -> Result<(), StoreError> {
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
        assert_eq!(Names::new("bounda", "").unwrap().tables(), "bounda.");
        assert_eq!(
            Names::new("app_2", "shop_").unwrap().tables(),
            "app_2.shop_"
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
    }
}
