//! A read model's rows as its row type reads them, for the projections' table and for queries
//! alike.

use crate::Error;
use crate::read_model::ReadModel;
use crate::read_model::value::{ColumnType, SqlValue};

/// The SQL types of `R`'s columns, in order.
pub(crate) fn types<R: ReadModel>() -> Vec<crate::read_model::SqlType> {
    R::TABLE
        .columns
        .iter()
        .map(|column| column.sql_type)
        .collect()
}

/// Rows as `R`s.
pub(crate) fn decode<R: ReadModel>(rows: Vec<Vec<SqlValue>>) -> Result<Vec<R>, Error> {
    rows.into_iter()
        .map(|row| {
            R::from_row(row).map_err(|error| Error::UnreadableRow {
                read_model: R::NAME.to_owned(),
                message: error.to_string(),
            })
        })
        .collect()
}

/// The count a `COUNT(*)` answered.
pub(crate) fn count_of(read_model: &str, rows: Vec<Vec<SqlValue>>) -> Result<u64, Error> {
    let value = rows
        .into_iter()
        .next()
        .and_then(|row| row.into_iter().next());
    match value.map(u64::from_sql) {
        Some(Ok(count)) => Ok(count),
        _ => Err(Error::UnreadableRow {
            read_model: read_model.to_owned(),
            message: "a count answered no number".into(),
        }),
    }
}
