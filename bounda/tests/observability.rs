//! What the runtime tells `tracing`: the spans of commands, subscriber passes,
//! policy runs, process steps and scheduled runs, with their fields, and the metric events.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

mod support;
// Handlers of the Order domain for apps that list what they run.
#[path = "support/listed.rs"]
mod listed;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bounda::prelude::*;
use bounda_sqlite::SqliteStore;
use listed::ConfirmOnOrderPlaced;
use support::storefront::*;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// A closed span or an event: its name and fields, as text.
#[derive(Debug, Clone, Default)]
struct Seen {
    name: String,
    fields: BTreeMap<String, String>,
}

impl Seen {
    fn get(&self, field: &str) -> Option<&str> {
        self.fields.get(field).map(String::as_str)
    }
}

impl Visit for Seen {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.fields
            .insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.fields
            .insert(field.name().to_owned(), format!("{value:?}"));
    }
}

/// Records every span when it closes and every event.
#[derive(Clone, Default)]
struct Recorder {
    spans: Arc<Mutex<Vec<Seen>>>,
    events: Arc<Mutex<Vec<Seen>>>,
}

impl<S> tracing_subscriber::Layer<S> for Recorder
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut seen = Seen {
            name: attrs.metadata().name().to_owned(),
            ..Seen::default()
        };
        attrs.record(&mut seen);
        ctx.span(id).unwrap().extensions_mut().insert(seen);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let span = ctx.span(id).unwrap();
        let mut extensions = span.extensions_mut();
        values.record(extensions.get_mut::<Seen>().unwrap());
    }

    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut seen = Seen {
            name: event.metadata().name().to_owned(),
            ..Seen::default()
        };
        seen.fields
            .insert("target".into(), event.metadata().target().to_owned());
        event.record(&mut seen);
        self.events.lock().unwrap().push(seen);
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let span = ctx.span(&id).unwrap();
        let seen = span.extensions().get::<Seen>().unwrap().clone();
        self.spans.lock().unwrap().push(seen);
    }
}

impl Recorder {
    fn spans_named(&self, otel_name: &str) -> Vec<Seen> {
        let spans = self.spans.lock().unwrap();
        spans
            .iter()
            .filter(|s| s.get("otel.name") == Some(otel_name))
            .cloned()
            .collect()
    }
}

struct RemindLater;

#[policy]
impl Policy for RemindLater {
    const NAME: &'static str = "remind_later";
    type Event = OrderPlaced;

    async fn handle(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
        let order_id = cx.event().order_id.clone();
        cx.send_after(SendReminder { order_id }, hours(1)).await?;
        Ok(())
    }
}

struct Broken;

#[policy]
impl Policy for Broken {
    const NAME: &'static str = "broken";
    type Event = OrderPlaced;

    async fn handle(_: Reaction<'_, OrderPlaced>) -> Result<()> {
        Err(anyhow::anyhow!("the mail server is down"))
    }
}

