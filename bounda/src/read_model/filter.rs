//! Typed conditions over a read model's columns: `OrderSummary::STATUS.eq("paid")`, combined
//! with `and` and `or`, ordered, limited; what a query or a projection's `update` and `delete`
//! say, rendered to SQL by [`render`](super::render).

use std::marker::PhantomData;

use crate::read_model::value::{ColumnType, SqlArg, SqlValue};

/// Column `T` of read model `R`: `#[read_model]` writes one per field, as an associated
/// constant named after it (`OrderSummary::CUSTOMER_ID`).
pub struct Column<R, T> {
    name: &'static str,
    marker: PhantomData<fn() -> (R, T)>,
}

impl<R, T> Clone for Column<R, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R, T> Copy for Column<R, T> {}

impl<R, T> std::fmt::Debug for Column<R, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Column({})", self.name)
    }
}

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `=`, or `IS NULL` against `NULL`.
    Eq,
    /// `<>`, or `IS NOT NULL` against `NULL`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
}

/// A condition on a table's rows, untyped: what a store renders.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// Every row.
    All,
    /// `column op value`.
    Compare {
        /// The column.
        column: &'static str,
        /// The comparison.
        op: Op,
        /// The value.
        value: SqlValue,
    },
    /// `column IN (values)`; no row for no values.
    In {
        /// The column.
        column: &'static str,
        /// The values.
        values: Vec<SqlValue>,
    },
    /// `column LIKE prefix%`, the prefix's own `%` and `_` taken as they are.
    StartsWith {
        /// The column.
        column: &'static str,
        /// The prefix.
        prefix: String,
    },
    /// Every one holds.
    And(Vec<Condition>),
    /// Any one holds.
    Or(Vec<Condition>),
    /// It does not hold.
    Not(Box<Condition>),
}

/// A condition on the rows of read model `R`.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter<R> {
    condition: Condition,
    marker: PhantomData<fn() -> R>,
}

impl<R> Filter<R> {
    fn new(condition: Condition) -> Filter<R> {
        Filter {
            condition,
            marker: PhantomData,
        }
    }

    /// Every row.
    pub fn all() -> Filter<R> {
        Filter::new(Condition::All)
    }

    /// Rows where this and `other` hold.
    pub fn and(self, other: Filter<R>) -> Filter<R> {
        Filter::new(match self.condition {
            Condition::All => other.condition,
            Condition::And(mut all) => {
                all.push(other.condition);
                Condition::And(all)
            }
            condition => Condition::And(vec![condition, other.condition]),
        })
    }

    /// Rows where this or `other` holds.
    pub fn or(self, other: Filter<R>) -> Filter<R> {
        Filter::new(match self.condition {
            Condition::Or(mut any) => {
                any.push(other.condition);
                Condition::Or(any)
            }
            condition => Condition::Or(vec![condition, other.condition]),
        })
    }

    /// Rows where this does not hold.
    #[allow(
        clippy::should_implement_trait,
        reason = "reads as the filter it builds"
    )]
    pub fn not(self) -> Filter<R> {
        Filter::new(Condition::Not(Box::new(self.condition)))
    }

    /// The condition, for a store.
    pub fn condition(&self) -> &Condition {
        &self.condition
    }
}

impl<R, T> Column<R, T> {
    /// The column named `name`. Written by `#[read_model]`.
    pub const fn new(name: &'static str) -> Column<R, T> {
        Column {
            name,
            marker: PhantomData,
        }
    }

    /// Its name.
    pub const fn name(self) -> &'static str {
        self.name
    }
}

impl<R, T: ColumnType> Column<R, T> {
    fn compare(self, op: Op, value: impl SqlArg<T>) -> Filter<R> {
        Filter::new(Condition::Compare {
            column: self.name,
            op,
            value: value.into_sql(),
        })
    }

    /// Rows whose value is `value` (`NULL` for `None`).
    pub fn eq(self, value: impl SqlArg<T>) -> Filter<R> {
        self.compare(Op::Eq, value)
    }

    /// Rows whose value is not `value`.
    pub fn ne(self, value: impl SqlArg<T>) -> Filter<R> {
        self.compare(Op::Ne, value)
    }

    /// Rows whose value is below `value`.
    pub fn lt(self, value: impl SqlArg<T>) -> Filter<R> {
        self.compare(Op::Lt, value)
    }

    /// Rows whose value is at most `value`.
    pub fn le(self, value: impl SqlArg<T>) -> Filter<R> {
        self.compare(Op::Le, value)
    }

