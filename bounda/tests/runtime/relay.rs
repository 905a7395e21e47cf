//! Relays: the app's events published to a sink, each stream in order, at least once.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use crate::support;

use bounda::prelude::*;
use bounda::relay::{Contract, MemorySink, Message, Relay};
use bounda::store::{LetterFilter, LetterKind};
use support::storefront::*;

async fn shop(relay: Relay) -> TestApp {
    TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .command::<PlaceOrder>()
            .relay(relay),
    )
    .await
    .unwrap()
}

async fn orders(app: &TestApp, ids: &[&str]) {
    for id in ids {
        app.dispatch(place(id)).await.unwrap();
        app.dispatch(PayAndFulfil {
            order_id: (*id).to_owned(),
        })
        .await
        .unwrap();
    }
}

/// `(subject, type)` of each message, in the order the sink took them.
fn told(messages: &[Message]) -> Vec<(String, String)> {
    messages
        .iter()
        .map(|message| {
            let subject = cloudevents::AttributesReader::subject(&message.event);
            (
                subject.unwrap_or_default().to_owned(),
                message.ty().to_owned(),
            )
        })
        .collect()
}

/// Each stream's versions, in the order the sink took them.
fn versions(messages: &[Message], order: &str) -> Vec<u64> {
    messages
        .iter()
        .filter(|message| message.aggregate_id == order)
        .map(|message| message.version)
        .collect()
}

// Issue 45: a relay publishes every event stored after it starts as a CloudEvent whose id is
// the event's, each stream's events in version order.
#[tokio::test]
async fn a_relay_publishes_each_event_once_as_a_cloud_event_in_stream_order() {
    let sink = MemorySink::new();
    let app = shop(Relay::new("everything", sink.clone()).source("https://shop.example")).await;
    orders(&app, &["o-1", "o-2"]).await;
    app.run_until_idle().await.unwrap();

    let published = sink.published();
    assert_eq!(published.len(), 6, "{:?}", told(&published));
    let stored = app.app().events_of::<Order>("o-1").await.unwrap();
    let first = &published
        .iter()
        .find(|message| message.aggregate_id == "o-1")
        .unwrap();
    assert_eq!(first.id(), stored[0].id, "the message id is the event's");
    let event = &first.event;
    use bounda::relay::cloudevents::AttributesReader;
    assert_eq!(event.source().as_str(), "https://shop.example");
    assert_eq!(event.ty(), "Order.OrderPlaced.v1");
    assert_eq!(event.subject(), Some("o-1"));
    assert_eq!(
        event.time().map(|time| time.timestamp_millis()),
        Some(stored[0].timestamp.as_millis())
    );
    let wire = first.wire().unwrap();
    let data: serde_json::Value = serde_json::from_slice(&wire.body).unwrap();
    assert_eq!(data, stored[0].payload, "the data is the event's payload");
    for order in ["o-1", "o-2"] {
        assert_eq!(versions(&published, order), [1, 2, 3], "{order} in order");
    }
    let published_ids: std::collections::HashSet<&str> =
        published.iter().map(Message::id).collect();
    assert_eq!(published_ids.len(), 6, "each event once");
}

// Issue 45: a publish that fails holds only its stream: the other streams go on, the held one
// is published again after each back-off, then in order, and nothing is skipped or lettered
// however long it fails.
#[tokio::test]
async fn a_failing_publish_holds_its_stream_and_is_retried_until_it_goes_through() {
    let sink = MemorySink::new();
    let app = shop(Relay::new("everything", sink.clone())).await;
    sink.fail_stream("o-1", true);
    orders(&app, &["o-1", "o-2"]).await;
    // An hour of failing: retried all along, a minute apart at most, never given up.
    app.advance(bounda::hours(1)).await.unwrap();
    let published = sink.published();
    assert_eq!(versions(&published, "o-2"), [1, 2, 3], "o-2 goes on");
    assert!(
        versions(&published, "o-1").is_empty(),
        "o-1 waits for its first event: {:?}",
        told(&published)
    );
    let tried = sink.attempts();
    assert!(
        tried > 60 && tried < 200,
        "retried while failing: {tried} attempts"
    );
    // `lag` counts the relays as the subscriber they are, and names the publish that fails.
    let lag = app.app().lag().await.unwrap();
    let relays = lag
        .subscribers
        .iter()
        .find(|subscriber| subscriber.subscriber == bounda::RELAYS)
        .unwrap_or_else(|| panic!("the relays are a subscriber: {lag:?}"));
    assert_eq!(
        relays.lag, 6,
        "o-1's first event and all after it: {relays:?}"
    );
    assert_eq!(lag.max_lag, 6);
    let failing = relays.failing.as_ref().unwrap();
    assert_eq!(failing.handler, "everything");
    assert!(
        failing.message.contains("does not take `o-1` now"),
        "{failing:?}"
    );

    sink.fail_stream("o-1", false);
    app.advance(bounda::minutes(2)).await.unwrap();
    let published = sink.published();
    assert_eq!(
        versions(&published, "o-1"),
        [1, 2, 3],
        "o-1 in order at last"
    );
    assert_eq!(app.app().lag().await.unwrap().max_lag, 0);
    let letters = app
        .app()
        .dead_letters()
        .count(&LetterFilter::default())
        .await
        .unwrap();
    assert_eq!(letters, 0, "a sink out of reach files no letter");
}

