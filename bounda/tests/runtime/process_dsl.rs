//! The code `#[process]` generates, called as the runtime will call it: merge, plan, dispatch.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use crate::support;

use bounda::aggregate::{Event, EventSet};
use bounda::process::{Context, DueDeadline, ProcessState, Reached, TIMEOUT, plan};
use bounda::{Deadline, Instant, Process, RecordedEvent, days, hours, millis};
use serde::Serialize;
use support::storefront::*;

fn at(text: &str) -> Instant {
    text.parse().expect("a test moment")
}

fn recorded<E: Event + Serialize>(event: &E, id: &str, timestamp: Instant) -> RecordedEvent {
    RecordedEvent {
        id: format!("evt-{id}"),
        aggregate_type: <E::Aggregate as bounda::Aggregate>::NAME.to_owned(),
        aggregate_id: id.to_owned(),
        event_type: E::TYPE.to_owned(),
        version: 1,
        position: 1,
        timestamp,
        payload: serde_json::to_value(event).expect("serialisable"),
        metadata: bounda::store::Metadata::of_command("cmd-1"),
        unreadable: None,
    }
}

/// Runs the `on_` handler for `event` and merges what it returns.
async fn handle(state: &mut OrderPayment, event: &RecordedEvent, now: Instant) -> bool {
    let cx = Context::new(&*state, "o-1", event.timestamp, now);
    let Some(future) = OrderPayment::on_event(cx, event) else {
        return false;
    };
    let patch = future.await.expect("the handler succeeds");
    state.merge(patch);
    true
}

/// Runs the `at_` handler for `due` and merges what it returns.
async fn fire(state: &mut OrderPayment, due: DueDeadline, now: Instant) {
    let cx = Context::new(&*state, "o-1", due.at, now);
    let future = OrderPayment::at_deadline(cx, due.field).expect("a handler");
    let patch = future.await.expect("the handler succeeds");
    state.merge(patch);
}

#[test]
fn declaration_is_read_from_the_attribute() {
    assert_eq!(OrderPayment::NAME, "OrderPayment");
    assert_eq!(OrderPayment::STARTED_BY, [OrderPlaced::key()]);
    assert_eq!(
        OrderPayment::COMPLETED_BY,
        [OrderFulfilled::key(), OrderCancelled::key()]
    );
    assert_eq!(OrderPayment::TIMEOUT, Some(days(30)));
    assert_eq!(
        OrderPayment::FIELDS,
        [
            "reminders",
            "next_reminder",
            "payment_deadline",
            "paid_at",
            "shipping",
            "refunded"
        ]
    );
    let deadlines: Vec<_> = OrderPayment::DEADLINES.iter().map(|d| d.name).collect();
    assert_eq!(deadlines, ["next_reminder", "payment_deadline"]);
}

#[test]
fn dispatch_tables_list_handlers() {
    assert_eq!(
        OrderPayment::ON,
        [
            OrderPlaced::key(),
            OrderPaid::key(),
            PaymentSettled::key(),
            PaymentRefunded::key()
        ]
    );
    assert_eq!(
        OrderPayment::AT,
        ["next_reminder", "payment_deadline", "timeout"]
    );
}

// spec 66, 68
#[test]
fn merge_keeps_unset_fields_and_replaces_set_ones() {
    let mut state = OrderPayment {
        reminders: 2,
        paid_at: Some(at("2026-01-02T00:00:00Z")),
        ..OrderPayment::default()
    };
    state.merge(OrderPaymentPatch::default().reminders(3));
    assert_eq!(state.reminders, 3);
    assert_eq!(state.paid_at, Some(at("2026-01-02T00:00:00Z")));

    state.merge(OrderPaymentPatch::default());
    assert_eq!(
        state.reminders, 3,
        "an empty patch keeps the state as it is"
    );

    state.merge(OrderPaymentPatch::default().paid_at(None));
    assert_eq!(state.paid_at, None, "a field set to None is reset");
}

// spec 67
#[test]
fn merge_replaces_a_nested_struct_whole() {
    let mut state = OrderPayment {
        shipping: Some(Shipping {
            address: "1 Main St".into(),
            express: true,
        }),
        ..OrderPayment::default()
    };
    state.merge(OrderPaymentPatch::default().shipping(Some(Shipping {
        address: "2 Side St".into(),
        ..Shipping::default()
    })));
    assert_eq!(
        state.shipping,
        Some(Shipping {
            address: "2 Side St".into(),
            express: false
        }),
        "the nested struct is not merged field by field"
    );
}

