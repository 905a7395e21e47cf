//! Pausing and resuming (issue 24): a process, one instance, a policy or a subscriber stopped
//! in the store, obeyed by every runner on it; what waited runs in order once resumed, a
//! deadline late; lag, deadlines and explain say what is paused, since when and by whom.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use crate::listed::ConfirmOnOrderPlaced;
use crate::support;

use bounda::prelude::*;
use bounda::store::{PauseStore, PauseTarget};
use support::storefront::*;

async fn shop() -> TestApp {
    TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .process::<OrderPayment>()
            .policy::<ConfirmOnOrderPlaced>(),
    )
    .await
    .unwrap()
}

async fn place(app: &TestApp, id: &str) {
    app.dispatch(PlaceOrder {
        order_id: id.into(),
        total: 1,
    })
    .await
    .unwrap();
}

fn process() -> PauseTarget {
    PauseTarget::Process {
        name: "OrderPayment".into(),
    }
}

fn instance(id: &str) -> PauseTarget {
    PauseTarget::Instance {
        process: "OrderPayment".into(),
        id: id.into(),
    }
}

/// Whether order `id` was confirmed.
async fn confirmed(app: &TestApp, id: &str) -> bool {
    app.events_of::<Order>(id)
        .await
        .unwrap()
        .types()
        .contains(&"ConfirmationSent")
}

// Issue 24: a paused process takes no event and runs no deadline; resumed, its events run and
// its deadlines that came due meanwhile run, late, in order.
#[tokio::test]
async fn a_paused_process_waits_and_runs_late_in_order_once_resumed() {
    let app = shop().await;
    place(&app, "o-1").await;
    app.run_until_idle().await.unwrap();
    let placed = app.now();
    assert!(
        app.app()
            .pause(process(), "alice", Some("the mail provider is down"))
            .await
            .unwrap()
    );
    assert!(
        !app.app().pause(process(), "bob", None).await.unwrap(),
        "paused once"
    );

    // Its events wait: o-2 starts nothing; the policy goes on.
    place(&app, "o-2").await;
    // Its deadlines wait: three reminders and the payment deadline come due, none runs.
    assert!(
        app.advance(hours(80)).await.unwrap().idle,
        "what is paused leaves nothing to do"
    );
    assert!(
        support::reached::<OrderPayment>(&app, "o-1")
            .await
            .is_empty()
    );
    assert!(app.instance::<OrderPayment>("o-2").await.unwrap().is_none());
    let o2 = app.events_of::<Order>("o-2").await.unwrap();
    assert!(o2.types().contains(&"ConfirmationSent"), "{:?}", o2.types());

    // Lag, deadlines and explain say so, with who and why.
    let lag = app.lag().await.unwrap();
    assert_eq!(lag.paused.len(), 1);
    let pause = &lag.paused[0];
    assert_eq!(
        (pause.target.clone(), pause.by.as_str(), pause.since),
        (process(), "alice", placed)
    );
    assert_eq!(pause.reason.as_deref(), Some("the mail provider is down"));
    let pending = app.app().pending_deadlines().await.unwrap();
    assert!(
        !pending.is_empty() && pending.iter().all(|due| due.paused),
        "{pending:?}"
    );
    let story = app
        .app()
        .explain::<OrderPayment>("o-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(story.paused.as_ref().map(|p| p.by.as_str()), Some("alice"));

    // Resumed: o-2 starts, and o-1's deadlines run in their order, each at its moment and late.
    let resumed_at = app.now();
    assert!(app.app().resume(&process()).await.unwrap());
    app.run_until_idle().await.unwrap();
    assert!(app.instance::<OrderPayment>("o-2").await.unwrap().is_some());
    let ran = support::reached::<OrderPayment>(&app, "o-1").await;
    let fields: Vec<&str> = ran.iter().map(|(field, ..)| field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "next_reminder",
            "next_reminder",
            "next_reminder",
            "payment_deadline"
        ],
        "{ran:?}"
    );
    for (field, at, when) in &ran {
        assert!(
            *at < resumed_at && *when >= resumed_at,
            "{field} at {at} ran {when}"
        );
    }
    let moments: Vec<Instant> = ran.iter().map(|(_, at, _)| *at).collect();
    assert!(moments.is_sorted(), "in due order: {moments:?}");
    assert!(app.lag().await.unwrap().paused.is_empty());
}

