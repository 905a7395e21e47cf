//! Metrics (issue 24): the runtime counts what it does through the `metrics` facade, and the
//! page serves `/metrics` in Prometheus's text format, its gauges surveyed from the store at the
//! scrape. Each test records on its own thread (a recorder set for the thread: the test's
//! runtime runs every task there), so its counts are its own.

#![cfg(feature = "page")]
#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use bounda::page::{Metrics, Options, router};
use bounda::prelude::*;
use prometheus_parse::{Sample, Scrape, Value};
use tower::ServiceExt;

use crate::listed::ConfirmOnOrderPlaced;
use crate::support;
use support::storefront::*;

/// A policy that always fails, under a name no other test counts.
struct MeteredMailer;

#[policy]
impl Policy for MeteredMailer {
    const NAME: &'static str = "metered_mailer";
    type Event = OrderPlaced;

    async fn handle(_: Reaction<'_, OrderPlaced>) -> Result<()> {
        anyhow::bail!("the mail server is down")
    }
}

/// Reminds an hour after the order; its payment's handler always fails, so a paid order's
/// instance fails holding its reminder.
#[process(on = Order, started_by = [OrderPlaced], completed_by = [OrderCancelled])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct Brittle {
    #[deadline]
    remind: Deadline,
}

#[process]
impl Brittle {
    async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<BrittlePatch> {
        Ok(BrittlePatch::default().remind(cx.after(hours(1))))
    }

    async fn on_order_paid(_cx: On<'_, Self, OrderPaid>) -> Result<BrittlePatch> {
        anyhow::bail!("the ledger is down")
    }

    async fn at_remind(_cx: At<'_, Self>) -> Result<AtRemind> {
        Ok(AtRemind::new(Deadline::none()))
    }
}

// Issue 44: a failed instance's deadlines are in the gauges, labelled as held by its letter:
// the series an alert on overdue work needs most.
#[tokio::test]
async fn a_failed_instances_overdue_deadline_is_counted_as_held() {
    let (metrics, recorder) = Metrics::unregistered().unwrap();
    let _recording = ::metrics::set_default_local_recorder(&recorder);
    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .process::<Brittle>()
            .command::<MarkOrderPaid>(),
    )
    .await
    .unwrap()
    .expecting_letters();
    app.dispatch(place("b-1")).await.unwrap();
    app.dispatch(MarkOrderPaid {
        order_id: "b-1".into(),
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    assert_eq!(support::letters(&app).await.len(), 1);
    app.clock().advance(hours(2));
    let scrape = scrape(&app, &metrics).await;
    let gauge = |name: &str, held: &str| -> Vec<f64> {
        samples(&scrape, name, &[("process", "Brittle"), ("held", held)])
            .into_iter()
            .map(value)
            .collect()
    };
    assert_eq!(gauge("bounda_deadlines_overdue", "true"), [1.0]);
    assert_eq!(gauge("bounda_deadlines_pending", "true"), [1.0]);
    assert_eq!(gauge("bounda_deadlines_overdue", "false"), [0.0]);
}

/// `/metrics` of `app`'s page exporting `metrics`, parsed.
async fn scrape(app: &TestApp, metrics: &Metrics) -> Scrape {
    let page = router(
        app.app().clone(),
        Options {
            metrics: Some(metrics.clone()),
            ..Options::default()
        },
    );
    let request = Request::get("/metrics")
        .header(header::HOST, "127.0.0.1:8080")
        .body(Body::empty())
        .unwrap();
    let response = page.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let text = String::from_utf8(body.to_vec()).unwrap();
    Scrape::parse(text.lines().map(|line| Ok(line.to_owned()))).unwrap()
}

/// The samples of `name` whose labels include `labels`.
fn samples<'a>(scrape: &'a Scrape, name: &str, labels: &[(&str, &str)]) -> Vec<&'a Sample> {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name)
        .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .collect()
}

/// The value of a counter or gauge sample.
fn value(sample: &Sample) -> f64 {
    match &sample.value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
        other => panic!("not a single value: {other:?}"),
    }
}

