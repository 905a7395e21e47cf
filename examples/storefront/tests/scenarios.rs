//! The storefront's twelve scenarios, on simulated time and SQLite in memory, read through the
//! aggregates' state and the `order-summary` and `my-orders` read models; and the payment
//! reminder in the customer's own time zone.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use std::sync::Arc;

use bounda::prelude::*;
use bounda::store::LetterFilter;
use bounda::testing::{Level, Logs};
use bounda_sqlite::SqliteStore;
use storefront::order::*;
use storefront::payment::*;
use storefront::ports::{FakeGateway, GatewayCall, GatewayPort, MemoryNotifier, NotifierPort};
use storefront::read::my_orders::MyOrder;
use storefront::read::order_summary::OrderSummary;

struct Shop {
    app: TestApp,
    /// Every warning and error the scenario logs must be one it expects.
    logs: Logs,
    notifier: Arc<MemoryNotifier>,
    gateway: Arc<FakeGateway>,
}

async fn shop() -> Shop {
    let notifier = Arc::new(MemoryNotifier::default());
    let gateway = Arc::new(FakeGateway::default());
    let builder = storefront::app(
        App::builder(SqliteStore::in_memory().unwrap()),
        notifier.clone() as NotifierPort,
        gateway.clone() as GatewayPort,
        storefront::Timing::default(),
    );
    let logs = Logs::check();
    Shop {
        app: TestApp::new(builder).await.unwrap(),
        logs,
        notifier,
        gateway,
    }
}

/// Items of 1 × 120 and 2 × 9.50: a total of 139 (in cents: 13900).
fn items() -> Vec<Item> {
    vec![
        Item {
            product_id: "p-1".into(),
            quantity: 1,
            price: 12_000,
        },
        Item {
            product_id: "p-2".into(),
            quantity: 2,
            price: 950,
        },
    ]
}

impl Shop {
    async fn place(&self, order_id: &str) {
        self.app
            .dispatch(PlaceOrder {
                order_id: order_id.into(),
                zone: None,
                customer_id: "c-1".into(),
                items: items(),
            })
            .await
            .unwrap();
        self.app.run_until_idle().await.unwrap();
    }

    async fn order(&self, id: &str) -> Order {
        self.app.app().load::<Order>(id).await.unwrap().state
    }

    async fn payment_id(&self, order_id: &str) -> String {
        let events = self
            .app
            .app()
            .store()
            .read_stream("process:OrderLifecycle", order_id)
            .await
            .unwrap();
        let last = events
            .iter()
            .rev()
            .find(|e| e.payload.get("state").is_some())
            .unwrap();
        last.payload["state"]["payment_id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    async fn payment(&self, order_id: &str) -> Payment {
        self.app
            .app()
            .load::<Payment>(&self.payment_id(order_id).await)
            .await
            .unwrap()
            .state
    }

    async fn webhook<C: Command>(
        &self,
        command: C,
    ) -> Result<bounda::Decided, bounda::DispatchError<C::Rejection>> {
        let result = self.app.dispatch(command).await;
        self.app.run_until_idle().await.unwrap();
        result
    }
}

// 1. Placed: confirmed once with a UUID key; one intent whose key is not the payment id; settled:
// fulfilled, no refund, lag 0.
#[tokio::test]
async fn placed_order_is_confirmed_requested_and_fulfilled_when_settled() {
    let shop = shop().await;
    shop.place("o-1").await;
    let sent = shop.notifier.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].total, 13_900);
    assert_eq!(sent[0].idempotency_key.len(), 36, "a UUID");
    let order = shop.order("o-1").await;
    assert_eq!(
        (order.status, order.confirmation_sent),
        (Some(OrderStatus::Placed), true)
    );
    let payment_id = shop.payment_id("o-1").await;
    let intents = shop.gateway.intents();
    assert_eq!(intents.len(), 1);
    let GatewayCall::Intent { key, .. } = &intents[0] else {
        unreachable!()
    };
    assert_ne!(key, &payment_id, "the intent's key is not the payment id");
    assert_eq!(
        shop.payment("o-1").await.status,
        Some(PaymentStatus::Requested)
    );

    shop.webhook(SettlePayment { payment_id }).await.unwrap();
    assert_eq!(shop.order("o-1").await.status, Some(OrderStatus::Fulfilled));
    assert_eq!(
        (
            shop.payment("o-1").await.status,
            shop.payment("o-1").await.refund
        ),
        (Some(PaymentStatus::Settled), Refund::None)
    );
    assert!(shop.gateway.refunds().is_empty());
    assert_eq!(shop.app.lag().await.unwrap().max_lag, 0);

    // The order-summary read model says the same.
    let summary = OrderSummary::get(shop.app.app(), "o-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (summary.status.as_str(), summary.payment_status.as_deref()),
        ("fulfilled", Some("settled"))
    );
    assert_eq!((summary.total, summary.item_count), (13_900, 3));
    assert!(summary.confirmation_sent && !summary.reminder_sent);
    assert_eq!(summary.payment_id, Some(shop.payment_id("o-1").await));
    assert!(summary.paid_at.is_some() && summary.fulfilled_at.is_some());
    assert_eq!(summary.cancelled_at, None);
}