// Issue 24: a paused instance waits; the process's other instances go on.
#[tokio::test]
async fn a_paused_instance_waits_while_the_others_go_on() {
    let app = shop().await;
    place(&app, "o-1").await;
    place(&app, "o-2").await;
    app.run_until_idle().await.unwrap();
    app.app()
        .pause(instance("o-1"), "alice", None)
        .await
        .unwrap();
    let paid = support::pay(&app, "o-1").await;
    assert!(
        app.advance(hours(25)).await.unwrap().idle,
        "a paused instance's due deadline does not wait for its events"
    );
    assert!(
        support::reached::<OrderPayment>(&app, "o-1")
            .await
            .is_empty()
    );
    assert_eq!(
        support::reached::<OrderPayment>(&app, "o-2").await.len(),
        1,
        "o-2's reminder ran"
    );
    let o1 = support::state::<OrderPayment>(&app, "o-1").await;
    assert_eq!(o1.paid_at, None, "o-1's payment waits");
    let lag = support::subscriber_lag(&app, "processes").await;
    assert_eq!(
        lag.passed
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [format!(
            "the events of `OrderPayment` for `o-1` from position {paid}"
        )],
        "the processes' checkpoint passed o-1's payment"
    );
    assert!(lag.position > paid, "and went on: {lag:?}");

    app.app().resume(&instance("o-1")).await.unwrap();
    // Resumed, its reminder is due; it waits for the payment the checkpoint passed.
    let reminder = app
        .app()
        .pending_deadlines()
        .await
        .unwrap()
        .into_iter()
        .find(|d| d.instance == "o-1" && d.field == "next_reminder")
        .unwrap();
    assert!(reminder.waiting && !reminder.paused, "{reminder:?}");
    app.run_until_idle().await.unwrap();
    // Its event came before its reminder's moment, so it runs first: paid, nothing to remind.
    let o1 = support::state::<OrderPayment>(&app, "o-1").await;
    assert!(o1.paid_at.is_some());
    assert!(
        support::reached::<OrderPayment>(&app, "o-1")
            .await
            .is_empty(),
        "paid before it was due"
    );
}

// Issue 24: a paused policy's events wait, as does a paused subscriber's whole pass, and a
// second app on the same store obeys the pause its neighbour made.
#[tokio::test]
async fn a_paused_policy_or_subscriber_waits_on_every_runner() {
    let app = shop().await;
    let policy = PauseTarget::Policy {
        name: "confirm_on_order_placed".into(),
    };
    app.app()
        .pause(policy.clone(), "alice", None)
        .await
        .unwrap();
    let other = support::another_app(&app.app().store_arc(), app.clock(), |builder| {
        builder
            .process::<OrderPayment>()
            .policy::<ConfirmOnOrderPlaced>()
    })
    .await;
    place(&other, "o-1").await;
    assert!(other.run_until_idle().await.unwrap().idle);
    assert!(app.run_until_idle().await.unwrap().idle);
    assert!(
        !confirmed(&app, "o-1").await,
        "the policy waits on both runners"
    );
    assert!(
        other
            .instance::<OrderPayment>("o-1")
            .await
            .unwrap()
            .is_some(),
        "the process goes on"
    );
    assert!(app.lag().await.unwrap().max_lag > 0);

    app.app().resume(&policy).await.unwrap();
    let subscriber = PauseTarget::Subscriber {
        name: "processes".into(),
    };
    other
        .app()
        .pause(subscriber.clone(), "bob", None)
        .await
        .unwrap();
    place(&app, "o-2").await;
    assert!(app.run_until_idle().await.unwrap().idle);
    assert!(confirmed(&app, "o-1").await, "resumed, the policy ran");
    assert!(
        app.instance::<OrderPayment>("o-2").await.unwrap().is_none(),
        "the processes subscriber makes no pass"
    );
    app.app().resume(&subscriber).await.unwrap();
    app.run_until_idle().await.unwrap();
    assert!(app.instance::<OrderPayment>("o-2").await.unwrap().is_some());
}

#[policy]
async fn mail_on_order_placed(_cx: Reaction<'_, OrderPlaced>) -> Result<()> {
    anyhow::bail!("the mail server is down")
}

/// An app whose one policy always fails, expecting its letters, and that policy's pause target.
async fn mailing() -> (TestApp, PauseTarget) {
    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .policy::<MailOnOrderPlaced>(),
    )
    .await
    .unwrap()
    .expecting_letters();
    let policy = PauseTarget::Policy {
        name: "mail_on_order_placed".into(),
    };
    (app, policy)
}

