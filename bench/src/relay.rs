//! A relay to a local NATS JetStream (`nats-server`, started by the benchmark): bounda's
//! relay publishing what the app stored, beside the least the same result needs: read the log
//! a page at a time, publish each event with its id as `Nats-Msg-Id`, await the page's
//! acknowledgements together, move a checkpoint. And deadline firings with a relay beside them,
//! against the same firings without: what a relay costs the work it does not publish.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use async_nats::jetstream;
use bounda::App;
use bounda::config::Config;
use bounda::relay::Relay;
use bounda::testing::TestApp;
use bounda_nats::JetStream;
use bounda_nats::testing::NatsServer;
use bounda_sqlite::{Options, SqliteStore};
use rusqlite::params;

use crate::Mode;
use crate::domain::OpenTicket;
use crate::floor;
use crate::measure::{Measured, open_tickets, settle};

/// How many messages the stream named `stream` holds.
async fn messages(url: &str, stream: &str) -> u64 {
    let context = jetstream::new(
        async_nats::connect(url)
            .await
            .expect("cannot reach the benchmark's nats-server"),
    );
    let mut stream = context
        .get_stream(stream)
        .await
        .expect("the relay's stream is missing");
    stream
        .info()
        .await
        .expect("the stream's info does not read")
        .state
        .messages
}

/// The store on a fresh file at `path`.
fn open(path: &Path, mode: Mode) -> Arc<SqliteStore> {
    let options = Options {
        synchronous: mode.synchronous(),
        ..Options::default()
    };
    Arc::new(SqliteStore::open_with(path, options).expect("cannot open bounda's store"))
}

/// bounda's relay publishing `units` tickets' `TicketOpened` to stream `name` on the SQLite
/// file at `path`: see [`relay_run`]; the write transactions counted.
pub async fn publishes(
    path: &Path,
    mode: Mode,
    units: usize,
    server: &NatsServer,
    name: &str,
) -> Measured {
    let store = open(path, mode);
    let shared = Arc::clone(&store) as Arc<dyn bounda::store::Store>;
    let counted = || store.write_transactions();
    relay_run(
        shared,
        units,
        server,
        name,
        || crate::measure::checkpoint(path),
        counted,
    )
    .await
}

/// The app on `store` with a relay of every event to stream `name`, built and run first, so the
/// relay starts at the head; `units` tickets opened untimed, then `settled` (a WAL checkpoint);
/// timed is the run until idle in which the relay publishes each, acknowledged, and the write
/// transactions `counted` meanwhile. Checked: the stream holds each.
async fn relay_run(
    store: Arc<dyn bounda::store::Store>,
    units: usize,
    server: &NatsServer,
    name: &str,
    settled: impl FnOnce(),
    counted: impl Fn() -> u64,
) -> Measured {
    let sink = JetStream::new(&server.url(), name, &name.to_lowercase());
    let builder = App::builder_shared(store)
        .only_listed()
        .command::<OpenTicket>()
        .relay(Relay::new("tickets", sink));
    let app = TestApp::new(builder)
        .await
        .expect("cannot build the relay app");
    settle(&app, "starting the relay").await;
    open_tickets(&app, units).await;
    settled();
    let before = counted();
    let start = Instant::now();
    settle(&app, "publishing").await;
    let elapsed = start.elapsed();
    let write_tx = counted() - before;
    drop(app);
    let published = messages(&server.url(), name).await;
    assert_eq!(
        published, units as u64,
        "the relay published {published} messages of {units} events"
    );
    Measured {
        units,
        elapsed,
        write_tx,
    }
}

/// One event of the log as the floors read it: position, id, aggregate id, type, payload.
type Logged = (i64, String, String, String, String);

/// The floors' stream `name` on `server`, made: a context to publish to it.
async fn floor_stream(server: &NatsServer, name: &str) -> jetstream::Context {
    let context = jetstream::new(
        async_nats::connect(server.url())
            .await
            .expect("cannot reach the benchmark's nats-server"),
    );
    context
        .get_or_create_stream(jetstream::stream::Config {
            name: name.to_owned(),
            subjects: vec![format!("{}.>", name.to_lowercase())],
            ..Default::default()
        })
        .await
        .expect("cannot make the floor's stream");
    context
}

/// Publishes `page` to stream `name`, each event with its id as `Nats-Msg-Id` and its
/// CloudEvents headers, and awaits the acknowledgements together.
async fn publish_page(context: &jetstream::Context, name: &str, page: &[Logged]) {
    let prefix = name.to_lowercase();
    let mut acks = Vec::with_capacity(page.len());
    for (_, id, aggregate_id, event_type, payload) in page {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("ce-specversion", "1.0");
        headers.insert("ce-id", id.as_str());
        headers.insert("ce-source", "/tickets");
        headers.insert("ce-type", format!("Ticket.{event_type}.v1").as_str());
        headers.insert("ce-subject", aggregate_id.as_str());
        headers.insert("content-type", "application/json");
        let message = jetstream::message::PublishMessage::build()
            .headers(headers)
            .message_id(id.as_str())
            .payload(payload.clone().into_bytes().into());
        acks.push(
            context
                .send_publish(format!("{prefix}.Ticket.{event_type}.v1"), message)
                .await
                .expect("the floor cannot publish"),
        );
    }
    for ack in acks {
        ack.await.expect("the floor's publish was not acknowledged");
    }
}