#[tokio::test]
async fn commands_passes_runs_and_steps_are_traced_with_their_fields() {
    let recorder = Recorder::default();
    let subscriber = tracing_subscriber::registry().with(recorder.clone());
    let _default = tracing::subscriber::set_default(subscriber);

    let builder = App::builder_shared(support::database::store().await)
        .only_listed()
        .policy::<ConfirmOnOrderPlaced>()
        .policy::<Broken>()
        .policy::<RemindLater>()
        .command::<SendReminder>()
        .process::<OrderPayment>();
    let app = TestApp::new(builder).await.unwrap().expecting_letters();
    let place = || PlaceOrder {
        order_id: "o-1".into(),
        total: 5,
    };
    app.dispatch(place()).await.unwrap();
    app.dispatch(place()).await.unwrap_err();
    app.run_until_idle().await.unwrap();
    app.advance(hours(24)).await.unwrap();

    // spec 222: the command, stored and then rejected.
    let commands = recorder.spans_named("bounda.command PlaceOrder");
    assert_eq!(commands.len(), 2, "{commands:?}");
    let stored = &commands[0];
    assert_eq!(stored.name, "bounda.command");
    assert_eq!(stored.get("bounda.command.type"), Some("PlaceOrder"));
    assert_eq!(stored.get("bounda.aggregate.type"), Some("Order"));
    assert_eq!(stored.get("bounda.aggregate.id"), Some("o-1"));
    assert_eq!(stored.get("bounda.outcome"), Some("stored"));
    assert_eq!(stored.get("bounda.event.count"), Some("1"));
    let correlation = stored.get("bounda.correlation_id").unwrap().to_owned();
    assert!(stored.get("bounda.causation_id").is_some());
    let rejected = &commands[1];
    assert_eq!(rejected.get("bounda.outcome"), Some("rejected"));
    assert_eq!(
        rejected.get("otel.status_code"),
        None,
        "a rejection is no error"
    );
    let events = recorder.events.lock().unwrap().clone();
    let rejection = events
        .iter()
        .find(|e| e.name == "bounda.command.rejected")
        .unwrap();
    assert_eq!(rejection.get("bounda.rejected"), Some("AlreadyPlaced"));
    assert!(
        rejection
            .get("message")
            .unwrap()
            .starts_with("command rejected")
    );

    // spec 222: the command a policy sent, caused by the event, in its correlation.
    let sent = recorder.spans_named("bounda.command RecordConfirmationSent");
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].get("bounda.correlation_id"),
        Some(correlation.as_str())
    );
    assert_eq!(sent[0].get("bounda.outcome"), Some("stored"));
    let placed = app.events_of::<Order>("o-1").await.unwrap().0[0].id.clone();
    assert_eq!(sent[0].get("bounda.causation_id"), Some(placed.as_str()));

    // spec 223: the subscriber passes that read events.
    let passes = recorder.spans_named("bounda.subscriber policies");
    let first = passes.first().unwrap();
    assert_eq!(first.get("bounda.subscriber"), Some("policies"));
    assert_eq!(first.get("bounda.subscriber.kind"), Some("policy"));
    assert_eq!(first.get("bounda.position.after"), Some("0"));
    assert!(first.get("bounda.event.count").is_some());
    let outcomes: Vec<_> = passes
        .iter()
        .filter_map(|p| p.get("bounda.outcome"))
        .collect();
    assert!(
        outcomes.contains(&"held"),
        "the broken policy's back-off held: {outcomes:?}"
    );
    assert!(outcomes.contains(&"advanced"), "{outcomes:?}");
    assert!(
        !recorder
            .spans_named("bounda.subscriber processes")
            .is_empty()
    );

    // spec 224: policy runs, with their attempt; a failing one marks its span.
    let confirm = recorder.spans_named("bounda.policy Order.confirm_on_order_placed");
    assert_eq!(confirm.len(), 1);
    assert_eq!(confirm[0].get("bounda.attempt"), Some("1"));
    assert_eq!(
        confirm[0].get("bounda.correlation_id"),
        Some(correlation.as_str())
    );
    assert_eq!(confirm[0].get("otel.status_code"), None);
    let broken = recorder.spans_named("bounda.policy Order.broken");
    let attempts: Vec<_> = broken
        .iter()
        .map(|s| s.get("bounda.attempt").unwrap())
        .collect();
    assert_eq!(attempts, ["1", "2", "3"]);
    assert!(
        broken
            .iter()
            .all(|s| s.get("otel.status_code") == Some("ERROR"))
    );
    assert!(
        broken[0]
            .get("error")
            .unwrap()
            .contains("the mail server is down")
    );

    // spec 224: process steps, a deadline's named after its field; the scheduled run's span.
    let steps = recorder.spans_named("bounda.process Order.OrderPayment");
    assert_eq!(steps.len(), 1, "the starting event's step");
    assert_eq!(steps[0].get("bounda.process.id"), Some("o-1"));
    assert_eq!(steps[0].get("bounda.attempt"), Some("1"));
    let reminder = recorder.spans_named("bounda.process Order.OrderPayment at next_reminder");
    assert_eq!(reminder.len(), 1);
    assert_eq!(reminder[0].get("bounda.deadline"), Some("next_reminder"));
    assert_eq!(
        reminder[0].get("bounda.correlation_id"),
        Some(correlation.as_str())
    );
    let scheduled = recorder.spans_named("bounda.scheduled bounda.ProcessDeadline");
    assert!(!scheduled.is_empty());
    assert_eq!(scheduled[0].get("bounda.attempt"), Some("1"));
    assert_eq!(
        scheduled[0].get("bounda.correlation_id"),
        Some(correlation.as_str())
    );

    app.advance(days(30)).await.unwrap();
    let timeout = recorder.spans_named("bounda.process Order.OrderPayment at timeout");
    assert_eq!(
        timeout.len(),
        1,
        "the process's end is named after `timeout`"
    );
    assert_eq!(timeout[0].get("bounda.deadline"), Some("timeout"));

    // spec 222, 224: a delayed command, scheduled by the policy, then run by the worker.
    let reminders = recorder.spans_named("bounda.command SendReminder");
    let outcomes: Vec<_> = reminders
        .iter()
        .filter_map(|s| s.get("bounda.outcome"))
        .collect();
    assert_eq!(outcomes, ["scheduled", "stored"]);
    assert_eq!(reminders[1].get("bounda.event.count"), Some("1"));
    assert_eq!(
        reminders[1].get("bounda.correlation_id"),
        Some(correlation.as_str())
    );
    let run = recorder.spans_named("bounda.scheduled SendReminder");
    assert_eq!(run.len(), 1);
    assert_eq!(
        run[0].get("bounda.correlation_id"),
        Some(correlation.as_str())
    );
}