// Issue 24: a paused policy's letter is not retried: the retry says what pause holds it.
#[tokio::test]
async fn a_letter_of_what_is_paused_is_not_retried_until_resumed() {
    let (app, policy) = mailing().await;
    place(&app, "o-1").await;
    app.run_until_idle().await.unwrap();
    let letter = support::letters(&app).await.remove(0);
    app.app().pause(policy.clone(), "erin", None).await.unwrap();
    let refused = app
        .app()
        .dead_letters()
        .retry(&letter.id)
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("policy mail_on_order_placed paused since")
            && refused.to_string().contains("resume it first"),
        "{refused}"
    );
    app.app().resume(&policy).await.unwrap();
    let retried = app.app().dead_letters().retry(&letter.id).await;
    assert!(
        !matches!(&retried, Err(bounda::Error::LetterNotRetriable { .. })),
        "resumed, it runs: {retried:?}"
    );
}

// Issue 24: a paused policy's failed event waits for its retry no longer: the test app comes to
// rest with the retry held by the pause, and after the resume it runs (here, to its letter).
#[tokio::test]
async fn a_paused_handlers_pending_retry_leaves_the_app_at_rest() {
    let (app, policy) = mailing().await;
    place(&app, "o-1").await;
    app.run_until_idle_with(1).await.unwrap();
    assert!(
        support::letters(&app).await.is_empty(),
        "the first attempt failed, its retry waits"
    );
    assert_eq!(
        support::subscriber_lag(&app, "policies")
            .await
            .failing
            .map(|f| f.attempts),
        Some(1),
        "a retry is pending"
    );
    app.app().pause(policy.clone(), "erin", None).await.unwrap();
    assert!(
        app.run_until_idle().await.unwrap().idle,
        "the retry waits for the resume"
    );
    assert!(support::letters(&app).await.is_empty());
    app.app().resume(&policy).await.unwrap();
    assert!(app.run_until_idle().await.unwrap().idle);
    assert_eq!(
        support::letters(&app).await.len(),
        1,
        "its retries ran, then its letter"
    );
}

