//! A relay publishing to a real `nats-server` with JetStream (Debian's package), started by the
//! tests: each event one message, its CloudEvent in `ce-` headers, its id the message id; a
//! message published again is dropped by the stream's duplicate window; a server that stops
//! holds the relay's streams until it is back, and nothing is lost or doubled.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use async_nats::jetstream;
use bounda::prelude::*;
use bounda::relay::{Relay, Sink};
use bounda_nats::JetStream;
use bounda_nats::testing::NatsServer;
use support::*;

mod support;

async fn shop(sink: JetStream) -> TestApp {
    TestApp::new(
        App::builder(bounda_sqlite::SqliteStore::in_memory().unwrap())
            .only_listed()
            .command::<PlaceOrder>()
            .relay(Relay::new("orders", sink).source("https://shop.example")),
    )
    .await
    .unwrap()
}

async fn place(app: &TestApp, order: &str, total: u64) {
    app.dispatch(PlaceOrder {
        order_id: order.to_owned(),
        total,
    })
    .await
    .unwrap();
}

/// Every message of stream `name`, in its order.
async fn messages(url: &str, name: &str) -> Vec<async_nats::jetstream::message::StreamMessage> {
    let client = async_nats::connect(url).await.unwrap();
    let context = jetstream::new(client);
    let mut stream = context.get_stream(name).await.unwrap();
    let last = stream.info().await.unwrap().state.last_sequence;
    let mut messages = Vec::new();
    for sequence in 1..=last {
        messages.push(stream.get_raw_message(sequence).await.unwrap());
    }
    messages
}

fn header<'m>(message: &'m jetstream::message::StreamMessage, name: &str) -> Option<&'m str> {
    message.headers.get(name).map(|value| value.as_str())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_event_is_one_cloud_event_on_the_stream_and_a_repeat_is_dropped() {
    let server = NatsServer::start().unwrap();
    let sink = JetStream::new(&server.url(), "SHOP", "shop");
    let app = shop(sink.clone()).await;
    place(&app, "o-1", 5).await;
    place(&app, "o-2", 7).await;
    place(&app, "o-1", 6).await;
    app.run_until_idle().await.unwrap();

    let stored = app.app().events_of::<Order>("o-1").await.unwrap();
    let published = messages(&server.url(), "SHOP").await;
    assert_eq!(published.len(), 3);
    let first = &published[0];
    assert_eq!(first.subject.as_str(), "shop.Order.OrderPlaced.v1");
    assert_eq!(header(first, "Nats-Msg-Id"), Some(stored[0].id.as_str()));
    assert_eq!(header(first, "ce-id"), Some(stored[0].id.as_str()));
    assert_eq!(header(first, "ce-specversion"), Some("1.0"));
    assert_eq!(header(first, "ce-source"), Some("https://shop.example"));
    assert_eq!(header(first, "ce-type"), Some("Order.OrderPlaced.v1"));
    assert_eq!(header(first, "ce-subject"), Some("o-1"));
    assert_eq!(header(first, "content-type"), Some("application/json"));
    let data: serde_json::Value = serde_json::from_slice(&first.payload).unwrap();
    assert_eq!(data, serde_json::json!({ "order_id": "o-1", "total": 5 }));
    let o1: Vec<Option<&str>> = published
        .iter()
        .filter(|message| header(message, "ce-subject") == Some("o-1"))
        .map(|message| header(message, "ce-id"))
        .collect();
    assert_eq!(
        o1,
        [Some(stored[0].id.as_str()), Some(stored[1].id.as_str())],
        "o-1's events in its order"
    );

    // A run repeated after a crash publishes the same message again: the stream keeps one.
    let relay = Relay::new("orders", sink.clone()).source("https://shop.example");
    let again = relay.message_of(&stored[0]).unwrap();
    sink.publish(&again).await.unwrap();
    assert_eq!(messages(&server.url(), "SHOP").await.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stops_holds_the_relay_until_it_is_back_and_nothing_is_lost() {
    let mut server = NatsServer::start().unwrap();
    let sink = JetStream::new(&server.url(), "SHOP", "shop")
        .ack_timeout(std::time::Duration::from_millis(300));
    let app = shop(sink).await;
    place(&app, "o-1", 1).await;
    app.run_until_idle().await.unwrap();
    assert_eq!(messages(&server.url(), "SHOP").await.len(), 1);

    server.stop();
    for n in 2..=4 {
        place(&app, "o-1", n).await;
    }
    place(&app, "o-2", 9).await;
    // Minutes of simulated time: each publish fails and is tried again after its back-off.
    app.advance(bounda::minutes(3)).await.unwrap();
    server.resume().unwrap();
    // The client reconnects in the background, in real time: the retries a minute apart go
    // through once it has.
    let started = std::time::Instant::now();
    let mut published = Vec::new();
    while published.len() < 5 && started.elapsed() < std::time::Duration::from_secs(30) {
        app.advance(bounda::minutes(1)).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        published = messages(&server.url(), "SHOP").await;
    }
    let stored = app.app().events_of::<Order>("o-1").await.unwrap();
    let o1: Vec<Option<&str>> = published
        .iter()
        .filter(|message| header(message, "ce-subject") == Some("o-1"))
        .map(|message| header(message, "ce-id"))
        .collect();
    let expected: Vec<Option<&str>> = stored.iter().map(|e| Some(e.id.as_str())).collect();
    assert_eq!(o1, expected, "o-1's four events once each, in order");
    assert_eq!(published.len(), 5, "o-2's too");
    let letters = app
        .app()
        .dead_letters()
        .count(&bounda::store::LetterFilter::default())
        .await
        .unwrap();
    assert_eq!(letters, 0);
}
