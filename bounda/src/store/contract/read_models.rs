//! The read model part of the contract: tables made and brought up at start, a batch written
//! with its checkpoint or not at all, holds counted.

use futures_util::future::BoxFuture;

use crate::read_model::render::{self, Statement};
use crate::read_model::{ColumnDef, Condition, Selection, SqlType, SqlValue, TableDef};
use crate::store::Store;
use crate::store::read_models::{
    Batch, Held, ProjectError, Projected, Projector, ReadModelStore, Rows,
};

const fn column(name: &'static str, sql_type: SqlType) -> ColumnDef {
    ColumnDef {
        name,
        sql_type,
        nullable: false,
        key: false,
        unique: false,
        index: false,
    }
}

const ID: ColumnDef = ColumnDef {
    key: true,
    ..column("id", SqlType::Text)
};
const TOTAL: ColumnDef = column("total", SqlType::Integer);
const PAID_AT: ColumnDef = ColumnDef {
    nullable: true,
    ..column("paid_at", SqlType::Timestamp)
};
const REFERENCE: ColumnDef = ColumnDef {
    unique: true,
    nullable: true,
    ..column("reference", SqlType::Text)
};

/// The table as a first build declares it.
const V1: TableDef = TableDef {
    name: "contract-orders",
    columns: &[ID, TOTAL, PAID_AT, REFERENCE],
};

const SUBSCRIBER: &str = "read-model:contract-orders";

fn tables(store: &dyn Store) -> &dyn ReadModelStore {
    super::kept(store.capabilities().read_models())
}

