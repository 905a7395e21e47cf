//! A row of plain SQL, its values by column name: what the escape hatch beside the table calls
//! answers.

use std::sync::Arc;

use crate::read_model::value::{ColumnError, ColumnType, SqlValue};

/// One row of plain SQL: its values by column name.
#[derive(Debug, Clone, PartialEq)]
pub struct SqlRow {
    columns: Arc<[String]>,
    values: Vec<SqlValue>,
}

impl SqlRow {
    /// A row of `values` under `columns`. Made by a store.
    pub fn new(columns: Arc<[String]>, values: Vec<SqlValue>) -> SqlRow {
        SqlRow { columns, values }
    }

    /// The column names, in order.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// The values, in column order.
    pub fn values(&self) -> &[SqlValue] {
        &self.values
    }

    /// Column `column`'s value as a `T`; an error names a column the row does not have, or a
    /// value that is not a `T`.
    pub fn get<T: ColumnType>(&self, column: &str) -> Result<T, ColumnError> {
        let index = self
            .columns
            .iter()
            .position(|name| name == column)
            .ok_or_else(|| {
                ColumnError::new(format!(
                    "the row has no column `{column}`; it has {}",
                    self.columns.join(", ")
                ))
            })?;
        T::from_sql(self.values[index].clone()).map_err(|error| error.in_column(column))
    }
}
