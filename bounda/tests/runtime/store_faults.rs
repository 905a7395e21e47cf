//! A SQLite file that will not take a write: locked by another writer past the busy timeout, or
//! full. The attempt fails whole, nothing of it is on the file, and it is retried (spec 126,
//! 127, 202; issue 5).

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use crate::support;

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use bounda::config::Config;
use bounda::prelude::*;
use bounda::store::LetterFilter;
use bounda_sqlite::{Options, SqliteStore};
use support::storefront::*;

/// Another process's connection to the same file.
fn other_writer(db: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(db).unwrap()
}

/// A store on `db` that gives up on a lock after 50 ms.
fn impatient(db: &Path, max_pages: Option<u32>) -> SqliteStore {
    let options = Options {
        busy_timeout_ms: 50,
        max_pages,
        ..Options::default()
    };
    SqliteStore::open_with(db, options).unwrap()
}

fn short_leases() -> Config {
    let mut config = Config::default();
    config.commands.timeout = seconds(1);
    config.policies.timeout = seconds(1);
    config.processes.handler_timeout = seconds(1);
    config
}

/// While its first run is under way, another writer takes the file's write lock and keeps it.
struct Intruder {
    db: std::path::PathBuf,
    lock: Mutex<Option<rusqlite::Connection>>,
    runs: AtomicU32,
}

impl Intruder {
    fn new(db: &Path) -> Intruder {
        Intruder {
            db: db.to_owned(),
            lock: Mutex::new(None),
            runs: AtomicU32::new(0),
        }
    }

    fn release(&self) {
        let lock = self.lock.lock().unwrap().take().unwrap();
        lock.execute_batch("COMMIT").unwrap();
    }
}

struct ConfirmWhileLocked;

#[policy]
impl Policy for ConfirmWhileLocked {
    const NAME: &'static str = "confirm_while_locked";
    type Event = OrderPlaced;
    const PORTS: &'static [bounda::PortDecl] =
        &[bounda::PortDecl::of::<std::sync::Arc<Intruder>>()];

    async fn handle(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
        let intruder = cx.port::<std::sync::Arc<Intruder>>()?;
        if intruder.runs.fetch_add(1, Ordering::SeqCst) == 0 {
            let conn = other_writer(&intruder.db);
            conn.execute_batch("BEGIN IMMEDIATE").unwrap();
            *intruder.lock.lock().unwrap() = Some(conn);
        }
        cx.send(RecordConfirmationSent {
            order_id: cx.event().order_id.clone(),
        })
        .await?;
        Ok(())
    }
}

// A commit that meets another writer's lock past the busy timeout fails the attempt; its failure
// cannot be written either, so the claim stays pending and the run is rerun once its lease lapses.
#[tokio::test]
async fn a_commit_locked_out_past_the_busy_timeout_writes_nothing_and_is_rerun() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shop.db");
    let intruder = std::sync::Arc::new(Intruder::new(&db));
    let builder = App::builder(impatient(&db, None))
        .only_listed()
        .config(short_leases())
        .port(intruder.clone())
        .policy::<ConfirmWhileLocked>();
    let app = TestApp::new(builder).await.unwrap();
    app.dispatch(PlaceOrder {
        order_id: "o-1".into(),
        total: 5,
    })
    .await
    .unwrap();
    let head = app.app().store().head().await.unwrap();

    let error = app.run_until_idle().await.unwrap_err();
    assert!(error.is_retriable(), "{error}");
    let cause = std::error::Error::source(&error).map(ToString::to_string);
    assert!(
        cause.as_deref().is_some_and(|c| c.contains("locked")),
        "the error says why: {error}: {cause:?}"
    );
    assert_eq!(intruder.runs.load(Ordering::SeqCst), 1);

    intruder.release();
    assert_eq!(
        app.app().store().head().await.unwrap(),
        head,
        "nothing written"
    );
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced"]
    );
    app.run_until_idle().await.unwrap();
    assert_eq!(intruder.runs.load(Ordering::SeqCst), 1, "held, not rerun");
    assert_eq!(
        app.lag().await.unwrap().max_lag,
        1,
        "the claim is pending until its lease lapses"
    );

    app.advance(seconds(2) + millis(1)).await.unwrap();
    assert_eq!(
        intruder.runs.load(Ordering::SeqCst),
        2,
        "rerun after the lease"
    );
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced", "ConfirmationSent"]
    );
    assert_eq!(app.lag().await.unwrap().max_lag, 0);
    assert_eq!(
        app.app()
            .dead_letters()
            .count(&LetterFilter::default())
            .await
            .unwrap(),
        0
    );
}