// spec 223, 226: a subscriber whose pass the store refuses is logged by name, its pass span
// marked failed, and the other subscribers still run.
#[tokio::test]
async fn a_failing_subscriber_is_logged_by_name_and_its_pass_marked_failed() {
    let recorder = Recorder::default();
    let subscriber = tracing_subscriber::registry().with(recorder.clone());
    let _default = tracing::subscriber::set_default(subscriber);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shop.db");
    let options = bounda_sqlite::Options {
        busy_timeout_ms: 20,
        ..bounda_sqlite::Options::default()
    };
    let app = App::builder(SqliteStore::open_with(&db, options).unwrap())
        .only_listed()
        .policy::<ConfirmOnOrderPlaced>()
        .build()
        .await
        .unwrap();
    app.dispatch(PlaceOrder {
        order_id: "o-1".into(),
        total: 5,
    })
    .await
    .unwrap();
    // Another process holds the write lock for the whole run.
    let other = rusqlite::Connection::open(&db).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    app.run_until(tokio::time::sleep(std::time::Duration::from_millis(250)))
        .await
        .unwrap();
    other.execute_batch("ROLLBACK").unwrap();

    let events = recorder.events.lock().unwrap().clone();
    let failed = events
        .iter()
        .find(|e| {
            e.get("message")
                .is_some_and(|m| m.starts_with("subscriber failed"))
        })
        .unwrap();
    assert_eq!(failed.get("bounda.subscriber"), Some("policies"));
    assert!(
        failed.get("message").unwrap().contains("locked"),
        "{failed:?}"
    );
    let passes = recorder.spans_named("bounda.subscriber policies");
    assert!(!passes.is_empty());
    assert!(
        passes
            .iter()
            .all(|p| p.get("bounda.outcome") == Some("failed"))
    );
    assert!(
        passes
            .iter()
            .all(|p| p.get("otel.status_code") == Some("ERROR"))
    );
    assert_eq!(
        app.lag().await.unwrap().max_lag,
        1,
        "nothing lost: the event waits"
    );
}
