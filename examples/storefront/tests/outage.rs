//! The storefront's worker while its PostgreSQL server is down for seconds (issue 19): a restart,
//! a failover or a network blip is waited out, each failure logged, and the work goes on once the
//! server is back, nothing lost. A file of its own: stopping the test server stops it for every
//! test of this process.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration as StdDuration, Instant as StdInstant};

use bounda::App;
use bounda_postgres::testing;
use bounda_postgres::{Options, PostgresStore};
use storefront::order::OrderStatus;

const BINARY: &str = env!("CARGO_BIN_EXE_storefront");

/// How long the server stays down: with a back-off of 200 ms, five failures in a row took
/// about 3 s, after which the worker used to stop.
const OUTAGE: StdDuration = StdDuration::from_secs(10);

/// `storefront work` on schema `schema` of the server at `url`, trying a failing store again
/// every 200 ms at first.
fn worker(url: &str, schema: &str) -> Command {
    let mut command = Command::new(BINARY);
    command.args([
        "work",
        "--schema",
        schema,
        "--db",
        url,
        "--backoff",
        "200ms",
    ]);
    command
}

/// Places orders `from..to`, trying each again while the server is coming back.
async fn place(shop: &App, from: usize, to: usize) {
    for i in from..to {
        let order = support::order(&format!("o-{i:03}"));
        let start = StdInstant::now();
        while let Err(error) = shop.dispatch(order.clone()).await {
            assert!(start.elapsed() < StdDuration::from_secs(30), "{error}");
            tokio::time::sleep(StdDuration::from_millis(100)).await;
        }
    }
}

/// Held by a test while it stops the server: the tests of this file take turns.
static SERVER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A test's turn with the server: once it ends, however the test ended, the server runs again
/// for the next.
struct Turn(#[allow(dead_code, reason = "held for its drop")] tokio::sync::MutexGuard<'static, ()>);

impl Turn {
    async fn take() -> Turn {
        Turn(SERVER.lock().await)
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        // Started already when the test started it again: that answer is not a failure.
        let _ = testing::start_server();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_waits_out_its_server_down_for_seconds_and_goes_on() {
    let _turn = Turn::take().await;
    let (url, schema) = testing::schema("outage").unwrap_or_else(|how| panic!("{how}"));
    let dir = tempfile::tempdir().unwrap();
    let (notified, log) = (
        dir.path().join("notified.log"),
        dir.path().join("worker.log"),
    );
    let options = Options {
        schema: schema.clone(),
        ..Options::default()
    };
    let shop = support::shop(PostgresStore::connect(&url, options).await.unwrap()).await;
    let mut worker = worker(&url, &schema)
        .env("NOTIFY_LOG", &notified)
        .env("PAYMENT_WINDOW", "2s")
        .env("REMINDER_DELAY", "1s")
        .env("HANDLER_TIMEOUT", "2s")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    place(&shop, 0, 20).await;

    // Down while the first orders' deadlines are pending.
    testing::stop_server().unwrap();
    let down = StdInstant::now();
    while down.elapsed() < OUTAGE {
        let exited = worker.try_wait().unwrap();
        assert!(
            exited.is_none(),
            "the worker stopped {:?} into the outage: {exited:?}\n{}",
            down.elapsed(),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(StdDuration::from_millis(250)).await;
    }
    testing::start_server().unwrap();
    place(&shop, 20, 40).await;

    // Every order expires: the deadlines the outage held up and the new ones.
    let deadline = StdInstant::now() + StdDuration::from_secs(60);
    loop {
        let ended = support::orders(&shop)
            .await
            .values()
            .all(|status| *status == Some(OrderStatus::Cancelled));
        let idle = shop.next_due_at().await.ok().flatten().is_none()
            && shop.lag().await.is_ok_and(|lag| lag.max_lag == 0);
        if ended && idle {
            break;
        }
        assert!(
            StdInstant::now() < deadline,
            "the worker did not finish after the outage:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(StdDuration::from_millis(200)).await;
    }
    assert!(
        support::signalled(worker, "-TERM").success(),
        "it stops cleanly"
    );
    // A confirmation sent just before the server went down could not commit: it is sent again,
    // under the same key, once the server is back (at-least-once side effects).
    support::each_order_expired_once(&shop, &notified, 40, support::Sent::SameKey).await;
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(
        said.contains("the store is out of reach: waiting for it"),
        "each failure is logged as an outage: {said}"
    );
    assert!(!said.contains("STALLED"), "{said}");
}

// Issue 43: a worker started while its server is down waits for it, saying so, and starts once
// it answers; past `--store-wait` it gives up, naming the cause, rather than exit at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_started_while_its_server_is_down_waits_for_it() {
    let _turn = Turn::take().await;
    let (url, schema) = testing::schema("start-down").unwrap_or_else(|how| panic!("{how}"));
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("worker.log");
    let worker = |wait: &str, log: &std::path::Path| {
        worker(&url, &schema)
            .args(["--store-wait", wait])
            .env("NOTIFY_LOG", dir.path().join("notified.log"))
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap()
    };
    testing::stop_server().unwrap();
    let gives_up = worker("1s", &dir.path().join("gives-up.log"));
    let status = support::finished_within(gives_up, 30);
    let said = std::fs::read_to_string(dir.path().join("gives-up.log")).unwrap();
    assert_eq!(status.code(), Some(1), "{said}");
    assert!(
        said.contains("the store stayed out of reach for 1s after start")
            && said.contains("cannot connect to the database")
            && !said.contains("Error occurred while creating a new object"),
        "{said}"
    );

    let mut waits = worker("5m", &log);
    tokio::time::sleep(StdDuration::from_secs(3)).await;
    assert!(waits.try_wait().unwrap().is_none(), "still waiting");
    testing::start_server().unwrap();
    let start = StdInstant::now();
    loop {
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        if said.contains("the store answers: starting") {
            assert!(
                said.contains("the store is out of reach at start: waiting for it, up to 5m"),
                "{said}"
            );
            break;
        }
        assert!(
            start.elapsed() < StdDuration::from_secs(60),
            "not started: {said}"
        );
        tokio::time::sleep(StdDuration::from_millis(100)).await;
    }
    assert!(
        support::signalled(waits, "-TERM").success(),
        "it stops cleanly"
    );
}