// The customer's orders, with what is open and what they spent, as pages ask for them.
#[tokio::test]
async fn a_customer_sees_their_orders_what_is_open_and_what_they_spent() {
    let shop = shop().await;
    shop.place("o-1").await;
    shop.place("o-2").await;
    shop.webhook(SettlePayment {
        payment_id: shop.payment_id("o-1").await,
    })
    .await
    .unwrap();
    let theirs = OrderSummary::by_customer(shop.app.app(), "c-1")
        .await
        .unwrap();
    let ids: Vec<&str> = theirs.orders.iter().map(|o| o.order_id.as_str()).collect();
    assert_eq!(ids, ["o-1", "o-2"]);
    assert_eq!((theirs.open, theirs.spent), (1, 13_900));
    assert_eq!(
        OrderSummary::by_customer(shop.app.app(), "c-9")
            .await
            .unwrap()
            .orders,
        []
    );
    let page = OrderSummary::newest(shop.app.app(), 1, 1).await.unwrap();
    assert_eq!((page.total, page.pages, page.rows.len()), (2, 2, 1));

    shop.webhook(CancelOrder {
        order_id: "o-2".into(),
        reason: "changed my mind".into(),
    })
    .await
    .unwrap();
    let mine = MyOrder::of(shop.app.app(), "c-1").await.unwrap();
    let statuses: Vec<(&str, &str)> = mine
        .iter()
        .map(|o| (o.order_id.as_str(), o.status.as_str()))
        .collect();
    assert_eq!(statuses, [("o-1", "placed"), ("o-2", "cancelled")]);
}

