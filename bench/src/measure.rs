//! bounda doing the work: each measurement opens a fresh file, builds a `TestApp` on the
//! simulated clock, sets up untimed, then times the work alone and counts the write
//! transactions the store committed meanwhile. Each checks afterwards, untimed, that the work
//! it timed was done, and panics if not: a benchmark that measures nothing is worse than none.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bounda::config::Config;
use bounda::testing::TestApp;
use bounda::{App, AppBuilder, hours};
use bounda_sqlite::{Options, SqliteStore};
use rusqlite::Connection;

use crate::Mode;
use crate::counting::Counting;
use crate::domain::expiry::{EXPIRES_AFTER_HOURS, Expiry};
use crate::domain::listing;
use crate::domain::{AcknowledgeOnTicketOpened, AuditOnTicketOpened, OpenTicket};
use crate::floor;

/// Passes `run_until_idle` may make: far more than any measurement needs (bounda's own limit,
/// 10,000, is one pass short of 10,000 firings one at a time).
const MAX_PASSES: usize = 10_000_000;

/// What one timed run did.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    /// Units of work done.
    pub units: usize,
    /// Wall time of the timed part.
    pub elapsed: Duration,
    /// Write transactions committed during the timed part.
    pub write_tx: u64,
}

impl Measured {
    /// Units per second.
    pub fn rate(&self) -> f64 {
        self.units as f64 / self.elapsed.as_secs_f64()
    }

    /// Write transactions per unit.
    pub fn tx_per_unit(&self) -> f64 {
        self.write_tx as f64 / self.units as f64
    }
}

/// The run of median rate among `runs`.
pub fn median_run(mut runs: Vec<Measured>) -> Measured {
    runs.sort_by(|a, b| a.rate().total_cmp(&b.rate()));
    runs[runs.len() / 2]
}

/// The store on a fresh file at `path`, shared so the benchmark can read its counter.
fn open(path: &Path, mode: Mode) -> Arc<SqliteStore> {
    let options = Options {
        synchronous: mode.synchronous(),
        ..Options::default()
    };
    Arc::new(SqliteStore::open_with(path, options).expect("cannot open bounda's store"))
}

/// A builder on `store`, sharing it, with `config`.
fn builder(store: &Arc<SqliteStore>, config: Config) -> AppBuilder {
    App::builder_shared(Arc::clone(store) as Arc<dyn bounda::store::Store>)
        .only_listed()
        .config(config)
}

/// Empties the WAL of the file at `path` through a connection of its own, so that setup's
/// writes are not checkpointed during the timed part (the floors do the same).
pub fn checkpoint(path: &Path) {
    let conn = Connection::open(path).expect("cannot open the file to checkpoint it");
    floor::checkpoint(&conn);
}

/// Dispatches one `OpenTicket` per ticket `0..count`, one after another.
pub async fn open_tickets(app: &TestApp, count: usize) {
    for n in 0..count {
        app.dispatch(OpenTicket {
            ticket_id: floor::ticket(n),
        })
        .await
        .expect("an OpenTicket was not stored");
    }
}

/// Runs until nothing is left to do, and insists that it got there.
pub async fn settle(app: &TestApp, what: &str) {
    let idle = app
        .run_until_idle_with(MAX_PASSES)
        .await
        .unwrap_or_else(|error| panic!("{what}: the app failed: {error}"));
    assert!(idle.idle, "{what}: the app did not come to rest");
    assert!(
        idle.rejections.is_empty(),
        "{what}: commands were rejected: {:?}",
        idle.rejections
    );
}

/// Counts the events of type `event_type` in the file at `path`, through a connection of its
/// own.
pub fn count_events(path: &Path, event_type: &str) -> usize {
    let conn = Connection::open(path).expect("cannot open the file to check it");
    let count: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM bounda_events WHERE type = ?1",
            [event_type],
            |row| row.get(0),
        )
        .expect("cannot count events");
    usize::try_from(count).unwrap_or_default()
}