// spec 73, 84
#[test]
fn deadline_setters_take_moments_and_at_types_require_their_field() {
    let moment = at("2026-01-02T00:00:00Z");
    let mut state = OrderPayment::default();
    state.merge(OrderPaymentPatch::default().next_reminder(moment));
    assert_eq!(state.next_reminder, Deadline::at(moment));
    state.merge(OrderPaymentPatch::default().next_reminder(None::<Instant>));
    assert_eq!(state.next_reminder, Deadline::none());

    let patch: OrderPaymentPatch = AtNextReminder::new(moment).reminders(1).into();
    assert_eq!(patch.next_reminder, Some(Deadline::at(moment)));
    assert_eq!(patch.reminders, Some(1));
    assert_eq!(patch.payment_deadline, None);
}

/// No deadline has come due yet.
fn none() -> Reached {
    Reached::default()
}

// spec 78, 81
#[test]
fn plan_picks_the_earliest_deadline_timeout_included() {
    let state = OrderPayment {
        next_reminder: Deadline::at(at("2026-01-02T00:00:00Z")),
        payment_deadline: Deadline::at(at("2026-01-04T00:00:00Z")),
        ..OrderPayment::default()
    };
    let timeout_at = Some(at("2026-01-31T00:00:00Z"));
    assert_eq!(
        plan::next(&state, timeout_at, &none()),
        Some(DueDeadline {
            at: at("2026-01-02T00:00:00Z"),
            field: "next_reminder"
        })
    );
    let early_timeout = Some(at("2026-01-01T12:00:00Z"));
    assert_eq!(
        plan::next(&state, early_timeout, &none()),
        Some(DueDeadline {
            at: at("2026-01-01T12:00:00Z"),
            field: TIMEOUT
        })
    );
    assert_eq!(
        plan::pending(&state, timeout_at, &none())
            .iter()
            .map(|d| d.field)
            .collect::<Vec<_>>(),
        ["next_reminder", "payment_deadline", "timeout"]
    );
}

// spec 81
#[test]
fn plan_breaks_ties_by_field_name_timeout_included() {
    let moment = at("2026-01-04T00:00:00Z");
    let state = OrderPayment {
        next_reminder: Deadline::at(moment),
        payment_deadline: Deadline::at(moment),
        ..OrderPayment::default()
    };
    assert_eq!(
        plan::next(&state, None, &none()).map(|d| d.field),
        Some("next_reminder")
    );
    assert_eq!(
        plan::pending(&state, Some(moment), &none())
            .iter()
            .map(|d| d.field)
            .collect::<Vec<_>>(),
        ["next_reminder", "payment_deadline", "timeout"]
    );
    let only_payment = OrderPayment {
        payment_deadline: Deadline::at(moment),
        ..OrderPayment::default()
    };
    assert_eq!(
        plan::next(&only_payment, Some(moment), &none()).map(|d| d.field),
        Some("payment_deadline"),
        "`payment_deadline` sorts before `timeout`"
    );
}

// spec 81, 82
#[test]
fn plan_is_due_at_or_after_its_moment_never_before() {
    let moment = at("2026-01-04T00:00:00Z");
    let state = OrderPayment {
        payment_deadline: Deadline::at(moment),
        ..OrderPayment::default()
    };
    let before = moment.checked_sub(millis(1)).expect("representable");
    assert_eq!(plan::due(&state, None, &none(), before), None);
    assert_eq!(
        plan::due(&state, None, &none(), moment).map(|d| d.at),
        Some(moment)
    );
    assert_eq!(
        plan::due(&state, None, &none(), moment + days(5)).map(|d| d.at),
        Some(moment),
        "a moment long past is due at once, at its own moment"
    );
}

