//! Read models on PostgreSQL: one process at a time writes a read model's batch; another that
//! finds it busy skips it rather than wait.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use std::sync::Arc;

use bounda::read_model::render;
use bounda::read_model::{ColumnDef, SqlType, SqlValue, TableDef};
use bounda::store::Store;
use bounda::store::read_models::{Batch, ProjectError, Projected, Projector, Rows};
use bounda_postgres::{Options, testing};
use futures_util::future::BoxFuture;
use tokio::sync::{Notify, oneshot};

mod support;

const TABLE: TableDef = TableDef {
    name: "busy-orders",
    columns: &[ColumnDef {
        name: "id",
        sql_type: SqlType::Text,
        nullable: false,
        key: true,
        unique: false,
        index: false,
    }],
};

/// Writes one row, says so, and waits to be let go before its batch commits.
struct Slow {
    started: Option<oneshot::Sender<()>>,
    go: Arc<Notify>,
}

impl Projector for Slow {
    fn apply<'t>(&'t mut self, rows: &'t mut dyn Rows) -> BoxFuture<'t, Result<(), ProjectError>> {
        Box::pin(async move {
            let row = vec![SqlValue::Text("o-1".into())];
            let statement = render::upsert(rows.dialect(), rows.target(), &TABLE, row);
            rows.execute(&statement).await?;
            if let Some(started) = self.started.take() {
                let _ = started.send(());
            }
            self.go.notified().await;
            Ok(())
        })
    }
}

/// Writes nothing.
struct Nothing;

impl Projector for Nothing {
    fn apply<'t>(&'t mut self, _: &'t mut dyn Rows) -> BoxFuture<'t, Result<(), ProjectError>> {
        Box::pin(async { Ok(()) })
    }
}

// Issue 22: on PostgreSQL one instance at a time per read model; another skips it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_model_another_process_is_projecting_is_skipped_not_waited_for() {
    let store = Arc::new(testing::store("read-models", Options::default()).await);
    let tables = store.capabilities().read_models().unwrap();
    tables.ensure(&TABLE).await.unwrap();
    let subscriber = "read-model:busy-orders";
    assert!(store.move_checkpoint(subscriber, None, 0).await.unwrap());

    let (started, has_started) = oneshot::channel();
    let go = Arc::new(Notify::new());
    let first = {
        let (store, go) = (store.clone(), go.clone());
        tokio::spawn(async move {
            let batch = Batch {
                table: &TABLE,
                subscriber,
                from: 0,
                to: 5,
                declared: &TABLE.declared(),
                rebuild: None,
            };
            let mut slow = Slow {
                started: Some(started),
                go,
            };
            store
                .capabilities()
                .read_models()
                .unwrap()
                .project(&batch, &mut slow)
                .await
                .unwrap()
        })
    };
    has_started.await.unwrap();

    let batch = Batch {
        table: &TABLE,
        subscriber,
        from: 0,
        to: 5,
        declared: &TABLE.declared(),
        rebuild: None,
    };
    let second = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        tables.project(&batch, &mut Nothing),
    )
    .await
    .expect("a busy read model is skipped at once");
    assert_eq!(second.unwrap(), Projected::Busy);

    go.notify_one();
    assert_eq!(first.await.unwrap(), Projected::Applied);
    assert_eq!(store.checkpoint(subscriber).await.unwrap(), Some(5));
    // Once the first is done, the same batch finds the checkpoint moved.
    assert_eq!(
        tables.project(&batch, &mut Nothing).await.unwrap(),
        Projected::Moved
    );
}
