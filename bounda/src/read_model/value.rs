//! What a read model's columns hold: the SQL types bounda maps fields to, the values it binds,
//! and [`ColumnType`], which says how a Rust type is stored.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Instant;

/// The SQL type of a column. Each store names it in its own dialect (`TEXT`, `BIGINT`,
/// `TIMESTAMPTZ`, `JSONB` on PostgreSQL; `TEXT`, `INTEGER`, `REAL` on SQLite, where a moment is
/// its RFC 3339 text, which sorts as time does, and a boolean is 0 or 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SqlType {
    /// Text.
    Text,
    /// A 64-bit signed integer.
    Integer,
    /// A 64-bit float.
    Real,
    /// True or false.
    Boolean,
    /// A moment, to the millisecond.
    Timestamp,
    /// A JSON document.
    Json,
}

impl SqlType {
    /// The type's name as a declaration shows it.
    pub fn name(self) -> &'static str {
        match self {
            SqlType::Text => "text",
            SqlType::Integer => "integer",
            SqlType::Real => "real",
            SqlType::Boolean => "boolean",
            SqlType::Timestamp => "timestamp",
            SqlType::Json => "json",
        }
    }
}

/// A value bound to a statement or read from a row.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    /// SQL `NULL`.
    Null,
    /// Text.
    Text(String),
    /// An integer.
    Integer(i64),
    /// An unsigned integer, stored as a signed one: a store refuses one above `i64::MAX`.
    Unsigned(u64),
    /// A float.
    Real(f64),
    /// True or false.
    Boolean(bool),
    /// A moment.
    Timestamp(Instant),
    /// A JSON document.
    Json(serde_json::Value),
    /// A field that could not be written, with why (a `Json<T>` serde cannot write as JSON):
    /// a store refuses to bind it, so the write fails naming it rather than storing `null`.
    Unwritable(String),
}

impl SqlValue {
    /// The value as a signed integer, for a store that binds one: an unsigned one above
    /// `i64::MAX` is refused, never wrapped.
    pub fn to_i64(&self) -> Result<Option<i64>, ColumnError> {
        match self {
            SqlValue::Integer(n) => Ok(Some(*n)),
            SqlValue::Unsigned(n) => i64::try_from(*n).map(Some).map_err(|_| {
                ColumnError::new(format!(
                    "{n} does not fit an integer column, whose largest value is {}",
                    i64::MAX
                ))
            }),
            SqlValue::Boolean(b) => Ok(Some(i64::from(*b))),
            _ => Ok(None),
        }
    }

    /// What kind of value it is, for an error.
    fn kind(&self) -> &'static str {
        match self {
            SqlValue::Null => "NULL",
            SqlValue::Text(_) => "text",
            SqlValue::Integer(_) | SqlValue::Unsigned(_) => "an integer",
            SqlValue::Real(_) => "a real",
            SqlValue::Boolean(_) => "a boolean",
            SqlValue::Timestamp(_) => "a moment",
            SqlValue::Json(_) => "JSON",
            SqlValue::Unwritable(_) => "an unwritable value",
        }
    }
}

macro_rules! sql_value_from {
    ($($ty:ty => $variant:ident),*) => {$(
        impl From<$ty> for SqlValue {
            fn from(value: $ty) -> SqlValue {
                SqlValue::$variant(value.into())
            }
        }
    )*};
}

sql_value_from!(String => Text, &str => Text, i64 => Integer, i32 => Integer, u64 => Unsigned,
    u32 => Unsigned, f64 => Real, bool => Boolean, Instant => Timestamp,
    serde_json::Value => Json);

/// A value that does not fit its column, or a column value its field cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ColumnError {
    message: String,
}

impl ColumnError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> ColumnError {
        ColumnError {
            message: message.into(),
        }
    }

    /// The same error, said of column `column`.
    pub fn in_column(self, column: &str) -> ColumnError {
        ColumnError::new(format!("column `{column}`: {}", self.message))
    }
}

fn unexpected(expected: &str, found: &SqlValue) -> ColumnError {
    ColumnError::new(format!("expected {expected}, found {}", found.kind()))
}

