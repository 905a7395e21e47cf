//! The benchmark on PostgreSQL: deadline firings, reactions and process steps by 1, 2, 4 and 8
//! worker processes against one server, directly and through a proxy one round trip of 1 ms
//! away (as from other machines), beside a floor at as many connections: plain SQL making the
//! same writes on bounda's own tables, on the same server, in the same run. The server flushes every commit to disk: a
//! throwaway one started from the installed binaries, or `BOUNDA_POSTGRES_URL`.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bounda::App;
use bounda::testing::TestApp;
use bounda_postgres::testing::{self, Proxy};
use bounda_postgres::{Options, PostgresStore};
use tokio_postgres::Client;

use crate::domain::AcknowledgeOnTicketOpened;
use crate::domain::expiry::Expiry;
use crate::domain::tracking::Tracking;
use crate::floor::Way;
use crate::measure::{Measured, open_tickets, settle};

/// What the workers do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    /// Fire one due deadline per instance (`Expiry`).
    Firings,
    /// React to each `TicketOpened` with one command (`acknowledge_on_ticket_opened`).
    Reactions,
    /// Start one process instance per `TicketOpened` (`Tracking`): a process step.
    Steps,
}

impl Job {
    /// Every job, in the table's order.
    pub const ALL: [Job; 3] = [Job::Firings, Job::Reactions, Job::Steps];

    /// Its name in the table.
    pub fn label(self) -> &'static str {
        match self {
            Job::Firings => "deadline firings",
            Job::Reactions => "reactions",
            Job::Steps => "process steps",
        }
    }

    /// Its name on a worker's command line.
    pub fn name(self) -> &'static str {
        match self {
            Job::Firings => "firings",
            Job::Reactions => "reactions",
            Job::Steps => "steps",
        }
    }

    /// The job named `name` on a worker's command line.
    pub fn parse(name: &str) -> Option<Job> {
        Job::ALL.into_iter().find(|job| job.name() == name)
    }

    /// The event each unit of the job stores once.
    fn event_type(self) -> &'static str {
        match self {
            Job::Firings => "ProcessDeadlineReached",
            Job::Reactions => "TicketAcknowledged",
            Job::Steps => "ProcessStarted",
        }
    }

    /// An app that does the job.
    fn app(self, builder: bounda::AppBuilder) -> bounda::AppBuilder {
        let builder = builder.only_listed();
        match self {
            Job::Firings => builder.process::<Expiry>(),
            Job::Reactions => builder.policy::<AcknowledgeOnTicketOpened>(),
            Job::Steps => builder.process::<Tracking>(),
        }
    }
}

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

/// A store on a fresh schema of the durable server.
pub async fn fresh_store(what: &str) -> PostgresStore {
    fresh(what).await.2
}

/// A fresh schema holding a log of `units` `TicketOpened` events: a plain connection to it,
/// and its tables' prefix (`"schema".`).
pub async fn filled_log(units: i64) -> (Client, String) {
    let (url, schema, store) = fresh("log").await;
    drop(store);
    let t = format!("\"{schema}\".");
    let client = client(&url).await;
    client
        .batch_execute(&format!("{} ANALYZE", log_of(&t, units)))
        .await
        .unwrap_or_else(|error| panic!("cannot fill the log: {error}"));
    (client, t)
}

/// The statements that store `count` tickets' `TicketOpened` in the tables prefixed `t`.
fn log_of(t: &str, count: i64) -> String {
    format!(
        "INSERT INTO {t}events (position, id, aggregate_type, aggregate_id, version, type,
             payload, timestamp, metadata)
         SELECT n, 'setup-' || n, 'Ticket', 't-' || n, 1, 'TicketOpened',
             json_build_object('ticket_id', 't-' || n), '{NOW}', '{{}}'
         FROM generate_series(1, {count}) AS n;
         UPDATE {t}head SET position = {count};"
    )
}

