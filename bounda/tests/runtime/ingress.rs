//! Ingress: commands from other services decided once per idempotency key, the first answer
//! given again, and a malformed one refused storing nothing; over HTTP with the answers a client
//! reads.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use crate::support;

use bounda::ingress::{Answer, Arrival, Ingress, Refusal};
use bounda::prelude::*;
use support::storefront::*;

async fn shop() -> TestApp {
    TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .ingress(
                Ingress::new()
                    .command::<PlaceOrder>()
                    .command_as::<MarkOrderPaid>("com.example.order.pay.v1"),
            ),
    )
    .await
    .unwrap()
}

fn arrival(name: &str, key: &str, payload: &str) -> Arrival {
    Arrival {
        name: name.to_owned(),
        key: key.to_owned(),
        payload: payload.as_bytes().to_vec(),
        correlation_id: None,
    }
}

async fn events(app: &TestApp, order: &str) -> usize {
    app.app().events_of::<Order>(order).await.unwrap().len()
}

// Issue 45: a key decides once; the same key again is given the first answer, replayed, and
// decides nothing; a rejection is an answer too, kept likewise; the key with another payload is
// refused.
#[tokio::test]
async fn a_command_is_decided_once_per_key_and_its_first_answer_given_again() {
    let app = shop().await;
    let place = arrival("PlaceOrder", "k-1", r#"{"order_id":"o-1","total":5}"#);
    let first = app.app().ingest(&place).await.unwrap();
    assert!(!first.replayed);
    let Answer::Decided {
        aggregate_id,
        version,
        event_types,
        ..
    } = &first.answer
    else {
        panic!("{first:?}")
    };
    assert_eq!(
        (aggregate_id.as_str(), *version, event_types.as_slice()),
        ("o-1", 1, &["OrderPlaced".to_owned()][..])
    );

    let again = app.app().ingest(&place).await.unwrap();
    assert!(again.replayed);
    assert_eq!(again.answer, first.answer, "the first answer, given again");
    assert_eq!(events(&app, "o-1").await, 1, "nothing decided again");

    let other = arrival("PlaceOrder", "k-1", r#"{"order_id":"o-2","total":5}"#);
    let reused = app.app().ingest(&other).await.unwrap_err();
    assert!(
        matches!(&reused, Refusal::KeyReused { key } if key == "k-1"),
        "{reused}"
    );
    assert_eq!(events(&app, "o-2").await, 0);

    // A rejection is the answer of its key, kept with nothing else.
    let twice = arrival("PlaceOrder", "k-2", r#"{"order_id":"o-1","total":5}"#);
    let rejected = app.app().ingest(&twice).await.unwrap();
    assert_eq!(
        rejected.answer,
        Answer::Rejected {
            command: "PlaceOrder".to_owned(),
            code: "AlreadyPlaced".to_owned(),
            message: "order `o-1` is placed already".to_owned(),
        }
    );
    assert!(app.app().ingest(&twice).await.unwrap().replayed);

    // Under the name another service publishes it as.
    let pay = arrival("com.example.order.pay.v1", "k-3", r#"{"order_id":"o-1"}"#);
    let paid = app.app().ingest(&pay).await.unwrap();
    assert!(
        matches!(&paid.answer, Answer::Decided { event_types, .. } if event_types == &["OrderPaid"]),
        "{paid:?}"
    );
}

// Issue 45: what does not parse, and a name the app does not take, are refused naming the field
// or the names it takes; nothing is stored, so the mended command decides under the same key.
#[tokio::test]
async fn a_malformed_or_unknown_command_is_refused_storing_nothing() {
    let app = shop().await;
    let unknown = arrival("CancelOrder", "k-1", r#"{"order_id":"o-1"}"#);
    let refused = app.app().ingest(&unknown).await.unwrap_err();
    assert_eq!(
        refused.to_string(),
        "this app takes no command named `CancelOrder` from outside (it takes: PlaceOrder, \
         com.example.order.pay.v1)"
    );

    let field = arrival("PlaceOrder", "k-1", r#"{"order_id":"o-1","total":"five"}"#);
    match app.app().ingest(&field).await.unwrap_err() {
        Refusal::Unparsed { field, message } => {
            assert_eq!(field, "total");
            assert!(
                message.contains("invalid type: string \"five\""),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    let not_json = arrival("PlaceOrder", "k-1", "order o-1, total 5");
    let refused = app.app().ingest(&not_json).await.unwrap_err();
    assert!(
        refused
            .to_string()
            .starts_with("the command does not parse: it is not JSON"),
        "{refused}"
    );
    assert_eq!(events(&app, "o-1").await, 0);
    // A blank id is the sender's to mend, not a failure to deliver again.
    let blank = arrival("PlaceOrder", "k-1", r#"{"order_id":" ","total":5}"#);
    let refused = app.app().ingest(&blank).await.unwrap_err();
    assert!(matches!(refused, Refusal::Unparsed { .. }), "{refused:?}");

    // Two CloudEvents whose source and id join alike are two keys.
    let one = |source: &'static str, id: &'static str| {
        let headers = [
            ("ce-type", "PlaceOrder"),
            ("ce-source", source),
            ("ce-id", id),
        ];
        Arrival::of_cloud_event(
            |name| headers.iter().find(|(n, _)| *n == name).map(|(_, v)| *v),
            b"{}",
        )
        .unwrap()
        .key
    };
    assert_ne!(one("urn:a", "b"), one("urn", "a:b"));

    let mended = arrival("PlaceOrder", "k-1", r#"{"order_id":"o-1","total":5}"#);
    let decided = app.app().ingest(&mended).await.unwrap();
    assert!(!decided.replayed, "nothing was kept under the key");
}

// Issue 45: deliveries of one message racing each other decide once: every one is answered
// with the same events, one of them first, the others replayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_racing_under_one_key_decide_once() {
    let app = shop().await;
    let place = arrival("PlaceOrder", "k-race", r#"{"order_id":"o-9","total":3}"#);
    let deliveries: Vec<_> = (0..8)
        .map(|_| {
            let app = app.app().clone();
            let place = place.clone();
            tokio::spawn(async move { app.ingest(&place).await })
        })
        .collect();
    let mut answers = Vec::new();
    for delivery in deliveries {
        answers.push(delivery.await.unwrap().unwrap());
    }
    assert_eq!(answers.iter().filter(|a| !a.replayed).count(), 1);
    assert!(answers.iter().all(|a| a.answer == answers[0].answer));
    assert_eq!(events(&app, "o-9").await, 1);
}

#[cfg(feature = "ingress")]
mod http {
    use super::*;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use bounda::ingress::{Guard, router};
    use tower::ServiceExt;

    async fn post(
        app: &TestApp,
        guard: Guard,
        uri: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (StatusCode, Option<String>, serde_json::Value) {
        let mut request = Request::post(uri);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = router(app.app().clone(), guard)
            .oneshot(request.body(Body::from(body.to_owned())).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let replayed = response
            .headers()
            .get("idempotent-replayed")
            .map(|v| v.to_str().unwrap().to_owned());
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, replayed, serde_json::from_slice(&bytes).unwrap())
    }

    // Issue 45: over HTTP, each answer as a client reads it: 200 with the events, the same again
    // marked replayed, 409 for a rejection, 400 naming the field or the missing key, 404 for a
    // name not taken, 422 for a key reused; a CloudEvent in binary mode names the command by its
    // type; a signed route refuses what is not signed.
    #[tokio::test]
    async fn commands_over_http_are_answered_as_a_client_expects() {
        let app = shop().await;
        let key = [("idempotency-key", "order-o-1")];
        let body = r#"{"order_id":"o-1","total":5}"#;
        let (status, replayed, first) =
            post(&app, Guard::Open, "/commands/PlaceOrder", &key, body).await;
        assert_eq!((status, replayed), (StatusCode::OK, None));
        assert_eq!(first["outcome"], "decided");
        assert_eq!(first["eventTypes"], serde_json::json!(["OrderPlaced"]));
        let (status, replayed, again) =
            post(&app, Guard::Open, "/commands/PlaceOrder", &key, body).await;
        assert_eq!(
            (status, replayed.as_deref()),
            (StatusCode::OK, Some("true"))
        );
        assert_eq!(again, first);

        let other_key = [("idempotency-key", "order-o-1-again")];
        let (status, _, rejected) =
            post(&app, Guard::Open, "/commands/PlaceOrder", &other_key, body).await;
        assert_eq!(status, StatusCode::CONFLICT);
        assert_eq!(rejected["code"], "AlreadyPlaced");

        let bad = r#"{"order_id":"o-2","total":-1}"#;
        let (status, _, error) = post(
            &app,
            Guard::Open,
            "/commands/PlaceOrder",
            &[("idempotency-key", "b")],
            bad,
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(error["field"], "total");

        let (status, _, error) = post(&app, Guard::Open, "/commands/PlaceOrder", &[], body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(
            error["error"]
                .as_str()
                .unwrap()
                .contains("`Idempotency-Key`"),
            "{error}"
        );
        let (status, _, _) = post(
            &app,
            Guard::Open,
            "/commands/CancelOrder",
            &[("idempotency-key", "c")],
            body,
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let changed = r#"{"order_id":"o-1","total":6}"#;
        let (status, _, _) = post(&app, Guard::Open, "/commands/PlaceOrder", &key, changed).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);

        let cloud_event = [
            ("ce-specversion", "1.0"),
            ("ce-id", "m-1"),
            ("ce-source", "https://payments.example"),
            ("ce-type", "com.example.order.pay.v1"),
            ("content-type", "application/json"),
        ];
        let (status, _, paid) = post(
            &app,
            Guard::Open,
            "/commands",
            &cloud_event,
            r#"{"order_id":"o-1"}"#,
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{paid}");
        assert_eq!(paid["eventTypes"], serde_json::json!(["OrderPaid"]));

        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let (status, _, error) = post(
            &app,
            Guard::signed(secret).unwrap(),
            "/commands",
            &cloud_event,
            r#"{"order_id":"o-1"}"#,
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{error}");
        assert!(Guard::signed("whsec_c2hvcnQ=").is_err(), "a short secret");
    }
}

// Issue 45: a copy (and a transfer) keeps the keys arrived commands were decided under: the
// same message delivered to the app on the copy is given its first answer, not decided again.
#[tokio::test]
async fn a_copy_keeps_the_keys_so_a_repeat_is_still_answered() {
    let app = shop().await;
    let place = arrival("PlaceOrder", "k-1", r#"{"order_id":"o-1","total":5}"#);
    let first = app.app().ingest(&place).await.unwrap();
    let copy = bounda_sqlite::SqliteStore::in_memory().unwrap();
    let copied = bounda::store::transfer(app.app().store(), &copy)
        .await
        .unwrap();
    assert_eq!(copied.ingress, 1);
    let moved = TestApp::new(
        App::builder(copy)
            .only_listed()
            .ingress(Ingress::new().command::<PlaceOrder>()),
    )
    .await
    .unwrap();
    let again = moved.app().ingest(&place).await.unwrap();
    assert!(again.replayed);
    assert_eq!(again.answer, first.answer);
    assert_eq!(events(&moved, "o-1").await, 1);
}

/// A source that takes nothing: what an app consuming from a broker looks like to its build.
struct Quiet;

#[bounda::store::async_trait]
impl bounda::ingress::Source for Quiet {
    fn name(&self) -> String {
        "quiet".to_owned()
    }

    async fn run(&self, _app: &App, stop: futures_util::future::BoxFuture<'static, ()>) {
        stop.await;
    }

    async fn behind(&self) -> anyhow::Result<bounda::ingress::Behind> {
        Ok(bounda::ingress::Behind::default())
    }
}

// Issue 46: arrived commands are answered from the store's record of their keys. An app that
// takes them from a source does not build on a store without one, naming the capability and
// the store; a command handed to such an app's ingress is refused, deciding nothing.
#[tokio::test]
async fn an_app_taking_commands_is_refused_at_start_on_a_store_that_keeps_no_record_of_them() {
    let store = || {
        std::sync::Arc::new(bounda::testing::CoreOnly(std::sync::Arc::new(
            bounda_sqlite::SqliteStore::in_memory().unwrap(),
        )))
    };
    let refused = App::builder_shared(store())
        .only_listed()
        .ingress(Ingress::new().command::<PlaceOrder>())
        .consume(Quiet)
        .build()
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        refused.contains("(quiet)")
            && refused.contains("the core-only store keeps no record of arrived commands"),
        "{refused}"
    );

    let app = TestApp::new(
        App::builder_shared(store())
            .only_listed()
            .ingress(Ingress::new().command::<PlaceOrder>()),
    )
    .await
    .unwrap();
    let refused = app
        .app()
        .ingest(&arrival(
            "PlaceOrder",
            "shop:m-1",
            r#"{"order_id":"o-1","total":5}"#,
        ))
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("keeps no record of arrived commands"),
        "{refused}"
    );
    assert_eq!(events(&app, "o-1").await, 0);
}