/// A Rust type a read model's field can have: how it is stored and read back.
///
/// Implemented for `String`, the integers up to 64 bits, `f64`, `bool`, [`Instant`],
/// `serde_json::Value`, [`Json<T>`] for any serde type, and `Option<T>` of those (a column
/// that may be `NULL`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a read model's column",
    label = "not a column type",
    note = "a column holds a `String`, an integer, `f64`, `bool`, `Instant`, `serde_json::Value` or an `Option` of one; wrap a structured value in `Json<..>`, which stores it as JSON"
)]
pub trait ColumnType: Sized + Send + Sync + 'static {
    /// The column's SQL type.
    const SQL_TYPE: SqlType;
    /// Whether the column may be `NULL`.
    const NULLABLE: bool = false;

    /// The value to store.
    fn to_sql(&self) -> SqlValue;

    /// The field from a stored value.
    fn from_sql(value: SqlValue) -> Result<Self, ColumnError>;
}

impl ColumnType for String {
    const SQL_TYPE: SqlType = SqlType::Text;

    fn to_sql(&self) -> SqlValue {
        SqlValue::Text(self.clone())
    }

    fn from_sql(value: SqlValue) -> Result<Self, ColumnError> {
        match value {
            SqlValue::Text(text) => Ok(text),
            other => Err(unexpected("text", &other)),
        }
    }
}

macro_rules! integer_columns {
    ($($ty:ty => $variant:ident),*) => {$(
        impl ColumnType for $ty {
            const SQL_TYPE: SqlType = SqlType::Integer;

            fn to_sql(&self) -> SqlValue {
                SqlValue::$variant((*self).into())
            }

            fn from_sql(value: SqlValue) -> Result<Self, ColumnError> {
                let n = value.to_i64()?.ok_or_else(|| unexpected("an integer", &value))?;
                <$ty>::try_from(n).map_err(|_| {
                    ColumnError::new(format!(
                        "{n} does not fit a `{}`",
                        ::core::stringify!($ty)
                    ))
                })
            }
        }
    )*};
}

integer_columns!(i8 => Integer, i16 => Integer, i32 => Integer, i64 => Integer,
    u8 => Unsigned, u16 => Unsigned, u32 => Unsigned, u64 => Unsigned);

impl ColumnType for f64 {
    const SQL_TYPE: SqlType = SqlType::Real;

    fn to_sql(&self) -> SqlValue {
        SqlValue::Real(*self)
    }

    fn from_sql(value: SqlValue) -> Result<Self, ColumnError> {
        match value {
            SqlValue::Real(x) => Ok(x),
            // SQLite hands back a whole REAL as an integer.
            SqlValue::Integer(n) => Ok(n as f64),
            other => Err(unexpected("a real", &other)),
        }
    }
}

impl ColumnType for bool {
    const SQL_TYPE: SqlType = SqlType::Boolean;

    fn to_sql(&self) -> SqlValue {
        SqlValue::Boolean(*self)
    }

    fn from_sql(value: SqlValue) -> Result<Self, ColumnError> {
        match value {
            SqlValue::Boolean(b) => Ok(b),
            SqlValue::Integer(0) => Ok(false),
            SqlValue::Integer(1) => Ok(true),
            other => Err(unexpected("a boolean", &other)),
        }
    }
}

impl ColumnType for Instant {
    const SQL_TYPE: SqlType = SqlType::Timestamp;

    fn to_sql(&self) -> SqlValue {
        SqlValue::Timestamp(*self)
    }

    fn from_sql(value: SqlValue) -> Result<Self, ColumnError> {
        match value {
            SqlValue::Timestamp(at) => Ok(at),
            SqlValue::Text(text) => Instant::parse(&text)
                .map_err(|error| ColumnError::new(format!("`{text}` is not a moment: {error}"))),
            other => Err(unexpected("a moment", &other)),
        }
    }
}

impl ColumnType for serde_json::Value {
    const SQL_TYPE: SqlType = SqlType::Json;

    fn to_sql(&self) -> SqlValue {
        SqlValue::Json(self.clone())
    }

    fn from_sql(value: SqlValue) -> Result<Self, ColumnError> {
        match value {
            SqlValue::Json(json) => Ok(json),
            SqlValue::Text(text) => serde_json::from_str(&text)
                .map_err(|error| ColumnError::new(format!("the stored JSON is invalid: {error}"))),
            other => Err(unexpected("JSON", &other)),
        }
    }
}

