//! The benchmark on PostgreSQL: deadline firings by 1, 2 and 4 worker processes against one
//! server, beside a floor: plain SQL making the same writes on bounda's own tables, on the same
//! server, in the same run. The server flushes every commit to disk: a throwaway one started
//! from the installed binaries, or `BOUNDA_POSTGRES_URL`.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bounda::App;
use bounda::testing::TestApp;
use bounda_postgres::{Options, PostgresStore, testing};
use tokio_postgres::Client;

use crate::domain::expiry::Expiry;
use crate::measure::{Measured, open_tickets, settle};

/// When the floor's firings happen (its deadlines are due an hour before).
const NOW: &str = "2026-01-01T02:00:00Z";
/// When the floor's deadlines are due.
const DUE: &str = "2026-01-01T01:00:00Z";
/// Where a fired deadline's row moves: the instance's timeout, a year on.
const TIMEOUT: &str = "2027-01-01T00:00:00Z";

/// A fresh schema on the durable server, and a store on it with bounda's tables.
async fn fresh(what: &str) -> (String, String, PostgresStore) {
    let (url, schema) = testing::durable_schema(what)
        .unwrap_or_else(|how| panic!("the PostgreSQL rows need a server: {how}"));
    let store = PostgresStore::connect(
        &url,
        Options {
            schema: schema.clone(),
            ..Options::default()
        },
    )
    .await
    .unwrap_or_else(|error| panic!("cannot connect to the benchmark's server: {error}"));
    (url, schema, store)
}

/// A plain connection to `url`.
async fn client(url: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|error| panic!("cannot connect to the benchmark's server: {error}"));
    tokio::spawn(connection);
    client
}

/// How many `ProcessDeadlineReached` events `schema` holds.
async fn fired(client: &Client, schema: &str) -> usize {
    let row = client
        .query_one(
            &format!(
                "SELECT count(*) FROM \"{schema}\".events WHERE type = 'ProcessDeadlineReached'"
            ),
            &[],
        )
        .await
        .unwrap_or_else(|error| panic!("cannot count the firings: {error}"));
    usize::try_from(row.get::<_, i64>(0)).unwrap_or_default()
}

