//! Processes fed by other aggregates, and the finer points of deadlines, follow-ups and holds.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use crate::support;

use std::cell::Cell;

use bounda::PROCESSES;
use bounda::config::Config;
use bounda::prelude::*;
use bounda::store::{LetterKind, Store};
use support::storefront::*;
use support::{lifecycle, state, types};

thread_local! {
    static REFUND_FAILS: Cell<bool> = const { Cell::new(false) };
    static PAID_FAILS: Cell<u32> = const { Cell::new(0) };
    /// Scripted outcomes of `on_order_paid` after `PAID_FAILS` runs out: `true` fails.
    static PAID_PLAN: std::cell::RefCell<Vec<bool>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Follows an order; the payment aggregate's events reach it through `order_id`, or, for
/// refunds, through a correlator.
#[process(on = Order, started_by = [OrderPlaced], completed_by = [OrderFulfilled, PaymentSettled])]
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
struct Settlement {
    settled_by: Option<String>,
    refunds: u32,
    cancelled: bool,
    confirmed: bool,
    #[deadline]
    chase: Deadline,
}

#[process]
impl Settlement {
    async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<SettlementPatch> {
        Ok(SettlementPatch::default().chase(cx.after(hours(1))))
    }

    /// Paid: no need to chase.
    async fn on_order_paid(_cx: On<'_, Self, OrderPaid>) -> Result<SettlementPatch> {
        let left = PAID_FAILS.with(Cell::get);
        if left > 0 {
            PAID_FAILS.with(|f| f.set(left - 1));
            anyhow::bail!("paid handler failed on purpose");
        }
        let fail = PAID_PLAN.with(|plan| {
            let mut plan = plan.borrow_mut();
            if plan.is_empty() {
                false
            } else {
                plan.remove(0)
            }
        });
        if fail {
            anyhow::bail!("paid handler failed as planned");
        }
        Ok(SettlementPatch::default().chase(Deadline::none()))
    }

    async fn on_payment_settled(cx: On<'_, Self, PaymentSettled>) -> Result<SettlementPatch> {
        Ok(SettlementPatch::default().settled_by(Some(cx.event().payment_id.clone())))
    }

    #[correlate(Self::order_of_refund)]
    async fn on_payment_refunded(cx: On<'_, Self, PaymentRefunded>) -> Result<SettlementPatch> {
        Ok(SettlementPatch::default().refunds(cx.state().refunds + 1))
    }

    async fn on_order_cancelled(cx: On<'_, Self, OrderCancelled>) -> Result<SettlementPatch> {
        if REFUND_FAILS.with(Cell::get) {
            anyhow::bail!("compensation failed");
        }
        // Its own command's event finds the process ended: follow-ups go one hop (spec 102).
        cx.send(RecordConfirmationSent { order_id: cx.id() })
            .await?;
        Ok(SettlementPatch::default().cancelled(true))
    }

    async fn on_confirmation_sent(_cx: On<'_, Self, ConfirmationSent>) -> Result<SettlementPatch> {
        Ok(SettlementPatch::default().confirmed(true))
    }

    async fn at_chase(cx: At<'_, Self>) -> Result<AtChase> {
        cx.send(SendReminder { order_id: cx.id() }).await?;
        Ok(AtChase::new(Deadline::none()))
    }

    async fn at_timeout(cx: At<'_, Self>) -> Result<()> {
        cx.send(CancelOrder {
            order_id: cx.id(),
            reason: "timed out".into(),
        })
        .await?;
        cx.send_after(SendReminder { order_id: cx.id() }, hours(1))
            .await?;
        Ok(())
    }

    /// `order:<id>` names an order, `none` names none, `panic` panics, anything else is an
    /// error.
    fn order_of_refund(refund: &PaymentRefunded) -> Result<Option<String>> {
        match refund.reference.strip_prefix("order:") {
            Some(id) => Ok(Some(id.to_owned())),
            None if refund.reference == "none" => Ok(None),
            None if refund.reference == "panic" => panic!("the reference reader fell over"),
            None => anyhow::bail!("unreadable reference `{}`", refund.reference),
        }
    }
}

async fn app_with(config: Config) -> TestApp {
    TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .config(config)
            .process::<Settlement>()
            .command::<SendReminder>(),
    )
    .await
    .unwrap()
}

async fn app() -> TestApp {
    app_with(Config::default()).await
}