// spec 80: a (field, moment) pair comes due once, even if the state sets it back.
#[test]
fn plan_does_not_run_a_moment_that_already_came_due() {
    let moment = at("2026-01-04T00:00:00Z");
    let state = OrderPayment {
        next_reminder: Deadline::at(moment),
        payment_deadline: Deadline::at(moment + hours(1)),
        ..OrderPayment::default()
    };
    let mut reached = Reached::default();
    reached.insert("next_reminder", moment);
    assert!(reached.contains("next_reminder", moment));
    assert!(!reached.contains("payment_deadline", moment));
    assert_eq!(
        plan::due(&state, None, &reached, moment + days(1)).map(|d| d.field),
        Some("payment_deadline"),
        "the reminder's moment came due before: the next pending one is due"
    );
    assert_eq!(
        plan::next(&state, None, &reached).map(|d| d.at),
        Some(moment + hours(1))
    );
    assert_eq!(plan::pending(&state, None, &reached).len(), 1);
}

#[test]
fn plan_of_a_state_without_deadlines_is_the_timeout_or_nothing() {
    let state = OrderPayment::default();
    assert_eq!(plan::next(&state, None, &none()), None);
    assert_eq!(plan::pending(&state, None, &none()), []);
    let timeout_at = at("2026-01-31T00:00:00Z");
    assert_eq!(
        plan::next(&state, Some(timeout_at), &none()).map(|d| d.field),
        Some(TIMEOUT)
    );
}

// spec 76, 77, 81, 83
#[tokio::test]
async fn handlers_chain_reminders_from_the_moment_that_came_due() {
    let placed_at = at("2026-01-01T00:00:00Z");
    let placed = recorded(
        &OrderPlaced {
            order_id: "o-1".into(),
            total: 139,
        },
        "o-1",
        placed_at,
    );
    let mut state = OrderPayment::default();
    assert!(handle(&mut state, &placed, placed_at).await);
    assert_eq!(state.next_reminder, Deadline::at(placed_at + hours(24)));
    assert_eq!(state.payment_deadline, Deadline::at(placed_at + hours(72)));

    // The worker comes back five days late: every deadline runs in turn, each counting from
    // its own moment, not from now.
    let now = placed_at + days(5);
    let timeout_at = Some(placed_at + days(30));
    let mut ran = Vec::new();
    while let Some(due) = plan::due(&state, timeout_at, &none(), now) {
        ran.push((due.field, due.at));
        fire(&mut state, due, now).await;
    }
    assert_eq!(
        ran,
        [
            ("next_reminder", placed_at + hours(24)),
            ("next_reminder", placed_at + hours(48)),
            ("next_reminder", placed_at + hours(72)),
            ("payment_deadline", placed_at + hours(72)),
        ]
    );
    assert_eq!(state.reminders, 3);
    assert_eq!(
        plan::next(&state, timeout_at, &none()).map(|d| d.field),
        Some(TIMEOUT)
    );
}

// spec 73
#[tokio::test]
async fn paying_clears_both_deadlines() {
    let placed_at = at("2026-01-01T00:00:00Z");
    let mut state = OrderPayment::default();
    handle(
        &mut state,
        &recorded(
            &OrderPlaced {
                order_id: "o-1".into(),
                total: 1,
            },
            "o-1",
            placed_at,
        ),
        placed_at,
    )
    .await;
    let paid_at = placed_at + hours(71);
    handle(
        &mut state,
        &recorded(
            &OrderPaid {
                order_id: "o-1".into(),
            },
            "o-1",
            paid_at,
        ),
        paid_at,
    )
    .await;
    assert_eq!(state.paid_at, Some(paid_at));
    assert_eq!(plan::next(&state, None, &none()), None);
}

#[tokio::test]
async fn events_without_a_handler_dispatch_nothing() {
    let now = at("2026-01-01T00:00:00Z");
    let event = recorded(
        &OrderFulfilled {
            order_id: "o-1".into(),
        },
        "o-1",
        now,
    );
    let mut state = OrderPayment::default();
    assert!(!handle(&mut state, &event, now).await);
    let cx = Context::new(&state, "o-1", now, now);
    assert!(OrderPayment::at_deadline(cx, "paid_at").is_none());
}

