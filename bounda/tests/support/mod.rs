//! Shared fixtures of the integration tests.
#![allow(dead_code, reason = "each test file uses part of the fixtures")]

pub mod database;
#[cfg(feature = "page")]
pub mod page;
pub mod racing;
pub mod storefront;

/// What operator command `command` prints on `app`, and its exit code.
#[cfg(feature = "cli")]
pub async fn operator(
    app: &bounda::App,
    command: bounda::cli::Operator,
) -> (std::process::ExitCode, String) {
    let mut out = Vec::new();
    let code = bounda::cli::execute(app, command, &mut out)
        .await
        .expect("the command runs");
    (code, String::from_utf8(out).expect("UTF-8 output"))
}

/// Every dead letter of `app`, oldest first.
pub async fn letters(app: &bounda::testing::TestApp) -> Vec<bounda::store::DeadLetter> {
    app.letters().await.expect("the letters read")
}

/// Another app on `store` and `clock`, as after a deploy: `build` lists what it runs, ids are
/// fresh UUIDs so they do not collide with the first app's.
pub async fn another_app(
    store: &std::sync::Arc<dyn bounda::store::Store>,
    clock: &std::sync::Arc<bounda::clock::SimulatedClock>,
    build: impl FnOnce(bounda::AppBuilder) -> bounda::AppBuilder,
) -> bounda::testing::TestApp {
    let builder = bounda::App::builder_shared(store.clone())
        .only_listed()
        .clock(clock.clone())
        .ids(std::sync::Arc::new(bounda::ids::UuidV7));
    bounda::testing::TestApp::with_app(
        build(builder).build().await.expect("the app builds"),
        clock.clone(),
    )
}

/// Stores `state` as the latest state of instance `id` of `process`, as other code might have
/// written it: a `ProcessHandled` at the end of its stream.
pub async fn write_state(
    app: &bounda::testing::TestApp,
    process: &str,
    id: &str,
    state: serde_json::Value,
) {
    let stream = format!("process:{process}");
    let store = app.app().store();
    let version = store
        .read_stream(&stream, id)
        .await
        .expect("readable")
        .len() as u64;
    let odd = bounda::store::WriteSet {
        appends: vec![bounda::store::Append {
            aggregate_type: stream,
            aggregate_id: id.to_owned(),
            expected_version: version,
            events: vec![bounda::store::NewEvent {
                id: format!("odd-state-{version}"),
                event_type: "ProcessHandled".into(),
                payload: serde_json::json!({
                    "eventId": "x", "eventType": "X", "aggregateType": "Order", "aggregateId": id,
                    "state": state
                }),
                timestamp: app.now(),
                metadata: bounda::store::Metadata::of_command("x"),
            }],
        }],
        ..Default::default()
    };
    store.commit(&odd).await.expect("the state is written");
}

/// Places `count` orders named `prefix` and a number from `0000`, one after another.
pub async fn place_orders(
    app: &bounda::testing::TestApp,
    prefix: &str,
    count: usize,
) -> Vec<String> {
    let ids: Vec<String> = (0..count).map(|n| format!("{prefix}{n:04}")).collect();
    for id in &ids {
        app.dispatch(storefront::place(id))
            .await
            .expect("the order is placed");
    }
    ids
}

/// The moments each of `ids` stored `event_type` on `A`'s stream.
pub async fn stored<A: bounda::Aggregate>(
    app: &bounda::testing::TestApp,
    ids: &[String],
    event_type: &str,
) -> Vec<bounda::Instant> {
    let mut moments = Vec::new();
    for id in ids {
        let events = app.events_of::<A>(id).await.expect("the stream reads").0;
        moments.extend(
            events
                .iter()
                .filter(|event| event.event_type == event_type)
                .map(|event| event.timestamp),
        );
    }
    moments
}

/// How many of `moments` fall in each second, by the second's start.
pub fn per_second(moments: &[bounda::Instant]) -> std::collections::BTreeMap<i64, usize> {
    let mut seconds = std::collections::BTreeMap::new();
    for at in moments {
        *seconds.entry(at.as_millis().div_euclid(1_000)).or_default() += 1;
    }
    seconds
}

