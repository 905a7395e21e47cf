//! The storefront's order, run for real: place an order, then watch the order-payment process
//! remind the customer and cancel the unpaid order on the real clock, beside a delayed welcome
//! policy, and print what happened.
//!
//! `cargo run -p bounda-examples` runs on SQLite in memory; `BOUNDA_DB=orders.db` keeps a file.
//! `REMINDER_EVERY` (`300ms`), `PAYMENT_WINDOW` (`1s`) and `WELCOME_DELAY` (`500ms`) set the
//! durations.

mod order;
mod order_payment;
mod policies;

use std::process::ExitCode;
use std::time::Duration as StdDuration;

use bounda::App;
use bounda_sqlite::SqliteStore;
use order::{Order, PlaceOrder};

/// How long the example waits for the order to be cancelled before it gives up.
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
    // Refuse a bad duration before anything runs.
    order_payment::reminder_every()?;
    order_payment::payment_window()?;
    let store = match std::env::var("BOUNDA_DB") {
        Ok(path) => SqliteStore::open(path)?,
        Err(_) => SqliteStore::in_memory()?,
    };
    // Every `#[process]`, `#[policy]` and `#[command]` of the binary registers itself.
    let app = App::builder(store).build().await?;

    let order_id = format!("o-{}", app.next_id());
    app.dispatch(PlaceOrder {
        order_id: order_id.clone(),
        total: 139,
    })
    .await?;
    let placed_at = app.clock().now();
    println!("placed order {order_id} at {placed_at}; it will not be paid");

    // Run the dispatcher and the worker until the order is cancelled, or Ctrl-C.
    let cancelled = {
        let app = app.clone();
        let order_id = order_id.clone();
        async move {
            let deadline = tokio::time::Instant::now() + PATIENCE;
            while tokio::time::Instant::now() < deadline {
                let events = app.events_of::<Order>(&order_id).await.unwrap_or_default();
                let done = events.iter().any(|e| e.event_type == "OrderCancelled");
                if done && app.lag().await.is_ok_and(|lag| lag.max_lag == 0) {
                    return;
                }
                tokio::time::sleep(StdDuration::from_millis(20)).await;
            }
        }
    };
    tokio::select! {
        result = app.run_until(cancelled) => result?,
        _ = tokio::signal::ctrl_c() => println!("interrupted"),
    }

    println!("the order's events:");
    let events = app.events_of::<Order>(&order_id).await?;
    for event in &events {
        let after = format!("+{}", event.timestamp - placed_at);
        println!("  {after:<9} {}", event.event_type);
    }
    println!("the order-payment process's history:");
    for event in app
        .store()
        .read_stream("process:OrderPayment", &order_id)
        .await?
    {
        let after = format!("+{}", event.timestamp - placed_at);
        let detail = event
            .payload
            .get("field")
            .and_then(|f| f.as_str())
            .unwrap_or("");
        println!("  {after:<9} {} {detail}", event.event_type);
    }
    anyhow::ensure!(
        events.iter().any(|e| e.event_type == "OrderCancelled"),
        "the order was not cancelled within {PATIENCE:?}"
    );
    println!(
        "lag: {} (every consequence has happened)",
        app.lag().await?.max_lag
    );
    Ok(())
}