/// Deadline firings by `workers` processes: `units` instances of `Expiry` are started untimed
/// on the simulated clock's first day, so their deadlines are long due on the real clock; then
/// `workers` processes of this binary (`--pg-worker`) run `App::run` on the schema, timed from
/// their start until the last firing is stored.
pub async fn firings(units: usize, workers: usize) -> Measured {
    let (url, schema, store) = fresh("firings").await;
    let setup = TestApp::new(App::builder(store).only_listed().process::<Expiry>())
        .await
        .expect("cannot build the deadline app");
    open_tickets(&setup, units).await;
    settle(&setup, "starting the instances").await;
    drop(setup);
    let counter = client(&url).await;
    let start = Instant::now();
    let mut children: Vec<Child> = (0..workers).map(|_| spawn_worker(&url, &schema)).collect();
    loop {
        if fired(&counter, &schema).await >= units {
            break;
        }
        for child in &mut children {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("a worker stopped before the firings were done: {status}");
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "{workers} workers fired {} of {units} deadlines in 10 minutes",
            fired(&counter, &schema).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = start.elapsed();
    for child in children {
        stop(child);
    }
    let count = fired(&counter, &schema).await;
    assert_eq!(
        count, units,
        "{workers} workers: expected {units} firings, found {count}; a deadline ran twice"
    );
    Measured {
        units,
        elapsed,
        write_tx: 0,
    }
}

/// A worker process of this binary on `schema`.
fn spawn_worker(url: &str, schema: &str) -> Child {
    let exe = std::env::current_exe().expect("the benchmark's own path");
    Command::new(exe)
        .args(["--pg-worker", "--pg-url", url, "--pg-schema", schema])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("cannot start a worker process")
}

/// Stops a worker as a service manager would, and insists it stopped cleanly.
fn stop(child: Child) {
    let id = child.id().to_string();
    let sent = Command::new("kill").args(["-TERM", &id]).status();
    assert!(sent.is_ok_and(|s| s.success()), "cannot signal worker {id}");
    let output = child.wait_with_output().expect("the worker's exit");
    assert!(
        output.status.success(),
        "worker {id} failed: {}",
        output.status
    );
}

/// The worker process: `App::run` with `Expiry` on `schema` until SIGTERM.
pub async fn worker(url: &str, schema: &str) {
    let store = PostgresStore::connect(
        url,
        Options {
            schema: schema.to_owned(),
            ..Options::default()
        },
    )
    .await
    .unwrap_or_else(|error| panic!("the worker cannot connect: {error}"));
    let app = App::builder(store)
        .only_listed()
        .process::<Expiry>()
        .build()
        .await
        .expect("the worker's app");
    app.run().await.expect("the worker ran");
}

/// The floor: per firing, the first due row taken (`FOR UPDATE SKIP LOCKED`, as workers
/// share rows), one event appended at the next position under the position counter, the row
/// moved to the instance's timeout; committed every `per_tx` firings, on one connection. The
/// schema holds what bounda's holds before its firings: each ticket's two events, one
/// scheduler row per instance.
pub async fn floor(units: usize, per_tx: usize) -> f64 {
    let (url, schema, store) = fresh("floor").await;
    drop(store);
    let mut client = client(&url).await;
    let t = format!("\"{schema}\".");
    let units_i64 = i64::try_from(units).unwrap_or(i64::MAX);
    client
        .batch_execute(&format!(
            "INSERT INTO {t}events (position, id, aggregate_type, aggregate_id, version, type,
                 payload, timestamp, metadata)
             SELECT n, 'setup-' || n, 'Ticket', 't-' || n, 1, 'TicketOpened',
                 json_build_object('ticket_id', 't-' || n), '{NOW}', '{{}}'
             FROM generate_series(1, {prefill}) AS n;
             UPDATE {t}head SET position = {prefill};
             INSERT INTO {t}scheduled_commands
                 (dedupe_key, command_type, aggregate_id, payload, execute_at, context)
             SELECT md5(n::text) || '-due-' || n, 'bounda.ProcessDeadline', 'due-' || n,
                 json_build_object('instance', 'due-' || n, 'process', 'Expiry'), '{DUE}', '{{}}'
             FROM generate_series(1, {units}) AS n;
             ANALYZE",
            prefill = 2 * units_i64,
        ))
        .await
        .unwrap_or_else(|error| panic!("cannot fill the floor's schema: {error}"));
    let due = client
        .prepare(&format!(
            "SELECT dedupe_key, aggregate_id FROM {t}scheduled_commands
             WHERE execute_at <= '{NOW}' AND claimed_at IS NULL
             ORDER BY execute_at, dedupe_key LIMIT 1 FOR UPDATE SKIP LOCKED"
        ))
        .await
        .expect("the floor's due read");
    let head = client
        .prepare(&format!(
            "SELECT position FROM {t}head WHERE id = 1 FOR UPDATE"
        ))
        .await
        .expect("the floor's counter read");
    let append = client
        .prepare(&format!(
            "INSERT INTO {t}events (position, id, aggregate_type, aggregate_id, version, type,
                 payload, timestamp, metadata)
             VALUES ($1, $3, 'process:Expiry', $2, 2, 'ProcessDeadlineReached',
                 json_build_object('field', 'expires'), '{NOW}', '{{}}')"
        ))
        .await
        .expect("the floor's append");
    let counter = client
        .prepare(&format!("UPDATE {t}head SET position = $1 WHERE id = 1"))
        .await
        .expect("the floor's counter write");
    let moved = client
        .prepare(&format!(
            "UPDATE {t}scheduled_commands SET execute_at = '{TIMEOUT}' WHERE dedupe_key = $1"
        ))
        .await
        .expect("the floor's move");
    let start = Instant::now();
    let mut done = 0;
    while done < units {
        let tx = client.transaction().await.expect("the floor cannot begin");
        let end = (done + per_tx).min(units);
        for _ in done..end {
            let row = tx.query_one(&due, &[]).await.expect("a due deadline");
            let (key, instance): (String, String) = (row.get(0), row.get(1));
            let position: i64 = tx.query_one(&head, &[]).await.expect("the counter").get(0);
            let id = format!("fired-{}", position + 1);
            tx.execute(&append, &[&(position + 1), &instance, &id])
                .await
                .expect("the floor's append");
            tx.execute(&counter, &[&(position + 1)])
                .await
                .expect("the counter's move");
            tx.execute(&moved, &[&key]).await.expect("the row's move");
        }
        tx.commit().await.expect("the floor cannot commit");
        done = end;
    }
    let rate = units as f64 / start.elapsed().as_secs_f64();
    let left = client
        .query_one(
            &format!("SELECT count(*) FROM {t}scheduled_commands WHERE execute_at <= '{NOW}'"),
            &[],
        )
        .await
        .expect("the floor's check")
        .get::<_, i64>(0);
    assert_eq!(left, 0, "the floor left deadlines due");
    rate
}