    /// Rows whose value is above `value`.
    pub fn gt(self, value: impl SqlArg<T>) -> Filter<R> {
        self.compare(Op::Gt, value)
    }

    /// Rows whose value is at least `value`.
    pub fn ge(self, value: impl SqlArg<T>) -> Filter<R> {
        self.compare(Op::Ge, value)
    }

    /// Rows whose value is one of `values`.
    pub fn is_in<A: SqlArg<T>>(self, values: impl IntoIterator<Item = A>) -> Filter<R> {
        Filter::new(Condition::In {
            column: self.name,
            values: values.into_iter().map(SqlArg::into_sql).collect(),
        })
    }

    /// Rows whose value is `NULL`.
    pub fn is_null(self) -> Filter<R> {
        Filter::new(Condition::Compare {
            column: self.name,
            op: Op::Eq,
            value: SqlValue::Null,
        })
    }

    /// Rows whose value is not `NULL`.
    pub fn is_not_null(self) -> Filter<R> {
        Filter::new(Condition::Compare {
            column: self.name,
            op: Op::Ne,
            value: SqlValue::Null,
        })
    }

    /// Rows ordered by this column, smallest first.
    pub fn asc(self) -> OrderBy {
        OrderBy {
            column: self.name,
            descending: false,
        }
    }

    /// Rows ordered by this column, largest first.
    pub fn desc(self) -> OrderBy {
        OrderBy {
            column: self.name,
            descending: true,
        }
    }

    /// Sets this column to `value`, in an update.
    pub fn set(self, value: impl SqlArg<T>) -> Set<R> {
        Set {
            column: self.name,
            value: value.into_sql(),
            marker: PhantomData,
        }
    }
}

impl<R> Column<R, String> {
    /// Rows whose text starts with `prefix`.
    pub fn starts_with(self, prefix: &str) -> Filter<R> {
        Filter::new(Condition::StartsWith {
            column: self.name,
            prefix: prefix.to_owned(),
        })
    }
}

/// One column a selection is ordered by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrderBy {
    /// The column.
    pub column: &'static str,
    /// Largest first.
    pub descending: bool,
}

/// A column set to a value, in an update.
#[derive(Debug, Clone, PartialEq)]
pub struct Set<R> {
    column: &'static str,
    value: SqlValue,
    marker: PhantomData<fn() -> R>,
}

impl<R> Set<R> {
    /// The column and its value, for a store.
    pub fn parts(&self) -> (&'static str, &SqlValue) {
        (self.column, &self.value)
    }
}

/// Which rows of read model `R` to read, in what order, how many: `Select::filter(..)`,
/// `.order(..)`, `.limit(..)`, `.offset(..)`. Rows come in key order when no order is given,
/// and in key order among equals, so pages never overlap.
#[derive(Debug, Clone, PartialEq)]
pub struct Select<R> {
    selection: Selection,
    marker: PhantomData<fn() -> R>,
}

/// A selection, untyped: what a store renders.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    /// Which rows.
    pub filter: Condition,
    /// In what order, before the key.
    pub order: Vec<OrderBy>,
    /// At most how many.
    pub limit: Option<u64>,
    /// How many to skip first.
    pub offset: u64,
}

impl<R> Default for Select<R> {
    fn default() -> Self {
        Select::all()
    }
}

impl<R> Select<R> {
    /// Every row.
    pub fn all() -> Select<R> {
        Select {
            selection: Selection {
                filter: Condition::All,
                order: Vec::new(),
                limit: None,
                offset: 0,
            },
            marker: PhantomData,
        }
    }

    /// The rows `filter` holds for.
    pub fn filter(filter: Filter<R>) -> Select<R> {
        let mut select = Select::all();
        select.selection.filter = filter.condition;
        select
    }

    /// Ordered by `order`, then by what was given before it.
    pub fn order(mut self, order: OrderBy) -> Select<R> {
        self.selection.order.push(order);
        self
    }

    /// At most `limit` rows.
    pub fn limit(mut self, limit: u64) -> Select<R> {
        self.selection.limit = Some(limit);
        self
    }

    /// Skipping the first `offset` rows.
    pub fn offset(mut self, offset: u64) -> Select<R> {
        self.selection.offset = offset;
        self
    }

    /// The selection, for a store.
    pub fn selection(&self) -> &Selection {
        &self.selection
    }
}

impl<R> From<Filter<R>> for Select<R> {
    fn from(filter: Filter<R>) -> Select<R> {
        Select::filter(filter)
    }
}