// Issue 45: a message the sink refuses for good is a dead letter naming its event and the
// relay; its stream goes on, and the letter, retried once the sink takes it, publishes it.
#[tokio::test]
async fn a_refused_message_is_a_letter_that_a_retry_publishes() {
    let sink = MemorySink::new();
    sink.refuse("Order.OrderPaid.v1");
    let app = shop(Relay::new("everything", sink.clone()))
        .await
        .expecting_letters();
    orders(&app, &["o-1"]).await;
    app.run_until_idle().await.unwrap();
    assert_eq!(
        told(&sink.published()),
        [
            ("o-1".to_owned(), "Order.OrderPlaced.v1".to_owned()),
            ("o-1".to_owned(), "Order.OrderFulfilled.v1".to_owned()),
        ]
    );
    let letters = support::letters(&app).await;
    assert_eq!(letters.len(), 1);
    let letter = &letters[0];
    assert_eq!(letter.kind, LetterKind::Relay);
    assert_eq!(letter.handler, "everything");
    assert_eq!(letter.event_type.as_deref(), Some("OrderPaid"));
    assert_eq!(letter.error_type, "terminal");
    assert!(
        letter.error_message.contains("refused the message")
            && letter
                .error_message
                .contains("`Order.OrderPaid.v1` are not accepted"),
        "{}",
        letter.error_message
    );

    sink.accept();
    app.app().dead_letters().retry(&letter.id).await.unwrap();
    let published = told(&sink.published());
    assert_eq!(
        published.last(),
        Some(&("o-1".to_owned(), "Order.OrderPaid.v1".to_owned()))
    );
}

/// What the service tells others an order was placed as.
#[derive(Debug, serde::Serialize)]
struct OrderPlacedV1 {
    order: String,
    amount_cents: u64,
}

impl Contract for OrderPlacedV1 {
    const TYPE: &'static str = "com.example.order.placed.v1";
}

// Issue 45: a relay publishes what it selects, an aggregate's events or some types, and an event
// with a contract leaves as the contract: its type and its data, not the internal event.
#[tokio::test]
async fn a_relay_publishes_what_it_selects_as_its_contracts() {
    let sink = MemorySink::new();
    let relay = Relay::new("placed", sink.clone())
        .event::<OrderPlaced>()
        .event::<OrderFulfilled>()
        .contract(|placed: OrderPlaced| OrderPlacedV1 {
            order: placed.order_id,
            amount_cents: placed.total * 100,
        });
    let app = shop(relay).await;
    orders(&app, &["o-1"]).await;
    app.run_until_idle().await.unwrap();
    let published = sink.published();
    assert_eq!(
        told(&published),
        [
            ("o-1".to_owned(), "com.example.order.placed.v1".to_owned()),
            ("o-1".to_owned(), "Order.OrderFulfilled.v1".to_owned()),
        ]
    );
    let data: serde_json::Value =
        serde_json::from_slice(&published[0].wire().unwrap().body).unwrap();
    assert_eq!(
        data,
        serde_json::json!({ "order": "o-1", "amount_cents": 13_900 })
    );

    let other = MemorySink::new();
    let app = shop(Relay::new("payments", other.clone()).aggregate::<Payment>()).await;
    orders(&app, &["o-2"]).await;
    app.run_until_idle().await.unwrap();
    assert!(other.published().is_empty(), "no payment event was stored");
}

