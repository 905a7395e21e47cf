//! Deadlines on the calendar (issue 38): a process whose reminder goes at 09:00 local the day
//! after the order, then every day at 09:00 by a recurring rule, run on simulated time across
//! 2026's clock changes in Paris and New York; and an outage of days run once, late, with the
//! occurrences it missed counted.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use crate::support;

use bounda::calendar::{LocalTime, Recurrence, Zone};
use bounda::prelude::*;
use support::storefront::*;

mod daily {
    use super::*;

    /// Where the reminders go: the zone the test sets (its orders' customers').
    pub fn zone() -> Zone {
        ZONE.with(|zone| Zone::named(&zone.borrow()).unwrap())
    }

    thread_local! {
        pub static ZONE: std::cell::RefCell<String> = std::cell::RefCell::new("Europe/Paris".into());
        /// The occurrences each reminder covered besides its own, in order.
        pub static MISSED: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
    }

    pub fn every_morning() -> Recurrence {
        Recurrence::parse("FREQ=DAILY;BYHOUR=9;BYMINUTE=0").unwrap()
    }

    /// Reminds the customer at 09:00 their time the day after the order, then every day at
    /// 09:00.
    #[process(on = Order, started_by = [OrderPlaced], timeout = "365d")]
    #[derive(Debug, Default, Clone, Serialize, Deserialize)]
    pub struct DailyReminder {
        #[deadline]
        remind: Deadline,
    }

    #[process]
    impl DailyReminder {
        async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<DailyReminderPatch> {
            let nine = LocalTime::parse("09:00")?;
            // The day after: 09:00 once the next day has begun there.
            let tomorrow = cx.next_local(&zone(), LocalTime::parse("23:59:59")?)?;
            let first = match tomorrow.moment() {
                Some(at) => zone().next(at, nine)?,
                None => anyhow::bail!("no next day"),
            };
            Ok(DailyReminderPatch::default().remind(Deadline::at(first)))
        }

        async fn at_remind(cx: At<'_, Self>) -> Result<AtRemind> {
            let missed = cx.missed_occurrences(&every_morning(), &zone())?;
            MISSED.with(|all| all.borrow_mut().push(missed));
            Ok(AtRemind::new(
                cx.next_occurrence(&every_morning(), &zone())?,
            ))
        }
    }
}

use daily::DailyReminder;

async fn reminders_from(zone: &str, placed_at: &str, span: u32) -> (TestApp, Vec<String>) {
    daily::ZONE.with(|z| *z.borrow_mut() = zone.to_owned());
    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .command::<PlaceOrder>()
            .process::<DailyReminder>(),
    )
    .await
    .unwrap();
    let start = Instant::parse(placed_at).unwrap();
    app.clock().advance_to(start);
    app.dispatch(place("o-1")).await.unwrap();
    app.advance(days(u64::from(span))).await.unwrap();
    let told = fired(&app, zone).await;
    (app, told)
}

/// When each reminder fired, as a person in `zone` reads it.
async fn fired(app: &TestApp, zone: &str) -> Vec<String> {
    let zone = Zone::named(zone).unwrap();
    support::lifecycle::<DailyReminder>(app, "o-1")
        .await
        .iter()
        .filter(|event| event.event_type == "ProcessDeadlineReached")
        .map(|event| zone.describe(event.timestamp))
        .collect()
}

// Issue 38: a daily 09:00 reminder fires at 09:00 local on each side of each of 2026's changes:
// Paris on 29 March and 25 October, New York on 8 March and 1 November.
#[tokio::test]
async fn a_daily_reminder_fires_at_nine_local_across_each_clock_change() {
    let (_, paris_spring) = reminders_from("Europe/Paris", "2026-03-27T16:00:00Z", 3).await;
    assert_eq!(
        paris_spring,
        [
            "2026-03-28 09:00 Europe/Paris (08:00Z)",
            "2026-03-29 09:00 Europe/Paris (07:00Z)",
            "2026-03-30 09:00 Europe/Paris (07:00Z)",
        ]
    );
    let (_, paris_autumn) = reminders_from("Europe/Paris", "2026-10-23T16:00:00Z", 3).await;
    assert_eq!(
        paris_autumn,
        [
            "2026-10-24 09:00 Europe/Paris (07:00Z)",
            "2026-10-25 09:00 Europe/Paris (08:00Z)",
            "2026-10-26 09:00 Europe/Paris (08:00Z)",
        ]
    );
    let (_, new_york) = reminders_from("America/New_York", "2026-03-06T20:00:00Z", 3).await;
    assert_eq!(
        new_york,
        [
            "2026-03-07 09:00 America/New_York (14:00Z)",
            "2026-03-08 09:00 America/New_York (13:00Z)",
            "2026-03-09 09:00 America/New_York (13:00Z)",
        ]
    );
    let (_, fall) = reminders_from("America/New_York", "2026-10-30T20:00:00Z", 3).await;
    assert_eq!(
        fall,
        [
            "2026-10-31 09:00 America/New_York (13:00Z)",
            "2026-11-01 09:00 America/New_York (14:00Z)",
            "2026-11-02 09:00 America/New_York (14:00Z)",
        ]
    );
}

// Issue 38: a recurring deadline that missed occurrences during an outage of days runs once,
// late, the handler told how many it covered, and its next value is the next occurrence after
// now.
#[tokio::test]
async fn an_outage_of_days_runs_the_reminder_once_and_goes_on_from_now() {
    daily::MISSED.with(|missed| missed.borrow_mut().clear());
    let (app, before) = reminders_from("Europe/Paris", "2026-03-27T16:00:00Z", 1).await;
    assert_eq!(before, ["2026-03-28 09:00 Europe/Paris (08:00Z)"]);
    // Nothing runs for four days and a bit: the 29th's to the 1st's reminders are missed.
    let back = Instant::parse("2026-04-01T12:00:00Z").unwrap();
    app.clock().advance_to(back);
    app.run_until_idle().await.unwrap();
    app.advance(days(1)).await.unwrap();
    assert_eq!(
        fired(&app, "Europe/Paris").await,
        [
            "2026-03-28 09:00 Europe/Paris (08:00Z)",
            "2026-04-01 14:00 Europe/Paris (12:00Z)",
            "2026-04-02 09:00 Europe/Paris (07:00Z)",
        ],
        "once, late, then at 09:00 again"
    );
    assert_eq!(
        daily::MISSED.with(|missed| missed.borrow().clone()),
        [0, 3, 0],
        "the late run covered the 30th's, the 31st's and the 1st's besides the 29th's"
    );
}