/// The lag of `subscriber` (`policies`, `processes`) as `app` reads it.
pub async fn subscriber_lag(
    app: &bounda::testing::TestApp,
    subscriber: &str,
) -> bounda::SubscriberLag {
    app.lag()
        .await
        .expect("the lag reads")
        .subscribers
        .into_iter()
        .find(|s| s.subscriber == subscriber)
        .expect("the app runs that subscriber")
}

/// Marks order `id` paid, and answers the position its payment was stored at.
pub async fn pay(app: &bounda::testing::TestApp, id: &str) -> u64 {
    let at = app.app().store().head().await.expect("the head reads") + 1;
    app.dispatch(storefront::MarkOrderPaid {
        order_id: id.to_owned(),
    })
    .await
    .expect("the order is paid");
    at
}

/// The lifecycle events of instance `id` of process `P`, in order.
pub async fn lifecycle<P: bounda::Process>(
    app: &bounda::testing::TestApp,
    id: &str,
) -> Vec<bounda::RecordedEvent> {
    app.app()
        .store()
        .read_stream(&format!("process:{}", P::NAME), id)
        .await
        .expect("the lifecycle reads")
}

/// The deadline fields instance `id` of `P` reached, in order, each with the moment it was due
/// and the moment it ran.
pub async fn reached<P: bounda::Process>(
    app: &bounda::testing::TestApp,
    id: &str,
) -> Vec<(String, bounda::Instant, bounda::Instant)> {
    lifecycle::<P>(app, id)
        .await
        .into_iter()
        .filter(|event| event.event_type == "ProcessDeadlineReached")
        .map(|event| {
            let field = event.payload["field"].as_str().expect("a field").to_owned();
            let at = event.payload["at"].as_str().expect("a moment");
            let at = bounda::Instant::parse(at).expect("a moment that reads");
            (field, at, event.timestamp)
        })
        .collect()
}

/// The types of `events`, in order.
pub fn types(events: &[bounda::RecordedEvent]) -> Vec<&str> {
    events.iter().map(|e| e.event_type.as_str()).collect()
}

/// The state of instance `id` of process `P`, as last stored.
pub async fn state<P: bounda::Process>(app: &bounda::testing::TestApp, id: &str) -> P {
    app.instance::<P>(id)
        .await
        .expect("the instance reads")
        .expect("the instance started")
        .state
}

/// An app on the suite's store running the order-payment process alone.
pub async fn order_payments() -> bounda::testing::TestApp {
    bounda::testing::TestApp::new(
        bounda::App::builder_shared(database::store().await)
            .only_listed()
            .process::<storefront::OrderPayment>(),
    )
    .await
    .expect("the app builds")
}

/// The operator's command `line` as a binary parses it (`dead-letters retry l-1`).
#[cfg(feature = "cli")]
pub fn command(line: &str) -> bounda::cli::Operator {
    use clap::Parser;

    /// The operator's commands as a binary parses them.
    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: bounda::cli::Operator,
    }
    Cli::try_parse_from(std::iter::once("app").chain(line.split(' ')))
        .expect("the command line parses")
        .command
}

/// Runs `work` (an operator's command) while `app`'s worker runs beside it, as a worker process
/// runs beside the operator's shell: what the command asks of the workers is run.
pub async fn beside_worker<T>(
    app: &bounda::testing::TestApp,
    work: impl std::future::Future<Output = T>,
) -> T {
    let worker = async {
        loop {
            app.run_until_idle().await.expect("the worker runs");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    };
    tokio::select! {
        done = work => done,
        never = worker => never,
    }
}

/// `dead-letters list`, every letter, as a table or as JSON lines.
#[cfg(feature = "cli")]
pub fn list_letters(json: bool) -> bounda::cli::Operator {
    bounda::cli::Operator::DeadLetters(bounda::cli::Letters::List(bounda::cli::ListArgs {
        kind: None,
        handler: None,
        status: None,
        limit: None,
        json,
    }))
}
