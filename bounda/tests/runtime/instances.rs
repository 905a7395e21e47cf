//! Finding instances: the instances index as the runtime keeps it, listed and counted through
//! the app, the operator's command and a copy.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use crate::support;

use bounda::prelude::*;
use bounda::store::{InstanceOrder, InstanceQuery, InstanceRow, InstanceStatus};
use support::storefront::*;

mod fussy {
    use super::*;

    /// Fails to start for order `o-failed`; runs for every other order, with no deadline.
    #[process(on = Order, started_by = [OrderPlaced], completed_by = [OrderCancelled])]
    #[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Fussy {
        pub seen: bool,
    }

    #[process]
    impl Fussy {
        async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<FussyPatch> {
            if cx.event().order_id == "o-failed" {
                anyhow::bail!("the warehouse is closed");
            }
            Ok(FussyPatch::default().seen(true))
        }
    }
}
use fussy::Fussy;

async fn place(app: &TestApp, id: &str) {
    app.dispatch(PlaceOrder {
        order_id: id.into(),
        total: 10,
    })
    .await
    .unwrap();
}

/// An app whose instances stand in every status: `o-old` timed out, `o-done` completed, the
/// `Fussy` of `o-failed` failed; `o-failed`, `o-1`, `o-2` and `o-3` placed an hour or more
/// apart, the clock moved without running anything an hour past the first reminder of `o-3`
/// (due 24 hours after its placing), so the four are overdue.
async fn app_in_every_status() -> TestApp {
    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .process::<OrderPayment>()
            .process::<Fussy>(),
    )
    .await
    .unwrap()
    .expecting_letters();
    place(&app, "o-old").await;
    app.advance(days(31)).await.unwrap();
    place(&app, "o-done").await;
    app.dispatch(PayAndFulfil {
        order_id: "o-done".into(),
    })
    .await
    .unwrap();
    place(&app, "o-failed").await;
    for _ in 0..12 {
        app.advance(minutes(10)).await.unwrap();
    }
    for id in ["o-1", "o-2", "o-3"] {
        place(&app, id).await;
        app.advance(hours(1)).await.unwrap();
    }
    app.clock().advance(hours(24));
    app
}

fn ids(rows: &[InstanceRow]) -> Vec<String> {
    rows.iter()
        .map(|row| format!("{}:{}", row.process, row.instance_id))
        .collect()
}

// Issue 24: the runtime keeps the index with each step; the app lists and counts it by each
// filter, newest or soonest first, a page at a time.
#[tokio::test]
async fn instances_are_found_by_status_deadline_correlation_and_id() {
    let app = app_in_every_status().await;
    let now = app.now();
    let list = |query: InstanceQuery| {
        let app = app.app().clone();
        async move { app.instances(&query).await.unwrap() }
    };
    let of = |process: &str| InstanceQuery {
        process: Some(process.to_owned()),
        ..InstanceQuery::default()
    };

    let payments = list(of("OrderPayment")).await;
    assert_eq!(
        ids(&payments.rows),
        [
            "OrderPayment:o-3",
            "OrderPayment:o-2",
            "OrderPayment:o-1",
            "OrderPayment:o-failed",
            "OrderPayment:o-done",
            "OrderPayment:o-old"
        ],
        "the latest started first"
    );
    assert_eq!(payments.next, None, "one page holds them all");
    let status = |id: &str| {
        payments
            .rows
            .iter()
            .find(|row| row.instance_id == id)
            .map(|row| row.status)
    };
    assert_eq!(status("o-old"), Some(InstanceStatus::TimedOut));
    assert_eq!(status("o-done"), Some(InstanceStatus::Completed));
    assert_eq!(status("o-1"), Some(InstanceStatus::Running));

    let failed = list(InstanceQuery {
        status: Some(InstanceStatus::Failed),
        ..InstanceQuery::default()
    })
    .await;
    assert_eq!(ids(&failed.rows), ["Fussy:o-failed"]);
    assert_eq!(
        failed.rows[0].next_due, None,
        "a failed instance has nothing due"
    );

    // Overdue, the most overdue first: the three first reminders (the clock moved past them
    // without running them), and the one of `o-failed`'s payment.
    let overdue = InstanceQuery {
        due_until: Some(now),
        order: InstanceOrder::Soonest,
        ..InstanceQuery::default()
    };
    let first = list(InstanceQuery {
        limit: 2,
        ..overdue.clone()
    })
    .await;
    assert_eq!(
        ids(&first.rows),
        ["OrderPayment:o-failed", "OrderPayment:o-1"]
    );
    let rest = list(InstanceQuery {
        after: first.next.clone(),
        ..overdue.clone()
    })
    .await;
    assert_eq!(ids(&rest.rows), ["OrderPayment:o-2", "OrderPayment:o-3"]);
    assert_eq!(app.app().count_instances(&overdue).await.unwrap(), 4);
    let o1 = &first.rows[1];
    assert_eq!(
        o1.next_due,
        Some(o1.started_at + hours(24)),
        "due at its first reminder"
    );

    // Due within the next week and not yet: the `Fussy` instances' lifetimes.
    let soon = list(InstanceQuery {
        due_from: Some(now),
        due_until: Some(now + days(7)),
        order: InstanceOrder::Soonest,
        ..InstanceQuery::default()
    })
    .await;
    assert_eq!(
        ids(&soon.rows),
        ["Fussy:o-done", "Fussy:o-1", "Fussy:o-2", "Fussy:o-3"]
    );

    // By the request that started it, and by id.
    let o2 = list(InstanceQuery {
        id_prefix: Some("o-2".into()),
        ..InstanceQuery::default()
    })
    .await;
    assert_eq!(ids(&o2.rows), ["OrderPayment:o-2", "Fussy:o-2"]);
    let correlated = list(InstanceQuery {
        correlation_id: Some(o2.rows[0].correlation_id.clone()),
        ..InstanceQuery::default()
    })
    .await;
    assert_eq!(ids(&correlated.rows), ["OrderPayment:o-2", "Fussy:o-2"]);

    let counts = app.app().instance_counts().await.unwrap();
    let payment = counts.iter().find(|c| c.process == "OrderPayment").unwrap();
    assert_eq!(
        (
            payment.running,
            payment.completed,
            payment.timed_out,
            payment.failed
        ),
        (4, 1, 1, 0)
    );
    assert_eq!((payment.pending, payment.overdue), (4, 4));
    assert_eq!(payment.oldest_overdue, first.rows[0].next_due);
    let fussy = counts.iter().find(|c| c.process == "Fussy").unwrap();
    assert_eq!((fussy.running, fussy.failed, fussy.timed_out), (4, 1, 1));

    // Once the worker catches up, nothing is overdue and the rows moved on.
    app.run_until_idle().await.unwrap();
    assert_eq!(app.app().count_instances(&overdue).await.unwrap(), 0);
}