impl<T: ColumnType> ColumnType for Option<T> {
    const SQL_TYPE: SqlType = T::SQL_TYPE;
    const NULLABLE: bool = true;

    fn to_sql(&self) -> SqlValue {
        match self {
            Some(value) => value.to_sql(),
            None => SqlValue::Null,
        }
    }

    fn from_sql(value: SqlValue) -> Result<Self, ColumnError> {
        match value {
            SqlValue::Null => Ok(None),
            value => T::from_sql(value).map(Some),
        }
    }
}

/// A structured field stored as one JSON column: `items: Json<Vec<Item>>`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Json<T>(pub T);

impl<T> std::ops::Deref for Json<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> std::ops::DerefMut for Json<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T: Serialize + DeserializeOwned + Send + Sync + 'static> ColumnType for Json<T> {
    const SQL_TYPE: SqlType = SqlType::Json;

    fn to_sql(&self) -> SqlValue {
        // A serde type that cannot be JSON (a map with non-string keys) is refused when bound.
        match serde_json::to_value(&self.0) {
            Ok(json) => SqlValue::Json(json),
            Err(error) => SqlValue::Unwritable(format!("cannot write it as JSON: {error}")),
        }
    }

    fn from_sql(value: SqlValue) -> Result<Self, ColumnError> {
        let json = serde_json::Value::from_sql(value)?;
        serde_json::from_value(json)
            .map(Json)
            .map_err(|error| ColumnError::new(format!("the stored JSON does not fit: {error}")))
    }
}

/// A value a column of type `T` can be compared with or set to: a `T`, a reference to one,
/// a `&str` for a text column, or the inner value for an `Option` column.
pub trait SqlArg<T> {
    /// The value to bind.
    fn into_sql(self) -> SqlValue;
}

impl<T: ColumnType> SqlArg<T> for T {
    fn into_sql(self) -> SqlValue {
        self.to_sql()
    }
}

impl<T: ColumnType> SqlArg<T> for &T {
    fn into_sql(self) -> SqlValue {
        self.to_sql()
    }
}

impl SqlArg<String> for &str {
    fn into_sql(self) -> SqlValue {
        SqlValue::Text(self.to_owned())
    }
}

impl SqlArg<Option<String>> for &str {
    fn into_sql(self) -> SqlValue {
        SqlValue::Text(self.to_owned())
    }
}

impl<T: ColumnType> SqlArg<Option<T>> for T {
    fn into_sql(self) -> SqlValue {
        self.to_sql()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unsigned_value_beyond_the_signed_range_is_refused_not_wrapped() {
        assert_eq!(SqlValue::Unsigned(7).to_i64(), Ok(Some(7)));
        let error = SqlValue::Unsigned(u64::MAX).to_i64().unwrap_err();
        assert!(error.to_string().contains("does not fit"), "{error}");
    }

    #[test]
    fn values_read_back_as_they_were_stored() {
        assert_eq!(u32::from_sql(7u32.to_sql()), Ok(7));
        assert!(u8::from_sql(SqlValue::Integer(300)).is_err());
        assert_eq!(Option::<i64>::from_sql(SqlValue::Null), Ok(None));
        assert_eq!(bool::from_sql(SqlValue::Integer(1)), Ok(true));
        let at = Instant::from_millis(1_700_000_000_123).unwrap();
        assert_eq!(Instant::from_sql(SqlValue::Text(at.to_string())), Ok(at));
        let items = Json(vec![1u32, 2]);
        assert_eq!(Json::<Vec<u32>>::from_sql(items.to_sql()), Ok(items));
        let keyed = Json(std::collections::BTreeMap::from([((1u8, 2u8), 3u8)]));
        assert!(
            matches!(keyed.to_sql(), SqlValue::Unwritable(why) if why.contains("as JSON")),
            "a map whose keys JSON cannot hold is refused, not stored as null"
        );
        let error = String::from_sql(SqlValue::Integer(1)).unwrap_err();
        assert_eq!(
            error.in_column("name").to_string(),
            "column `name`: expected text, found an integer"
        );
    }
}