// spec 54, 56, 57: another aggregate's events reach the instance by its id field or correlator,
// and one of them completes it.
#[tokio::test]
async fn another_aggregates_events_reach_the_instance_and_may_complete_it() {
    let app = app().await;
    app.dispatch(place("o-1")).await.unwrap();
    app.dispatch(RefundPayment {
        payment_id: "p-1".into(),
        reference: "order:o-1".into(),
    })
    .await
    .unwrap();
    app.dispatch(RefundPayment {
        payment_id: "p-2".into(),
        reference: "none".into(),
    })
    .await
    .unwrap();
    app.dispatch(SettlePayment {
        payment_id: "p-1".into(),
        order_id: None,
    })
    .await
    .unwrap();
    app.dispatch(SettlePayment {
        payment_id: "p-1".into(),
        order_id: Some("o-1".into()),
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    assert_eq!(
        types(&lifecycle::<Settlement>(&app, "o-1").await),
        [
            "ProcessStarted",
            "ProcessHandled",
            "ProcessHandled",
            "ProcessHandled",
            "ProcessCompleted"
        ],
        "the correlated refund, then the settlement that completes it; the ones naming no order are skipped"
    );
    let state = state::<Settlement>(&app, "o-1").await;
    assert_eq!(
        (state.refunds, state.settled_by.as_deref()),
        (1, Some("p-1"))
    );
}

// spec 58: a correlator that fails dead-letters that event for the process only.
#[tokio::test]
async fn a_failing_correlator_dead_letters_the_event_for_the_process_only() {
    let app = app().await.expecting_letters();
    app.dispatch(place("o-1")).await.unwrap();
    app.dispatch(RefundPayment {
        payment_id: "p-1".into(),
        reference: "garbled".into(),
    })
    .await
    .unwrap();
    app.dispatch(RefundPayment {
        payment_id: "p-2".into(),
        reference: "order:o-1".into(),
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    let letters = support::letters(&app).await;
    assert_eq!(letters.len(), 1);
    assert_eq!(
        (letters[0].kind, letters[0].error_type.as_str()),
        (LetterKind::Process, "terminal")
    );
    assert!(
        letters[0]
            .error_message
            .contains("unreadable reference `garbled`"),
        "{}",
        letters[0].error_message
    );
    assert_eq!(
        state::<Settlement>(&app, "o-1").await.refunds,
        1,
        "the other events carry on"
    );
}

// A correlator that panics has failed on that event: it is lettered for the process, and the
// runner goes on with the others.
#[tokio::test]
async fn a_panicking_correlator_dead_letters_the_event_and_the_runner_goes_on() {
    let app = app().await.expecting_letters();
    app.dispatch(place("o-1")).await.unwrap();
    for (payment, reference) in [("p-1", "panic"), ("p-2", "order:o-1")] {
        app.dispatch(RefundPayment {
            payment_id: payment.into(),
            reference: reference.into(),
        })
        .await
        .unwrap();
    }
    app.run_until_idle().await.unwrap();
    let letters = support::letters(&app).await;
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert!(
        letters[0]
            .error_message
            .contains("it panicked: the reference reader fell over"),
        "{}",
        letters[0].error_message
    );
    assert_eq!(
        state::<Settlement>(&app, "o-1").await.refunds,
        1,
        "the other events carry on"
    );
}

// Issue 9: an id field holding an empty or blank id, or a correlator returning one, names no
// instance: a terminal letter for the process naming it, and the rest goes on.
#[tokio::test]
async fn an_empty_id_is_a_letter_for_the_process_not_an_instance() {
    let app = app().await.expecting_letters();
    app.dispatch(place("o-1")).await.unwrap();
    app.dispatch(SettlePayment {
        payment_id: "p-1".into(),
        order_id: Some("  ".into()),
    })
    .await
    .unwrap();
    app.dispatch(RefundPayment {
        payment_id: "p-2".into(),
        reference: "order:".into(),
    })
    .await
    .unwrap();
    app.dispatch(RefundPayment {
        payment_id: "p-3".into(),
        reference: "order:o-1".into(),
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    let letters = support::letters(&app).await;
    let messages: Vec<&str> = letters.iter().map(|l| l.error_message.as_str()).collect();
    assert_eq!(letters.len(), 2, "{messages:?}");
    assert!(
        letters
            .iter()
            .all(|l| (l.kind, l.error_type.as_str()) == (LetterKind::Process, "terminal"))
    );
    assert!(
        messages[0].contains("`order_id` with an empty id"),
        "names the field: {}",
        messages[0]
    );
    assert!(
        messages[1].contains("returned an empty id"),
        "names the correlator: {}",
        messages[1]
    );
    for blank in ["", "  "] {
        assert!(
            app.app()
                .store()
                .read_stream("process:Settlement", blank)
                .await
                .unwrap()
                .is_empty(),
            "no instance `{blank}`"
        );
    }
    assert_eq!(
        state::<Settlement>(&app, "o-1").await.refunds,
        1,
        "the other events carry on"
    );
    assert_eq!(app.lag().await.unwrap().max_lag, 0);
}

// Review of issue 8: an event step whose instance cannot be read at all files a letter that
// names the instance, so an operator can find it.
#[tokio::test]
async fn an_unreadable_instance_is_named_in_its_letter() {
    let app = app().await.expecting_letters();
    app.dispatch(place("o-1")).await.unwrap();
    app.dispatch(place("o-2")).await.unwrap();
    app.run_until_idle().await.unwrap();
    let version = lifecycle::<Settlement>(&app, "o-1").await.len() as u64;
    let garbled = bounda::store::WriteSet {
        appends: vec![bounda::store::Append {
            aggregate_type: "process:Settlement".into(),
            aggregate_id: "o-1".into(),
            expected_version: version,
            events: vec![bounda::store::NewEvent {
                id: "garbled".into(),
                event_type: "ProcessSomethingNew".into(),
                payload: serde_json::json!({}),
                timestamp: app.now(),
                metadata: bounda::store::Metadata::of_command("x"),
            }],
        }],
        ..Default::default()
    };
    app.app().store().commit(&garbled).await.unwrap();
    for order in ["o-1", "o-2"] {
        app.dispatch(RefundPayment {
            payment_id: format!("p-{order}"),
            reference: format!("order:{order}"),
        })
        .await
        .unwrap();
    }
    app.run_until_idle().await.unwrap();
    let letters = support::letters(&app).await;
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].error_type, "terminal");
    assert_eq!(
        letters[0].payload.as_ref().map(|p| p["instance"].clone()),
        Some(serde_json::json!("o-1")),
        "the letter names the instance it could not read"
    );
    assert_eq!(
        state::<Settlement>(&app, "o-2").await.refunds,
        1,
        "the other instance carries on"
    );
}

// spec 60: a starting event never reopens an ended instance.
#[tokio::test]
async fn a_starting_event_never_reopens_an_ended_instance() {
    let app = app().await;
    app.dispatch(place("o-1")).await.unwrap();
    app.dispatch(SettlePayment {
        payment_id: "p-1".into(),
        order_id: Some("o-1".into()),
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    // Another `OrderPlaced` for the same order, appended behind the command's back.
    let version = app
        .app()
        .store()
        .read_stream("Order", "o-1")
        .await
        .unwrap()
        .len() as u64;
    let again = bounda::store::WriteSet {
        appends: vec![bounda::store::Append {
            aggregate_type: "Order".into(),
            aggregate_id: "o-1".into(),
            expected_version: version,
            events: vec![bounda::store::NewEvent {
                id: "placed-again".into(),
                event_type: "OrderPlaced".into(),
                payload: serde_json::json!({ "order_id": "o-1", "total": 1 }),
                timestamp: app.now(),
                metadata: bounda::store::Metadata::of_command("x"),
            }],
        }],
        ..Default::default()
    };
    app.app().store().commit(&again).await.unwrap();
    app.advance(days(10)).await.unwrap();
    assert_eq!(
        types(&lifecycle::<Settlement>(&app, "o-1").await),
        [
            "ProcessStarted",
            "ProcessHandled",
            "ProcessHandled",
            "ProcessCompleted"
        ]
    );
}

// spec 95: without its own `timeout`, the configuration's lifetime, per aggregate.
#[tokio::test]
async fn the_lifetime_defaults_to_the_configuration() {
    let mut config = Config::default();
    config.overrides.insert(
        "Order".into(),
        bounda::config::Overrides {
            processes_timeout: Some(days(2)),
            ..Default::default()
        },
    );
    let app = app_with(config).await.expecting_letters();
    app.dispatch(place("o-1")).await.unwrap();
    let start = app.now();
    app.run_until_idle().await.unwrap();
    assert_eq!(
        lifecycle::<Settlement>(&app, "o-1").await[0].payload["timeoutAt"],
        serde_json::json!((start + days(2)).to_string())
    );
    let default = app_with(Config::default()).await;
    default.dispatch(place("o-1")).await.unwrap();
    default.run_until_idle().await.unwrap();
    assert_eq!(
        lifecycle::<Settlement>(&default, "o-1").await[0].payload["timeoutAt"],
        serde_json::json!((start + days(7)).to_string())
    );
}

// spec 98, 99, 100: the timeout's cancellation is a follow-up, its delayed command is not; a
// follow-up that fails for good is a letter, and the process stays timed out.
#[tokio::test]
async fn a_failing_follow_up_is_a_letter_and_the_process_stays_timed_out() {
    REFUND_FAILS.with(|f| f.set(true));
    let app = app().await.expecting_letters();
    app.dispatch(place("o-1")).await.unwrap();
    app.advance(days(7)).await.unwrap();
    let events = lifecycle::<Settlement>(&app, "o-1").await;
    let timed_out = events
        .iter()
        .find(|e| e.event_type == "ProcessTimedOut")
        .unwrap();
    let follow_ups = timed_out.payload["followUps"].as_array().unwrap();
    assert_eq!(
        follow_ups.len(),
        1,
        "the cancellation; not the delayed reminder"
    );
    let letters = support::letters(&app).await;
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].event_type.as_deref(), Some("OrderCancelled"));
    assert!(
        !types(&events).contains(&"ProcessFailed"),
        "the process has ended already"
    );
    app.advance(hours(2)).await.unwrap();
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced", "ReminderSent", "OrderCancelled"],
        "the chase at 1 h, the cancellation at 7 d; the delayed reminder decided nothing for a cancelled order"
    );
    // spec 104: retrying the follow-up's letter runs its handler and nothing else.
    REFUND_FAILS.with(|f| f.set(false));
    app.app()
        .dead_letters()
        .retry(&letters[0].id)
        .await
        .unwrap();
    assert!(state::<Settlement>(&app, "o-1").await.cancelled);
    assert_eq!(
        types(&lifecycle::<Settlement>(&app, "o-1").await).last(),
        Some(&"ProcessHandled")
    );
    assert!(types(&lifecycle::<Settlement>(&app, "o-1").await).contains(&"ProcessTimedOut"));
}

// spec 85, 86, 175: a due deadline waits while its instance's earlier event is unhandled;
// `waiting_deadlines` counts it meanwhile; a step whose retry comes within its ten rounds runs
// first.
#[tokio::test]
async fn a_due_deadline_waits_for_the_event_stored_before_it() {
    PAID_FAILS.with(|f| f.set(1));
    let app = app().await;
    app.dispatch(place("o-1")).await.unwrap();
    app.advance(hours(1) - millis(500)).await.unwrap();
    // Paid half a second before the chase; its handler fails once, so the runner falls behind.
    app.dispatch(MarkOrderPaid {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.run_until_idle_with(1).await.unwrap();
    app.clock().advance(millis(500));
    app.run_until_idle_with(1).await.unwrap();
    assert_eq!(
        app.lag().await.unwrap().waiting_deadlines,
        1,
        "the chase is due and held back"
    );
    let pending = app.app().pending_deadlines().await.unwrap();
    assert!(
        pending.iter().any(|d| d.field == "chase" && d.waiting),
        "{pending:?}"
    );
    app.run_until_idle().await.unwrap();
    // The payment's step waits for its back-off (a second), which ends within the ten worker
    // rounds the chase waits (a poll interval each): the payment is handled on its retry, first,
    // and clears the chase. A back-off longer than the rounds lets the chase run first
    // (`a_deadline_behind_a_step_in_back_off_runs_after_ten_rounds_at_its_moment`).
    assert_eq!(
        types(&lifecycle::<Settlement>(&app, "o-1").await),
        ["ProcessStarted", "ProcessHandled", "ProcessHandled"],
    );
    assert_eq!(app.lag().await.unwrap().waiting_deadlines, 0);
    assert_eq!(
        app.app()
            .next_due_at()
            .await
            .unwrap()
            .map(|at| at > app.now()),
        Some(true),
        "only the lifetime is left"
    );
}

// spec 86: if the process runner is stuck, the held deadline runs anyway after ten rounds.
#[tokio::test]
async fn a_deadline_held_by_a_stuck_runner_runs_after_ten_rounds() {
    let app = app().await;
    app.dispatch(place("o-1")).await.unwrap();
    app.run_until_idle().await.unwrap();
    app.dispatch(MarkOrderPaid {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.clock().advance(hours(1));
    // Another runner claimed the payment and is stuck on it.
    let paid = app
        .app()
        .store()
        .read_stream("Order", "o-1")
        .await
        .unwrap()
        .pop()
        .unwrap();
    app.app()
        .store()
        .claim_inbox("Settlement", &paid.id, "stuck", app.now(), seconds(60))
        .await
        .unwrap();
    for round in 1..=10 {
        app.run_until_idle_with(1).await.unwrap();
        assert_eq!(
            app.lag().await.unwrap().waiting_deadlines,
            1,
            "round {round}"
        );
    }
    assert!(
        !types(&lifecycle::<Settlement>(&app, "o-1").await).contains(&"ProcessDeadlineReached")
    );
    app.run_until_idle_with(1).await.unwrap();
    assert_eq!(
        types(&lifecycle::<Settlement>(&app, "o-1").await),
        ["ProcessStarted", "ProcessHandled", "ProcessDeadlineReached"],
        "best effort: it ran anyway"
    );
    assert_eq!(app.lag().await.unwrap().waiting_deadlines, 0);
}

// spec 86, 184, issue 9: a failing event holds its instance's step in back-off; the instance's
// due deadline gets its ten rounds at the moment it came due, then runs, before the clock moves
// on to the failing step's retry.
#[tokio::test]
async fn a_deadline_behind_a_step_in_back_off_runs_after_ten_rounds_at_its_moment() {
    PAID_FAILS.with(|f| f.set(100));
    let mut config = Config::default();
    config.processes.retry = bounda::config::Retry {
        strategy: bounda::config::Strategy::Fixed,
        max_attempts: 5,
        base_delay: minutes(10),
        max_delay: minutes(10),
    };
    let app = app_with(config).await.expecting_letters();
    app.dispatch(place("o-1")).await.unwrap();
    let start = app.now();
    app.advance(minutes(59)).await.unwrap();
    app.dispatch(MarkOrderPaid {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.advance(minutes(2)).await.unwrap();
    let events = lifecycle::<Settlement>(&app, "o-1").await;
    let reached = events
        .iter()
        .find(|e| e.event_type == "ProcessDeadlineReached")
        .expect("the chase ran");
    assert_eq!(
        reached.timestamp,
        start + hours(1),
        "it ran at its moment, once its ten rounds were up, not after the retry"
    );
    PAID_FAILS.with(|f| f.set(0));
}

// spec 109: while a step waits for its back-off, the process gets none of its later events,
// for any instance.
#[tokio::test]
async fn a_step_waiting_for_its_back_off_holds_the_whole_process() {
    PAID_FAILS.with(|f| f.set(1));
    let app = app().await;
    app.dispatch(place("o-1")).await.unwrap();
    app.dispatch(MarkOrderPaid {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.dispatch(place("o-2")).await.unwrap();
    app.run_until_idle_with(1).await.unwrap();
    assert!(
        lifecycle::<Settlement>(&app, "o-2").await.is_empty(),
        "o-2 waits behind o-1's retry"
    );
    let lag = app.lag().await.unwrap();
    let processes = lag
        .subscribers
        .iter()
        .find(|s| s.subscriber == PROCESSES)
        .unwrap();
    let failing = processes
        .failing
        .as_ref()
        .expect("the hold shows (spec 173)");
    assert_eq!(
        (
            failing.handler.as_str(),
            failing.event_type.as_str(),
            failing.attempts
        ),
        ("Settlement", "OrderPaid", 1)
    );
    app.run_until_idle().await.unwrap();
    assert_eq!(
        types(&lifecycle::<Settlement>(&app, "o-2").await),
        ["ProcessStarted", "ProcessHandled"]
    );
    assert_eq!(
        types(&lifecycle::<Settlement>(&app, "o-1").await),
        ["ProcessStarted", "ProcessHandled", "ProcessHandled"]
    );
    let store: &dyn Store = app.app().store();
    assert_eq!(
        store.checkpoint(PROCESSES).await.unwrap(),
        Some(store.head().await.unwrap())
    );
}

// spec 116: a parked event that fails again is the new failure at once, without retries; later
// events stay parked behind the new letter.
#[tokio::test]
async fn a_parked_event_that_fails_again_is_the_new_failure_at_once() {
    PAID_FAILS.with(|f| f.set(3));
    let app = app().await.expecting_letters();
    app.dispatch(place("o-1")).await.unwrap();
    app.dispatch(MarkOrderPaid {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    let first = support::letters(&app).await[0].id.clone();
    app.dispatch(PayAndFulfil {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    assert_eq!(
        types(&lifecycle::<Settlement>(&app, "o-1").await),
        [
            "ProcessStarted",
            "ProcessHandled",
            "ProcessFailed",
            "ProcessEventParked",
            "ProcessEventParked"
        ]
    );

    PAID_PLAN.with(|plan| *plan.borrow_mut() = vec![false, true]);
    let answer = app.app().dead_letters().retry(&first).await.unwrap();
    let events = lifecycle::<Settlement>(&app, "o-1").await;
    assert_eq!(
        types(&events)[5..],
        ["ProcessHandled", "ProcessFailed"],
        "the failed step ran; the parked payment failed at once, no retries"
    );
    let letters = support::letters(&app).await;
    assert_eq!(letters.len(), 2);
    assert_eq!(
        letters[0].status,
        bounda::store::LetterStatus::Retried,
        "its step ran"
    );
    assert_eq!(letters[1].status, bounda::store::LetterStatus::Failed);
    assert!(
        letters[1].error_message.contains("failed as planned"),
        "{}",
        letters[1].error_message
    );
    assert_eq!(
        events[6].payload["letterId"],
        serde_json::json!(letters[1].id)
    );
    assert_eq!(
        answer,
        bounda::Retried::FailedAgain {
            letter: letters[1].id.clone(),
            drained: 0,
            parked: 1,
        },
        "the answer agrees with the store: settled, and the new failure is the new letter"
    );
    let parked = async |letter: &bounda::store::DeadLetter| {
        app.app().dead_letters().parked(letter).await.unwrap()
    };
    assert_eq!(
        (parked(&letters[0]).await, parked(&letters[1]).await),
        (0, 1),
        "parked belongs to the letter: the settled one shows 0, the new one its fulfilment"
    );
    // The fulfilment is still parked behind the new letter; retrying it drains it and completes.
    app.app()
        .dead_letters()
        .retry(&letters[1].id)
        .await
        .unwrap();
    assert_eq!(
        types(&lifecycle::<Settlement>(&app, "o-1").await).last(),
        Some(&"ProcessCompleted")
    );
}

// spec 102: follow-ups go one hop only: what their own commands cause finds the process ended.
#[tokio::test]
async fn follow_ups_go_one_hop_only() {
    let app = app().await;
    app.dispatch(place("o-1")).await.unwrap();
    app.advance(days(8)).await.unwrap();
    let events = types(&lifecycle::<Settlement>(&app, "o-1").await)
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    assert_eq!(
        events,
        [
            "ProcessStarted",
            "ProcessHandled",
            "ProcessDeadlineReached",
            "ProcessTimedOut",
            "ProcessHandled"
        ]
        .map(str::to_owned),
        "the chase, the timeout, its cancellation as a follow-up, and no more"
    );
    assert!(
        app.events_of::<Order>("o-1")
            .await
            .unwrap()
            .types()
            .contains(&"ConfirmationSent")
    );
    let state = state::<Settlement>(&app, "o-1").await;
    assert!(
        state.cancelled && !state.confirmed,
        "the follow-up's own confirmation did not reach the ended instance"
    );
}

// spec 69: a stored state the process can no longer read fails the step for good.
#[tokio::test]
async fn a_state_that_no_longer_reads_fails_the_instance_for_good() {
    let app = app().await.expecting_letters();
    app.dispatch(place("o-1")).await.unwrap();
    app.run_until_idle().await.unwrap();
    support::write_state(
        &app,
        "Settlement",
        "o-1",
        serde_json::json!({ "refunds": "many" }),
    )
    .await;
    app.dispatch(RefundPayment {
        payment_id: "p-1".into(),
        reference: "order:o-1".into(),
    })
    .await
    .unwrap();
    let start = app.now();
    app.run_until_idle().await.unwrap();
    assert_eq!(app.now(), start, "no retries: terminal");
    let letters = support::letters(&app).await;
    assert_eq!(
        (letters.len(), letters[0].error_type.as_str()),
        (1, "terminal")
    );
    assert!(
        letters[0].error_message.contains("cannot read"),
        "{}",
        letters[0].error_message
    );
    assert_eq!(
        types(&lifecycle::<Settlement>(&app, "o-1").await).last(),
        Some(&"ProcessFailed")
    );
}

mod v1 {
    use bounda::prelude::*;

    use crate::support::storefront::*;

    /// The first deploy: its payment handler always fails.
    #[process(on = Order, started_by = [OrderPlaced])]
    #[derive(Debug, Default, Clone, Serialize, Deserialize)]
    pub struct Deployed {
        pub paid: bool,
    }

    #[process]
    impl Deployed {
        async fn on_order_paid(_cx: On<'_, Self, OrderPaid>) -> Result<DeployedPatch> {
            Err(bounda::Error::Configuration {
                message: "broken in v1".into(),
            }
            .into())
        }
    }
}

mod v2 {
    use bounda::prelude::*;

    use crate::support::storefront::*;

    /// The next deploy: no payment handler any more.
    #[process(on = Order, started_by = [OrderPlaced])]
    #[derive(Debug, Default, Clone, Serialize, Deserialize)]
    pub struct Deployed {
        pub paid: bool,
    }

    #[process]
    impl Deployed {}
}

mod v3 {
    use bounda::prelude::*;

    use crate::support::storefront::*;

    /// `Deployed` as the first deploy stored it.
    #[derive(Debug, Clone, Deserialize)]
    pub struct DeployedV1 {
        pub paid: bool,
    }

    impl From<DeployedV1> for Deployed {
        fn from(old: DeployedV1) -> Deployed {
            Deployed {
                settled: old.paid,
                note: "migrated".into(),
            }
        }
    }

    /// A deploy without the payment handler whose state is at version 2: `paid` renamed
    /// `settled`, and a field that version 1 lacks and cannot default.
    #[process(on = Order, started_by = [OrderPlaced], version = 2, migrate = [DeployedV1])]
    #[derive(Debug, Default, Clone, Serialize, Deserialize)]
    pub struct Deployed {
        pub settled: bool,
        pub note: String,
    }

    #[process]
    impl Deployed {}
}

/// `v3` before it dropped the payment handler, which always fails: its states are stored at
/// version 2.
mod v3_failing {
    use bounda::prelude::*;

    use crate::support::storefront::*;

    impl From<super::v3::DeployedV1> for Deployed {
        fn from(old: super::v3::DeployedV1) -> Deployed {
            Deployed {
                settled: old.paid,
                note: "migrated".into(),
            }
        }
    }

    #[process(on = Order, started_by = [OrderPlaced], version = 2, migrate = [super::v3::DeployedV1])]
    #[derive(Debug, Default, Clone, Serialize, Deserialize)]
    pub struct Deployed {
        pub settled: bool,
        pub note: String,
    }

    #[process]
    impl Deployed {
        async fn on_order_placed(_cx: On<'_, Self, OrderPlaced>) -> Result<DeployedPatch> {
            Ok(DeployedPatch::default().note("placed at version 2".to_owned()))
        }

        async fn on_order_paid(_cx: On<'_, Self, OrderPaid>) -> Result<DeployedPatch> {
            Err(bounda::Error::Configuration {
                message: "broken at version 2".into(),
            }
            .into())
        }
    }
}

// Issue 20: a retry that lets a failure through carries the state over as it was stored, so it
// keeps the version it was written at: a state stored at version 2 is not read back as a
// version-1 state (which this build would migrate, and fail to).
#[tokio::test]
async fn a_failure_let_through_keeps_the_version_its_state_was_stored_at() {
    let (store, next, letter) = paid_order_failed_then_deployed(
        |b| b.process::<v3_failing::Deployed>(),
        |b| b.process::<v3::Deployed>(),
    )
    .await;
    next.dead_letters().retry(&letter).await.unwrap();
    let events = store.read_stream("process:Deployed", "o-1").await.unwrap();
    let handled = events
        .iter()
        .rfind(|e| e.event_type == "ProcessHandled")
        .expect("the failure let through");
    assert_eq!(
        (
            handled.payload["state"]["note"].as_str(),
            handled.metadata.schema_version
        ),
        (Some("placed at version 2"), 2),
        "the stored state carried over at the version it was written at"
    );
    assert_eq!(next.unreadable_states().await.unwrap(), vec![]);
    let instance = next
        .process_instance::<v3::Deployed>("o-1")
        .await
        .unwrap()
        .expect("the instance");
    assert_eq!(instance.state.note, "placed at version 2", "read as stored");
}

/// A paid order whose process `first` lists fails for good (its payment handler is broken),
/// then the app `next` lists deployed on the same store: the store, that app, and the letter.
async fn paid_order_failed_then_deployed(
    first: fn(bounda::AppBuilder) -> bounda::AppBuilder,
    next: fn(bounda::AppBuilder) -> bounda::AppBuilder,
) -> (std::sync::Arc<dyn Store>, App, String) {
    let store: std::sync::Arc<dyn Store> = support::database::store().await;
    let clock = std::sync::Arc::new(bounda::clock::SimulatedClock::default());
    let builder = App::builder_shared(store.clone())
        .only_listed()
        .clock(clock.clone());
    let failing =
        TestApp::with_app(first(builder).build().await.unwrap(), clock.clone()).expecting_letters();
    failing.dispatch(place("o-1")).await.unwrap();
    failing
        .dispatch(MarkOrderPaid {
            order_id: "o-1".into(),
        })
        .await
        .unwrap();
    failing.run_until_idle().await.unwrap();
    let letter = support::letters(&failing).await[0].id.clone();
    let builder = App::builder_shared(store.clone())
        .only_listed()
        .clock(clock)
        .ids(std::sync::Arc::new(bounda::ids::UuidV7));
    (store, next(builder).build().await.unwrap(), letter)
}

// spec 117: a failure whose handler a deploy removed is let through, and the retry goes on.
#[tokio::test]
async fn a_failure_whose_handler_a_deploy_removed_is_let_through() {
    let (store, next, letter) = paid_order_failed_then_deployed(
        |b| b.process::<v1::Deployed>(),
        |b| b.process::<v2::Deployed>(),
    )
    .await;
    next.dead_letters().retry(&letter).await.unwrap();
    let events = store.read_stream("process:Deployed", "o-1").await.unwrap();
    assert_eq!(
        types(&events),
        [
            "ProcessStarted",
            "ProcessFailed",
            "ProcessHandled",
            "ProcessResumed"
        ]
    );
    assert_eq!(
        next.dead_letters()
            .get(&letter)
            .await
            .unwrap()
            .unwrap()
            .status,
        bounda::store::LetterStatus::Retried
    );
}

// spec 103: a follow-up that fails retriably holds the process's later events until its retry.
#[tokio::test]
async fn a_follow_up_failing_retriably_holds_the_processs_later_events() {
    let app = app().await;
    app.dispatch(place("o-1")).await.unwrap();
    app.run_until_idle().await.unwrap();
    app.clock().advance(days(7));
    REFUND_FAILS.with(|f| f.set(true));
    app.run_until_idle_with(2).await.unwrap();
    assert!(types(&lifecycle::<Settlement>(&app, "o-1").await).contains(&"ProcessTimedOut"));
    app.dispatch(place("o-2")).await.unwrap();
    app.run_until_idle_with(1).await.unwrap();
    assert!(
        lifecycle::<Settlement>(&app, "o-2").await.is_empty(),
        "o-2's start waits behind the follow-up's retry"
    );
    REFUND_FAILS.with(|f| f.set(false));
    app.run_until_idle().await.unwrap();
    assert_eq!(
        types(&lifecycle::<Settlement>(&app, "o-2").await),
        ["ProcessStarted", "ProcessHandled"]
    );
    assert!(
        state::<Settlement>(&app, "o-1").await.cancelled,
        "the follow-up ran on its retry"
    );
}

// Issue 24: a paused instance whose event waits for its retry leaves the app at rest, its
// other instances going on; resumed, the retry runs and the instance is paid.
#[tokio::test]
async fn a_paused_instances_pending_retry_leaves_the_app_at_rest() {
    PAID_FAILS.with(|f| f.set(1));
    let app = app().await;
    app.dispatch(place("o-1")).await.unwrap();
    app.run_until_idle().await.unwrap();
    app.dispatch(MarkOrderPaid {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.run_until_idle_with(1).await.unwrap();
    let one = bounda::store::PauseTarget::Instance {
        process: "Settlement".into(),
        id: "o-1".into(),
    };
    app.app().pause(one.clone(), "erin", None).await.unwrap();
    app.dispatch(place("o-2")).await.unwrap();
    assert!(
        app.run_until_idle().await.unwrap().idle,
        "the retry waits for the resume"
    );
    assert!(app.instance::<Settlement>("o-2").await.unwrap().is_some());
    assert!(
        state::<Settlement>(&app, "o-1").await.chase.is_set(),
        "o-1's payment waits"
    );
    app.app().resume(&one).await.unwrap();
    assert!(app.run_until_idle().await.unwrap().idle);
    assert!(
        !state::<Settlement>(&app, "o-1").await.chase.is_set(),
        "resumed, the payment ran and cleared the chase"
    );
}