#[tokio::test]
async fn a_payload_that_does_not_fit_is_a_typed_error() {
    let now = at("2026-01-01T00:00:00Z");
    let mut event = recorded(
        &OrderPlaced {
            order_id: "o-1".into(),
            total: 1,
        },
        "o-1",
        now,
    );
    event.payload = serde_json::json!({ "order_id": "o-1", "total": "lots" });
    let state = OrderPayment::default();
    let future =
        OrderPayment::on_event(Context::new(&state, "o-1", now, now), &event).expect("a handler");
    let error = future.await.expect_err("the payload does not fit");
    let error = error
        .downcast_ref::<bounda::Error>()
        .expect("a bounda error");
    assert_eq!(error.code(), "VALIDATION_FAILED");
    assert!(error.to_string().contains("Order.OrderPlaced"), "{error}");
}

// spec 56, 57
#[test]
fn events_route_to_the_instance_their_payload_or_correlator_names() {
    use bounda::process::instance_of;
    let now = at("2026-01-01T00:00:00Z");
    let own = recorded(
        &OrderPaid {
            order_id: "ignored".into(),
        },
        "o-1",
        now,
    );
    assert_eq!(
        instance_of::<OrderPayment>(&own).ok(),
        Some(Some("o-1".to_owned()))
    );

    let settled = recorded(
        &PaymentSettled {
            payment_id: "p-1".into(),
            order_id: Some("o-7".into()),
        },
        "p-1",
        now,
    );
    assert_eq!(
        instance_of::<OrderPayment>(&settled).ok(),
        Some(Some("o-7".to_owned()))
    );

    let unassigned = recorded(
        &PaymentSettled {
            payment_id: "p-1".into(),
            order_id: None,
        },
        "p-1",
        now,
    );
    assert_eq!(
        instance_of::<OrderPayment>(&unassigned).ok(),
        Some(None),
        "null names no instance"
    );

    let refund = recorded(
        &PaymentRefunded {
            payment_id: "p-1".into(),
            reference: "order:o-9".into(),
        },
        "p-1",
        now,
    );
    assert_eq!(
        instance_of::<OrderPayment>(&refund).ok(),
        Some(Some("o-9".to_owned()))
    );
    let stray = recorded(
        &PaymentRefunded {
            payment_id: "p-1".into(),
            reference: "gift".into(),
        },
        "p-1",
        now,
    );
    assert_eq!(instance_of::<OrderPayment>(&stray).ok(), Some(None));

    let mut odd = settled.clone();
    odd.payload = serde_json::json!({ "payment_id": "p-1", "order_id": ["o-1"] });
    let error = instance_of::<OrderPayment>(&odd).expect_err("a list is not an id");
    assert!(error.to_string().contains("order_id"), "{error}");
}

// spec 12
#[test]
fn event_sets_round_trip_by_type_name_and_refuse_unknown_types() {
    let event = OrderEvent::from(OrderCancelled {
        order_id: "o-1".into(),
        reason: "late".into(),
    });
    assert_eq!(event.type_name(), "OrderCancelled");
    let json = event.to_json().expect("serialisable");
    let stored = |event_type: &str| RecordedEvent {
        event_type: event_type.to_owned(),
        payload: json.clone(),
        ..recorded(
            &OrderCancelled {
                order_id: "o-1".into(),
                reason: "late".into(),
            },
            "o-1",
            at("2026-01-01T00:00:00Z"),
        )
    };
    assert_eq!(
        OrderEvent::read(&stored("OrderCancelled")).expect("readable"),
        event
    );
    let error = OrderEvent::read(&stored("OrderLost")).expect_err("unknown type");
    assert!(error.to_string().contains("`OrderLost`"), "{error}");
    assert_eq!(
        OrderEvent::TYPES,
        [
            "OrderPlaced",
            "OrderPaid",
            "OrderCancelled",
            "OrderFulfilled",
            "ReminderSent",
            "ConfirmationSent"
        ]
    );
    assert_ne!(OrderPlaced::key(), PaymentSettled::key());
}

mod stubborn {
    use bounda::prelude::*;

    use super::support::storefront::{Order, OrderPlaced};

    /// A process whose `at_retry` sets its deadline back to the moment that came due.
    #[process(on = Order, started_by = [OrderPlaced])]
    #[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
    pub(crate) struct Stubborn {
        pub(crate) tries: u32,
        #[deadline]
        pub(crate) retry: Deadline,
    }

