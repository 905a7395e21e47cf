//! Paced work (issue 24): a limit per process, policy or scheduled command, counted in the
//! store, holds a catch-up to its rate; each instance's runs keep their order, every run
//! happens once, and lag says what a limit holds back.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use std::collections::BTreeMap;

use crate::support;

use bounda::config::Config;
use bounda::prelude::*;
use support::storefront::*;

/// A shop whose payment process may start `rate` steps (`"100/s"`).
async fn shop(rate: &str) -> TestApp {
    let config = Config::from_json(&format!(
        r#"{{ "limits": {{ "processes": {{ "OrderPayment": {{ "rate": "{rate}" }} }} }} }}"#
    ))
    .unwrap();
    TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .process::<OrderPayment>()
            .config(config),
    )
    .await
    .unwrap()
}

/// The moments `id`'s lifecycle events of `event_type` were stored at.
async fn moments(app: &TestApp, id: &str, event_type: &str) -> Vec<Instant> {
    support::lifecycle::<OrderPayment>(app, id)
        .await
        .into_iter()
        .filter(|event| event.event_type == event_type)
        .map(|event| event.timestamp)
        .collect()
}

/// How many of `moments` fall in each second, by the second's start.
fn per_second(moments: &[Instant]) -> BTreeMap<i64, usize> {
    let mut seconds = BTreeMap::new();
    for at in moments {
        *seconds.entry(at.as_millis().div_euclid(1_000)).or_default() += 1;
    }
    seconds
}

// Issue 24: 1,000 deadlines due at once under a limit of 100/s take ten seconds of simulated
// time, 100 in each second, and each fires once; the events that started the instances were
// paced the same way.
#[tokio::test]
async fn a_thousand_deadlines_due_at_once_run_at_the_limits_rate() {
    let app = shop("100/s").await;
    let placed = app.now();
    let ids: Vec<String> = (0..1_000).map(|n| format!("o-{n:04}")).collect();
    for id in &ids {
        app.dispatch(PlaceOrder {
            order_id: id.clone(),
            total: 1,
        })
        .await
        .unwrap();
    }
    assert!(app.run_until_idle().await.unwrap().idle);
    let mut started = Vec::new();
    for id in &ids {
        started.extend(moments(&app, id, "ProcessStarted").await);
    }
    assert_eq!(started.len(), 1_000, "each instance started once");
    let by_second = per_second(&started);
    assert_eq!(by_second.len(), 10, "{by_second:?}");
    assert!(by_second.values().all(|&n| n == 100), "{by_second:?}");

    // Every first reminder is due at once, a day after the orders were placed.
    let due = placed + hours(24);
    app.advance(due.saturating_since(app.now())).await.unwrap();
    // The first hundred ran; lag says the limit holds the other 900 until the second ends.
    let lag = app.lag().await.unwrap();
    let [limited] = lag.limited.as_slice() else {
        panic!("one limit holds work: {:?}", lag.limited)
    };
    assert_eq!(
        (limited.window.taken, limited.window.ends, limited.overdue),
        (100, due + seconds(1), Some(900))
    );
    assert_eq!(
        limited.to_string(),
        format!(
            "process `OrderPayment` at 100/s: 100 started, the rest waits until {} \
             (900 instances with a deadline due)",
            due + seconds(1)
        )
    );
    assert!(app.advance(seconds(10)).await.unwrap().idle);
    let mut reached = Vec::new();
    for id in &ids {
        let ran = moments(&app, id, "ProcessDeadlineReached").await;
        assert_eq!(
            ran.len(),
            1,
            "{id} reached its first reminder once: {ran:?}"
        );
        reached.extend(ran);
    }
    let by_second = per_second(&reached);
    assert!(by_second.values().all(|&n| n <= 100), "{by_second:?}");
    assert_eq!(
        by_second.len(),
        10,
        "ten seconds of 100 each: {by_second:?}"
    );
    let first = reached.iter().min().copied().unwrap();
    let last = reached.iter().max().copied().unwrap();
    assert_eq!(first, due, "the first hundred run when due");
    assert!(
        last >= due + seconds(9),
        "the last hundred run in the tenth second: {last}"
    );
}