/// Upserts `rows` (id, total) into V1's columns, failing before the row at `fail_at`.
struct Upserts {
    rows: Vec<(&'static str, i64)>,
    fail_at: Option<usize>,
}

impl Projector for Upserts {
    fn apply<'t>(&'t mut self, rows: &'t mut dyn Rows) -> BoxFuture<'t, Result<(), ProjectError>> {
        Box::pin(async move {
            for (index, (id, total)) in self.rows.iter().enumerate() {
                if self.fail_at == Some(index) {
                    return Err(ProjectError::Failed {
                        event: index,
                        message: "planted".into(),
                    });
                }
                let statement = render::upsert(
                    rows.dialect(),
                    rows.target(),
                    &V1,
                    vec![
                        SqlValue::Text((*id).into()),
                        SqlValue::Integer(*total),
                        SqlValue::Null,
                        SqlValue::Null,
                    ],
                );
                rows.execute(&statement).await?;
            }
            Ok(())
        })
    }
}

/// Every row of `table` as (id, total), in key order.
async fn totals(store: &dyn Store, table: &TableDef) -> Vec<(String, i64)> {
    let tables = tables(store);
    let target = tables.target(table, None);
    let selection = Selection {
        filter: Condition::All,
        order: Vec::new(),
        limit: None,
        offset: 0,
    };
    let statement: Statement = render::select(tables.dialect(), &target, table, &selection);
    let types: Vec<SqlType> = table.columns.iter().map(|c| c.sql_type).collect();
    tables
        .query(&statement, &types)
        .await
        .unwrap()
        .into_iter()
        .map(|row| match (&row[0], &row[1]) {
            (SqlValue::Text(id), SqlValue::Integer(total)) => (id.clone(), *total),
            other => panic!("unexpected row {other:?}"),
        })
        .collect()
}

async fn project(
    store: &dyn Store,
    from: u64,
    to: u64,
    projector: &mut Upserts,
) -> Result<Projected, ProjectError> {
    project_into(store, from, to, None, projector).await
}

/// `project` into the live table, or into the shadow of rebuild `rebuild`.
async fn project_into(
    store: &dyn Store,
    from: u64,
    to: u64,
    rebuild: Option<&str>,
    projector: &mut Upserts,
) -> Result<Projected, ProjectError> {
    let batch = Batch {
        table: &V1,
        subscriber: SUBSCRIBER,
        from,
        to,
        declared: &V1.declared(),
        rebuild,
    };
    tables(store).project(&batch, projector).await
}

fn upserts(rows: &[(&'static str, i64)]) -> Upserts {
    Upserts {
        rows: rows.to_vec(),
        fail_at: None,
    }
}

// Issue 22: a rebuild fills a shadow table under its fingerprint, resumes under the same, is
// superseded by another, swaps in one transaction (again and again under one fingerprint), and
// is abandoned leaving the live table alone.
pub async fn a_rebuild_resumes_is_superseded_swaps_and_is_abandoned(store: &dyn Store) {
    let tables = tables(store);
    tables.ensure(&V1).await.unwrap();
    assert!(store.move_checkpoint(SUBSCRIBER, None, 0).await.unwrap());
    let live = project(store, 0, 1, &mut upserts(&[("o-1", 10)])).await;
    assert_eq!(live.unwrap(), Projected::Applied);

    assert_eq!(tables.start_rebuild(&V1, "fp-a").await.unwrap(), 0);
    let rows = [("o-1", 11), ("o-2", 20)];
    let slice = project_into(store, 0, 5, Some("fp-a"), &mut upserts(&rows)).await;
    assert_eq!(slice.unwrap(), Projected::Applied);
    let under_way = tables.rebuilding(V1.name).await.unwrap();
    assert_eq!(under_way, Some(("fp-a".to_owned(), 5)));
    assert_eq!(
        tables.start_rebuild(&V1, "fp-a").await.unwrap(),
        5,
        "resumed"
    );
    let serving = totals(store, &V1).await;
    assert_eq!(serving, [("o-1".to_owned(), 10)], "the live table serves");

    // Other code starts afresh; the older rebuild's next slice is told.
    assert_eq!(tables.start_rebuild(&V1, "fp-b").await.unwrap(), 0);
    let late = project_into(store, 5, 6, Some("fp-a"), &mut upserts(&[("o-9", 9)])).await;
    assert_eq!(late.unwrap(), Projected::Superseded);
    let slice = project_into(store, 0, 7, Some("fp-b"), &mut upserts(&[("o-3", 30)])).await;
    assert_eq!(slice.unwrap(), Projected::Applied);
    assert!(!tables.finish_rebuild(&V1, "fp-a").await.unwrap());
    assert!(tables.finish_rebuild(&V1, "fp-b").await.unwrap());
    assert_eq!(totals(store, &V1).await, [("o-3".to_owned(), 30)]);
    assert_eq!(store.checkpoint(SUBSCRIBER).await.unwrap(), Some(7));
    assert_eq!(tables.rebuilding(V1.name).await.unwrap(), None);
    // The swapped table is fed as the live one was.
    let fed = project(store, 7, 8, &mut upserts(&[("o-4", 40)])).await;
    assert_eq!(fed.unwrap(), Projected::Applied);

    // The same code again: a shadow of the same name, swapped in again.
    assert_eq!(tables.start_rebuild(&V1, "fp-b").await.unwrap(), 0);
    assert!(tables.finish_rebuild(&V1, "fp-b").await.unwrap());
    assert_eq!(totals(store, &V1).await, []);
    assert_eq!(store.checkpoint(SUBSCRIBER).await.unwrap(), Some(0));

    // Abandoned, the shadow goes and the live table stays.
    let fed = project(store, 0, 1, &mut upserts(&[("o-5", 50)])).await;
    assert_eq!(fed.unwrap(), Projected::Applied);
    assert_eq!(tables.start_rebuild(&V1, "fp-c").await.unwrap(), 0);
    tables.abandon_rebuild(&V1, "fp-c").await.unwrap();
    assert_eq!(tables.rebuilding(V1.name).await.unwrap(), None);
    assert_eq!(totals(store, &V1).await, [("o-5".to_owned(), 50)]);
}

// Issue 22: a new field becomes a column and a new index is built; what the table cannot
// become in place is refused, naming the rebuild.
pub async fn read_model_tables_are_made_and_brought_up_at_start(store: &dyn Store) {
    let tables = tables(store);
    tables.ensure(&V1).await.unwrap();
    tables.ensure(&V1).await.unwrap();
    assert!(store.move_checkpoint(SUBSCRIBER, None, 0).await.unwrap());
    let mut one = Upserts {
        rows: vec![("o-1", 10)],
        fail_at: None,
    };
    assert_eq!(
        project(store, 0, 1, &mut one).await.unwrap(),
        Projected::Applied
    );

    const NOTE: ColumnDef = ColumnDef {
        nullable: true,
        index: true,
        ..column("note", SqlType::Text)
    };
    const ITEMS: ColumnDef = column("items", SqlType::Integer);
    const FLAG: ColumnDef = column("flag", SqlType::Boolean);
    const INDEXED_TOTAL: ColumnDef = ColumnDef {
        index: true,
        ..TOTAL
    };
    let v2 = TableDef {
        name: "contract-orders",
        columns: &[ID, INDEXED_TOTAL, PAID_AT, REFERENCE, NOTE, ITEMS, FLAG],
    };
    tables.ensure(&v2).await.unwrap();
    // A process of the build before, still running, no longer writes the table.
    let stale = Batch {
        table: &V1,
        subscriber: SUBSCRIBER,
        from: 1,
        to: 2,
        declared: &V1.declared(),
        rebuild: None,
    };
    let mut nothing = Upserts {
        rows: Vec::new(),
        fail_at: None,
    };
    assert_eq!(
        tables.project(&stale, &mut nothing).await.unwrap(),
        Projected::Outdated
    );
    assert_eq!(store.checkpoint(SUBSCRIBER).await.unwrap(), Some(1));
    let target = tables.target(&v2, None);
    let selection = Selection {
        filter: Condition::All,
        order: Vec::new(),
        limit: None,
        offset: 0,
    };
    let statement = render::select(tables.dialect(), &target, &v2, &selection);
    let types: Vec<SqlType> = v2.columns.iter().map(|c| c.sql_type).collect();
    let rows = tables.query(&statement, &types).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0][4], SqlValue::Null, "a new optional column is NULL");
    assert_eq!(
        rows[0][5],
        SqlValue::Integer(0),
        "a new column takes its type's zero"
    );
    assert!(
        matches!(rows[0][6], SqlValue::Boolean(false) | SqlValue::Integer(0)),
        "{:?}",
        rows[0][6]
    );

    // The new indexes are there: total's and note's.
    let indexes = match tables.dialect() {
        crate::read_model::render::Dialect::Sqlite => tables
            .sql(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = $1 AND sql IS NOT NULL",
                &[target.bare.clone().into()],
            )
            .await
            .unwrap(),
        crate::read_model::render::Dialect::Postgres => tables
            .sql(
                "SELECT indexname AS name FROM pg_indexes WHERE tablename = $1 AND indexname NOT LIKE '%pkey'",
                &[target.bare.clone().into()],
            )
            .await
            .unwrap(),
    };
    let names: Vec<String> = indexes.iter().map(|row| row.get("name").unwrap()).collect();
    for column in ["total", "note", "reference"] {
        assert!(
            names
                .iter()
                .any(|name| name.contains(&format!("_{column}_"))),
            "an index on `{column}`: {names:?}"
        );
    }

    const TOTAL_REAL: ColumnDef = column("total", SqlType::Real);
    const PLAIN_REFERENCE: ColumnDef = ColumnDef {
        unique: false,
        ..REFERENCE
    };
    const WHEN: ColumnDef = column("when", SqlType::Timestamp);
    let refused: [(&[ColumnDef], &str); 4] = [
        (
            &[ID, INDEXED_TOTAL, PAID_AT, REFERENCE, NOTE, ITEMS],
            "field `flag` was removed",
        ),
        (
            &[ID, TOTAL_REAL, PAID_AT, REFERENCE, NOTE, ITEMS, FLAG],
            "field `total` was integer and is now real",
        ),
        (
            &[
                ID,
                INDEXED_TOTAL,
                PAID_AT,
                PLAIN_REFERENCE,
                NOTE,
                ITEMS,
                FLAG,
            ],
            "`reference` is no longer unique",
        ),
        (
            &[
                ID,
                INDEXED_TOTAL,
                PAID_AT,
                REFERENCE,
                NOTE,
                ITEMS,
                FLAG,
                WHEN,
            ],
            "new field `when`",
        ),
    ];
    for (columns, problem) in refused {
        let table = TableDef {
            name: "contract-orders",
            columns,
        };
        let error = tables.ensure(&table).await.unwrap_err().to_string();
        assert!(error.contains(problem), "{error}");
        assert!(error.contains("rebuild contract-orders"), "{error}");
    }
    // Refused, the table is as it was, and still takes the declaration it had.
    tables.ensure(&v2).await.unwrap();
    assert_eq!(totals(store, &v2).await, [("o-1".to_owned(), 10)]);
}

// Issue 22: a batch applies its rows and moves its checkpoint in one transaction.
pub async fn a_read_model_batch_writes_its_rows_with_its_checkpoint_or_nothing(store: &dyn Store) {
    tables(store).ensure(&V1).await.unwrap();
    assert!(store.move_checkpoint(SUBSCRIBER, None, 0).await.unwrap());
    let mut first = Upserts {
        rows: vec![("o-1", 10), ("o-2", 20)],
        fail_at: None,
    };
    assert_eq!(
        project(store, 0, 2, &mut first).await.unwrap(),
        Projected::Applied
    );
    assert_eq!(store.checkpoint(SUBSCRIBER).await.unwrap(), Some(2));

    // A batch that began where the checkpoint no longer is writes nothing.
    let mut stale = Upserts {
        rows: vec![("o-1", 99)],
        fail_at: None,
    };
    assert_eq!(
        project(store, 0, 2, &mut stale).await.unwrap(),
        Projected::Moved
    );

    // A failing projection rolls back the rows before it and the checkpoint.
    let mut failing = Upserts {
        rows: vec![("o-1", 11), ("o-3", 30)],
        fail_at: Some(1),
    };
    let error = project(store, 2, 4, &mut failing).await.unwrap_err();
    assert!(
        matches!(error, ProjectError::Failed { event: 1, .. }),
        "{error}"
    );
    assert_eq!(store.checkpoint(SUBSCRIBER).await.unwrap(), Some(2));
    assert_eq!(
        totals(store, &V1).await,
        [("o-1".to_owned(), 10), ("o-2".to_owned(), 20)]
    );

    // Upserts are idempotent: the same batch again leaves the same rows.
    let mut again = Upserts {
        rows: vec![("o-1", 11), ("o-1", 12)],
        fail_at: None,
    };
    assert_eq!(
        project(store, 2, 4, &mut again).await.unwrap(),
        Projected::Applied
    );
    assert_eq!(
        totals(store, &V1).await,
        [("o-1".to_owned(), 12), ("o-2".to_owned(), 20)]
    );
}

// Issue 22: `lag` shows what a read model is held on, and how many times it failed there.
pub async fn a_read_model_hold_counts_its_attempts_at_one_event(store: &dyn Store) {
    const HELD: TableDef = TableDef {
        name: "contract-held",
        columns: &[ID],
    };
    let tables = tables(store);
    tables.ensure(&HELD).await.unwrap();
    assert_eq!(tables.holds().await.unwrap(), []);
    let at = super::t("2026-01-01T00:00:00Z");
    let mut held = Held {
        read_model: HELD.name.to_owned(),
        position: 7,
        event_id: "e-7".into(),
        event_type: "OrderPlaced".into(),
        message: "planted".into(),
        attempts: 1,
        failed_at: at,
        retry_at: at + crate::seconds(1),
    };
    tables.hold(&held).await.unwrap();
    tables.hold(&held).await.unwrap();
    assert_eq!(tables.holds().await.unwrap()[0].attempts, 2);
    held.position = 9;
    held.message = "another".into();
    tables.hold(&held).await.unwrap();
    assert_eq!(tables.holds().await.unwrap(), [held]);
}