// Issue 45: two runners share a relay: each stream is published in its order, whichever runner
// takes which event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runners_sharing_a_relay_publish_each_stream_in_order() {
    let sink = MemorySink::new();
    let store = support::database::store().await;
    let build = |store| {
        App::builder_shared(store)
            .only_listed()
            .command::<PlaceOrder>()
            .relay(Relay::new("everything", sink.clone()))
            .build()
    };
    let (one, two) = (
        build(store.clone()).await.unwrap(),
        build(store.clone()).await.unwrap(),
    );
    let ids: Vec<String> = (0..40).map(|n| format!("o-{n}")).collect();
    for id in &ids {
        one.dispatch(place(id)).await.unwrap();
        one.dispatch(PayAndFulfil {
            order_id: id.clone(),
        })
        .await
        .unwrap();
    }
    let stop = async {
        for _ in 0..500 {
            if sink.published().len() >= ids.len() * 3 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    };
    tokio::select! {
        _ = stop => {}
        _ = one.run() => {}
        _ = two.run() => {}
    }
    let published = sink.published();
    for id in &ids {
        assert_eq!(versions(&published, id), [1, 2, 3], "{id} in order");
    }
}

// Issue 45: the relays are paused and resumed as any subscriber: paused, nothing is published and
// the events wait; resumed, each goes out in its order.
#[tokio::test]
async fn paused_relays_publish_nothing_until_resumed() {
    let sink = MemorySink::new();
    let app = shop(Relay::new("everything", sink.clone())).await;
    let relays = bounda::store::PauseTarget::Subscriber {
        name: bounda::RELAYS.to_owned(),
    };
    assert!(app.app().pause(relays.clone(), "erin", None).await.unwrap());
    orders(&app, &["o-1"]).await;
    app.advance(bounda::minutes(5)).await.unwrap();
    assert!(sink.published().is_empty(), "paused");
    assert_eq!(app.app().lag().await.unwrap().max_lag, 3);
    assert!(app.app().resume(&relays).await.unwrap());
    app.run_until_idle().await.unwrap();
    assert_eq!(versions(&sink.published(), "o-1"), [1, 2, 3]);
}

/// A shop with two relays on their own sinks, `crm` and `audit`, the app configured by `config`.
async fn two_relays(config: bounda::config::Config) -> (TestApp, MemorySink, MemorySink) {
    let (crm, audit) = (MemorySink::new(), MemorySink::new());
    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .command::<PlaceOrder>()
            .config(config)
            .relay(Relay::new("crm", crm.clone()))
            .relay(Relay::new("audit", audit.clone())),
    )
    .await
    .unwrap();
    (app, crm, audit)
}

// Issue 45: one relay paused holds its own events, each stream in order, while the other relay
// goes on; `lag` names it with what it has yet to publish and since when; resumed, it publishes
// them in order. A name the app does not relay is refused.
#[tokio::test]
async fn one_paused_relay_waits_while_the_other_goes_on_and_lag_says_since_when() {
    let (app, crm, audit) = two_relays(bounda::config::Config::default()).await;
    let target = bounda::store::PauseTarget::Relay {
        name: "crm".to_owned(),
    };
    assert!(app.app().pause(target.clone(), "erin", None).await.unwrap());
    let unknown = bounda::store::PauseTarget::Relay {
        name: "billing".to_owned(),
    };
    let refused = app.app().pause(unknown, "erin", None).await.unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("relay `billing` in this app (its relays: crm, audit)"),
        "{refused}"
    );
    let stored_at = app.now();
    orders(&app, &["o-1", "o-2"]).await;
    app.advance(bounda::minutes(5)).await.unwrap();
    assert!(crm.published().is_empty(), "paused");
    assert_eq!(audit.published().len(), 6, "the other relay goes on");

    let lag = app.app().lag().await.unwrap();
    let crm_lag = lag.relays.iter().find(|r| r.relay == "crm").unwrap();
    assert_eq!(
        (crm_lag.behind, crm_lag.oldest, crm_lag.sink.as_str()),
        (6, Some(stored_at), "a sink in memory")
    );
    let audit_lag = lag.relays.iter().find(|r| r.relay == "audit").unwrap();
    assert_eq!(
        audit_lag.oldest,
        Some(stored_at),
        "counted from the shared checkpoint"
    );
    #[cfg(feature = "cli")]
    {
        let mut out = Vec::new();
        bounda::cli::execute(app.app(), support::command("lag"), &mut out)
            .await
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("relay crm to a sink in memory: 6 behind, the oldest stored 5m ago"),
            "{text}"
        );
        assert!(text.contains("paused: relay crm paused since"), "{text}");
    }
    #[cfg(feature = "page")]
    {
        let (_, html, _) = support::page::get(&app, None, "/lag").await;
        assert!(
            html.contains(
                "<tr><td>crm</td><td>a sink in memory</td>\n<td class=\"num bad\">6</td>\n<td>5m</td>"
            ),
            "{html}"
        );
    }

    assert!(app.app().resume(&target).await.unwrap());
    app.run_until_idle().await.unwrap();
    for order in ["o-1", "o-2"] {
        assert_eq!(versions(&crm.published(), order), [1, 2, 3]);
    }
    assert_eq!(audit.published().len(), 6, "nothing published twice");
    let lag = app.app().lag().await.unwrap();
    assert!(
        lag.relays
            .iter()
            .all(|r| r.behind == 0 && r.oldest.is_none()),
        "{lag:?}"
    );
}