    #[process]
    impl Stubborn {
        async fn at_retry(cx: At<'_, Self>) -> Result<AtRetry> {
            Ok(AtRetry::new(cx.due_at()).tries(cx.state().tries + 1))
        }
    }
}

// spec 84
#[tokio::test]
async fn a_deadline_handler_that_returns_the_moment_that_came_due_fails() {
    use bounda::process::step;
    let due_at = at("2026-01-02T00:00:00Z");
    let mut state = stubborn::Stubborn {
        tries: 0,
        retry: Deadline::at(due_at),
    };
    let due = plan::due(&state, None, &none(), due_at + hours(1)).expect("due");
    let error = step::run_deadline(&mut state, "o-1", due, due_at + hours(1))
        .await
        .expect_err("the deadline did not move");
    let error = error
        .downcast_ref::<bounda::Error>()
        .expect("a bounda error");
    assert!(
        matches!(error, bounda::Error::DeadlineNotAdvanced { field, at } if field == "retry" && *at == due_at)
    );
    assert_eq!(state.tries, 0, "a failed step leaves the state as it was");
}

mod eager {
    use bounda::prelude::*;

    use super::support::storefront::{Order, OrderPlaced};

    /// A process whose `at_retry` sets its deadline an hour before the moment that came due.
    #[process(on = Order, started_by = [OrderPlaced])]
    #[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
    pub(crate) struct Eager {
        #[deadline]
        pub(crate) retry: Deadline,
    }

    #[process]
    impl Eager {
        async fn at_retry(cx: At<'_, Self>) -> Result<AtRetry> {
            let earlier = cx.due_at().checked_sub(hours(1)).unwrap_or(cx.due_at());
            Ok(AtRetry::new(earlier))
        }
    }
}

// spec 84: an earlier moment would come due again at once, without end.
#[tokio::test]
async fn a_deadline_handler_that_moves_its_deadline_back_fails() {
    use bounda::process::step;
    let due_at = at("2026-01-02T00:00:00Z");
    let mut state = eager::Eager {
        retry: Deadline::at(due_at),
    };
    let due = plan::due(&state, None, &none(), due_at).expect("due");
    let error = step::run_deadline(&mut state, "o-1", due, due_at)
        .await
        .expect_err("moved back");
    assert!(error.to_string().contains("at or before"), "{error}");
    assert_eq!(state.retry, Deadline::at(due_at));
}

// spec 76, 96
#[tokio::test]
async fn steps_merge_handler_patches_and_timeout_without_handler_merges_nothing() {
    use bounda::process::step;
    let placed_at = at("2026-01-01T00:00:00Z");
    let mut state = OrderPayment::default();
    let placed = recorded(
        &OrderPlaced {
            order_id: "o-1".into(),
            total: 1,
        },
        "o-1",
        placed_at,
    );
    // The handler runs late: `after` still counts from the event's time, not from now.
    assert!(
        step::handle_event(&mut state, "o-1", &placed, placed_at + days(2))
            .await
            .unwrap()
    );
    assert_eq!(state.next_reminder, Deadline::at(placed_at + hours(24)));

    let mut plain = stubborn::Stubborn::default();
    let timeout = DueDeadline {
        at: placed_at,
        field: TIMEOUT,
    };
    step::run_deadline(&mut plain, "o-1", timeout, placed_at)
        .await
        .unwrap();
    assert_eq!(plain, stubborn::Stubborn::default());

    // `OrderPayment` has `at_timeout`: it clears the reminder.
    step::run_deadline(&mut state, "o-1", timeout, placed_at)
        .await
        .unwrap();
    assert_eq!(state.next_reminder, Deadline::none());
}

// Beyond the spec: a deadline handler tells a late run from a punctual one.
#[tokio::test]
async fn a_deadline_context_has_the_moment_that_came_due_and_the_current_time() {
    let due_at = at("2026-01-02T00:00:00Z");
    let state = OrderPayment::default();
    let now = due_at + days(5);
    let cx = bounda::At::new(Context::new(&state, "o-1", due_at, now), "next_reminder");
    assert_eq!(cx.due_at(), due_at);
    assert_eq!(cx.now(), now);
    assert_eq!(cx.lateness(), days(5));
    assert_eq!(cx.after(hours(24)), Deadline::at(due_at + hours(24)));
    assert_eq!(cx.field(), "next_reminder");
}