// Issue 24: a copy keeps the index as it was.
#[tokio::test]
async fn a_copy_fills_the_same_instances_index() {
    let app = app_in_every_status().await;
    let copy = bounda_sqlite::SqliteStore::in_memory().unwrap();
    let copied = bounda::store::copy(app.app().store(), &copy, "test", app.now())
        .await
        .unwrap();
    assert_eq!(copied.instances, 12);
    let all = InstanceQuery {
        limit: 100,
        ..InstanceQuery::default()
    };
    use bounda::store::InstanceIndex;
    assert_eq!(
        copy.instances(&all).await.unwrap(),
        app.app()
            .store()
            .capabilities()
            .instances()
            .unwrap()
            .instances(&all)
            .await
            .unwrap()
    );
}

// Issue 46: on a store without the instances index, a listing is refused naming it, and so is
// a copy into one, before it writes anything.
#[tokio::test]
async fn a_store_without_the_index_refuses_a_listing_and_a_copy_naming_it() {
    let store = std::sync::Arc::new(bounda::testing::CoreOnly(support::database::store().await));
    let app = TestApp::new(
        App::builder_shared(store)
            .only_listed()
            .process::<OrderPayment>(),
    )
    .await
    .unwrap();
    place(&app, "o-1").await;
    app.run_until_idle().await.unwrap();
    for refused in [
        app.app()
            .instances(&InstanceQuery::default())
            .await
            .unwrap_err(),
        app.app().instance_counts().await.unwrap_err(),
    ] {
        assert!(
            refused.to_string().contains("keeps no instances index"),
            "{refused}"
        );
    }

    let source = app_in_every_status().await;
    let target = CopiesWithoutIndex(std::sync::Arc::new(
        bounda_sqlite::SqliteStore::in_memory().unwrap(),
    ));
    let refused = bounda::store::copy(source.app().store(), &target, "test", source.now())
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("keeps no instances index"),
        "{refused}"
    );
    use bounda::store::Store;
    assert_eq!(target.head().await.unwrap(), 0, "nothing written");
}

/// A store that takes copies and keeps no instances index.
struct CopiesWithoutIndex(std::sync::Arc<dyn bounda::store::Store>);

impl bounda::store::forward::Forward for CopiesWithoutIndex {
    fn inner(&self) -> &dyn bounda::store::Store {
        &*self.0
    }

    fn capabilities(&self) -> bounda::store::Capabilities<'_> {
        let core = bounda::store::Capabilities::core();
        match self.0.capabilities().copies {
            Some(copies) => core.with_copies(copies),
            None => core,
        }
    }
}

#[cfg(feature = "cli")]
mod cli {
    use super::*;
    use bounda::cli::Operator;
    use clap::Parser;

    #[derive(Parser)]
    struct Command {
        #[command(subcommand)]
        operator: Operator,
    }

    /// What `instances <args>` prints.
    async fn instances(app: &TestApp, args: &[&str]) -> Result<String, bounda::Error> {
        let command = Command::try_parse_from(["app", "instances"].iter().chain(args))
            .unwrap_or_else(|e| panic!("{e}"));
        let mut out = Vec::new();
        bounda::cli::execute(app.app(), command.operator, &mut out).await?;
        Ok(String::from_utf8(out).unwrap())
    }