/// A plain connection to `url`.
async fn client(url: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|error| panic!("cannot connect to the benchmark's server: {error}"));
    tokio::spawn(connection);
    client
}

/// How many units of `job` `schema` holds: its events.
async fn done(client: &Client, schema: &str, job: Job) -> usize {
    let row = client
        .query_one(
            &format!("SELECT count(*) FROM \"{schema}\".events WHERE type = $1"),
            &[&job.event_type()],
        )
        .await
        .unwrap_or_else(|error| panic!("cannot count what the workers did: {error}"));
    usize::try_from(row.get::<_, i64>(0)).unwrap_or_default()
}

/// The units done so far, counted as the events are placed: each look reads only the events
/// placed since the last, through the position index, so the benchmark's polling costs the
/// server next to nothing while the workers are timed (a count of the whole table every 50 ms
/// took most of a core).
struct Tally {
    /// The last position counted.
    after: i64,
    /// The units among the events up to it.
    units: usize,
}

impl Tally {
    /// Counts the units placed since the last look; answers the total.
    async fn look(&mut self, client: &Client, schema: &str, job: Job) -> usize {
        let row = client
            .query_one(
                &format!(
                    "SELECT count(*) FILTER (WHERE type = $1), coalesce(max(position), $2)
                     FROM \"{schema}\".events WHERE position > $2"
                ),
                &[&job.event_type(), &self.after],
            )
            .await
            .unwrap_or_else(|error| panic!("cannot count what the workers did: {error}"));
        self.units += usize::try_from(row.get::<_, i64>(0)).unwrap_or_default();
        self.after = row.get(1);
        self.units
    }
}