// issue 24: the instruments an operator reads, exported and parsed as Prometheus reads them.
#[tokio::test]
async fn the_runtime_is_measured_and_scraped_in_prometheus_format() {
    let (metrics, recorder) = Metrics::unregistered().unwrap();
    let _recording = ::metrics::set_default_local_recorder(&recorder);
    bounda::metrics::record(true);
    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .process::<OrderPayment>()
            .policy::<ConfirmOnOrderPlaced>()
            .policy::<MeteredMailer>()
            .command::<RecordConfirmationSent>()
            .command::<SendReminder>(),
    )
    .await
    .unwrap()
    .expecting_letters();
    app.dispatch(place("m-1")).await.unwrap();
    assert!(app.dispatch(place("m-1")).await.is_err(), "placed already");
    app.run_until_idle().await.unwrap();
    // An outage: the first reminder, due a day after the order, runs three hours late.
    app.clock().advance(hours(27));
    app.run_until_idle().await.unwrap();

    let scrape = scrape(&app, &metrics).await;
    let count = |name: &str, labels: &[(&str, &str)]| -> f64 {
        samples(&scrape, name, labels).into_iter().map(value).sum()
    };
    assert!(
        count(
            "bounda_commands_total",
            &[("command", "PlaceOrder"), ("outcome", "stored")]
        ) == 1.0
    );
    assert!(
        count(
            "bounda_commands_total",
            &[("command", "PlaceOrder"), ("outcome", "rejected")]
        ) == 1.0
    );
    // Three tries, the last one lettered.
    assert_eq!(
        count(
            "bounda_handler_failures_total",
            &[("handler", "metered_mailer"), ("kind", "policy")]
        ),
        3.0
    );
    assert_eq!(
        count(
            "bounda_dead_letters_filed_total",
            &[
                ("handler", "metered_mailer"),
                ("outcome", "retriable_exhausted")
            ]
        ),
        1.0
    );
    assert!(
        count(
            "bounda_deadline_firings_total",
            &[("process", "OrderPayment"), ("field", "next_reminder")]
        ) == 1.0
    );
    // The gauges are this app's: surveyed from its store at the scrape.
    assert_eq!(count("bounda_dead_letters_open", &[]), 1.0);
    assert_eq!(
        count("bounda_deadlines_pending", &[("process", "OrderPayment")]),
        1.0
    );
    assert_eq!(
        count("bounda_deadlines_overdue", &[("process", "OrderPayment")]),
        0.0
    );
    assert_eq!(
        count("bounda_subscriber_lag", &[("subscriber", "policies")]),
        0.0
    );

    let lateness = samples(
        &scrape,
        "bounda_deadline_lateness_seconds",
        &[("process", "OrderPayment")],
    );
    let Some(Value::Histogram(buckets)) = lateness.first().map(|s| &s.value) else {
        panic!("lateness is a histogram: {lateness:?}");
    };
    let late = |at_most: f64| {
        buckets
            .iter()
            .find(|b| b.less_than == at_most)
            .map_or(0.0, |b| b.count)
    };
    assert!(
        late(f64::INFINITY) - late(3_600.0) == 1.0 && late(f64::INFINITY) == 1.0,
        "a reminder three hours late: {buckets:?}"
    );
    assert!(matches!(
        samples(&scrape, "bounda_commit_seconds", &[])
            .first()
            .map(|s| &s.value),
        Some(Value::Histogram(_))
    ));
    assert!(
        scrape.docs.contains_key("bounda_deadline_lateness_seconds"),
        "described"
    );
}

// issue 24: without a recorder given, the page has no `/metrics`.
#[tokio::test]
async fn without_metrics_the_page_has_no_metrics_route() {
    let app = TestApp::new(App::builder_shared(support::database::store().await).only_listed())
        .await
        .unwrap();
    let page = router(app.app().clone(), Options::default());
    let request = Request::get("/metrics")
        .header(header::HOST, "127.0.0.1:8080")
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        page.oneshot(request).await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
}

// issue 24: a process whose deadline entries are gone (a deploy removed it) reads 0 at the next
// scrape, not the count it had.
#[tokio::test]
async fn a_process_gone_from_the_store_reads_zero_not_its_last_count() {
    let (metrics, recorder) = Metrics::unregistered().unwrap();
    let _recording = ::metrics::set_default_local_recorder(&recorder);
    let before = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .process::<OrderPayment>(),
    )
    .await
    .unwrap();
    before.dispatch(place("gone-1")).await.unwrap();
    before.run_until_idle().await.unwrap();
    let pending = |scrape: &Scrape| -> Vec<f64> {
        samples(
            scrape,
            "bounda_deadlines_pending",
            &[("process", "OrderPayment"), ("held", "false")],
        )
        .into_iter()
        .map(value)
        .collect()
    };
    assert_eq!(pending(&scrape(&before, &metrics).await), [1.0]);
    let after = TestApp::new(App::builder_shared(support::database::store().await).only_listed())
        .await
        .unwrap();
    assert_eq!(pending(&scrape(&after, &metrics).await), [0.0]);
}

// Issue 45: a relay's publishes are counted once acknowledged, its failed tries as its handler's
// failures, and its lag is the relays subscriber's.
#[tokio::test]
async fn a_relays_publishes_failures_and_lag_are_measured() {
    let (metrics, recorder) = Metrics::unregistered().unwrap();
    let _recording = ::metrics::set_default_local_recorder(&recorder);
    bounda::metrics::record(true);
    let sink = bounda::relay::MemorySink::new();
    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .command::<PlaceOrder>()
            .relay(bounda::relay::Relay::new("everything", sink.clone())),
    )
    .await
    .unwrap();
    sink.fail_next(2);
    app.dispatch(place("m-1")).await.unwrap();
    app.dispatch(place("m-2")).await.unwrap();
    app.advance(minutes(1)).await.unwrap();
    assert_eq!(sink.published().len(), 2);

    let scrape = scrape(&app, &metrics).await;
    let count = |name: &str, labels: &[(&str, &str)]| -> f64 {
        samples(&scrape, name, labels).into_iter().map(value).sum()
    };
    assert_eq!(
        count("bounda_relay_published_total", &[("relay", "everything")]),
        2.0
    );
    assert_eq!(
        count(
            "bounda_handler_failures_total",
            &[("handler", "everything"), ("kind", "relay")]
        ),
        2.0
    );
    assert_eq!(
        count("bounda_subscriber_lag", &[("subscriber", "relays")]),
        0.0
    );
    assert!(
        scrape.docs.contains_key("bounda_relay_published_total"),
        "described"
    );

    // A sink down for ten minutes: what the relay has yet to publish, and since when.
    sink.set_down(true);
    app.dispatch(place("m-3")).await.unwrap();
    let placed = app.now();
    app.advance(minutes(10)).await.unwrap();
    let down = self::scrape(&app, &metrics).await;
    let gauge = |name: &str| -> f64 {
        samples(&down, name, &[("relay", "everything")])
            .into_iter()
            .map(value)
            .sum()
    };
    assert_eq!(gauge("bounda_relay_behind"), 1.0);
    assert_eq!(
        gauge("bounda_relay_oldest_unpublished_seconds"),
        app.now().saturating_since(placed).as_millis() as f64 / 1_000.0
    );
    assert!(
        scrape
            .docs
            .contains_key("bounda_relay_oldest_unpublished_seconds")
    );
}