    // Issue 24: `instances` lists, pages and counts from the command line.
    #[tokio::test]
    async fn the_operator_finds_instances_from_the_command_line() {
        let app = app_in_every_status().await;
        let failed = instances(&app, &["--status", "failed"]).await.unwrap();
        assert!(
            failed.starts_with("Fussy:o-failed  failed ") && failed.lines().count() == 1,
            "{failed}"
        );

        let first = instances(&app, &["--overdue", "--soonest", "--limit", "3"])
            .await
            .unwrap();
        let lines: Vec<&str> = first.lines().collect();
        assert_eq!(lines.len(), 4, "{first}");
        assert!(lines[0].starts_with("OrderPayment:o-failed  running "));
        assert!(lines[0].contains("(overdue "), "{first}");
        let cursor = lines[3].strip_prefix("more: --after ").unwrap();
        let rest = instances(&app, &["--overdue", "--soonest", "--after", cursor])
            .await
            .unwrap();
        assert!(
            rest.starts_with("OrderPayment:o-3  running ") && rest.lines().count() == 1,
            "{rest}"
        );

        assert_eq!(
            instances(&app, &["--overdue", "--count"]).await.unwrap(),
            "4\n"
        );
        let json = instances(&app, &["--id", "o-done", "--json"])
            .await
            .unwrap();
        let rows: Vec<serde_json::Value> = json
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0]["status"], "completed");
        assert_eq!(rows[0]["process"], "OrderPayment");
        assert_eq!(
            instances(&app, &["--status", "timed-out", "--process", "Fussy"])
                .await
                .unwrap()
                .lines()
                .count(),
            1
        );
        assert_eq!(
            instances(&app, &["--id", "o-none"]).await.unwrap(),
            "no instance matches\n"
        );
        let unknown = instances(&app, &["--process", "Nope"]).await.unwrap_err();
        assert!(
            unknown.to_string().contains("OrderPayment"),
            "names the app's processes: {unknown}"
        );
        assert!(
            Command::try_parse_from(["app", "instances", "--status", "lost"]).is_err_and(|e| e
                .to_string()
                .contains("running, failed, timed-out or completed"))
        );
    }

    /// SQLite files, each opened with its core alone.
    struct CoreOnlyFiles;

    #[bounda::store::async_trait]
    impl bounda::store::Opener for CoreOnlyFiles {
        async fn open(
            &self,
            address: &bounda::store::Address,
            place: &bounda::store::Place,
            opening: bounda::store::Opening,
        ) -> Result<std::sync::Arc<dyn bounda::store::Store>, bounda::store::StoreError> {
            let store = bounda_sqlite::Files.open(address, place, opening).await?;
            Ok(std::sync::Arc::new(bounda::testing::CoreOnly(store)))
        }

        async fn new_file(
            &self,
            path: &std::path::Path,
        ) -> Result<std::sync::Arc<dyn bounda::store::Store>, bounda::store::StoreError> {
            bounda_sqlite::Files.new_file(path).await
        }

        async fn scratch_copy(
            &self,
            from: &dyn bounda::store::Store,
            source: &str,
        ) -> Result<std::sync::Arc<dyn bounda::store::Store>, bounda::store::StoreError> {
            bounda_sqlite::Files.scratch_copy(from, source).await
        }
    }

    // Issue 46: the operator page lists instances from the store's index: `serve` on a store
    // without one stops at start, failing, rather than serving a page whose every list fails;
    // `instances` is refused naming the index and the store.
    #[cfg(feature = "page")]
    #[tokio::test]
    async fn serve_and_instances_are_refused_at_start_on_a_store_without_the_index() {
        use bounda::cli::{ServeArgs, Service, ServiceArgs, ServiceCommand};
        let dir = tempfile::tempdir().unwrap();
        let service = Service::new("shop", CoreOnlyFiles)
            .app(|builder| builder.only_listed().process::<OrderPayment>());
        let args = ServiceArgs {
            db: Some(
                dir.path()
                    .join("shop.db")
                    .to_str()
                    .unwrap()
                    .parse()
                    .unwrap(),
            ),
            ..ServiceArgs::default()
        };
        assert_eq!(
            service.run(&args, ServiceCommand::Migrate).await,
            std::process::ExitCode::SUCCESS
        );
        let serve = ServiceCommand::Serve(ServeArgs {
            listen: "127.0.0.1:0".parse().unwrap(),
            hosts: Vec::new(),
            origins: Vec::new(),
            path: String::new(),
        });
        let code = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            service.run(&args, serve),
        )
        .await
        .expect("`serve` stops at start");
        assert_eq!(code, std::process::ExitCode::FAILURE);

        let app = service
            .open(&args, bounda::store::Opening::AsIs)
            .await
            .unwrap();
        let refused = bounda::cli::execute(
            &app,
            Command::try_parse_from(["app", "instances"])
                .unwrap()
                .operator,
            &mut Vec::new(),
        )
        .await
        .unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("the core-only store keeps no instances index"),
            "{refused}"
        );
    }
}
