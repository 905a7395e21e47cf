//! Commands from a real `nats-server`'s JetStream stream: each CloudEvent decided once for its
//! key however often it is delivered, acknowledged after its commit; a message that is no
//! command the app takes a dead letter with its raw bytes, nothing behind it waiting; its retry,
//! once a deploy takes its type, decides it.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use bounda::ingress::Ingress;
use bounda::prelude::*;
use bounda::store::{LetterFilter, LetterKind, Store};
use bounda_nats::CommandConsumer;
use bounda_nats::testing::NatsServer;
use support::*;

mod support;

/// The payments service publishes to `PAYMENTS`, subjects `payments.>`.
async fn payments_stream(url: &str) -> jetstream::Context {
    let context = jetstream::new(async_nats::connect(url).await.unwrap());
    context
        .get_or_create_stream(jetstream::stream::Config {
            name: "PAYMENTS".to_owned(),
            subjects: vec!["payments.>".to_owned()],
            ..Default::default()
        })
        .await
        .unwrap();
    context
}

/// Publishes a message with `headers` and `body`, as another service would.
async fn publish(context: &jetstream::Context, headers: &[(&str, &str)], body: &str) {
    let mut map = async_nats::HeaderMap::new();
    for (name, value) in headers {
        map.insert(*name, *value);
    }
    context
        .publish_with_headers("payments.commands", map, body.to_owned().into())
        .await
        .unwrap()
        .await
        .unwrap();
}

fn cloud_event<'a>(id: &'a str, ty: &'a str) -> [(&'a str, &'a str); 4] {
    [
        ("ce-specversion", "1.0"),
        ("ce-id", id),
        ("ce-source", "https://payments.example"),
        ("ce-type", ty),
    ]
}

async fn app_on(store: Arc<dyn Store>, ingress: Ingress, consumer: Option<CommandConsumer>) -> App {
    let builder = App::builder_shared(store).only_listed().ingress(ingress);
    match consumer {
        Some(consumer) => builder.consume(consumer),
        None => builder,
    }
    .build()
    .await
    .unwrap()
}

/// The consumer `shop`'s pending and unacknowledged messages, as the broker counts them.
async fn waiting(url: &str) -> Option<u64> {
    let context = jetstream::new(async_nats::connect(url).await.unwrap());
    let stream = context.get_stream("PAYMENTS").await.unwrap();
    let mut consumer = stream
        .get_consumer::<jetstream::consumer::pull::Config>("shop")
        .await
        .ok()?;
    let info = consumer.info().await.unwrap();
    Some(info.num_pending + info.num_ack_pending as u64)
}

/// Waits until the broker counts no message waiting at the consumer `shop`.
async fn until_taken(url: &str) {
    let started = std::time::Instant::now();
    while waiting(url).await != Some(0) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the consumer did not take every message"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `app` running in the background until told to stop.
struct Running {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), bounda::Error>>,
}

impl Running {
    fn start(app: &App) -> Running {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let app = app.clone();
        let task = tokio::spawn(async move {
            app.run_until(async {
                stopped.await.ok();
            })
            .await
        });
        Running { stop, task }
    }

    async fn stop(self) {
        self.stop.send(()).unwrap();
        self.task.await.unwrap().unwrap();
    }
}

/// Runs `app` (whose sources include the consumer `shop`) until every message of the stream is
/// acknowledged.
async fn drained(app: &App, url: &str) {
    let running = Running::start(app);
    until_taken(url).await;
    running.stop().await;
}

