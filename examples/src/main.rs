//! The storefront's order, run for real: place an order, then let a scheduled reminder and a
//! delayed policy run on the real clock, and print what happened.
//!
//! `cargo run -p bounda-examples` runs on SQLite in memory; `BOUNDA_DB=orders.db` keeps a file.
//! `REMINDER_DELAY` and `WELCOME_DELAY` set the two delays (`1s` and `500ms` by default).
//! It also prints the plan of the order-payment process, whose deadlines run in the next release.

mod order;
mod order_payment;
mod policies;

use std::process::ExitCode;
use std::time::Duration as StdDuration;

use bounda::process::{ProcessState, plan, step};
use bounda::{App, Instant, RecordedEvent};
use bounda_sqlite::SqliteStore;
use order::{Order, OrderPlaced, PlaceOrder, RecordWelcome, SendReminder};
use order_payment::OrderPayment;
use policies::{ScheduleReminderOnOrderPlaced, WelcomeOnOrderPlaced};

/// How long the example waits for the reminder and the welcome before it gives up.
const PATIENCE: StdDuration = StdDuration::from_secs(30);

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> anyhow::Result<()> {
    // Refuse a bad delay before anything runs, rather than in the policy's first run.
    policies::reminder_delay()?;
    let store = match std::env::var("BOUNDA_DB") {
        Ok(path) => SqliteStore::open(path)?,
        Err(_) => SqliteStore::in_memory()?,
    };
    let app = App::builder(store)
        .policy::<ScheduleReminderOnOrderPlaced>()
        .policy::<WelcomeOnOrderPlaced>()
        .command::<SendReminder>()
        .command::<RecordWelcome>()
        .build()?;

    let order_id = format!("o-{}", app.next_id());
    let placed = app
        .dispatch(PlaceOrder {
            order_id: order_id.clone(),
            total: 139,
        })
        .await?;
    let placed_at = app.clock().now();
    println!(
        "placed order {order_id} at {placed_at} (event at position {:?})",
        placed.position
    );
    print_plan(&order_id, placed_at).await?;

    // Run the dispatcher and the worker until the reminder and the welcome are in, or Ctrl-C.
    let done = {
        let app = app.clone();
        let order_id = order_id.clone();
        async move {
            let deadline = tokio::time::Instant::now() + PATIENCE;
            while tokio::time::Instant::now() < deadline {
                if app
                    .events_of::<Order>(&order_id)
                    .map_or(0, |events| events.len())
                    >= 3
                {
                    return;
                }
                tokio::time::sleep(StdDuration::from_millis(20)).await;
            }
        }
    };
    tokio::select! {
        result = app.run_until(done) => result?,
        _ = tokio::signal::ctrl_c() => println!("interrupted"),
    }

    println!("what happened to {order_id}:");
    let events = app.events_of::<Order>(&order_id)?;
    for event in &events {
        let after = format!("+{}", event.timestamp - placed_at);
        println!(
            "  {after:<9} {:<14} caused by {}",
            event.event_type, event.metadata.causation_id
        );
    }
    anyhow::ensure!(
        events.len() >= 3,
        "the reminder and the welcome did not both run within {PATIENCE:?}"
    );
    let lag = app.lag()?;
    println!("lag: {} (every consequence has happened)", lag.max_lag);
    println!("events stored: {}", app.store().head()?);
    Ok(())
}

/// The order-payment process's plan for this order: which deadline is due when.
async fn print_plan(order_id: &str, placed_at: Instant) -> anyhow::Result<()> {
    let placed = OrderPlaced {
        order_id: order_id.to_owned(),
        total: 139,
    };
    let event = RecordedEvent {
        id: "plan".to_owned(),
        aggregate_type: "Order".to_owned(),
        aggregate_id: order_id.to_owned(),
        event_type: <OrderPlaced as bounda::aggregate::Event>::TYPE.to_owned(),
        version: 1,
        position: 1,
        timestamp: placed_at,
        payload: serde_json::to_value(&placed)?,
        metadata: bounda::store::Metadata::of_command("plan"),
    };
    let mut state = OrderPayment::default();
    step::handle_event(&mut state, order_id, &event, placed_at).await?;
    let timeout_at = OrderPayment::TIMEOUT.map(|timeout| placed_at + timeout);
    println!("the order-payment process's plan (its deadlines run in the next release):");
    for pending in plan::pending(&state, timeout_at) {
        println!("  {}  {}", pending.at, pending.field);
    }
    Ok(())
}