/// `job` done by `workers` processes: `units` tickets are opened on the simulated clock's first
/// day (for firings, their `Expiry` instances started untimed, so their deadlines are long due
/// on the real clock; for reactions and steps, by an app built first, so its subscriber starts
/// before them); then `workers` processes of this binary (`--pg-worker`) run `App::run` on the
/// schema, timed from their start until the last unit is stored.
pub async fn work(job: Job, units: usize, workers: usize, route: Route) -> Measured {
    let (url, schema, store) = fresh(job.name()).await;
    let setup = TestApp::new(job.app(App::builder(store.clone())))
        .await
        .expect("cannot build the setup's app");
    open_tickets(&setup, units).await;
    if job == Job::Firings {
        settle(&setup, "starting the instances").await;
    }
    drop(setup);
    let counter = client(&url).await;
    let reach = Reach::new(route, &url).await;
    let mut tally = Tally { after: 0, units: 0 };
    tally.look(&counter, &schema, job).await;
    let start = Instant::now();
    let mut children: Vec<Child> = (0..workers)
        .map(|_| spawn_worker(job, &reach.url, &schema))
        .collect();
    loop {
        if tally.look(&counter, &schema, job).await >= units {
            break;
        }
        for child in &mut children {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "a worker stopped before its {} were done: {status}",
                    job.label()
                );
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "{workers} workers did {} of {units} {} in 10 minutes",
            tally.units,
            job.label()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = start.elapsed();
    // Waited for off this thread, which runs the proxy the workers may still be talking
    // through as they stop.
    for child in children {
        tokio::task::spawn_blocking(move || stop(child))
            .await
            .expect("a worker's stop");
    }
    let count = done(&counter, &schema, job).await;
    assert_eq!(
        count,
        units,
        "{workers} workers: expected {units} {}, found {count}; one ran twice",
        job.label()
    );
    check_order(&store, &counter, &schema, job, units).await;
    Measured {
        units,
        elapsed,
        write_tx: 0,
    }
}

/// A worker process of this binary doing `job` on `schema`.
fn spawn_worker(job: Job, url: &str, schema: &str) -> Child {
    let exe = std::env::current_exe().expect("the benchmark's own path");
    Command::new(exe)
        .args(["--pg-worker", "--pg-url", url, "--pg-schema", schema])
        .args(["--pg-job", job.name()])
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

/// The worker process: `App::run` doing `job` on `schema` until SIGTERM.
pub async fn worker(job: Job, url: &str, schema: &str) {
    let store = PostgresStore::connect(
        url,
        Options {
            schema: schema.to_owned(),
            ..Options::default()
        },
    )
    .await
    .unwrap_or_else(|error| panic!("the worker cannot connect: {error}"));
    let app = job
        .app(App::builder(store))
        .build()
        .await
        .expect("the worker's app");
    app.run().await.expect("the worker ran");
}

/// The floor of `job` at `connections` connections: plain SQL making the writes bounda makes,
/// with the least work the same result needs, committed every `per_tx` units, from
/// `connections` connections at once, each reaching the server by `route`.
///
/// - Firings: per firing, one statement takes the first due row (`FOR UPDATE SKIP LOCKED`, as
///   workers share rows) and moves it to the instance's timeout, and one appends the firing's
///   event. The schema holds what bounda's holds before its firings: each ticket's two events,
///   one scheduler row per instance.
/// - Reactions: per reaction, one statement marks the event done in the inbox and one appends
///   the command's event; each connection takes its share of the tickets, known beforehand.
/// - Process steps: per step, the inbox mark, the instance's first lifecycle event, and its
///   timeout's scheduler row.
///
/// With [`Way::PerTable`], each transaction's units go in a statement per table: the due rows
/// taken and moved in one, the events appended in one (`unnest`), the inbox marks in one.
pub async fn floor(
    job: Job,
    units: usize,
    connections: usize,
    per_tx: usize,
    route: Route,
    way: Way,
) -> f64 {
    let (url, schema, store) = fresh("floor").await;
    drop(store);
    let t = format!("\"{schema}\".");
    let units_i64 = i64::try_from(units).unwrap_or(i64::MAX);
    let (prefill, due) = match job {
        Job::Firings => (2 * units_i64, units_i64),
        Job::Reactions | Job::Steps => (units_i64, 0),
    };
    client(&url)
        .await
        .batch_execute(&format!(
            "{}
             INSERT INTO {t}scheduled_commands
                 (dedupe_key, command_type, aggregate_id, payload, execute_at, context)
             SELECT md5(n::text) || '-due-' || n, 'bounda.ProcessDeadline', 'due-' || n,
                 json_build_object('instance', 'due-' || n, 'process', 'Expiry'), '{DUE}', '{{}}'
             FROM generate_series(1, {due}) AS n;
             ANALYZE",
            log_of(&t, prefill)
        ))
        .await
        .unwrap_or_else(|error| panic!("cannot fill the floor's schema: {error}"));
    let reach = Reach::new(route, &url).await;
    let start = Instant::now();
    let working: Vec<_> = (0..connections)
        .map(|c| {
            let (url, t) = (reach.url.clone(), t.clone());
            tokio::spawn(async move {
                match job {
                    Job::Firings => fire_plainly(url, t, per_tx, way).await,
                    Job::Reactions | Job::Steps => {
                        let share: Vec<usize> = (c..units).step_by(connections).collect();
                        react_plainly(url, t, job, per_tx, share, way).await
                    }
                }
            })
        })
        .collect();
    let mut done = 0;
    for connection in working {
        done += connection.await.expect("a floor connection");
    }
    let rate = units as f64 / start.elapsed().as_secs_f64();
    assert_eq!(done, units, "the floor did each unit once");
    rate
}

/// One of the floor's connections doing reactions or process steps for tickets `share`,
/// `per_tx` per commit; answers how many it did.
async fn react_plainly(
    url: String,
    t: String,
    job: Job,
    per_tx: usize,
    share: Vec<usize>,
    way: Way,
) -> usize {
    let mut client = client(&url).await;
    if way == Way::PerTable {
        return react_per_table(&mut client, &t, job, per_tx, &share).await;
    }
    let handler = match job {
        Job::Steps => "Tracking",
        Job::Firings | Job::Reactions => "acknowledge_on_ticket_opened",
    };
    let mark = client
        .prepare(&format!(
            "INSERT INTO {t}inbox (handler, event_id, status, attempts, claimed_at, claim_id)
             VALUES ('{handler}', 'setup-' || $1, 'succeeded', 1, '{NOW}', 'floor')"
        ))
        .await
        .expect("the floor's inbox mark");
    let (stream, version) = match job {
        Job::Steps => ("process:Tracking", 1),
        Job::Firings | Job::Reactions => ("Ticket", 2),
    };
    let append = client
        .prepare(&format!(
            "INSERT INTO {t}events (id, aggregate_type, aggregate_id, version, type, payload,
                 timestamp, metadata)
             VALUES ('{}-' || $1, '{stream}', 't-' || $1, {version}, '{}',
                 json_build_object('ticket_id', 't-' || $1), '{NOW}', '{{}}')",
            job.name(),
            job.event_type()
        ))
        .await
        .expect("the floor's append");
    let timeout = client
        .prepare(&format!(
            "INSERT INTO {t}scheduled_commands
                 (dedupe_key, command_type, aggregate_id, payload, execute_at, context)
             VALUES ('timeout-' || $1, 'bounda.ProcessDeadline', 't-' || $1,
                 json_build_object('instance', 't-' || $1, 'process', 'Tracking'), '{TIMEOUT}',
                 '{{}}')"
        ))
        .await
        .expect("the floor's scheduler row");
    let mut done = 0;
    for chunk in share.chunks(per_tx.max(1)) {
        let tx = client.transaction().await.expect("the floor cannot begin");
        for n in chunk {
            // The ticket's number as the setup wrote it, from 1.
            let n = (n + 1).to_string();
            tx.execute(&mark, &[&n])
                .await
                .expect("the floor's inbox mark");
            tx.execute(&append, &[&n])
                .await
                .expect("the floor's append");
            if job == Job::Steps {
                tx.execute(&timeout, &[&n])
                    .await
                    .expect("the floor's scheduler row");
            }
        }
        tx.commit().await.expect("the floor cannot commit");
        done += chunk.len();
    }
    done
}

/// One of the floor's connections: fires until nothing is due, `per_tx` per commit; answers
/// how many it fired.
async fn fire_plainly(url: String, t: String, per_tx: usize, way: Way) -> usize {
    let mut client = client(&url).await;
    if way == Way::PerTable {
        return fire_per_table(&mut client, &t, per_tx).await;
    }
    let take = client
        .prepare(&format!(
            "UPDATE {t}scheduled_commands s SET execute_at = '{TIMEOUT}'
             WHERE s.dedupe_key = (
                 SELECT dedupe_key FROM {t}scheduled_commands
                 WHERE execute_at <= '{NOW}' AND claimed_at IS NULL
                 ORDER BY execute_at, dedupe_key LIMIT 1 FOR UPDATE SKIP LOCKED)
             RETURNING s.aggregate_id"
        ))
        .await
        .expect("the floor's take");
    let append = client
        .prepare(&format!(
            "INSERT INTO {t}events (id, aggregate_type, aggregate_id, version, type, payload,
                 timestamp, metadata)
             VALUES ('fired-' || $1, 'process:Expiry', $1, 2, 'ProcessDeadlineReached',
                 json_build_object('field', 'expires'), '{NOW}', '{{}}')"
        ))
        .await
        .expect("the floor's append");
    let mut fired = 0;
    loop {
        let tx = client.transaction().await.expect("the floor cannot begin");
        let mut this_tx = 0;
        while this_tx < per_tx {
            let Some(row) = tx.query_opt(&take, &[]).await.expect("a due deadline") else {
                break;
            };
            let instance: String = row.get(0);
            tx.execute(&append, &[&instance])
                .await
                .expect("the floor's append");
            this_tx += 1;
        }
        tx.commit().await.expect("the floor cannot commit");
        fired += this_tx;
        if this_tx < per_tx {
            return fired;
        }
    }
}

