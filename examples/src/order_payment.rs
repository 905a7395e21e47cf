//! The order-payment process of seed 001: remind the customer every 24 hours, three times at
//! most, and give up on the order if it is not paid within 72 hours.

use bounda::prelude::*;

use crate::order::{
    CancelOrder, Order, OrderCancelled, OrderFulfilled, OrderPaid, OrderPlaced, SendReminder,
};

/// Reminds the customer daily and cancels the order if it is not paid within 72 hours.
#[process(
    on = Order,
    started_by = [OrderPlaced],
    completed_by = [OrderFulfilled, OrderCancelled],
    timeout = "30d",
)]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    /// Reminders sent so far.
    pub reminders: u32,
    /// When the next reminder goes out.
    #[deadline]
    pub next_reminder: Deadline,
    /// When an unpaid order is cancelled.
    #[deadline]
    pub payment_deadline: Deadline,
    /// When the order was paid: recorded, nothing runs for it.
    pub paid_at: Option<Instant>,
}

/// Reminders sent at most.
pub const MAX_REMINDERS: u32 = 3;

/// How often to remind: `REMINDER_EVERY`, `300ms` by default (the real storefront: `24h`).
pub fn reminder_every() -> Result<Duration, DurationError> {
    env_duration("REMINDER_EVERY", millis(300))
}

/// How long the customer has to pay: `PAYMENT_WINDOW`, `1s` by default (the real storefront:
/// `72h`).
pub fn payment_window() -> Result<Duration, DurationError> {
    env_duration("PAYMENT_WINDOW", seconds(1))
}

#[process]
impl OrderPayment {
    async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<OrderPaymentPatch> {
        Ok(OrderPaymentPatch::default()
            .next_reminder(cx.after(reminder_every()?))
            .payment_deadline(cx.after(payment_window()?)))
    }

    async fn on_order_paid(cx: On<'_, Self, OrderPaid>) -> Result<OrderPaymentPatch> {
        Ok(OrderPaymentPatch::default()
            .paid_at(Some(cx.event_time()))
            .next_reminder(Deadline::none())
            .payment_deadline(Deadline::none()))
    }

    // The return type requires `next_reminder`: leaving it out does not compile.
    async fn at_next_reminder(cx: At<'_, Self>) -> Result<AtNextReminder> {
        cx.send(SendReminder { order_id: cx.id() }).await?;
        // Run late (after an outage, a pause, a retry), this one reminder stands for the links
        // missed meanwhile, and the chain goes on from the first link still ahead, instead of
        // every missed link reminding the customer at once.
        let every = reminder_every()?;
        let missed = u32::try_from(cx.missed(every)).unwrap_or(u32::MAX);
        let reminders = cx
            .state()
            .reminders
            .saturating_add(1)
            .saturating_add(missed);
        let next = if reminders < MAX_REMINDERS {
            cx.next_link(every)?
        } else {
            Deadline::none()
        };
        Ok(AtNextReminder::new(next).reminders(reminders))
    }

    async fn at_payment_deadline(cx: At<'_, Self>) -> Result<AtPaymentDeadline> {
        cx.send(CancelOrder {
            order_id: cx.id(),
            reason: "not paid in time".into(),
        })
        .await?;
        Ok(AtPaymentDeadline::new(Deadline::none()).next_reminder(Deadline::none()))
    }
}

#[cfg(test)]
mod tests {
    use bounda::prelude::*;
    use bounda_sqlite::SqliteStore;

    use super::*;
    use crate::order::PlaceOrder;

    /// The order-payment app on simulated time, nothing else in it.
    async fn app() -> TestApp {
        let store = SqliteStore::in_memory().expect("an in-memory store");
        TestApp::new(
            App::builder(store)
                .only_listed()
                .process::<OrderPayment>()
                .command::<PlaceOrder>()
                .command::<SendReminder>()
                .command::<CancelOrder>(),
        )
        .await
        .expect("the app builds")
    }

    /// The app with order `o-1` placed, and when.
    async fn placed() -> (TestApp, Instant) {
        let app = app().await;
        let placed = app.now();
        app.dispatch(PlaceOrder {
            order_id: "o-1".into(),
            total: 10,
        })
        .await
        .expect("placed");
        (app, placed)
    }

    /// `every`, `n` times over.
    fn times(every: Duration, n: u64) -> Duration {
        every.checked_mul(n).expect("a short duration")
    }

    /// When each reminder of `o-1` was stored.
    async fn reminded(app: &TestApp) -> Vec<Instant> {
        app.events_of::<Order>("o-1")
            .await
            .expect("the order's events")
            .0
            .iter()
            .filter(|event| event.event_type == "ReminderSent")
            .map(|event| event.timestamp)
            .collect()
    }

    // On time, a reminder at each link: 300 ms, 600 ms and 900 ms after the order.
    #[tokio::test]
    async fn on_time_the_customer_is_reminded_at_each_link() {
        let (app, placed) = placed().await;
        app.advance(seconds(2)).await.expect("ran");
        let every = reminder_every().expect("the default");
        assert_eq!(
            reminded(&app).await,
            [
                placed + every,
                placed + times(every, 2),
                placed + times(every, 3)
            ]
        );
    }

    // After an outage that missed a link, one reminder stands for both, and the next one comes
    // at the chain's next link, not at once.
    #[tokio::test]
    async fn after_an_outage_one_reminder_stands_for_the_links_missed() {
        let (app, placed) = placed().await;
        app.run_until_idle().await.expect("started");
        // Down from the order until 700 ms after it: the links at 300 and 600 ms passed.
        app.clock().advance(millis(700));
        app.advance(seconds(2)).await.expect("ran");
        let every = reminder_every().expect("the default");
        assert_eq!(
            reminded(&app).await,
            [placed + millis(700), placed + times(every, 3)],
            "one reminder for the two missed, then the third link"
        );
        let state = app
            .app()
            .process_instance::<OrderPayment>("o-1")
            .await
            .expect("read")
            .expect("the instance");
        assert_eq!(state.state.reminders, MAX_REMINDERS);
    }
}