/// A floor's rate from `start`, once the stream holds each of its `units` events.
async fn published_all(units: usize, start: Instant, server: &NatsServer, name: &str) -> f64 {
    let rate = units as f64 / start.elapsed().as_secs_f64();
    assert_eq!(
        messages(&server.url(), name).await,
        units as u64,
        "the floor did not publish every event"
    );
    rate
}

/// The floor on SQLite: `units` events read from the log `per_tx` at a time, each page
/// published and acknowledged (see [`publish_page`]), then the checkpoint moved past it in one
/// transaction.
pub async fn floor(
    path: &Path,
    mode: Mode,
    units: usize,
    per_tx: usize,
    server: &NatsServer,
    name: &str,
) -> f64 {
    let mut conn = floor::open(path, mode);
    floor::prefill_events(&mut conn, units);
    floor::checkpoint(&conn);
    let context = floor_stream(server, name).await;
    let start = Instant::now();
    let (mut after, mut done) = (0_i64, 0);
    while done < units {
        let page: Vec<Logged> = conn
            .prepare_cached(
                "SELECT position, id, aggregate_id, type, payload FROM bounda_events
                 WHERE position > ?1 ORDER BY position LIMIT ?2",
            )
            .and_then(|mut statement| {
                statement
                    .query_map(params![after, per_tx as i64], |row| {
                        Ok((
                            row.get(0)?,
                            row.get(1)?,
                            row.get(2)?,
                            row.get(3)?,
                            row.get(4)?,
                        ))
                    })?
                    .collect()
            })
            .expect("the floor cannot read the log");
        publish_page(&context, name, &page).await;
        let Some((last, ..)) = page.last() else {
            break;
        };
        after = *last;
        conn.execute(
            "INSERT INTO bounda_checkpoints (subscriber, position) VALUES ('relays', ?1)
             ON CONFLICT (subscriber) DO UPDATE SET position = excluded.position",
            [after],
        )
        .expect("the floor cannot move its checkpoint");
        done += page.len();
    }
    published_all(units, start, server, name).await
}

/// bounda's relay on PostgreSQL (a store on a fresh schema of the benchmark's server, in this
/// process), as [`publishes`] on SQLite; its write transactions are not counted.
pub async fn publishes_on_postgres(units: usize, server: &NatsServer, name: &str) -> Measured {
    let store = Arc::new(crate::postgres::fresh_store("relay").await);
    relay_run(store, units, server, name, || {}, || 0).await
}

/// The floor on PostgreSQL: as [`floor()`], from a schema of the benchmark's server over one
/// connection.
pub async fn floor_on_postgres(
    units: usize,
    per_tx: usize,
    server: &NatsServer,
    name: &str,
) -> f64 {
    let (client, t) = crate::postgres::filled_log(i64::try_from(units).unwrap_or(i64::MAX)).await;
    let context = floor_stream(server, name).await;
    let read = format!(
        "SELECT position, id, aggregate_id, type, payload::text FROM {t}events
         WHERE position > $1 ORDER BY position LIMIT $2"
    );
    let mark = format!(
        "INSERT INTO {t}checkpoints (subscriber, position) VALUES ('relays', $1)
         ON CONFLICT (subscriber) DO UPDATE SET position = excluded.position"
    );
    let start = Instant::now();
    let (mut after, mut done) = (0_i64, 0);
    while done < units {
        let rows = client
            .query(&read, &[&after, &(per_tx as i64)])
            .await
            .expect("the floor cannot read the log");
        let page: Vec<Logged> = rows
            .iter()
            .map(|row| (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4)))
            .collect();
        publish_page(&context, name, &page).await;
        let Some((last, ..)) = page.last() else {
            break;
        };
        after = *last;
        client
            .execute(&mark, &[&after])
            .await
            .expect("the floor cannot move its checkpoint");
        done += page.len();
    }
    published_all(units, start, server, name).await
}

/// `units` deadline firings (see `measure::deadline_firings`) with a relay of every event to
/// stream `name` beside them: the firings store only the runtime's own events, which a relay
/// does not publish, so what it costs them is its pass over their events (and the tickets'
/// openings it publishes before the firings are timed).
pub async fn beside_firings(
    path: &Path,
    mode: Mode,
    units: usize,
    server: &NatsServer,
    name: &str,
) -> Measured {
    let sink = JetStream::new(&server.url(), name, &name.to_lowercase());
    let relay = Relay::new("tickets", sink);
    let measured =
        crate::measure::firings_beside(path, mode, units, Config::default(), Some(relay)).await;
    assert_eq!(
        messages(&server.url(), name).await,
        units as u64,
        "the relay did not publish every ticket opened"
    );
    measured
}