/// As [`fire_plainly`], each transaction's firings in a statement per table: the due rows
/// taken and moved to the timeout in one, their events appended in one.
async fn fire_per_table(client: &mut Client, t: &str, per_tx: usize) -> usize {
    let take = client
        .prepare(&format!(
            "UPDATE {t}scheduled_commands s SET execute_at = '{TIMEOUT}'
             WHERE s.dedupe_key IN (
                 SELECT dedupe_key FROM {t}scheduled_commands
                 WHERE execute_at <= '{NOW}' AND claimed_at IS NULL
                 ORDER BY execute_at, dedupe_key LIMIT $1 FOR UPDATE SKIP LOCKED)
             RETURNING s.aggregate_id"
        ))
        .await
        .expect("the floor's take");
    let append = client
        .prepare(&format!(
            "INSERT INTO {t}events (id, aggregate_type, aggregate_id, version, type, payload,
                 timestamp, metadata)
             SELECT 'fired-' || i, 'process:Expiry', i, 2, 'ProcessDeadlineReached',
                 json_build_object('field', 'expires'), '{NOW}', '{{}}'
             FROM unnest($1::text[]) AS i"
        ))
        .await
        .expect("the floor's append");
    let limit = i64::try_from(per_tx).unwrap_or(i64::MAX);
    let mut fired = 0;
    loop {
        let tx = client.transaction().await.expect("the floor cannot begin");
        let instances: Vec<String> = tx
            .query(&take, &[&limit])
            .await
            .expect("due deadlines")
            .iter()
            .map(|row| row.get(0))
            .collect();
        if !instances.is_empty() {
            tx.execute(&append, &[&instances])
                .await
                .expect("the floor's append");
        }
        tx.commit().await.expect("the floor cannot commit");
        fired += instances.len();
        if instances.len() < per_tx {
            return fired;
        }
    }
}

