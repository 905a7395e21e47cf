//! A stored row with a column that does not read (text that is not JSON, a moment that does not
//! parse, metadata of another shape). A store reads such a row anyway, marks it with the first
//! column that failed and keeps that column's text as stored, so the runtime fails that row
//! alone, naming it (a dead letter, a report line), and everything else goes on. Refusing the
//! whole read instead would let one hand-edited row stop every subscriber, deadline and
//! operator command behind it.

use std::fmt;

/// The column of a stored row that does not read: where, why, and its text as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// The table, as the store names it (`bounda_events`).
    pub table: String,
    /// The column (`payload`).
    pub column: String,
    /// Why it does not read.
    pub reason: String,
    /// Its text as stored, so that nothing of it is lost where the row is settled.
    pub stored: String,
}

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "column `{}` of `{}` does not read ({}); stored as {:?}",
            self.column, self.table, self.reason, self.stored
        )
    }
}

/// Reads the columns of one row, keeping the first that does not read: a store's row decoder
/// passes each fallible column through [`Columns::or`] and gives the row
/// [`Columns::unreadable`].
#[derive(Debug)]
pub struct Columns<'a> {
    table: &'a str,
    first: Option<Unreadable>,
}

impl<'a> Columns<'a> {
    /// The columns of a row of `table`.
    pub fn new(table: &'a str) -> Columns<'a> {
        Columns { table, first: None }
    }

    /// Column `column`'s value as `read` answered, or `instead` when it did not read, the row
    /// then marked with `column`, the reason and `stored` (its text as stored). Only the first
    /// column that does not read is kept.
    pub fn or<T, E: fmt::Display>(
        &mut self,
        column: &str,
        read: Result<T, E>,
        instead: T,
        stored: impl FnOnce() -> String,
    ) -> T {
        match read {
            Ok(value) => value,
            Err(error) => {
                if self.first.is_none() {
                    self.first = Some(Unreadable {
                        table: self.table.to_owned(),
                        column: column.to_owned(),
                        reason: error.to_string(),
                        stored: stored(),
                    });
                }
                instead
            }
        }
    }

    /// The first column that did not read, if any (boxed: rows that read are the rule, and
    /// carry one word for it).
    pub fn unreadable(self) -> Option<Box<Unreadable>> {
        self.first.map(Box::new)
    }
}
