//! A long hold holds only what it holds (issue 24): the events of a paused policy, or of one
//! whose limit is used up, are passed by the subscriber's checkpoint, bookmarked, while its
//! other handlers go on; once the hold is over the subscriber returns to them and each runs
//! once. Before bookmarks, a hold stopped the checkpoint, and once a pass's pages (800 events)
//! were behind it, the subscriber's other handlers waited too.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use crate::listed::ConfirmOnOrderPlaced;
use crate::support;

use bounda::config::Config;
use bounda::prelude::*;
use bounda::store::{Bookmark, PauseTarget};
use support::storefront::*;

/// The orders `note_on_order_placed` saw, by the order's id: the moment it ran, and how often.
static NOTED: Mutex<BTreeMap<String, (Instant, u32)>> = Mutex::new(BTreeMap::new());

/// Notes each order placed: the other policy beside the held one.
#[policy]
async fn note_on_order_placed(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
    let mut noted = NOTED.lock().unwrap_or_else(PoisonError::into_inner);
    let seen = noted
        .entry(cx.event().order_id.clone())
        .or_insert((cx.now(), 0));
    seen.1 += 1;
    Ok(())
}

/// An app of the two policies on one subscriber, configured by `config`.
async fn two_policies(config: Config) -> TestApp {
    TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .policy::<ConfirmOnOrderPlaced>()
            .policy::<NoteOnOrderPlaced>()
            .config(config),
    )
    .await
    .unwrap()
}

fn confirming() -> PauseTarget {
    PauseTarget::Policy {
        name: "confirm_on_order_placed".into(),
    }
}

/// Places `count` orders named `prefix` and a number, and the position of the first one's event.
async fn place_orders(app: &TestApp, prefix: &str, count: usize) -> (Vec<String>, u64) {
    let first = app.app().store().head().await.unwrap() + 1;
    (support::place_orders(app, prefix, count).await, first)
}

/// When `note_on_order_placed` ran for each of `ids`, each checked to have run once.
fn noted(ids: &[String]) -> Vec<Instant> {
    let noted: Vec<Option<(Instant, u32)>> = {
        let noted = NOTED.lock().unwrap_or_else(PoisonError::into_inner);
        ids.iter().map(|id| noted.get(id).copied()).collect()
    };
    ids.iter()
        .zip(noted)
        .map(|(id, seen)| {
            let (at, runs) = seen.unwrap_or_else(|| panic!("the other policy never saw {id}"));
            assert_eq!(runs, 1, "{id} noted once");
            at
        })
        .collect()
}

/// The moments `ConfirmationSent` was stored on each of `ids`, each checked to be there once at
/// most.
async fn confirmations(app: &TestApp, ids: &[String]) -> Vec<Instant> {
    let mut moments = Vec::new();
    for id in ids {
        let confirmed =
            support::stored::<Order>(app, std::slice::from_ref(id), "ConfirmationSent").await;
        assert!(confirmed.len() <= 1, "{id} confirmed once: {confirmed:?}");
        moments.extend(confirmed);
    }
    moments
}

// Issue 24: a policy paused with 2,000 events behind it holds none of the other policy's, then
// or later: the checkpoint passes its events, bookmarked, and `lag` says so; resumed, each of
// its events runs once and the bookmark is gone.
#[tokio::test]
async fn a_long_pause_holds_none_of_the_other_policys_events() {
    let app = two_policies(Config::default()).await;
    app.app()
        .pause(confirming(), "alice", Some("the mail server is down"))
        .await
        .unwrap();
    let (ids, first) = place_orders(&app, "paused-", 2_000).await;
    let placed = app.now();
    assert!(app.run_until_idle().await.unwrap().idle);
    assert!(
        noted(&ids).iter().all(|at| *at == placed),
        "the other policy saw every order at once"
    );
    assert!(confirmations(&app, &ids).await.is_empty(), "paused");
    let head = app.app().store().head().await.unwrap();
    let lag = support::subscriber_lag(&app, "policies").await;
    assert_eq!(
        lag.passed,
        [Bookmark {
            handler: "confirm_on_order_placed".into(),
            lane: None,
            position: first,
        }],
        "the checkpoint passed the paused policy's events from its first"
    );
    assert_eq!(lag.position, head, "the checkpoint is at the head");
    assert_eq!(lag.lag, head - first + 1, "its events are still owed");

    // An order placed now is seen at once too.
    let (later, _) = place_orders(&app, "later-", 1).await;
    assert!(app.run_until_idle().await.unwrap().idle);
    assert_eq!(noted(&later), [app.now()]);

    app.app().resume(&confirming()).await.unwrap();
    assert!(app.run_until_idle().await.unwrap().idle);
    let all: Vec<String> = ids.iter().chain(&later).cloned().collect();
    assert_eq!(
        confirmations(&app, &all).await.len(),
        all.len(),
        "resumed, every order was confirmed once"
    );
    noted(&all);
    let lag = support::subscriber_lag(&app, "policies").await;
    assert!(lag.passed.is_empty(), "{:?}", lag.passed);
    assert_eq!(lag.lag, 0);
}

// Issue 24: a policy held by its limit for a hundred windows holds none of the other policy's
// events: they all run at once, while the limited one runs at its rate, each event once.
#[tokio::test]
async fn a_long_held_limit_holds_none_of_the_other_policys_events() {
    let app = two_policies(
        Config::from_json(
            r#"{ "limits": { "policies": { "confirm_on_order_placed": { "rate": "10/s" } } } }"#,
        )
        .unwrap(),
    )
    .await;
    let (ids, _) = place_orders(&app, "limited-", 1_000).await;
    let placed = app.now();
    assert!(app.run_until_idle().await.unwrap().idle);
    assert!(
        noted(&ids).iter().all(|at| *at == placed),
        "the other policy saw every order at once"
    );
    let confirmed = confirmations(&app, &ids).await;
    assert_eq!(confirmed.len(), ids.len(), "each confirmed once");
    let per_second = support::per_second(&confirmed);
    assert!(
        per_second.len() == 100 && per_second.values().all(|&n| n == 10),
        "ten a second for a hundred seconds: {per_second:?}"
    );
    let lag = support::subscriber_lag(&app, "policies").await;
    assert!(lag.passed.is_empty(), "{:?}", lag.passed);
    assert_eq!(lag.lag, 0);
}

// Issue 24: a bookmark of a paused policy that a deploy removed from the code is returned to by
// the next build's runner, which finds nothing left to run there: its lag is none.
#[tokio::test]
async fn a_bookmark_of_a_handler_the_app_no_longer_runs_is_let_go() {
    let app = two_policies(Config::default()).await;
    app.app().pause(confirming(), "alice", None).await.unwrap();
    let (ids, _) = place_orders(&app, "removed-", 3).await;
    assert!(app.run_until_idle().await.unwrap().idle);
    assert_eq!(
        support::subscriber_lag(&app, "policies").await.passed.len(),
        1
    );

    let next = support::another_app(&app.app().store_arc(), app.clock(), |builder| {
        builder.policy::<NoteOnOrderPlaced>()
    })
    .await;
    let (later, _) = place_orders(&next, "removed-later-", 1).await;
    assert!(next.run_until_idle().await.unwrap().idle);
    noted(&ids);
    noted(&later);
    let lag = support::subscriber_lag(&next, "policies").await;
    assert!(lag.passed.is_empty(), "{:?}", lag.passed);
    assert_eq!(lag.lag, 0);
}