/// As [`react_plainly`], each transaction's reactions or steps in a statement per table: the
/// inbox marks in one, the events in one, the timeouts in one.
async fn react_per_table(
    client: &mut Client,
    t: &str,
    job: Job,
    per_tx: usize,
    share: &[usize],
) -> usize {
    let handler = match job {
        Job::Steps => "Tracking",
        Job::Firings | Job::Reactions => "acknowledge_on_ticket_opened",
    };
    let (stream, version) = match job {
        Job::Steps => ("process:Tracking", 1),
        Job::Firings | Job::Reactions => ("Ticket", 2),
    };
    let mark = client
        .prepare(&format!(
            "INSERT INTO {t}inbox (handler, event_id, status, attempts, claimed_at, claim_id)
             SELECT '{handler}', 'setup-' || n, 'succeeded', 1, '{NOW}', 'floor'
             FROM unnest($1::text[]) AS n"
        ))
        .await
        .expect("the floor's inbox mark");
    let append = client
        .prepare(&format!(
            "INSERT INTO {t}events (id, aggregate_type, aggregate_id, version, type, payload,
                 timestamp, metadata)
             SELECT '{}-' || n, '{stream}', 't-' || n, {version}, '{}',
                 json_build_object('ticket_id', 't-' || n), '{NOW}', '{{}}'
             FROM unnest($1::text[]) AS n",
            job.name(),
            job.event_type()
        ))
        .await
        .expect("the floor's append");
    let timeout = client
        .prepare(&format!(
            "INSERT INTO {t}scheduled_commands
                 (dedupe_key, command_type, aggregate_id, payload, execute_at, context)
             SELECT 'timeout-' || n, 'bounda.ProcessDeadline', 't-' || n,
                 json_build_object('instance', 't-' || n, 'process', 'Tracking'), '{TIMEOUT}',
                 '{{}}'
             FROM unnest($1::text[]) AS n"
        ))
        .await
        .expect("the floor's scheduler row");
    let mut done = 0;
    for chunk in share.chunks(per_tx.max(1)) {
        // The tickets' numbers as the setup wrote them, from 1.
        let numbers: Vec<String> = chunk.iter().map(|n| (n + 1).to_string()).collect();
        let tx = client.transaction().await.expect("the floor cannot begin");
        tx.execute(&mark, &[&numbers])
            .await
            .expect("the floor's inbox marks");
        tx.execute(&append, &[&numbers])
            .await
            .expect("the floor's append");
        if job == Job::Steps {
            tx.execute(&timeout, &[&numbers])
                .await
                .expect("the floor's scheduler rows");
        }
        tx.commit().await.expect("the floor cannot commit");
        done += chunk.len();
    }
    done
}