// Issue 24: what cannot be paused is refused, saying why.
#[tokio::test]
async fn a_pause_of_what_the_app_does_not_have_is_refused() {
    let app = shop().await;
    place(&app, "o-1").await;
    app.run_until_idle().await.unwrap();
    let refused = |target: PauseTarget, by: &'static str| {
        let app = app.app().clone();
        async move { app.pause(target, by, None).await.unwrap_err().to_string() }
    };
    let nope = refused(
        PauseTarget::Process {
            name: "Nope".into(),
        },
        "alice",
    )
    .await;
    assert!(
        nope.contains("(its processes: OrderPayment)"),
        "names the processes: {nope}"
    );
    assert_eq!(
        refused(instance("o-none"), "alice").await,
        "instance `o-none` of process `OrderPayment` does not exist"
    );
    let policy = refused(
        PauseTarget::Policy {
            name: "nope".into(),
        },
        "alice",
    )
    .await;
    assert!(
        policy.contains("(its policies: confirm_on_order_placed)"),
        "{policy}"
    );
    let subscriber = refused(
        PauseTarget::Subscriber {
            name: "nope".into(),
        },
        "alice",
    )
    .await;
    assert!(subscriber.contains("policies, processes"), "{subscriber}");
    assert!(
        refused(instance("o-1"), " ")
            .await
            .contains("operator's name")
    );
    // Issue 43: a reason is a line an operator reads, not a document.
    let long = app
        .app()
        .pause(process(), "alice", Some(&"x".repeat(501)))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        long.contains("at most 500 characters, and this one has 501"),
        "{long}"
    );
    assert!(app.app().pauses().await.unwrap().is_empty());
    // Issue 43: a resume of what is neither paused nor the app's is a mistyped name.
    let resumed = app
        .app()
        .resume(&PauseTarget::Process {
            name: "Nope".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(resumed.code(), "NOT_FOUND", "{resumed}");
    assert!(!app.app().resume(&process()).await.unwrap(), "not paused");
}

#[cfg(feature = "cli")]
mod cli {
    use super::*;
    use bounda::cli::Operator;
    use clap::Parser;

    #[derive(Parser)]
    struct Command {
        #[command(subcommand)]
        operator: Operator,
    }

    async fn run(app: &TestApp, args: &[&str]) -> String {
        let command = Command::try_parse_from(std::iter::once(&"app").chain(args))
            .unwrap_or_else(|e| panic!("{e}"));
        support::operator(app.app(), command.operator).await.1
    }

    // Issue 24: `pause` and `resume` from the command line, with the operator's name; `lag`,
    // `deadlines` and `explain` say what is paused.
    #[tokio::test]
    async fn the_operator_pauses_and_resumes_from_the_command_line() {
        let app = shop().await;
        place(&app, "o-1").await;
        app.run_until_idle().await.unwrap();
        let paused = run(
            &app,
            &[
                "pause",
                "instance",
                "OrderPayment",
                "o-1",
                "--by",
                "carol",
                "--reason",
                "a refund is pending",
            ],
        )
        .await;
        assert_eq!(paused, "instance OrderPayment o-1 paused by carol\n");
        let paid = support::pay(&app, "o-1").await;
        place(&app, "o-2").await;
        app.run_until_idle().await.unwrap();
        let lag = run(&app, &["lag"]).await;
        assert!(
            lag.contains("paused: instance OrderPayment o-1 paused since 2026-01-01T00:00:00.000Z by carol: a refund is pending"),
            "{lag}"
        );
        assert!(
            lag.contains(&format!(
                "\n  passed the events of `OrderPayment` for `o-1` from position {paid} while held; \
                 they run once the hold is over\n"
            )),
            "{lag}"
        );
        let deadlines = run(&app, &["deadlines"]).await;
        assert!(deadlines.contains("next_reminder  paused"), "{deadlines}");
        let story = run(&app, &["explain", "OrderPayment", "o-1"]).await;
        assert!(story.contains("paused since"), "{story}");
        assert_eq!(
            run(&app, &["resume", "instance", "OrderPayment", "o-1"]).await,
            "instance OrderPayment o-1 resumed\n"
        );
        assert_eq!(
            run(&app, &["resume", "instance", "OrderPayment", "o-1"]).await,
            "instance OrderPayment o-1 was not paused\n"
        );
    }
}

// Issue 24: a copy or a transfer keeps what is paused, with who paused it and when.
#[tokio::test]
async fn a_copy_keeps_what_is_paused() {
    use bounda::store::Store;
    let app = shop().await;
    place(&app, "o-1").await;
    app.run_until_idle().await.unwrap();
    app.app()
        .pause(instance("o-1"), "frank", Some("checking"))
        .await
        .unwrap();
    // Its payment is passed by the processes' checkpoint, bookmarked, as o-2 goes on.
    let paid = support::pay(&app, "o-1").await;
    place(&app, "o-2").await;
    app.run_until_idle().await.unwrap();
    let source = app
        .app()
        .store()
        .cursor("processes")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(source.handled_to(), paid - 1, "{source:?}");
    assert!(source.checkpoint > paid, "{source:?}");

    let copy = bounda_sqlite::SqliteStore::in_memory().unwrap();
    bounda::store::copy(app.app().store(), &copy, "test", app.now())
        .await
        .unwrap();
    assert_eq!(
        copy.pauses().await.unwrap(),
        app.app().pauses().await.unwrap()
    );
    assert_eq!(
        copy.cursor("processes").await.unwrap(),
        Some(bounda::store::Cursor {
            checkpoint: paid - 1,
            bookmarks: Vec::new(),
        }),
        "the copy's checkpoint stands before what the source's passed"
    );
}

// Issue 46: a store with the core alone runs the app, its process on simulated time included,
// and a pause on it is refused before anything changes, naming what the store lacks; where
// nothing can be paused, nothing is.
#[tokio::test]
async fn a_store_with_the_core_alone_runs_the_app_and_refuses_a_pause_naming_what_it_lacks() {
    let store = std::sync::Arc::new(bounda::testing::CoreOnly(support::database::store().await));
    let app = TestApp::new(
        App::builder_shared(store)
            .only_listed()
            .process::<OrderPayment>()
            .policy::<ConfirmOnOrderPlaced>(),
    )
    .await
    .unwrap();
    place(&app, "o-1").await;
    assert!(app.advance(hours(80)).await.unwrap().idle);
    assert!(confirmed(&app, "o-1").await);
    let ran = support::reached::<OrderPayment>(&app, "o-1").await;
    assert!(
        ran.iter().any(|(field, ..)| field == "payment_deadline"),
        "{ran:?}"
    );

    let refused = app
        .app()
        .pause(process(), "alice", None)
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("keeps no pauses"), "{refused}");
    let refused = app.app().resume(&process()).await.unwrap_err().to_string();
    assert!(refused.contains("keeps no pauses"), "{refused}");
    assert!(app.lag().await.unwrap().paused.is_empty());
}
