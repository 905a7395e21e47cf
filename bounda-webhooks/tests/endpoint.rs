//! A relay posting to a real HTTP endpoint the test serves: each event one signed `POST`
//! whose signature a Standard Webhooks verifier accepts; an endpoint that answers `503` or
//! nothing in time holds the stream until it answers, and nothing is lost or reordered; one
//! that refuses (`401` for a wrong secret, `413`) files a letter naming the event, retried
//! once the endpoint is mended.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use bounda::prelude::*;
use bounda::relay::Relay;
use bounda::store::LetterFilter;
use bounda_webhooks::Webhook;
use support::*;

mod support;

/// What the endpoint does with the next request.
#[derive(Debug, Clone, Copy)]
enum Answer {
    Status(StatusCode),
    /// Answers `200` after this long.
    Late(Duration),
}

/// One request the endpoint took, whatever it answered.
#[derive(Debug, Clone)]
struct Received {
    headers: HeaderMap,
    body: Bytes,
    verified: bool,
    answered: StatusCode,
}

/// The endpoint: it verifies each request's signature with its own secret, answers as
/// planned (then `200` for a verified request, `401` for another), and keeps what it took.
#[derive(Debug, Clone)]
struct Endpoint {
    secret: &'static str,
    plan: Arc<Mutex<VecDeque<Answer>>>,
    /// The `webhook-id` of each request as it arrived, answered or not.
    arrived: Arc<Mutex<Vec<String>>>,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Endpoint {
    /// Serves on a free local port; the address to post to.
    async fn serve(secret: &'static str) -> (Endpoint, String) {
        let endpoint = Endpoint {
            secret,
            plan: Arc::default(),
            arrived: Arc::default(),
            received: Arc::default(),
        };
        let taken = endpoint.clone();
        let app = axum::Router::new().route(
            "/hooks",
            axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                let endpoint = taken.clone();
                async move { endpoint.take(headers, body).await }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (endpoint, format!("http://{address}/hooks"))
    }

    async fn take(&self, headers: HeaderMap, body: Bytes) -> StatusCode {
        let verified = bounda_webhooks::verify(self.secret, &headers, &body).is_ok();
        let id = headers.get("webhook-id").and_then(|v| v.to_str().ok());
        self.arrived
            .lock()
            .unwrap()
            .push(id.unwrap_or_default().to_owned());
        let planned = self.plan.lock().unwrap().pop_front();
        let answered = match planned {
            Some(Answer::Status(status)) => status,
            Some(Answer::Late(delay)) => {
                tokio::time::sleep(delay).await;
                StatusCode::OK
            }
            None if verified => StatusCode::OK,
            None => StatusCode::UNAUTHORIZED,
        };
        self.received.lock().unwrap().push(Received {
            headers,
            body,
            verified,
            answered,
        });
        answered
    }

    fn plan(&self, answers: &[Answer]) {
        self.plan.lock().unwrap().extend(answers.iter().copied());
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// The ids of the events it acknowledged, in order, of ticket `id`.
    fn acknowledged(&self, id: &str) -> Vec<String> {
        self.received()
            .iter()
            .filter(|r| r.answered.is_success() && header(r, "ce-subject") == Some(id))
            .filter_map(|r| header(r, "webhook-id").map(str::to_owned))
            .collect()
    }
}

fn header<'r>(received: &'r Received, name: &str) -> Option<&'r str> {
    received.headers.get(name).and_then(|v| v.to_str().ok())
}

async fn desk(sink: Webhook) -> TestApp {
    TestApp::new(
        App::builder(bounda_sqlite::SqliteStore::in_memory().unwrap())
            .only_listed()
            .command::<AddLine>()
            .relay(Relay::new("tickets", sink).source("https://desk.example")),
    )
    .await
    .unwrap()
}

async fn add(app: &TestApp, ticket: &str, line: u64) {
    app.dispatch(AddLine {
        ticket_id: ticket.to_owned(),
        line,
    })
    .await
    .unwrap();
}

async fn ids(app: &TestApp, ticket: &str) -> Vec<String> {
    let stored = app.app().events_of::<Ticket>(ticket).await.unwrap();
    stored.into_iter().map(|event| event.id).collect()
}

async fn letters(app: &TestApp) -> Vec<bounda::store::DeadLetter> {
    app.app()
        .dead_letters()
        .list(&LetterFilter::default())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_event_is_one_signed_post_of_its_cloud_event() {
    let (endpoint, url) = Endpoint::serve(SECRET).await;
    let app = desk(Webhook::new(&url, SECRET).unwrap()).await;
    add(&app, "t-1", 1).await;
    add(&app, "t-2", 1).await;
    add(&app, "t-1", 2).await;
    app.run_until_idle().await.unwrap();

    let received = endpoint.received();
    assert_eq!(received.len(), 3);
    assert!(received.iter().all(|r| r.verified), "{received:?}");
    let first = received
        .iter()
        .find(|r| header(r, "ce-subject") == Some("t-1"))
        .unwrap();
    let t1 = ids(&app, "t-1").await;
    assert_eq!(header(first, "webhook-id"), Some(t1[0].as_str()));
    assert_eq!(header(first, "ce-id"), Some(t1[0].as_str()));
    assert_eq!(header(first, "ce-type"), Some("Ticket.TicketOpened.v1"));
    assert_eq!(header(first, "ce-source"), Some("https://desk.example"));
    assert_eq!(header(first, "content-type"), Some("application/json"));
    let data: serde_json::Value = serde_json::from_slice(&first.body).unwrap();
    assert_eq!(data, serde_json::json!({ "ticket_id": "t-1", "line": 1 }));
    assert_eq!(endpoint.acknowledged("t-1"), t1, "t-1's events in order");

    // A request signed with another secret is told apart: the signature is over the body.
    let (stranger, other) = Endpoint::serve("whsec_c2VjcmV0LW9mLWFub3RoZXItZW5kcG9pbnQ=").await;
    let app = desk(Webhook::new(&other, SECRET).unwrap())
        .await
        .expecting_letters();
    add(&app, "t-9", 1).await;
    app.run_until_idle().await.unwrap();
    let refused = stranger.received();
    assert!(refused.iter().all(|r| !r.verified) && !refused.is_empty());
    let filed = letters(&app).await;
    assert_eq!(filed.len(), 1, "401 is a refusal for good: a letter");
    assert!(
        filed[0].error_message.contains("401"),
        "{}",
        filed[0].error_message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_that_fails_or_is_slow_holds_its_stream_until_it_answers() {
    let (endpoint, url) = Endpoint::serve(SECRET).await;
    let sink = Webhook::new(&url, SECRET)
        .unwrap()
        .time_limit(Duration::from_millis(200));
    let app = desk(sink).await;
    endpoint.plan(&[
        Answer::Status(StatusCode::SERVICE_UNAVAILABLE),
        Answer::Status(StatusCode::TOO_MANY_REQUESTS),
        Answer::Late(Duration::from_secs(2)),
    ]);
    for line in 1..=3 {
        add(&app, "t-1", line).await;
    }
    app.run_until_idle().await.unwrap();
    assert!(
        endpoint.acknowledged("t-1").is_empty(),
        "the first event waits, and the two behind it"
    );
    // Each failed post is tried again after its back-off, on simulated time.
    for _ in 0..6 {
        app.advance(bounda::minutes(1)).await.unwrap();
    }
    assert_eq!(endpoint.acknowledged("t-1"), ids(&app, "t-1").await);
    let answered: Vec<u16> = endpoint
        .received()
        .iter()
        .map(|r| r.answered.as_u16())
        .collect();
    assert_eq!(&answered[..2], [503, 429]);
    let t1 = ids(&app, "t-1").await;
    let posts = |id: &str| {
        endpoint
            .arrived
            .lock()
            .unwrap()
            .iter()
            .filter(|a| *a == id)
            .count()
    };
    assert_eq!(posts(&t1[0]), 4, "503, 429, no answer in time, then 200");
    assert_eq!(posts(&t1[1]), 1, "the events behind waited");
    assert!(letters(&app).await.is_empty(), "nothing refused for good");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusing_endpoint_files_a_letter_naming_the_event_and_its_retry_delivers_it() {
    let (endpoint, url) = Endpoint::serve(SECRET).await;
    let app = desk(Webhook::new(&url, SECRET).unwrap())
        .await
        .expecting_letters();
    endpoint.plan(&[Answer::Status(StatusCode::PAYLOAD_TOO_LARGE)]);
    add(&app, "t-1", 1).await;
    add(&app, "t-1", 2).await;
    app.run_until_idle().await.unwrap();

    let t1 = ids(&app, "t-1").await;
    let filed = letters(&app).await;
    assert_eq!(filed.len(), 1);
    assert_eq!(filed[0].event_id.as_deref(), Some(t1[0].as_str()));
    assert!(
        filed[0].error_message.contains("413"),
        "{}",
        filed[0].error_message
    );
    assert_eq!(
        endpoint.acknowledged("t-1"),
        [t1[1].clone()],
        "the stream goes on past a message refused for good"
    );

    app.app().dead_letters().retry(&filed[0].id).await.unwrap();
    assert_eq!(endpoint.acknowledged("t-1"), [t1[1].clone(), t1[0].clone()]);
}

#[test]
fn a_wrong_address_or_secret_is_refused_when_the_sink_is_made() {
    let error = Webhook::new("ftp://desk.example/hooks", SECRET).unwrap_err();
    assert_eq!(
        error.to_string(),
        "webhook address `ftp://desk.example/hooks`: its scheme is `ftp`; a webhook is posted \
         over `http` or `https`"
    );
    let error = Webhook::new("https://desk.example/hooks", "whsec_not base64!").unwrap_err();
    assert!(error.to_string().contains("is not base64"), "{error}");
    let error = Webhook::new("https://desk.example/hooks", "whsec_c2hvcnQ=").unwrap_err();
    assert!(error.to_string().contains("is too short"), "{error}");
}