// 2. Processing: paying, cancel rejected, 72 h change nothing (the deadline was cleared); a later
// settle fulfils it.
#[tokio::test]
async fn a_paying_order_survives_its_payment_window() {
    let shop = shop().await;
    shop.place("o-1").await;
    let payment_id = shop.payment_id("o-1").await;
    shop.webhook(MarkPaymentProcessing {
        payment_id: payment_id.clone(),
    })
    .await
    .unwrap();
    assert_eq!(shop.order("o-1").await.status, Some(OrderStatus::Paying));
    let refused = shop
        .app
        .dispatch(CancelOrder {
            order_id: "o-1".into(),
            reason: "changed mind".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        refused.rejection().map(Rejection::message).as_deref(),
        Some("Payment in progress")
    );
    shop.app.advance(hours(72)).await.unwrap();
    assert_eq!(shop.order("o-1").await.status, Some(OrderStatus::Paying));
    shop.webhook(SettlePayment { payment_id }).await.unwrap();
    assert_eq!(shop.order("o-1").await.status, Some(OrderStatus::Fulfilled));
}

// 3. Processing then declined: cancelled, payment declined, no refund call.
#[tokio::test]
async fn a_declined_payment_cancels_the_order() {
    let shop = shop().await;
    shop.place("o-1").await;
    let payment_id = shop.payment_id("o-1").await;
    shop.webhook(MarkPaymentProcessing {
        payment_id: payment_id.clone(),
    })
    .await
    .unwrap();
    shop.webhook(DeclinePayment {
        payment_id,
        reason: "card expired".into(),
    })
    .await
    .unwrap();
    assert_eq!(shop.order("o-1").await.status, Some(OrderStatus::Cancelled));
    assert_eq!(
        shop.payment("o-1").await.status,
        Some(PaymentStatus::Declined)
    );
    assert!(shop.gateway.refunds().is_empty());
}

// 4. Cancel, then settle: the payment is cancelled, then refunded once for 139.
#[tokio::test]
async fn a_settlement_after_cancellation_is_refunded_once() {
    let shop = shop().await;
    shop.place("o-1").await;
    shop.webhook(CancelOrder {
        order_id: "o-1".into(),
        reason: "changed mind".into(),
    })
    .await
    .unwrap();
    assert_eq!(
        shop.payment("o-1").await.status,
        Some(PaymentStatus::Cancelled)
    );
    shop.webhook(SettlePayment {
        payment_id: shop.payment_id("o-1").await,
    })
    .await
    .unwrap();
    assert_eq!(shop.payment("o-1").await.refund, Refund::Done);
    let refunds = shop.gateway.refunds();
    assert_eq!(refunds.len(), 1);
    assert!(matches!(
        &refunds[0],
        GatewayCall::Refund { amount: 13_900, .. }
    ));
}

// 5. 72 h without payment: cancelled, payment cancelled; a later settle is refunded once.
#[tokio::test]
async fn an_unpaid_order_is_cancelled_when_its_window_closes() {
    let shop = shop().await;
    shop.place("o-1").await;
    shop.app.advance(hours(72)).await.unwrap();
    assert_eq!(shop.order("o-1").await.status, Some(OrderStatus::Cancelled));
    assert_eq!(
        shop.payment("o-1").await.status,
        Some(PaymentStatus::Cancelled)
    );
    shop.webhook(SettlePayment {
        payment_id: shop.payment_id("o-1").await,
    })
    .await
    .unwrap();
    assert_eq!(shop.gateway.refunds().len(), 1);
}

// 6. Processing, then 30 days: the timeout cancels the order and the payment; a later settle is
// refunded once; lag 0.
#[tokio::test]
async fn the_timeout_cancels_order_and_payment_through_one_compensation() {
    let shop = shop().await;
    shop.place("o-1").await;
    shop.webhook(MarkPaymentProcessing {
        payment_id: shop.payment_id("o-1").await,
    })
    .await
    .unwrap();
    shop.app.advance(days(30)).await.unwrap();
    assert_eq!(shop.order("o-1").await.status, Some(OrderStatus::Cancelled));
    assert_eq!(
        shop.payment("o-1").await.status,
        Some(PaymentStatus::Cancelled)
    );
    shop.webhook(SettlePayment {
        payment_id: shop.payment_id("o-1").await,
    })
    .await
    .unwrap();
    assert_eq!(shop.gateway.refunds().len(), 1);
    assert_eq!(shop.app.lag().await.unwrap().max_lag, 0);
}

// 7. Settle three times: ["PaymentSettled"], then [], then [].
#[tokio::test]
async fn settling_three_times_settles_once() {
    let shop = shop().await;
    shop.place("o-1").await;
    let payment_id = shop.payment_id("o-1").await;
    let mut answers = Vec::new();
    for _ in 0..3 {
        answers.push(
            shop.webhook(SettlePayment {
                payment_id: payment_id.clone(),
            })
            .await
            .unwrap()
            .event_types,
        );
    }
    assert_eq!(answers, [vec!["PaymentSettled"], vec![], vec![]]);
}

// 8. The refund gateway fails once: retried with the same key, one refund made.
#[tokio::test]
async fn a_failing_refund_is_retried_with_the_same_key() {
    let shop = shop().await;
    shop.place("o-1").await;
    shop.webhook(CancelOrder {
        order_id: "o-1".into(),
        reason: "changed mind".into(),
    })
    .await
    .unwrap();
    shop.gateway.fail_refunds(1);
    // The failed try is logged, with the policy, its event and the error.
    shop.logs.expect(
        Level::WARN,
        "policy `refund_on_refund_requested` on `RefundRequested`",
    );
    shop.webhook(SettlePayment {
        payment_id: shop.payment_id("o-1").await,
    })
    .await
    .unwrap();
    assert_eq!(shop.gateway.refunds().len(), 1);
    assert_eq!(shop.payment("o-1").await.refund, Refund::Done);
    let attempts: Vec<_> = shop
        .gateway
        .attempts()
        .into_iter()
        .filter(|c| matches!(c, GatewayCall::Refund { .. }))
        .collect();
    assert_eq!(attempts.len(), 2, "failed once, then made: {attempts:?}");
    assert_eq!(attempts[0], attempts[1], "the retry sent the same key");
}

// 9. Settle and cancel back to back: the rejections are [MarkOrderPaid NotOpen]; cancelled and
// refunded once.
#[tokio::test]
async fn a_settlement_racing_a_cancellation_is_refunded() {
    let shop = shop().await;
    shop.place("o-1").await;
    shop.app
        .dispatch(SettlePayment {
            payment_id: shop.payment_id("o-1").await,
        })
        .await
        .unwrap();
    shop.app
        .dispatch(CancelOrder {
            order_id: "o-1".into(),
            reason: "changed mind".into(),
        })
        .await
        .unwrap();
    let idle = shop.app.run_until_idle().await.unwrap();
    assert_eq!(
        idle.rejections
            .iter()
            .map(|r| (r.command_type, r.rejected))
            .collect::<Vec<_>>(),
        [("MarkOrderPaid", "NotOpen")]
    );
    assert_eq!(shop.order("o-1").await.status, Some(OrderStatus::Cancelled));
    assert_eq!(shop.payment("o-1").await.refund, Refund::Done);
    assert_eq!(shop.gateway.refunds().len(), 1);
}

// 10. After 24 h a placed order has had its reminder; a paying one has not.
#[tokio::test]
async fn a_reminder_goes_to_placed_orders_only() {
    let shop = shop().await;
    shop.place("o-1").await;
    shop.place("o-2").await;
    shop.webhook(MarkPaymentProcessing {
        payment_id: shop.payment_id("o-2").await,
    })
    .await
    .unwrap();
    shop.app.advance(hours(24)).await.unwrap();
    assert!(shop.order("o-1").await.reminder_sent);
    assert!(!shop.order("o-2").await.reminder_sent);
}

// 11. Webhooks out of order: settle then processing → fulfilled and settled; decline then
// settle → cancelled and refunded.
#[tokio::test]
async fn webhooks_out_of_order_end_where_they_should() {
    let shop = shop().await;
    shop.place("o-1").await;
    let payment_id = shop.payment_id("o-1").await;
    shop.webhook(SettlePayment {
        payment_id: payment_id.clone(),
    })
    .await
    .unwrap();
    shop.webhook(MarkPaymentProcessing { payment_id })
        .await
        .unwrap();
    assert_eq!(shop.order("o-1").await.status, Some(OrderStatus::Fulfilled));
    assert_eq!(
        shop.payment("o-1").await.status,
        Some(PaymentStatus::Settled)
    );

    shop.place("o-2").await;
    let payment_id = shop.payment_id("o-2").await;
    shop.webhook(DeclinePayment {
        payment_id: payment_id.clone(),
        reason: "no funds".into(),
    })
    .await
    .unwrap();
    shop.webhook(SettlePayment { payment_id }).await.unwrap();
    assert_eq!(shop.order("o-2").await.status, Some(OrderStatus::Cancelled));
    assert_eq!(shop.payment("o-2").await.refund, Refund::Done);
}

// 12. `create_intent` fails once: the step retries with the same payment id and key; one intent.
#[tokio::test]
async fn a_failing_intent_is_retried_with_the_same_ids() {
    let shop = shop().await;
    shop.gateway.fail_intents(1);
    // The failed try is logged, with the process, its event, the instance and the error.
    shop.logs.expect(
        Level::WARN,
        "process `OrderLifecycle` on `OrderPlaced` `id-2` of instance `o-1` failed (attempt 1), \
         trying again at 2026-01-01T00:00:01.000Z; `OrderLifecycle`'s later events wait for it: \
         the gateway is unavailable",
    );
    shop.place("o-1").await;
    let intents = shop.gateway.intents();
    assert_eq!(intents.len(), 1);
    let GatewayCall::Intent { payment_id, .. } = &intents[0] else {
        unreachable!()
    };
    assert_eq!(payment_id, &shop.payment_id("o-1").await);
    let attempts = shop.gateway.attempts();
    assert_eq!(attempts.len(), 2, "failed once, then made: {attempts:?}");
    assert_eq!(
        attempts[0], attempts[1],
        "the retry sent the same payment id and key"
    );
    assert_eq!(
        shop.payment("o-1").await.status,
        Some(PaymentStatus::Requested)
    );
    assert_eq!(
        shop.app
            .app()
            .dead_letters()
            .count(&LetterFilter::default())
            .await
            .unwrap(),
        0
    );
}

// Issue 38: an order carries the customer's zone; its payment reminder goes at 09:00 there the
// next morning (here the morning Paris moves to summer time), and `explain` shows it in that
// zone. A zone the database does not hold is refused when the order is placed.
#[tokio::test]
async fn the_payment_reminder_goes_at_nine_the_next_morning_in_the_customers_zone() {
    let shop = shop().await;
    let placed = Instant::parse("2026-03-28T20:00:00Z").unwrap();
    shop.app.clock().advance_to(placed);
    let in_zone = |order_id: &str, zone: &str| PlaceOrder {
        order_id: order_id.into(),
        customer_id: "c-1".into(),
        items: items(),
        zone: Some(zone.into()),
    };
    shop.app
        .dispatch(in_zone("o-1", "Europe/Paris"))
        .await
        .unwrap();
    shop.app.run_until_idle().await.unwrap();

    let story = shop
        .app
        .app()
        .explain::<storefront::lifecycle::OrderLifecycle>("o-1")
        .await
        .unwrap()
        .unwrap();
    let reminder = story
        .pending
        .iter()
        .find(|due| due.field == "payment_reminder")
        .unwrap();
    assert_eq!(
        reminder.local.as_deref(),
        Some("2026-03-29 09:00 Europe/Paris (07:00Z)")
    );
    // Eleven hours on: one millisecond before 09:00 in Paris, then 09:00.
    shop.app
        .advance(hours(11) - bounda::millis(1))
        .await
        .unwrap();
    assert!(!shop.order("o-1").await.payment_reminder_sent);
    shop.app.advance(bounda::millis(1)).await.unwrap();
    assert!(
        shop.order("o-1").await.payment_reminder_sent,
        "at 09:00 Paris time"
    );

    let refused = shop
        .app
        .dispatch(in_zone("o-2", "Europe/Atlantis"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            bounda::DispatchError::Rejected(PlaceOrderRejection::UnknownZone)
        ),
        "{refused:?}"
    );
}