/// Publishes orders `o-1` to `o-<count>` as commands, message ids `m-1` on.
async fn place_orders(context: &jetstream::Context, count: u64) {
    for n in 1..=count {
        let id = format!("m-{n}");
        let body = format!(r#"{{"order_id":"o-{n}","total":{n}}}"#);
        publish(context, &cloud_event(&id, "PlaceOrder"), &body).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_command_is_decided_once_and_what_is_none_is_a_letter_with_its_bytes() {
    let server = NatsServer::start().unwrap();
    let context = payments_stream(&server.url()).await;
    let store: Arc<dyn Store> = Arc::new(bounda_sqlite::SqliteStore::in_memory().unwrap());
    let consumer = CommandConsumer::new(&server.url(), "PAYMENTS", "shop");
    let app = app_on(
        Arc::clone(&store),
        Ingress::new().command::<PlaceOrder>(),
        Some(consumer),
    )
    .await;

    publish(
        &context,
        &cloud_event("m-1", "PlaceOrder"),
        r#"{"order_id":"o-1","total":5}"#,
    )
    .await;
    // Delivered again (published twice, as a sender retrying after a lost acknowledgement).
    publish(
        &context,
        &cloud_event("m-1", "PlaceOrder"),
        r#"{"order_id":"o-1","total":5}"#,
    )
    .await;
    publish(&context, &cloud_event("m-2", "PlaceOrder"), "total: five").await;
    publish(
        &context,
        &cloud_event("m-3", "com.example.order.place.v1"),
        r#"{"order_id":"o-3","total":2}"#,
    )
    .await;
    publish(&context, &[("content-type", "text/plain")], "hello").await;
    publish(
        &context,
        &cloud_event("m-4", "PlaceOrder"),
        r#"{"order_id":"o-4","total":7}"#,
    )
    .await;

    drained(&app, &server.url()).await;

    let placed = |id: &'static str| {
        let app = app.clone();
        async move { app.events_of::<Order>(id).await.unwrap().len() }
    };
    assert_eq!(placed("o-1").await, 1, "m-1 decided once");
    assert_eq!(
        placed("o-4").await,
        1,
        "what came after the malformed ones went on"
    );
    assert_eq!(placed("o-3").await, 0);

    let letters = app
        .dead_letters()
        .list(&LetterFilter::default())
        .await
        .unwrap();
    assert_eq!(letters.len(), 3, "{letters:#?}");
    assert!(
        letters
            .iter()
            .all(|l| l.kind == LetterKind::Ingress && l.handler == "nats:PAYMENTS/shop")
    );
    let bodies: Vec<&str> = letters
        .iter()
        .map(|l| l.payload.as_ref().unwrap()["body"].as_str().unwrap())
        .collect();
    assert_eq!(
        bodies,
        ["total: five", r#"{"order_id":"o-3","total":2}"#, "hello"],
        "each message's bytes kept"
    );
    assert!(
        letters[0].error_message.contains("not JSON"),
        "{}",
        letters[0].error_message
    );
    assert!(
        letters[1]
            .error_message
            .contains("no command named `com.example.order.place.v1`"),
        "{}",
        letters[1].error_message
    );
    assert!(
        letters[2].error_message.contains("no `ce-type` header"),
        "{}",
        letters[2].error_message
    );

    // A deploy takes the other service's name for the command: the letter's retry decides it,
    // once, and a retry of the malformed one fails again, leaving it failed.
    let deployed = app_on(
        Arc::clone(&store),
        Ingress::new()
            .command::<PlaceOrder>()
            .command_as::<PlaceOrder>("com.example.order.place.v1"),
        None,
    )
    .await;
    deployed.dead_letters().retry(&letters[1].id).await.unwrap();
    assert_eq!(placed("o-3").await, 1);
    let again = deployed
        .dead_letters()
        .retry(&letters[0].id)
        .await
        .unwrap_err();
    assert!(again.to_string().contains("not JSON"), "{again}");
    let failed = deployed
        .dead_letters()
        .count(&LetterFilter {
            status: Some(bounda::store::LetterStatus::Failed),
            ..LetterFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(failed, 2);
}

// Issue 45: `lag` says what waits at a source and since when; paused, its messages wait at the
// broker and nothing is decided; resumed, they are taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_source_leaves_its_messages_at_the_broker_and_lag_counts_them() {
    let server = NatsServer::start().unwrap();
    let context = payments_stream(&server.url()).await;
    let store: Arc<dyn Store> = Arc::new(bounda_sqlite::SqliteStore::in_memory().unwrap());
    let consumer = CommandConsumer::new(&server.url(), "PAYMENTS", "shop");
    let name = bounda::ingress::Source::name(&consumer);
    assert_eq!(name, "nats:PAYMENTS/shop");
    let app = app_on(
        Arc::clone(&store),
        Ingress::new().command::<PlaceOrder>(),
        Some(consumer),
    )
    .await;
    let target = bounda::store::PauseTarget::Ingress { name: name.clone() };
    assert!(app.pause(target.clone(), "erin", None).await.unwrap());
    use bounda::clock::Clock;
    let sent_at = bounda::clock::SystemClock.now();
    place_orders(&context, 3).await;

    let running = Running::start(&app);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        app.store().head().await.unwrap(),
        0,
        "paused: nothing decided"
    );
    let lag = app.lag().await.unwrap();
    let behind = lag.ingress[0].behind.clone().unwrap();
    assert_eq!(
        (lag.ingress[0].source.as_str(), behind.messages),
        (name.as_str(), 3)
    );
    let oldest = behind.oldest.unwrap();
    assert!(
        oldest.as_millis().abs_diff(sent_at.as_millis()) < 5_000,
        "the oldest was sent when the test sent it: {oldest} against {sent_at}"
    );

    assert!(app.resume(&target).await.unwrap());
    until_taken(&server.url()).await;
    running.stop().await;
    assert_eq!(
        app.store().head().await.unwrap(),
        3,
        "each message decided once resumed"
    );
    let lag = app.lag().await.unwrap();
    assert_eq!(lag.ingress[0].behind.clone().unwrap().messages, 0);
}

// Issue 45: a source's limit paces the commands it takes, the rest waiting at the broker: one a
// second takes three messages in three windows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sources_limit_paces_the_commands_it_takes() {
    let server = NatsServer::start().unwrap();
    let context = payments_stream(&server.url()).await;
    let store: Arc<dyn Store> = Arc::new(bounda_sqlite::SqliteStore::in_memory().unwrap());
    let consumer = CommandConsumer::new(&server.url(), "PAYMENTS", "shop");
    let config = bounda::config::Config::from_json(
        r#"{ "limits": { "ingress": { "nats:PAYMENTS/shop": { "rate": "1/s" } } } }"#,
    )
    .unwrap();
    let app = App::builder_shared(Arc::clone(&store))
        .only_listed()
        .config(config)
        .ingress(Ingress::new().command::<PlaceOrder>())
        .consume(consumer)
        .build()
        .await
        .unwrap();
    place_orders(&context, 3).await;
    drained(&app, &server.url()).await;
    let mut windows = Vec::new();
    for n in 1..=3 {
        let placed = app.events_of::<Order>(&format!("o-{n}")).await.unwrap();
        assert_eq!(placed.len(), 1);
        windows.push(placed[0].timestamp.as_millis() / 1_000);
    }
    windows.dedup();
    assert_eq!(windows.len(), 3, "one a second: {windows:?}");
}