// Issue 45: a relay's limit paces its publishes to the sink's rate, each stream in order, the
// other relay unpaced.
#[tokio::test]
async fn a_relays_limit_paces_its_publishes() {
    let config = bounda::config::Config::from_json(
        r#"{ "limits": { "relays": { "crm": { "rate": "2/s" } } } }"#,
    )
    .unwrap();
    let (app, crm, audit) = two_relays(config).await;
    orders(&app, &["o-1", "o-2"]).await;
    let start = app.now();
    // One round of passes at each moment: two in each second's window, none in between.
    let mut published = Vec::new();
    for at in [0, 999, 1_000, 1_999, 2_000] {
        app.clock().advance_to(start + bounda::millis(at));
        app.run_until_idle_with(1).await.unwrap();
        published.push(crm.published().len());
    }
    assert_eq!(published, [2, 2, 4, 4, 6], "two a second");
    assert_eq!(audit.published().len(), 6, "the other relay is not paced");
    for order in ["o-1", "o-2"] {
        assert_eq!(versions(&crm.published(), order), [1, 2, 3], "in order");
    }
}

// Issue 45: a preview on a copy publishes nothing: what each relay would publish is recorded
// with the other port calls (the relay, the message's id, type and subject) and reported.
#[tokio::test]
async fn a_preview_records_what_its_relays_would_publish() {
    let production = MemorySink::new();
    let app = shop(Relay::new("everything", production.clone())).await;
    app.run_until_idle().await.unwrap();
    let copy = bounda_sqlite::SqliteStore::in_memory().unwrap();
    bounda::store::copy(app.app().store(), &copy, "the shop", app.now())
        .await
        .unwrap();
    let sink = MemorySink::new();
    let builder = App::builder(copy)
        .only_listed()
        .command::<PlaceOrder>()
        .relay(Relay::new("everything", sink.clone()));
    let preview = bounda::testing::TestApp::over_copy(builder).await.unwrap();
    preview.dispatch(place("o-7")).await.unwrap();
    let report = bounda::preview::run(&preview, bounda::days(1))
        .await
        .unwrap();
    assert!(sink.published().is_empty(), "a preview tells no broker");
    let stored = preview.app().events_of::<Order>("o-7").await.unwrap();
    let published: Vec<(&str, &str, Option<&str>)> = report
        .calls
        .iter()
        .map(|call| (call.port.as_str(), call.call.as_str(), call.key.as_deref()))
        .collect();
    assert_eq!(
        published,
        [("relay everything", "publish", Some(stored[0].id.as_str()))]
    );
    assert_eq!(report.calls[0].detail["type"], "Order.OrderPlaced.v1");
    assert_eq!(report.calls[0].detail["subject"], "o-7");
}

// Issue 45: `explain` says where an instance's events were published: by which relay, to which
// sink, how many, how many wait, and the letters of those refused.
#[tokio::test]
async fn explain_says_where_an_instances_events_were_published() {
    let sink = MemorySink::new();
    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .command::<PlaceOrder>()
            .command::<PayAndFulfil>()
            .process::<OrderPayment>()
            .relay(Relay::new("everything", sink.clone())),
    )
    .await
    .unwrap()
    .expecting_letters();
    sink.refuse("Order.OrderFulfilled.v1");
    orders(&app, &["o-1"]).await;
    app.run_until_idle().await.unwrap();
    let story = app
        .app()
        .explain_named("OrderPayment", "o-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(story.published.len(), 1, "{:?}", story.published);
    let told = &story.published[0];
    assert_eq!(
        (
            told.relay.as_str(),
            told.sink.as_str(),
            told.published,
            told.waiting
        ),
        ("everything", "a sink in memory", 2, 0)
    );
    let letters = support::letters(&app).await;
    assert_eq!(told.letters, [letters[0].id.clone()], "the refused one");
    #[cfg(feature = "cli")]
    {
        let mut out = Vec::new();
        bounda::cli::execute(
            app.app(),
            support::command("explain OrderPayment o-1"),
            &mut out,
        )
        .await
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(&format!(
                "published by relay everything to a sink in memory: 2 events, 0 waiting, \
                 refused: letters {}",
                letters[0].id
            )),
            "{text}"
        );
    }
}
