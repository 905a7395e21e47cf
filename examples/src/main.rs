//! Prints the plan of the order-payment process after an order is placed: which deadline comes
//! due when, walked on the process's own pure functions, before any runtime exists.
//!
//! `cargo run -p bounda-examples` places the order at `2026-01-01T00:00:00Z`; pass another
//! RFC 3339 moment as the first argument (`cargo run -p bounda-examples -- 2026-03-01T09:30:00+01:00`).

mod order_payment;

use std::process::ExitCode;

use bounda::aggregate::Event;
use bounda::process::{ProcessState, plan, step};
use bounda::{Instant, RecordedEvent};
use order_payment::{OrderPayment, OrderPlaced};

const DEFAULT_PLACED_AT: &str = "2026-01-01T00:00:00Z";

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let text = std::env::args()
        .nth(1)
        .unwrap_or_else(|| DEFAULT_PLACED_AT.to_owned());
    let placed_at = match Instant::parse(&text) {
        Ok(moment) => moment,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    match run(placed_at).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Places order `o-1` at `placed_at`, prints the plan, then runs every deadline in turn, as if
/// the order were never paid, until the payment deadline cancels it.
async fn run(placed_at: Instant) -> anyhow::Result<()> {
    let placed = OrderPlaced {
        order_id: "o-1".to_owned(),
        total: 139,
    };
    let event = RecordedEvent {
        id: "evt-1".to_owned(),
        aggregate_type: "Order".to_owned(),
        aggregate_id: placed.order_id.clone(),
        event_type: OrderPlaced::TYPE.to_owned(),
        version: 1,
        position: 1,
        timestamp: placed_at,
        payload: serde_json::to_value(&placed)?,
        metadata: bounda::store::Metadata::of_command("cmd-1"),
    };
    let timeout = OrderPayment::TIMEOUT.unwrap_or_else(|| bounda::days(7));
    let timeout_at = Some(placed_at + timeout);

    let mut state = OrderPayment::default();
    step::handle_event(&mut state, &event.aggregate_id, &event, placed_at).await?;
    println!("OrderPlaced for o-1 at {placed_at}; the plan:");
    for pending in plan::pending(&state, timeout_at) {
        println!("  {}  {}", pending.at, pending.field);
    }

    println!("if it is never paid:");
    while let Some(due) = plan::next(&state, timeout_at) {
        if due.field == plan::TIMEOUT {
            println!("  {}  timeout: the process ends", due.at);
            break;
        }
        step::run_deadline(&mut state, &event.aggregate_id, due, due.at).await?;
        if due.field == "payment_deadline" {
            println!(
                "  {}  payment_deadline: the order is cancelled, which completes the process",
                due.at
            );
            break;
        }
        println!(
            "  {}  next_reminder: reminder {} sent",
            due.at, state.reminders
        );
    }
    Ok(())
}
