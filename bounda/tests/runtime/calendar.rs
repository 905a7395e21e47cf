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
            let first = cx.days_later(1, LocalTime::parse("09:00")?, &zone())?;
            Ok(DailyReminderPatch::default().remind(first))
        }

        async fn at_remind(cx: At<'_, Self>) -> Result<AtRemind> {
            // The first reminder was set in a zone alone; every later one by the rule.
            let next = match cx.deadline().and_then(Deadline::on_calendar) {
                Some(civil) if civil.rule().is_some() => {
                    let missed = cx.missed_recurrences()?;
                    MISSED.with(|all| all.borrow_mut().push(missed));
                    cx.recur()?
                }
                _ => {
                    let missed = cx.missed_occurrences(&every_morning(), &zone())?;
                    MISSED.with(|all| all.borrow_mut().push(missed));
                    cx.next_occurrence(&every_morning(), &zone())?
                }
            };
            Ok(AtRemind::new(next))
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

// Issue 38: a deadline set on the calendar keeps its zone and rule beside its instant, and
// operators read it in its zone: `deadlines`, `explain` (pending and history), the page and a
// preview on a copy.
#[cfg(all(feature = "cli", feature = "page"))]
#[tokio::test]
async fn a_deadline_set_in_a_zone_reads_in_it_wherever_operators_look() {
    use bounda::cli::{DeadlineArgs, ExplainArgs, Operator};

    let (app, _) = reminders_from("Europe/Paris", "2026-03-27T16:00:00Z", 1).await;
    let explain = || ExplainArgs {
        process: "DailyReminder".into(),
        id: "o-1".into(),
        json: false,
    };
    // The first went at 09:00 the day after the order; the next is the rule's, across the
    // change to summer time.
    let (_, story) = support::operator(app.app(), Operator::Explain(explain())).await;
    assert!(
        story.contains("deadline remind reached (due 2026-03-28 09:00 Europe/Paris (08:00Z))"),
        "{story}"
    );
    assert!(
        story.contains("remind               2026-03-29 09:00 Europe/Paris (07:00Z)"),
        "{story}"
    );
    let (_, listed) =
        support::operator(app.app(), Operator::Deadlines(DeadlineArgs::default())).await;
    assert!(
        listed.contains("DailyReminder:o-1  remind  2026-03-29 09:00 Europe/Paris (07:00Z)"),
        "{listed}"
    );
    let (_, page, _) = support::page::get(&app, None, "/instances/DailyReminder/o-1").await;
    assert!(
        page.contains("remind at 2026-03-29 09:00 Europe/Paris (07:00Z)"),
        "{page}"
    );
    // The overview's timeline names it in its zone too.
    let (_, overview, _) = support::page::get(&app, None, "/").await;
    assert!(
        overview.contains("DailyReminder:o-1 remind at 2026-03-29 09:00 Europe/Paris (07:00Z)"),
        "{overview}"
    );
    // Stored as the reading with its offset (the instant) and zone, and the rule.
    let state = support::lifecycle::<DailyReminder>(&app, "o-1")
        .await
        .last()
        .unwrap()
        .payload["state"]["remind"]
        .clone();
    assert_eq!(
        state,
        "2026-03-29T09:00:00+02:00[Europe/Paris] FREQ=DAILY;BYHOUR=9;BYMINUTE=0"
    );

    // A preview on a copy reads its firings in their zone.
    let copy = bounda_sqlite::SqliteStore::in_memory().unwrap();
    bounda::store::copy(app.app().store(), &copy, "production", app.now())
        .await
        .unwrap();
    let builder = App::builder_shared(std::sync::Arc::new(copy))
        .only_listed()
        .command::<PlaceOrder>()
        .process::<DailyReminder>();
    let report = bounda::preview::preview(builder, days(2)).await.unwrap();
    let local: Vec<&str> = report
        .fired
        .iter()
        .filter_map(|fired| fired.local.as_deref())
        .collect();
    assert_eq!(
        local,
        [
            "2026-03-29 09:00 Europe/Paris (07:00Z)",
            "2026-03-30 09:00 Europe/Paris (07:00Z)"
        ]
    );
}

mod rezoned {
    use super::*;

    /// Holds a reminder as a zone database that kept Paris on winter time all year would have
    /// written it: 09:00 at +01:00 on 1 July, 08:00Z.
    #[process(on = Order, started_by = [OrderPlaced], timeout = "365d")]
    #[derive(Debug, Default, Clone, Serialize, Deserialize)]
    pub struct OldRules {
        #[deadline]
        remind: Deadline,
    }

    #[process]
    impl OldRules {
        async fn on_order_placed(_cx: On<'_, Self, OrderPlaced>) -> Result<OldRulesPatch> {
            let stored: Deadline =
                serde_json::from_str(r#""2026-07-01T09:00:00+01:00[Europe/Paris]""#)?;
            Ok(OldRulesPatch::default().remind(stored))
        }

        async fn at_remind(_cx: At<'_, Self>) -> Result<AtRemind> {
            Ok(AtRemind::new(Deadline::none()))
        }
    }
}

// Issue 38: a deadline whose zone's rules changed in this build's zone database keeps the
// instant it holds, and `check` names it with where the new rules put its reading.
#[cfg(feature = "cli")]
#[tokio::test]
async fn check_names_a_deadline_the_zone_rules_of_this_build_would_move_and_it_keeps_its_instant() {
    use bounda::cli::{CheckArgs, Operator};

    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .command::<PlaceOrder>()
            .process::<rezoned::OldRules>(),
    )
    .await
    .unwrap();
    app.clock()
        .advance_to(Instant::parse("2026-06-30T12:00:00Z").unwrap());
    app.dispatch(place("o-1")).await.unwrap();
    app.run_until_idle().await.unwrap();

    let report = app.app().preflight().await.unwrap();
    assert!(report.passes(), "reported, not a failure: {report:#?}");
    let moved: Vec<(&str, Instant, Instant)> = report
        .rezoned_deadlines
        .iter()
        .map(|moved| (moved.field, moved.at, moved.resolved))
        .collect();
    assert_eq!(
        moved,
        [(
            "remind",
            Instant::parse("2026-07-01T08:00:00Z").unwrap(),
            Instant::parse("2026-07-01T07:00:00Z").unwrap()
        )]
    );
    let (_, text) = support::operator(app.app(), Operator::Check(CheckArgs { json: false })).await;
    assert!(
        text.contains(&format!(
            "deadlines set in a zone whose rules this build's zone database ({}) changed",
            bounda::calendar::ZONE_DATABASE
        )),
        "{text}"
    );
    assert!(
        text.contains(
            "OldRules:o-1: `remind` set for 2026-07-01T09:00:00+01:00[Europe/Paris] fires at \
             2026-07-01T08:00:00.000Z; this build's rules put that at 2026-07-01T07:00:00.000Z"
        ),
        "{text}"
    );
    // It fires at the instant it holds: not at 07:00Z, at 08:00Z.
    app.advance(hours(19) + minutes(30)).await.unwrap();
    assert!(fired_of::<rezoned::OldRules>(&app).await.is_empty());
    app.advance(hours(1)).await.unwrap();
    assert_eq!(
        fired_of::<rezoned::OldRules>(&app).await,
        [Instant::parse("2026-07-01T08:00:00Z").unwrap()]
    );
}

/// The moments `P`'s instance `o-1` ran its deadlines at.
async fn fired_of<P: bounda::Process>(app: &TestApp) -> Vec<Instant> {
    support::lifecycle::<P>(app, "o-1")
        .await
        .iter()
        .filter(|event| event.event_type == "ProcessDeadlineReached")
        .map(|event| event.timestamp)
        .collect()
}