/// Panics unless the file at `path` holds `expected` events of type `event_type`.
fn check_events(path: &Path, event_type: &str, expected: usize, what: &str) {
    let found = count_events(path, event_type);
    assert_eq!(
        found, expected,
        "{what}: expected {expected} `{event_type}` events after the timed run, found {found}; \
         the measurement did not measure the work it names"
    );
}

/// Deadline firings: `units` instances of `Expiry`, started untimed, whose deadlines come due
/// together; timed from moving the clock past them until the app is idle again. The file may
/// hold pending instances already (see `pending`); `batch_size` is the dispatcher's.
pub async fn deadline_firings(
    path: &Path,
    mode: Mode,
    units: usize,
    batch_size: usize,
) -> Measured {
    let mut config = Config::default();
    config.dispatcher.batch_size = batch_size;
    firings(path, mode, units, config).await
}

/// Deadline firings under a limit of `rate` on the process (`"1000/s"`), counted on the
/// simulated clock, which the run moves from window to window: what holding the runs beyond
/// each window's permits back costs, against the same firings unpaced.
pub async fn paced_firings(path: &Path, mode: Mode, units: usize, rate: &str) -> Measured {
    let limits =
        format!(r#"{{ "limits": {{ "processes": {{ "Expiry": {{ "rate": "{rate}" }} }} }} }}"#);
    let config = Config::from_json(&limits).expect("the limit reads");
    firings(path, mode, units, config).await
}

/// `units` deadline firings under `config`.
async fn firings(path: &Path, mode: Mode, units: usize, config: Config) -> Measured {
    firings_beside(path, mode, units, config, None).await
}

/// `units` firings of a daily deadline, each setting the next day's: `P` is
/// [`daily::Plain`](crate::domain::daily::Plain) (24 hours on) or
/// [`daily::Civil`](crate::domain::daily::Civil) (a rule's next occurrence in a zone).
pub async fn daily_firings<P: bounda::Process>(path: &Path, mode: Mode, units: usize) -> Measured {
    firings_of::<P>(path, mode, units, Config::default(), None).await
}

/// `units` deadline firings under `config`, with `relay` in the app when given.
pub async fn firings_beside(
    path: &Path,
    mode: Mode,
    units: usize,
    config: Config,
    relay: Option<bounda::relay::Relay>,
) -> Measured {
    firings_of::<Expiry>(path, mode, units, config, relay).await
}

/// `units` firings of `P`'s one deadline, due an hour after its ticket opens, under `config`,
/// with `relay` in the app when given.
async fn firings_of<P: bounda::Process>(
    path: &Path,
    mode: Mode,
    units: usize,
    config: Config,
    relay: Option<bounda::relay::Relay>,
) -> Measured {
    let store = open(path, mode);
    let mut builder = builder(&store, config).process::<P>();
    if let Some(relay) = relay {
        builder = builder.relay(relay);
    }
    let app = TestApp::new(builder)
        .await
        .expect("cannot build the deadline app");
    open_tickets(&app, units).await;
    settle(&app, "starting the instances").await;
    checkpoint(path);
    let before = store.write_transactions();
    let start = Instant::now();
    app.clock().advance(hours(EXPIRES_AFTER_HOURS + 1));
    settle(&app, "firing the deadlines").await;
    let elapsed = start.elapsed();
    let write_tx = store.write_transactions() - before;
    drop((app, store));
    check_events(path, "ProcessDeadlineReached", units, "deadline firings");
    Measured {
        units,
        elapsed,
        write_tx,
    }
}

/// What one deadline firing asks of the store: the calls of `units` firings (batch 100, FULL)
/// on a store that counts them ([`Counting`]), untimed, by method, per firing.
pub async fn store_calls_per_firing(path: &Path, units: usize) -> Vec<(&'static str, f64)> {
    let store = open(path, Mode::Full);
    store.count_statements().expect("cannot count statements");
    let counting = Arc::new(Counting::new(
        Arc::clone(&store) as Arc<dyn bounda::store::Store>
    ));
    let app = TestApp::new(
        App::builder_shared(Arc::clone(&counting) as Arc<dyn bounda::store::Store>)
            .only_listed()
            .process::<Expiry>(),
    )
    .await
    .expect("cannot build the deadline app");
    open_tickets(&app, units).await;
    settle(&app, "starting the instances").await;
    counting.take();
    let before = store.statements_run();
    app.clock().advance(hours(EXPIRES_AFTER_HOURS + 1));
    settle(&app, "firing the deadlines").await;
    with_statements(per_unit(counting.take(), units), &store, before, units)
}

/// What one reaction asks of the store, counted as [`store_calls_per_firing`] counts a firing's.
pub async fn store_calls_per_reaction(path: &Path, units: usize) -> Vec<(&'static str, f64)> {
    let store = open(path, Mode::Full);
    store.count_statements().expect("cannot count statements");
    let counting = Arc::new(Counting::new(
        Arc::clone(&store) as Arc<dyn bounda::store::Store>
    ));
    let app = TestApp::new(
        App::builder_shared(Arc::clone(&counting) as Arc<dyn bounda::store::Store>)
            .only_listed()
            .policy::<AcknowledgeOnTicketOpened>(),
    )
    .await
    .expect("cannot build the reaction app");
    open_tickets(&app, units).await;
    counting.take();
    let before = store.statements_run();
    settle(&app, "reacting").await;
    with_statements(per_unit(counting.take(), units), &store, before, units)
}

/// `calls` and the SQL statements `store` ran per unit since it had run `before`: what the
/// store's calls cost it below (reads included, `BEGIN` and `COMMIT` too).
fn with_statements(
    mut calls: Vec<(&'static str, f64)>,
    store: &SqliteStore,
    before: u64,
    units: usize,
) -> Vec<(&'static str, f64)> {
    let statements = store.statements_run() - before;
    calls.push(("SQL statements", statements as f64 / units as f64));
    calls
}

/// `calls`, each divided by `units`.
fn per_unit(
    calls: std::collections::BTreeMap<&'static str, u64>,
    units: usize,
) -> Vec<(&'static str, f64)> {
    calls
        .into_iter()
        .map(|(method, count)| (method, count as f64 / units as f64))
        .collect()
}

/// Reactions: a policy that sends one command per `TicketOpened`. The app is built first, so
/// the policy starts at the head, then `units` tickets are opened untimed; timed is the run
/// until idle in which the policy reacts to each. `beside_paused` adds a second policy on the
/// same events, paused throughout: the subscriber passes its events, bookmarked, while the
/// first reacts.
pub async fn reactions(path: &Path, mode: Mode, units: usize, beside_paused: bool) -> Measured {
    let store = open(path, mode);
    let mut builder = builder(&store, Config::default()).policy::<AcknowledgeOnTicketOpened>();
    if beside_paused {
        builder = builder.policy::<AuditOnTicketOpened>();
    }
    let app = TestApp::new(builder)
        .await
        .expect("cannot build the reaction app");
    if beside_paused {
        let audit = bounda::store::PauseTarget::Policy {
            name: "audit_on_ticket_opened".into(),
        };
        app.app()
            .pause(audit, "bench", None)
            .await
            .expect("cannot pause the audit");
    }
    open_tickets(&app, units).await;
    checkpoint(path);
    let before = store.write_transactions();
    let start = Instant::now();
    settle(&app, "reacting").await;
    let elapsed = start.elapsed();
    let write_tx = store.write_transactions() - before;
    drop((app, store));
    check_events(path, "TicketAcknowledged", units, "reactions");
    Measured {
        units,
        elapsed,
        write_tx,
    }
}

/// Projections: a read model of `units` tickets opened, their events stored untimed before the
/// app is built; timed from the first batch until the read model has reached the log's head, a
/// batch of the dispatcher's size (100) per transaction.
pub async fn projections(path: &Path, mode: Mode, units: usize) -> Measured {
    {
        let mut conn = floor::open(path, mode);
        floor::prefill_events(&mut conn, units);
    }
    let store = open(path, mode);
    let mut config = Config::default();
    config.dispatcher.catch_up.timeout = hours(1);
    let app = TestApp::new(builder(&store, config).read_model::<listing::TicketRow>())
        .await
        .expect("cannot build the read model app");
    checkpoint(path);
    let before = store.write_transactions();
    let start = Instant::now();
    let caught = app.app().catch_up_all().await.expect("projecting failed");
    let elapsed = start.elapsed();
    let write_tx = store.write_transactions() - before;
    assert!(
        caught.is_complete(),
        "the read model did not catch up: {caught:?}"
    );
    check_rows(&app, units).await;
    Measured {
        units,
        elapsed,
        write_tx,
    }
}

/// A rebuild of the read model over a log of `units` events, the live table caught up first
/// (untimed): timed from its start to its swap; with the peak resident set during it (KiB),
/// where Linux can reset the peak before it starts.
pub async fn rebuild(path: &Path, mode: Mode, units: usize) -> (Measured, Option<u64>) {
    {
        let mut conn = floor::open(path, mode);
        floor::prefill_events(&mut conn, units);
    }
    let store = open(path, mode);
    let mut config = Config::default();
    config.dispatcher.catch_up.timeout = hours(1);
    let app = TestApp::new(builder(&store, config).read_model::<listing::TicketRow>())
        .await
        .expect("cannot build the read model app");
    app.app().catch_up_all().await.expect("projecting failed");
    checkpoint(path);
    let reset = crate::memory::reset_peak();
    let before = store.write_transactions();
    let start = Instant::now();
    let done = app
        .app()
        .rebuild("tickets", |_| {})
        .await
        .expect("the rebuild failed");
    let elapsed = start.elapsed();
    let write_tx = store.write_transactions() - before;
    assert!(done.swapped && done.position == units as u64, "{done:?}");
    let peak = crate::memory::peak_kib().filter(|_| reset);
    check_rows(&app, units).await;
    (
        Measured {
            units,
            elapsed,
            write_tx,
        },
        peak,
    )
}

/// Fails unless the read model holds one row per ticket.
async fn check_rows(app: &TestApp, units: usize) {
    let rows = app
        .app()
        .read::<listing::TicketRow>()
        .count(bounda::read_model::Filter::all())
        .await
        .expect("cannot count the read model's rows");
    assert_eq!(
        rows, units as u64,
        "the read model holds {rows} rows after the timed run, not {units}: the measurement did          not measure the work it names"
    );
}

/// Commands: `units` `OpenTicket`s dispatched one after another, each to a new ticket.
pub async fn commands(path: &Path, mode: Mode, units: usize) -> Measured {
    let store = open(path, mode);
    let app = TestApp::new(builder(&store, Config::default()))
        .await
        .expect("cannot build the app");
    checkpoint(path);
    let before = store.write_transactions();
    let start = Instant::now();
    open_tickets(&app, units).await;
    let elapsed = start.elapsed();
    let write_tx = store.write_transactions() - before;
    drop((app, store));
    check_events(path, "TicketOpened", units, "commands");
    Measured {
        units,
        elapsed,
        write_tx,
    }
}

/// How late deadlines ran under `App::run` on the real clock.
#[derive(Debug, Clone, Copy)]
pub struct Lateness {
    /// Deadlines measured.
    pub units: usize,
    /// The poll interval the app ran with.
    pub poll: Duration,
    /// The median lateness: from a deadline's moment to its `ProcessDeadlineReached`.
    pub median: Duration,
    /// The largest.
    pub max: Duration,
}

/// Deadline latency on the real clock: `units` tickets opened `spacing` apart while `App::run`
/// runs with its default poll interval; each deadline comes due a moment after its ticket
/// opens, when the worker is otherwise idle. Lateness is read from each
/// `ProcessDeadlineReached`: its time, minus the moment that came due.
pub async fn lateness(path: &Path, mode: Mode, units: usize, spacing: Duration) -> Lateness {
    use crate::domain::soon::{DUE_AFTER_MS, Soon};

    let store = open(path, mode);
    let app = builder(&store, Config::default())
        .process::<Soon>()
        .build()
        .await
        .expect("the app");
    let poll: Duration = app.config().dispatcher.poll_interval.into();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let runner = {
        let app = app.clone();
        tokio::spawn(async move {
            app.run_until(async {
                let _ = stopped.await;
            })
            .await
        })
    };
    for n in 0..units {
        app.dispatch(OpenTicket {
            ticket_id: floor::ticket(n),
        })
        .await
        .expect("an OpenTicket was not stored");
        tokio::time::sleep(spacing).await;
    }
    // Every deadline is due a moment after the last ticket; wait for them, a while at most.
    let deadline = Instant::now() + Duration::from_millis(DUE_AFTER_MS) + poll * 20;
    while count_events(path, "ProcessDeadlineReached") < units && Instant::now() < deadline {
        tokio::time::sleep(poll / 4).await;
    }
    let _ = stop.send(());
    runner
        .await
        .expect("the runner task")
        .expect("App::run failed");
    check_events(path, "ProcessDeadlineReached", units, "latency");
    let conn = Connection::open(path).expect("cannot open the file to read lateness");
    let mut late: Vec<Duration> = conn
        .prepare(
            "SELECT payload, timestamp FROM bounda_events WHERE type = 'ProcessDeadlineReached'",
        )
        .and_then(|mut statement| {
            statement
                .query_map([], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
                })?
                .collect::<Result<Vec<_>, _>>()
        })
        .expect("cannot read the deadlines reached")
        .into_iter()
        .map(|(payload, timestamp)| {
            let payload: serde_json::Value =
                serde_json::from_str(&payload).expect("a lifecycle payload");
            let at: bounda::Instant = payload["at"]
                .as_str()
                .and_then(|at| at.parse().ok())
                .expect("the moment that came due");
            let ran: bounda::Instant = timestamp.parse().expect("the event's time");
            Duration::from_millis(
                u64::try_from(ran.as_millis() - at.as_millis()).unwrap_or_default(),
            )
        })
        .collect();
    late.sort();
    Lateness {
        units,
        poll,
        median: late[late.len() / 2],
        max: late[late.len() - 1],
    }
}

/// How long the operator page's overview takes to draw with `pending` far-future deadlines
/// beside `due` instances whose deadlines fall in its 48-hour window: the median of `views`
/// requests through its router, on the simulated clock's first day.
pub async fn page_overview(path: &Path, pending: usize, due: usize, views: usize) -> Duration {
    use tower::ServiceExt;

    let store = open(path, Mode::Normal);
    if pending > 0 {
        let mut conn = Connection::open(path).expect("cannot open the file to add pending rows");
        floor::insert_pending(&mut conn, pending);
    }
    let app = TestApp::new(builder(&store, Config::default()).process::<Expiry>())
        .await
        .expect("cannot build the page's app");
    open_tickets(&app, due).await;
    settle(&app, "starting the instances").await;
    checkpoint(path);
    let page = bounda::page::router(app.app().clone(), bounda::page::Options::default());
    let mut times = Vec::with_capacity(views);
    for _ in 0..views {
        let request = axum::http::Request::get("/")
            .header(axum::http::header::HOST, "127.0.0.1")
            .body(axum::body::Body::empty())
            .expect("a request");
        let start = Instant::now();
        let response = page.clone().oneshot(request).await.expect("an answer");
        let body = axum::body::to_bytes(response.into_body(), 16 << 20)
            .await
            .expect("the page");
        times.push(start.elapsed());
        let html = String::from_utf8_lossy(&body);
        assert!(
            html.contains(&format!("{due} shown")),
            "the overview did not show the {due} due deadlines"
        );
    }
    times.sort();
    times[times.len() / 2]
}

/// What a check before a deploy costs: `instances` process instances started by the app, the
/// log padded with copies of their opening event to `events` in all, then `App::preflight`
/// (every event and instance read) and the survey a runner makes when it starts, each timed.
/// What the check's setup measured: the check and its floor, the survey, the memory before, and
/// a copy of the same store into a fresh file with its floor.
pub struct Preflighted {
    /// `App::preflight`.
    pub checked: Measured,
    /// `App::drifted` over every instance.
    pub survey: Duration,
    /// The check's floor.
    pub floor: Duration,
    /// Peak memory before the check, in KiB.
    pub before: Option<u64>,
    /// `store::copy` into a fresh SQLite file.
    pub copy: Duration,
    /// SQLite's own copy of the file (`VACUUM INTO`): the same pages written once, with no
    /// record read out or checked.
    pub copy_floor: Duration,
    /// The same rows copied by SQL in one transaction (`INSERT INTO .. SELECT` from the file
    /// attached): every row and index entry written again, none read out of SQLite.
    pub copy_rows: Duration,
}

pub async fn preflight(path: &Path, instances: usize, events: usize) -> Preflighted {
    let store = open(path, Mode::Normal);
    let app = TestApp::new(builder(&store, Config::default()).process::<Expiry>())
        .await
        .expect("cannot build the check's app");
    open_tickets(&app, instances).await;
    settle(&app, "starting the instances").await;
    {
        let conn = Connection::open(path).expect("cannot open the file to pad its log");
        let stored: i64 = conn
            .query_row("SELECT COUNT(*) FROM bounda_events", [], |row| row.get(0))
            .expect("cannot count the events");
        let padding = events.saturating_sub(stored as usize);
        conn.execute(
            "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?1)
             INSERT INTO bounda_events
                 (id, aggregate_type, aggregate_id, version, type, payload, timestamp, metadata)
             SELECT 'pad-' || i, 'Ticket', 'pad-' || i, 1, e.type,
                    json_object('ticket_id', 'pad-' || i), e.timestamp, e.metadata
             FROM n, (SELECT * FROM bounda_events WHERE type = 'TicketOpened' LIMIT 1) AS e",
            [padding as i64],
        )
        .expect("cannot pad the log");
    }
    checkpoint(path);
    let before = crate::memory::peak_kib();
    let floor = read_floor(&*store, instances).await;
    let start = Instant::now();
    let report = app.app().preflight().await.expect("the check failed");
    let elapsed = start.elapsed();
    assert!(report.passes(), "the check found problems: {report:#?}");
    assert_eq!(report.events as usize, events, "every event was read");
    assert_eq!(
        report.instances as usize, instances,
        "every instance was read"
    );
    let start = Instant::now();
    let drifted = app
        .app()
        .drifted(bounda::Rearm::All)
        .await
        .expect("the survey failed");
    let survey = start.elapsed();
    assert!(drifted.is_empty(), "entries drifted: {drifted:?}");
    let (copy, copy_floor, copy_rows) = copy_and_floor(path, &store, events).await;
    Preflighted {
        checked: Measured {
            units: events,
            elapsed,
            write_tx: 0,
        },
        survey,
        floor,
        before,
        copy,
        copy_floor,
        copy_rows,
    }
}

/// `store::copy` of `store` (the file at `path`, holding `events` events) into a fresh file,
/// SQLite's `VACUUM INTO` of the same file, and its rows copied by SQL into a fresh bounda file,
/// each timed.
async fn copy_and_floor(
    path: &Path,
    store: &SqliteStore,
    events: usize,
) -> (Duration, Duration, Duration) {
    let into = path.with_extension("copy.db");
    let target = SqliteStore::open(&into).expect("cannot open the copy's file");
    let now = bounda::Instant::parse("2026-06-01T00:00:00Z").expect("a moment");
    let start = Instant::now();
    let copied = bounda::store::copy(store, &target, "bench", now)
        .await
        .expect("the copy failed");
    let copy = start.elapsed();
    assert_eq!(copied.events as usize, events, "every event was copied");
    let floor_into = path.with_extension("vacuum.db");
    let conn = Connection::open(path).expect("cannot open the file to copy it");
    let start = Instant::now();
    conn.execute("VACUUM INTO ?1", [floor_into.to_string_lossy()])
        .expect("cannot copy the file");
    let vacuum = start.elapsed();
    // A fresh file with bounda's tables, the rows copied into it by SQL.
    let rows_into = path.with_extension("rows.db");
    drop(SqliteStore::open(&rows_into).expect("cannot create the rows' file"));
    let rows = Connection::open(&rows_into).expect("cannot open the rows' file");
    rows.execute("ATTACH ?1 AS source", [path.to_string_lossy()])
        .expect("cannot attach the store");
    let start = Instant::now();
    rows.execute_batch(
        "BEGIN;
         INSERT INTO main.bounda_events SELECT * FROM source.bounda_events;
         INSERT INTO main.bounda_checkpoints SELECT * FROM source.bounda_checkpoints;
         INSERT INTO main.bounda_inbox SELECT * FROM source.bounda_inbox;
         INSERT INTO main.bounda_scheduled_commands SELECT * FROM source.bounda_scheduled_commands;
         INSERT INTO main.bounda_dead_letters SELECT * FROM source.bounda_dead_letters;
         COMMIT;",
    )
    .expect("cannot copy the rows");
    (copy, vacuum, start.elapsed())
}

/// The least reading the check needs, timed: every event read a page at a time, and each
/// instance's snapshot and scheduler entry read by key, nothing decoded or compared.
async fn read_floor(store: &dyn bounda::store::Store, instances: usize) -> Duration {
    let start = Instant::now();
    let mut after = 0;
    loop {
        let page = store
            .read_all(after, 1_000)
            .await
            .expect("cannot read events");
        let Some(last) = page.last() else { break };
        after = last.position;
    }
    let mut read = 0;
    let mut from: Option<String> = None;
    loop {
        let ids = store
            .stream_ids("process:Expiry", from.as_deref(), 500)
            .await
            .expect("cannot read instances");
        let Some(last) = ids.last() else { break };
        from = Some(last.clone());
        for id in &ids {
            store
                .snapshot("process:Expiry", id)
                .await
                .expect("cannot read a snapshot");
            read += 1;
        }
    }
    assert_eq!(read, instances, "the floor read every instance");
    start.elapsed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn each_measurement_does_its_work() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = |name: &str| dir.path().join(name);
        let fired = deadline_firings(&path("d.db"), Mode::Normal, 3, 100).await;
        assert_eq!(fired.units, 3);
        assert!(
            (1..=3).contains(&fired.write_tx),
            "a batch commits together: {fired:?}"
        );
        let one_by_one = deadline_firings(&path("d1.db"), Mode::Normal, 3, 1).await;
        let paced = paced_firings(&path("dp.db"), Mode::Normal, 3, "2/s").await;
        assert_eq!(paced.units, 3);
        assert!(
            one_by_one.write_tx >= 3,
            "batches of one commit each: {one_by_one:?}"
        );
        let reacted = reactions(&path("r.db"), Mode::Normal, 3, false).await;
        assert!(reacted.write_tx >= 1, "{reacted:?}");
        let past_paused = reactions(&path("rp.db"), Mode::Normal, 3, true).await;
        assert_eq!(past_paused.units, 3, "{past_paused:?}");
        let late = lateness(&path("l.db"), Mode::Normal, 2, Duration::from_millis(10)).await;
        assert_eq!(late.units, 2);
        assert!(late.max >= late.median);
        let dispatched = commands(&path("c.db"), Mode::Normal, 3).await;
        assert_eq!(dispatched.write_tx, 3, "one transaction per command");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn pending_rows_are_written_as_bounda_writes_moments() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("format.db");
        let store = open(&path, Mode::Normal);
        let app = TestApp::new(builder(&store, Config::default()).process::<Expiry>())
            .await
            .expect("the app");
        open_tickets(&app, 1).await;
        settle(&app, "starting").await;
        let conn = Connection::open(&path).expect("the file");
        let (command_type, execute_at): (String, String) = conn
            .query_row(
                "SELECT command_type, execute_at FROM bounda_scheduled_commands",
                [],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .expect("bounda's one scheduler row");
        assert_eq!(command_type, "bounda.ProcessDeadline");
        assert_eq!(execute_at, "2026-01-01T01:00:00.000Z");
        assert_eq!(execute_at.len(), floor::FAR_FUTURE.len());
        assert!(
            floor::FAR_FUTURE > execute_at.as_str(),
            "pending rows sort after"
        );
    }
}