/// An archive whose entries are large: the write the full disk refuses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = Archive)]
pub struct Archived {
    pub order_id: String,
    pub copy: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Events)]
pub enum ArchiveEvent {
    Archived(Archived),
}

#[derive(Debug, Default)]
pub struct Archive {
    copies: u32,
}

impl Aggregate for Archive {
    const NAME: &'static str = "Archive";
    const ID_FIELD: &'static str = "order_id";
    type Event = ArchiveEvent;

    fn apply(&mut self, _: &ArchiveEvent) {
        self.copies += 1;
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ArchiveOrder {
    pub order_id: String,
}

#[command]
impl Command for ArchiveOrder {
    const NAME: &'static str = "ArchiveOrder";
    type Aggregate = Archive;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.order_id
    }

    fn decide(&self, _: &Archive) -> Decision<Self> {
        Ok(vec![
            Archived {
                order_id: self.order_id.clone(),
                copy: "x".repeat(256 * 1024),
            }
            .into(),
        ])
    }
}

struct ArchiveOnOrderPlaced;

#[policy]
impl Policy for ArchiveOnOrderPlaced {
    const NAME: &'static str = "archive_on_order_placed";
    type Event = OrderPlaced;

    async fn handle(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
        cx.send(ArchiveOrder {
            order_id: cx.event().order_id.clone(),
        })
        .await?;
        Ok(())
    }
}

fn archiving(store: SqliteStore) -> bounda::AppBuilder {
    App::builder(store)
        .only_listed()
        .config(short_leases())
        .policy::<ArchiveOnOrderPlaced>()
}

fn page_count(db: &Path) -> u32 {
    other_writer(db)
        .query_row("PRAGMA page_count", [], |row| row.get(0))
        .unwrap()
}

// A full disk refuses the attempt's commit: the attempt fails whole and is retried with back-off
// until it is dead-lettered; freed, the file takes the retried letter, and nothing was lost.
#[tokio::test]
async fn a_commit_the_full_disk_refuses_fails_whole_and_is_retried() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shop.db");
    let setup = TestApp::new(archiving(SqliteStore::open(&db).unwrap()))
        .await
        .unwrap()
        .expecting_letters();
    setup
        .dispatch(PlaceOrder {
            order_id: "o-1".into(),
            total: 5,
        })
        .await
        .unwrap();
    drop(setup);

    // The file may grow by a few pages: enough for claims and letters, not for a 256 KiB event.
    let full = impatient(&db, Some(page_count(&db) + 8));
    let app = TestApp::new(archiving(full))
        .await
        .unwrap()
        .expecting_letters();
    let head = app.app().store().head().await.unwrap();
    app.run_until_idle().await.unwrap();
    let letters = support::letters(&app).await;
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_eq!(letters[0].attempts, 3, "retried before giving up");
    assert!(
        letters[0].error_message.contains("full"),
        "the letter says why: {}",
        letters[0].error_message
    );
    assert_eq!(
        app.app().store().head().await.unwrap(),
        head,
        "no event of the attempt"
    );
    assert!(app.events_of::<Archive>("o-1").await.unwrap().is_empty());
    let check: String = other_writer(&db)
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    assert_eq!(
        app.lag().await.unwrap().max_lag,
        0,
        "the letter holds nothing back"
    );
    drop(app);

    // The operator frees the disk and retries the letter, on the real clock.
    let app = archiving(SqliteStore::open(&db).unwrap())
        .build()
        .await
        .unwrap();
    app.dead_letters().retry(&letters[0].id).await.unwrap();
    let archived = app.load::<Archive>("o-1").await.unwrap();
    assert_eq!(archived.state.copies, 1, "the letter's run landed once");
    app.run_until(tokio::time::sleep(std::time::Duration::from_millis(300)))
        .await
        .unwrap();
    assert_eq!(
        app.lag().await.unwrap().max_lag,
        0,
        "the dispatcher caught up with it"
    );
    assert_eq!(app.load::<Archive>("o-1").await.unwrap().state.copies, 1);
}