/// How the processes reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Directly, on this machine.
    Local,
    /// Through a proxy that delays every byte by half [`ROUND_TRIP`] each way, as a worker on
    /// another machine would.
    Distant,
}

/// The round trip between machines that [`Route::Distant`] stands for.
pub const ROUND_TRIP: Duration = Duration::from_millis(1);

impl Route {
    /// The label of the table's mode column.
    pub fn label(self) -> &'static str {
        match self {
            Route::Local => "PostgreSQL",
            Route::Distant => "PostgreSQL, 1 ms away",
        }
    }
}

/// The address to reach the server by, and the proxy that stands for the distance.
struct Reach {
    url: String,
    _proxy: Option<Proxy>,
}

impl Reach {
    async fn new(route: Route, url: &str) -> Reach {
        match route {
            Route::Local => Reach {
                url: url.to_owned(),
                _proxy: None,
            },
            Route::Distant => {
                let server = testing::durable_address()
                    .unwrap_or_else(|how| panic!("a distant route needs a TCP server: {how}"));
                let proxy = Proxy::delayed(server, ROUND_TRIP / 2)
                    .await
                    .unwrap_or_else(|how| panic!("cannot start the delaying proxy: {how}"));
                let url = testing::durable_url_via(proxy.address())
                    .unwrap_or_else(|how| panic!("no address through the proxy: {how}"));
                Reach {
                    url,
                    _proxy: Some(proxy),
                }
            }
        }
    }
}

/// Checks what the workers stored: every unit of `job` once, every event placed in one global order
/// without holes, each stream's events in version order, and a reader from the start seeing each
/// event once, in order.
async fn check_order(store: &PostgresStore, client: &Client, schema: &str, job: Job, units: usize) {
    use bounda::store::Store;
    let t = format!("\"{schema}\".");
    let mut seen = std::collections::HashSet::new();
    let mut after = 0;
    loop {
        let page = store.read_all(after, 1000).await.expect("a reader's page");
        let Some(last) = page.last() else { break };
        for event in &page {
            assert_eq!(
                event.position,
                after + 1,
                "positions without holes, in order"
            );
            assert!(
                seen.insert(event.id.clone()),
                "event {} read twice",
                event.id
            );
            after = event.position;
        }
        after = last.position;
    }
    let row = client
        .query_one(
            &format!(
                "SELECT count(*), count(*) FILTER (WHERE position < 0),
                     count(DISTINCT aggregate_id) FILTER (WHERE type = $1),
                     (SELECT count(*) FROM {t}events a JOIN {t}events b
                          ON a.aggregate_type = b.aggregate_type
                         AND a.aggregate_id = b.aggregate_id
                         AND a.version < b.version AND a.position > b.position)
                 FROM {t}events"
            ),
            &[&job.event_type()],
        )
        .await
        .expect("the order check");
    let (events, unplaced, instances, disordered): (i64, i64, i64, i64) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!(unplaced, 0, "every event was placed");
    assert_eq!(seen.len() as i64, events, "the reader saw every event once");
    assert_eq!(
        instances as usize, units,
        "every instance did its unit once"
    );
    assert_eq!(disordered, 0, "every stream in version order");
}
