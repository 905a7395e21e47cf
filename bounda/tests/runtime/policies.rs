//! Policies, delayed policies and scheduled commands on simulated time and the SQLite store.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use crate::support;

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use bounda::prelude::*;
use bounda::store::{LetterFilter, LetterKind, Store};
use bounda::{AppBuilder, DispatchOptions, POLICIES};
use support::storefront::*;

thread_local! {
    /// Failures still to come, by policy: tests run on one thread each, so each has its own.
    static FAILURES: RefCell<HashMap<String, (u32, bool)>> = RefCell::new(HashMap::new());
}

/// Makes the runs checked under `key` fail `times` times, by panicking if `panic`.
fn failing(key: &str, times: u32, panic: bool) {
    FAILURES.with(|f| f.borrow_mut().insert(key.to_owned(), (times, panic)));
}

fn maybe_fail(policy: &str) -> Result<()> {
    let fail = FAILURES.with(|f| {
        let mut f = f.borrow_mut();
        match f.get_mut(policy) {
            Some((left, panic)) if *left > 0 => {
                *left -= 1;
                Some(*panic)
            }
            _ => None,
        }
    });
    match fail {
        Some(true) => panic!("{policy} blew up"),
        Some(false) => anyhow::bail!("{policy} failed on purpose"),
        None => Ok(()),
    }
}

struct ConfirmOnOrderPlaced;

#[policy]
impl Policy for ConfirmOnOrderPlaced {
    const NAME: &'static str = "confirm_on_order_placed";
    type Event = OrderPlaced;

    async fn handle(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
        maybe_fail(Self::NAME)?;
        cx.send(RecordConfirmationSent {
            order_id: cx.event().order_id.clone(),
        })
        .await?;
        Ok(())
    }
}

struct RemindOnOrderPlaced;

#[policy]
impl Policy for RemindOnOrderPlaced {
    const NAME: &'static str = "remind_on_order_placed";
    type Event = OrderPlaced;

    async fn handle(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
        cx.send_after(
            SendReminder {
                order_id: cx.event().order_id.clone(),
            },
            hours(24),
        )
        .await?;
        maybe_fail(Self::NAME)?;
        Ok(())
    }
}

struct CancelOnOrderFulfilled;

#[policy]
impl Policy for CancelOnOrderFulfilled {
    const NAME: &'static str = "cancel_on_order_fulfilled";
    type Event = OrderFulfilled;

    async fn handle(cx: Reaction<'_, OrderFulfilled>) -> Result<()> {
        let order_id = cx.event().order_id.clone();
        let answer = cx
            .send(CancelOrder {
                order_id: order_id.clone(),
                reason: "changed my mind".into(),
            })
            .await?;
        // The handler may look at the rejection; here it sends another command either way.
        if answer.rejection().is_some() {
            cx.send(SendReminder { order_id }).await?;
        }
        Ok(())
    }
}

/// Answers every reminder with another: a chain that never ends by itself.
struct EchoOnReminderSent;

#[policy]
impl Policy for EchoOnReminderSent {
    const NAME: &'static str = "echo_on_reminder_sent";
    type Event = ReminderSent;

    async fn handle(cx: Reaction<'_, ReminderSent>) -> Result<()> {
        cx.send(SendReminder {
            order_id: cx.event().order_id.clone(),
        })
        .await?;
        Ok(())
    }
}

struct WelcomeOnOrderPlaced;

#[policy]
impl Policy for WelcomeOnOrderPlaced {
    const NAME: &'static str = "welcome_on_order_placed";
    type Event = OrderPlaced;

    fn delay() -> Result<Option<Duration>, DurationError> {
        Ok(Some(minutes(1)))
    }

    async fn handle(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
        maybe_fail(&format!("{}:{}", Self::NAME, cx.event().order_id))?;
        cx.send(RecordConfirmationSent {
            order_id: cx.event().order_id.clone(),
        })
        .await?;
        Ok(())
    }
}

async fn store() -> Arc<dyn Store> {
    support::database::store().await
}

async fn test_app(builder: AppBuilder) -> TestApp {
    TestApp::new(builder).await.expect("an app")
}

/// Another app on a shared store, with ids of its own.
async fn shared(builder: AppBuilder) -> TestApp {
    let clock = Arc::new(bounda::clock::SimulatedClock::default());
    let app = builder.clock(clock.clone()).build().await.expect("an app");
    TestApp::with_app(app, clock)
}

// spec 20, 21, 27–29, 131, 174
#[tokio::test]
async fn a_policy_answers_an_event_with_a_command_committed_with_its_inbox_mark() {
    let app = test_app(
        App::builder_shared(store().await)
            .only_listed()
            .policy::<ConfirmOnOrderPlaced>(),
    )
    .await;
    app.dispatch(place("o-1")).await.unwrap();
    assert_eq!(app.lag().await.unwrap().max_lag, 1, "not yet handled");
    let idle = app.run_until_idle().await.unwrap();
    assert!(idle.idle && idle.rejections.is_empty());
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced", "ConfirmationSent"]
    );
    let lag = app.lag().await.unwrap();
    assert_eq!(lag.max_lag, 0, "every consequence has happened");
    assert_eq!(lag.subscribers[0].subscriber, POLICIES);
    // Run again: the inbox says it is done, nothing is sent twice (spec 124).
    app.run_until_idle().await.unwrap();
    assert_eq!(app.events_of::<Order>("o-1").await.unwrap().len(), 2);
}

// spec 144
#[tokio::test]
async fn a_reactions_commands_keep_the_correlation_take_the_event_as_cause_and_go_one_deeper() {
    let app = test_app(
        App::builder_shared(store().await)
            .only_listed()
            .policy::<ConfirmOnOrderPlaced>(),
    )
    .await;
    app.dispatch(place("o-1")).await.unwrap();
    app.run_until_idle().await.unwrap();
    let events = app.events_of::<Order>("o-1").await.unwrap().0;
    let (placed, confirmed) = (&events[0], &events[1]);
    assert_eq!(
        confirmed.metadata.correlation_id,
        placed.metadata.correlation_id
    );
    assert_eq!(confirmed.metadata.causation_id, placed.id);
    assert_eq!((placed.metadata.depth, confirmed.metadata.depth), (0, 1));
}

// spec 31, 33
#[tokio::test]
async fn a_policy_reacts_only_to_events_stored_after_it_starts() {
    let store: Arc<dyn Store> = store().await;
    let before = test_app(App::builder_shared(store.clone()).only_listed()).await;
    before.dispatch(place("o-1")).await.unwrap();
    assert_eq!(
        store.checkpoint(POLICIES).await.unwrap(),
        None,
        "no policy, no checkpoint (spec 32)"
    );

    let after = shared(
        App::builder_shared(store.clone())
            .only_listed()
            .policy::<ConfirmOnOrderPlaced>(),
    )
    .await;
    after.dispatch(place("o-2")).await.unwrap();
    after.run_until_idle().await.unwrap();
    assert_eq!(
        after.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced"],
        "history is not replayed"
    );
    assert_eq!(
        after.events_of::<Order>("o-2").await.unwrap().types(),
        ["OrderPlaced", "ConfirmationSent"]
    );

    // The last policy removed: its checkpoint stays; brought back, it catches up (spec 33).
    let without = shared(App::builder_shared(store.clone()).only_listed()).await;
    without.dispatch(place("o-3")).await.unwrap();
    let back = shared(
        App::builder_shared(store.clone())
            .only_listed()
            .policy::<ConfirmOnOrderPlaced>(),
    )
    .await;
    back.run_until_idle().await.unwrap();
    assert_eq!(
        back.events_of::<Order>("o-3").await.unwrap().types(),
        ["OrderPlaced", "ConfirmationSent"]
    );
}

// spec 151–153, 155, 184
#[tokio::test]
async fn a_failed_run_is_retried_after_its_back_off_and_run_until_idle_waits_for_it() {
    failing(ConfirmOnOrderPlaced::NAME, 2, false);
    let app = test_app(
        App::builder_shared(store().await)
            .only_listed()
            .policy::<ConfirmOnOrderPlaced>(),
    )
    .await;
    app.dispatch(place("o-1")).await.unwrap();
    let start = app.now();
    let idle = app.run_until_idle().await.unwrap();
    assert!(idle.idle);
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced", "ConfirmationSent"]
    );
    assert_eq!(
        app.now(),
        start + seconds(3),
        "waited 1 s, then 2 s, and no further"
    );
    assert_eq!(
        app.app()
            .store()
            .count_dead_letters(&LetterFilter::default())
            .await
            .unwrap(),
        0
    );
}

// spec 36, 153, 154, 162, 163
#[tokio::test]
async fn a_run_that_keeps_failing_is_dead_lettered_and_the_policy_goes_on() {
    failing(ConfirmOnOrderPlaced::NAME, 3, false);
    let app = test_app(
        App::builder_shared(store().await)
            .only_listed()
            .policy::<ConfirmOnOrderPlaced>(),
    )
    .await
    .expecting_letters();
    app.dispatch(place("o-1")).await.unwrap();
    app.dispatch(place("o-2")).await.unwrap();
    app.run_until_idle().await.unwrap();
    let letters = app
        .app()
        .store()
        .dead_letters(&LetterFilter::default())
        .await
        .unwrap();
    assert_eq!(letters.len(), 1);
    let letter = &letters[0];
    assert_eq!(
        (letter.kind, letter.handler.as_str()),
        (LetterKind::Policy, ConfirmOnOrderPlaced::NAME)
    );
    assert_eq!(
        (letter.attempts, letter.error_type.as_str()),
        (3, "retriable_exhausted")
    );
    assert_eq!(
        letter.first_failed_at,
        bounda::clock::SimulatedClock::start(),
        "when the first run failed"
    );
    assert!(
        letter.last_failed_at > letter.first_failed_at,
        "the last failure came after its retries' back-off"
    );
    assert_eq!(letter.aggregate_id.as_deref(), Some("o-1"));
    assert!(
        letter.error_message.contains("failed on purpose"),
        "{}",
        letter.error_message
    );
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced"]
    );
    assert_eq!(
        app.events_of::<Order>("o-2").await.unwrap().types(),
        ["OrderPlaced", "ConfirmationSent"]
    );
    assert_eq!(app.lag().await.unwrap().max_lag, 0);
}

// A handler that panics is a failed attempt: retried, then dead-lettered, nothing stored.
#[tokio::test]
async fn a_handler_that_panics_fails_its_attempt_and_is_retried() {
    failing(ConfirmOnOrderPlaced::NAME, 1, true);
    let app = test_app(
        App::builder_shared(store().await)
            .only_listed()
            .policy::<ConfirmOnOrderPlaced>(),
    )
    .await
    .expecting_letters();
    app.dispatch(place("o-1")).await.unwrap();
    app.run_until_idle().await.unwrap();
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced", "ConfirmationSent"]
    );

    failing(ConfirmOnOrderPlaced::NAME, 3, true);
    app.dispatch(place("o-2")).await.unwrap();
    app.run_until_idle().await.unwrap();
    let letters = app
        .app()
        .store()
        .dead_letters(&LetterFilter::default())
        .await
        .unwrap();
    assert_eq!(letters.len(), 1);
    assert!(
        letters[0]
            .error_message
            .contains("panicked: confirm_on_order_placed blew up"),
        "{}",
        letters[0].error_message
    );
}

// spec 145, 154
#[tokio::test]
async fn a_chain_past_max_chain_depth_is_refused_and_dead_lettered_at_once() {
    let app = test_app(
        App::builder_shared(store().await)
            .only_listed()
            .policy::<EchoOnReminderSent>(),
    )
    .await
    .expecting_letters();
    app.dispatch(place("o-1")).await.unwrap();
    app.dispatch(SendReminder {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    let events = app.events_of::<Order>("o-1").await.unwrap();
    assert_eq!(
        events.len(),
        1 + 26,
        "the reminder from outside, then 25 echoes"
    );
    assert_eq!(events.0.last().unwrap().metadata.depth, 25);
    let letters = app
        .app()
        .store()
        .dead_letters(&LetterFilter::default())
        .await
        .unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(
        (letters[0].error_type.as_str(), letters[0].attempts),
        ("terminal", 1)
    );
    assert!(
        letters[0]
            .error_message
            .contains("26 reactions deep, past the limit of 25"),
        "{}",
        letters[0].error_message
    );
}

// spec 22, 182
#[tokio::test]
async fn a_rejection_in_a_reaction_changes_nothing_and_is_reported_by_run_until_idle() {
    let app = test_app(
        App::builder_shared(store().await)
            .only_listed()
            .policy::<CancelOnOrderFulfilled>(),
    )
    .await;
    app.dispatch(place("o-1")).await.unwrap();
    app.dispatch(PayAndFulfil {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    let idle = app.run_until_idle().await.unwrap();
    assert_eq!(idle.rejections.len(), 1);
    let rejection = &idle.rejections[0];
    assert_eq!(
        (rejection.command_type, rejection.rejected),
        ("CancelOrder", "NotCancellable")
    );
    assert_eq!(
        (rejection.aggregate_type, rejection.aggregate_id.as_str()),
        ("Order", "o-1")
    );
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced", "OrderPaid", "OrderFulfilled"],
        "the reminder after the rejection decided nothing for a fulfilled order"
    );
}

// spec 26
#[tokio::test]
async fn a_later_command_in_a_run_sees_the_earlier_ones_staged_decisions() {
    struct ConfirmTwice;
    #[policy]
    impl Policy for ConfirmTwice {
        const NAME: &'static str = "confirm_twice";
        type Event = OrderPlaced;
        async fn handle(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
            let order_id = cx.event().order_id.clone();
            let first = cx
                .send(RecordConfirmationSent {
                    order_id: order_id.clone(),
                })
                .await?;
            let second = cx.send(RecordConfirmationSent { order_id }).await?;
            assert_eq!(
                first.decided().map(|d| d.event_types.clone()),
                Some(vec!["ConfirmationSent"])
            );
            assert_eq!(
                first.decided().and_then(|d| d.position),
                None,
                "nothing stored yet (spec 21)"
            );
            assert_eq!(
                second.decided().map(|d| d.event_types.len()),
                Some(0),
                "already done"
            );
            Ok(())
        }
    }
    let app = test_app(
        App::builder_shared(store().await)
            .only_listed()
            .policy::<ConfirmTwice>(),
    )
    .await;
    app.dispatch(place("o-1")).await.unwrap();
    app.run_until_idle().await.unwrap();
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced", "ConfirmationSent"]
    );
}

// spec 148, 149
#[tokio::test]
async fn a_held_policy_keeps_its_later_events_waiting_while_the_others_go_on() {
    failing(ConfirmOnOrderPlaced::NAME, 1, false);
    let app = test_app(
        App::builder_shared(store().await)
            .only_listed()
            .policy::<ConfirmOnOrderPlaced>()
            .policy::<RemindOnOrderPlaced>()
            .command::<SendReminder>(),
    )
    .await;
    app.dispatch(place("o-1")).await.unwrap();
    app.dispatch(place("o-2")).await.unwrap();
    // One pass only: the confirmation of o-1 fails and waits for its retry.
    let idle = app.run_until_idle_with(1).await.unwrap();
    assert!(!idle.idle);
    let lag = app.lag().await.unwrap();
    assert_eq!(lag.max_lag, 2, "the checkpoint stops before the held event");
    let failing = lag.subscribers[0]
        .failing
        .clone()
        .expect("held by a failing run (spec 173)");
    assert_eq!(
        (
            failing.handler.as_str(),
            failing.position,
            failing.event_type.as_str()
        ),
        ("confirm_on_order_placed", 1, "OrderPlaced")
    );
    assert_eq!(
        (failing.attempts, failing.message.as_str()),
        (1, "confirm_on_order_placed failed on purpose")
    );
    assert_eq!(failing.retry_at, app.now() + seconds(1));
    assert_eq!(
        app.events_of::<Order>("o-2").await.unwrap().types(),
        ["OrderPlaced"],
        "o-2's confirmation waits behind o-1's"
    );
    assert!(
        app.app().next_due_at().await.unwrap().is_some(),
        "the other policy scheduled both reminders"
    );
    app.run_until_idle().await.unwrap();
    assert_eq!(
        app.events_of::<Order>("o-2").await.unwrap().types(),
        ["OrderPlaced", "ConfirmationSent"]
    );
    assert_eq!(app.lag().await.unwrap().max_lag, 0);
}

// spec 42, 44, 49, 52, 183
#[tokio::test]
async fn a_delayed_command_is_stored_with_the_run_and_runs_when_due_with_its_cause() {
    failing(RemindOnOrderPlaced::NAME, 1, false);
    let app = test_app(
        App::builder_shared(store().await)
            .only_listed()
            .policy::<RemindOnOrderPlaced>()
            .command::<SendReminder>(),
    )
    .await;
    app.dispatch(place("o-1")).await.unwrap();
    let start = app.now();
    app.run_until_idle().await.unwrap();
    // The first run scheduled it and then failed: only the retried run's entry exists (spec 52).
    assert_eq!(
        app.app().next_due_at().await.unwrap(),
        Some(start + seconds(1) + hours(24))
    );
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced"]
    );
    let idle = app.advance(hours(24)).await.unwrap();
    assert!(idle.idle);
    let events = app.events_of::<Order>("o-1").await.unwrap().0;
    assert_eq!(
        events
            .iter()
            .map(|e| e.event_type.as_str())
            .collect::<Vec<_>>(),
        ["OrderPlaced", "ReminderSent"]
    );
    assert_eq!(
        events[1].metadata.correlation_id, events[0].metadata.correlation_id,
        "spec 49"
    );
    assert_eq!(events[1].metadata.causation_id, events[0].id);
    assert_eq!(events[1].timestamp, start + seconds(1) + hours(24));
    assert_eq!(app.app().next_due_at().await.unwrap(), None);
}

// spec 25
#[tokio::test]
async fn a_scheduled_command_rejected_when_it_runs_is_settled_not_retried() {
    struct CancelLater;
    #[policy]
    impl Policy for CancelLater {
        const NAME: &'static str = "cancel_later";
        type Event = OrderPlaced;
        async fn handle(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
            let order_id = cx.event().order_id.clone();
            cx.send_after(
                CancelOrder {
                    order_id,
                    reason: "too slow".into(),
                },
                hours(1),
            )
            .await?;
            Ok(())
        }
    }
    let app = test_app(
        App::builder_shared(store().await)
            .only_listed()
            .policy::<CancelLater>()
            .command::<CancelOrder>(),
    )
    .await;
    app.dispatch(place("o-1")).await.unwrap();
    app.run_until_idle().await.unwrap();
    app.dispatch(PayAndFulfil {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    let idle = app.advance(hours(2)).await.unwrap();
    assert_eq!(
        idle.rejections
            .iter()
            .map(|r| r.rejected)
            .collect::<Vec<_>>(),
        ["NotCancellable"]
    );
    assert_eq!(app.app().next_due_at().await.unwrap(), None, "settled");
    assert_eq!(
        app.app()
            .store()
            .count_dead_letters(&LetterFilter::default())
            .await
            .unwrap(),
        0
    );
}

/// A command whose decision panics.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Explode {
    order_id: String,
}

#[command]
impl Command for Explode {
    const NAME: &'static str = "Explode";
    type Aggregate = Order;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.order_id
    }

    fn decide(&self, _: &Order) -> Decision<Self> {
        panic!("the decision fell over")
    }
}

// A scheduled command's own code runs under the handlers' guard: its panic is the run's
// failure, retried then lettered with the panic's message, and the worker goes on with the rest.
#[tokio::test]
async fn a_scheduled_command_that_panics_is_lettered_and_the_worker_goes_on() {
    let app = test_app(
        App::builder_shared(store().await)
            .only_listed()
            .command::<Explode>()
            .command::<PlaceOrder>(),
    )
    .await
    .expecting_letters();
    app.dispatch_with(
        Explode {
            order_id: "o-1".into(),
        },
        DispatchOptions::default().delay(hours(1)),
    )
    .await
    .unwrap();
    app.dispatch_with(place("o-2"), DispatchOptions::default().delay(hours(1)))
        .await
        .unwrap();
    app.advance(hours(2)).await.unwrap();
    let letters = support::letters(&app).await;
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_eq!(letters[0].kind, LetterKind::Scheduled);
    assert_eq!(letters[0].handler, "Explode");
    assert!(
        letters[0].error_message.contains("the decision fell over"),
        "{}",
        letters[0].error_message
    );
    assert_eq!(letters[0].attempts, 3, "retried, then lettered");
    assert_eq!(
        app.events_of::<Order>("o-2").await.unwrap().types(),
        ["OrderPlaced"],
        "the other command ran"
    );
}

#[tokio::test]
async fn a_delayed_command_of_an_unregistered_type_fails_the_run_with_the_fix() {
    let app = test_app(
        App::builder_shared(store().await)
            .only_listed()
            .policy::<RemindOnOrderPlaced>(),
    )
    .await
    .expecting_letters();
    app.dispatch(place("o-1")).await.unwrap();
    app.run_until_idle().await.unwrap();
    let letters = app
        .app()
        .store()
        .dead_letters(&LetterFilter::default())
        .await
        .unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].error_type, "terminal");
    assert!(
        letters[0]
            .error_message
            .contains("add `.command::<SendReminder>()`"),
        "{}",
        letters[0].error_message
    );
}

// spec 37, 38, 41
#[tokio::test]
async fn a_delayed_policy_runs_at_the_events_time_plus_its_delay() {
    let app = test_app(
        App::builder_shared(store().await)
            .only_listed()
            .policy::<WelcomeOnOrderPlaced>(),
    )
    .await;
    app.dispatch(place("o-1")).await.unwrap();
    let placed_at = app.now();
    app.run_until_idle().await.unwrap();
    assert_eq!(
        app.app().next_due_at().await.unwrap(),
        Some(placed_at + minutes(1))
    );
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced"],
        "not before its time"
    );
    app.advance(seconds(59)).await.unwrap();
    assert_eq!(app.events_of::<Order>("o-1").await.unwrap().len(), 1);
    app.advance(seconds(1)).await.unwrap();
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced", "ConfirmationSent"]
    );
}

// spec 37: read late, due at the event's time plus the delay all the same.
#[tokio::test]
async fn a_delayed_policy_read_late_is_not_pushed_later() {
    let app = test_app(
        App::builder_shared(store().await)
            .only_listed()
            .policy::<WelcomeOnOrderPlaced>(),
    )
    .await;
    app.dispatch(place("o-1")).await.unwrap();
    let placed_at = app.now();
    let idle = app.advance(seconds(30)).await.unwrap();
    assert!(idle.idle);
    assert_eq!(
        app.app().next_due_at().await.unwrap(),
        Some(placed_at + minutes(1))
    );
}

// spec 39, 40
#[tokio::test]
async fn a_delayed_run_retries_on_its_own_and_ends_as_the_policys_letter() {
    failing("welcome_on_order_placed:o-1", 3, false);
    let app = test_app(
        App::builder_shared(store().await)
            .only_listed()
            .policy::<WelcomeOnOrderPlaced>(),
    )
    .await
    .expecting_letters();
    app.dispatch(place("o-1")).await.unwrap();
    app.dispatch(place("o-2")).await.unwrap();
    app.advance(minutes(2)).await.unwrap();
    let letters = app
        .app()
        .store()
        .dead_letters(&LetterFilter::default())
        .await
        .unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(
        (
            letters[0].kind,
            letters[0].handler.as_str(),
            letters[0].attempts
        ),
        (LetterKind::Policy, "welcome_on_order_placed", 3)
    );
    assert_eq!(
        app.events_of::<Order>("o-2").await.unwrap().types(),
        ["OrderPlaced", "ConfirmationSent"]
    );
}

/// Declared with the attribute: a unit struct `NotifyOnOrderPaid` implementing `Policy`.
#[policy]
async fn notify_on_order_paid(cx: Reaction<'_, OrderPaid>) -> Result<()> {
    cx.send(SendReminder {
        order_id: cx.event().order_id.clone(),
    })
    .await?;
    Ok(())
}

// spec 27–29
#[tokio::test]
async fn a_policy_declared_with_the_attribute_runs_like_any_other() {
    let app = test_app(
        App::builder_shared(store().await)
            .only_listed()
            .policy::<NotifyOnOrderPaid>(),
    )
    .await;
    app.dispatch(place("o-1")).await.unwrap();
    app.dispatch(MarkOrderPaid {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    // The order is paid: the reminder decided nothing, and the policy's run succeeded.
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced", "OrderPaid"]
    );
    assert_eq!(app.lag().await.unwrap().max_lag, 0);
    assert_eq!(
        app.app()
            .dead_letters()
            .count(&LetterFilter::default())
            .await
            .unwrap(),
        0
    );
}

// spec 183: one `advance` straight after the command runs every consequence, at its own time.
#[tokio::test]
async fn one_advance_runs_the_policy_then_the_delayed_command_it_scheduled() {
    let app = test_app(
        App::builder_shared(store().await)
            .only_listed()
            .policy::<RemindOnOrderPlaced>()
            .command::<SendReminder>(),
    )
    .await;
    app.dispatch(place("o-1")).await.unwrap();
    let placed_at = app.now();
    app.advance(hours(24)).await.unwrap();
    let events = app.events_of::<Order>("o-1").await.unwrap().0;
    assert_eq!(
        events
            .iter()
            .map(|e| e.event_type.as_str())
            .collect::<Vec<_>>(),
        ["OrderPlaced", "ReminderSent"]
    );
    assert_eq!(
        events[1].timestamp,
        placed_at + hours(24),
        "due 24 h after the order, not after the advance"
    );
}

// spec 150: a pass reads `batchSize` events; the next pass goes on from there.
#[tokio::test]
async fn events_are_read_in_batches_and_every_one_is_handled() {
    let mut config = bounda::config::Config::default();
    config.dispatcher.batch_size = 2;
    let app = test_app(
        App::builder_shared(store().await)
            .only_listed()
            .config(config)
            .policy::<ConfirmOnOrderPlaced>(),
    )
    .await;
    for i in 0..5 {
        app.dispatch(place(&format!("o-{i}"))).await.unwrap();
    }
    let first = app.run_until_idle_with(1).await.unwrap();
    assert!(!first.idle);
    let position = app.lag().await.unwrap().subscribers[0].position;
    // Where the store pipelines, a pass claims each next batch while the last commits, up to
    // four batches (issue 47), reading on past the confirmations those batches add.
    match app.app().store().capabilities().pipelined_batches {
        false => assert_eq!(position, 2, "one pass, one batch of two"),
        true => assert!(position >= 4, "one pass, more than one batch: {position}"),
    }
    app.run_until_idle().await.unwrap();
    for i in 0..5 {
        assert_eq!(
            app.events_of::<Order>(&format!("o-{i}"))
                .await
                .unwrap()
                .len(),
            2
        );
    }
}

// spec 182: a retried run counts only the rejections of the attempt that commits.
#[tokio::test]
async fn rejections_of_a_failed_attempt_are_not_reported() {
    struct RejectedThenFails;
    #[policy]
    impl Policy for RejectedThenFails {
        const NAME: &'static str = "rejected_then_fails";
        type Event = OrderFulfilled;
        async fn handle(cx: Reaction<'_, OrderFulfilled>) -> Result<()> {
            let order_id = cx.event().order_id.clone();
            cx.send(CancelOrder {
                order_id,
                reason: "late".into(),
            })
            .await?;
            maybe_fail(Self::NAME)?;
            Ok(())
        }
    }
    failing(RejectedThenFails::NAME, 1, false);
    let app = test_app(
        App::builder_shared(store().await)
            .only_listed()
            .policy::<RejectedThenFails>(),
    )
    .await;
    app.dispatch(place("o-1")).await.unwrap();
    app.dispatch(PayAndFulfil {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    let idle = app.run_until_idle().await.unwrap();
    assert_eq!(
        idle.rejections.len(),
        1,
        "the failed attempt's rejection is not counted"
    );
}

// spec 51, 125: a claim lasts twice the longest handler time limit configured.
#[tokio::test]
async fn a_claim_lasts_twice_the_longest_time_limit() {
    let mut config = bounda::config::Config::default();
    config.overrides.insert(
        "Order".into(),
        bounda::config::Overrides {
            policies_timeout: Some(minutes(2)),
            ..Default::default()
        },
    );
    let app = test_app(
        App::builder_shared(store().await)
            .only_listed()
            .config(config)
            .policy::<ConfirmOnOrderPlaced>(),
    )
    .await;
    app.dispatch(place("o-1")).await.unwrap();
    let placed = app
        .app()
        .store()
        .read_stream("Order", "o-1")
        .await
        .unwrap()
        .remove(0);
    app.app()
        .store()
        .claim_inbox(
            ConfirmOnOrderPlaced::NAME,
            &placed.id,
            "other",
            app.now(),
            minutes(4),
        )
        .await
        .unwrap();
    app.advance(minutes(4)).await.unwrap();
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().len(),
        1,
        "still held when its lease of 4 min ends"
    );
    app.advance(millis(1)).await.unwrap();
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().len(),
        2,
        "taken over once 2 × 2 min have passed"
    );
}

/// A notifier port: what the confirmation policy calls outside.
trait Notifier: Send + Sync {
    fn notify(&self, order_id: &str, key: &str);
}

#[derive(Default)]
struct MemoryNotifier(std::sync::Mutex<Vec<(String, String)>>);

impl Notifier for MemoryNotifier {
    fn notify(&self, order_id: &str, key: &str) {
        self.0
            .lock()
            .unwrap()
            .push((order_id.to_owned(), key.to_owned()));
    }
}

#[policy(ports = [Arc<dyn Notifier>])]
async fn notify_on_order_placed(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
    let notifier = cx.port::<Arc<dyn Notifier>>()?;
    notifier.notify(&cx.event().order_id, cx.idempotency_key());
    cx.send(RecordConfirmationSent {
        order_id: cx.event().order_id.clone(),
    })
    .await?;
    Ok(())
}

// spec 28, 187: a policy reaches the app's ports. Issue 44: an app without a port a policy
// declares is refused when it is built, naming both, not failed one run at a time.
#[tokio::test]
async fn handlers_reach_ports_and_an_app_without_a_declared_port_is_refused() {
    let notifier = Arc::new(MemoryNotifier::default());
    let port: Arc<dyn Notifier> = notifier.clone();
    let app = test_app(
        App::builder_shared(store().await)
            .only_listed()
            .port(port)
            .policy::<NotifyOnOrderPlaced>(),
    )
    .await
    .expecting_letters();
    app.dispatch(place("o-1")).await.unwrap();
    app.run_until_idle().await.unwrap();
    let calls = notifier.0.lock().unwrap().clone();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].0, "o-1");
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced", "ConfirmationSent"]
    );

    let built = App::builder_shared(store().await)
        .only_listed()
        .policy::<NotifyOnOrderPlaced>()
        .build()
        .await;
    let Err(refused) = built else {
        panic!("an app without the policy's port was built");
    };
    assert_eq!(
        refused.to_string(),
        "invalid configuration: policy `notify_on_order_placed` reads port \
         `alloc::sync::Arc<dyn runtime::policies::Notifier>`, which the app was not given: give \
         it with `.port(..)` when building the app"
    );
}

/// A policy that reads a port it does not declare.
#[policy]
async fn peek_on_order_placed(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
    cx.port::<Arc<dyn Notifier>>()?;
    Ok(())
}

// Issue 44: a handler that reads a port its attribute does not list fails, saying so, even
// though the app has the port: the first test that runs it says what to declare. A terminal
// failure, not retried.
#[tokio::test]
async fn a_port_read_without_being_declared_fails_at_once_naming_it() {
    let port: Arc<dyn Notifier> = Arc::new(MemoryNotifier::default());
    let app = test_app(
        App::builder_shared(store().await)
            .only_listed()
            .port(port)
            .policy::<PeekOnOrderPlaced>(),
    )
    .await
    .expecting_letters();
    app.dispatch(place("o-1")).await.unwrap();
    let start = app.now();
    app.run_until_idle().await.unwrap();
    assert_eq!(app.now(), start, "not retried");
    let letters = support::letters(&app).await;
    assert_eq!(
        (letters.len(), letters[0].error_type.as_str()),
        (1, "terminal")
    );
    assert!(
        letters[0].error_message.contains(
            "policy `peek_on_order_placed` reads port `alloc::sync::Arc<dyn runtime::policies::Notifier>` \
             without declaring it; add it to `ports = [..]` in its attribute"
        ),
        "{}",
        letters[0].error_message
    );
}

// Issue 23: a fake port waits on the app's clock. Its timers read their due moment, can be
// counted, fire in due order as the test moves the clock, each seeing the clock at its own
// moment, and the clock never goes back.
#[tokio::test]
async fn a_fake_ports_timers_fire_in_due_order_each_at_its_own_moment() {
    use bounda::clock::Clock;
    let store = support::database::store().await;
    let app = TestApp::new(App::builder_shared(store).only_listed())
        .await
        .unwrap();
    let clock = app.clock().clone();
    let start = clock.now();
    let fired = Arc::new(std::sync::Mutex::new(Vec::new()));
    for after in [30, 10, 20] {
        let timer = clock.after(minutes(after));
        assert_eq!(timer.due(), start + minutes(after));
        let (clock, fired) = (clock.clone(), fired.clone());
        tokio::spawn(async move {
            let due = timer.due();
            timer.await;
            fired.lock().unwrap().push((due, clock.now()));
        });
    }
    let dropped = clock.after(minutes(5));
    assert_eq!(clock.pending_timers(), 4);
    drop(dropped);
    assert_eq!(
        clock.pending_timers(),
        3,
        "a dropped timer is no longer pending"
    );
    assert_eq!(clock.next_timer(), Some(start + minutes(10)));

    app.advance(minutes(25)).await.unwrap();
    let seen = fired.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            (start + minutes(10), start + minutes(10)),
            (start + minutes(20), start + minutes(20)),
        ],
        "fired in due order, each at its own moment, the later one not yet"
    );
    assert_eq!(clock.pending_timers(), 1);

    app.advance(minutes(25)).await.unwrap();
    assert_eq!(fired.lock().unwrap().len(), 3);
    assert_eq!(clock.pending_timers(), 0);
    assert_eq!(clock.now(), start + minutes(50));
    clock.advance_to(start);
    assert_eq!(
        clock.now(),
        start + minutes(50),
        "the clock never goes back"
    );
    // A timer of a moment already passed fires at once.
    clock.timer_at(start).await;
}

/// Confirms a copy of each order placed: its commands go to another instance than its event's.
struct ConfirmCopyOnOrderPlaced;

#[policy]
impl Policy for ConfirmCopyOnOrderPlaced {
    const NAME: &'static str = "confirm_copy_on_order_placed";
    type Event = OrderPlaced;

    async fn handle(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
        cx.send(RecordConfirmationSent {
            order_id: format!("{}-copy", cx.event().order_id),
        })
        .await?;
        Ok(())
    }
}

// issue 47: on a store a round trip away, a subscriber claims its next batch of deliveries
// while the last one commits. When a run of the last batch waits for its retry, the batch
// claimed beside it is given back unrun: the handler's later events still run after the retry,
// each once, in order.
#[tokio::test]
async fn a_subscriber_claims_its_next_batch_beside_the_commit_and_gives_it_back_behind_a_retry() {
    const ORDERS: usize = 35;
    let (racing, app) = pipelined(|app| app.policy::<ConfirmOnOrderPlaced>()).await;
    orders_placed(&app, 0, ORDERS).await;
    // The first run, o-0's confirmation, fails once: the nine after it in its batch wait, and
    // so must the ten claimed beside its commit.
    failing(ConfirmOnOrderPlaced::NAME, 1, false);
    let first = app.run_until_idle_with(1).await.unwrap();
    assert!(!first.idle);
    assert_eq!(
        racing.inbox_claims_beside(),
        1,
        "the first pass claimed its second batch while the first committed, and stopped there"
    );
    for n in [1, 10] {
        assert_eq!(
            app.events_of::<Order>(&format!("o-{n}"))
                .await
                .unwrap()
                .types(),
            ["OrderPlaced"],
            "o-{n} waits behind o-0's retry"
        );
    }
    app.run_until_idle().await.unwrap();
    let mut confirmed = Vec::new();
    for n in 0..ORDERS {
        let events = app.events_of::<Order>(&format!("o-{n}")).await.unwrap();
        assert_eq!(
            events.types(),
            ["OrderPlaced", "ConfirmationSent"],
            "o-{n} confirmed once"
        );
        confirmed.push(events.0[1].position);
    }
    assert!(
        confirmed.windows(2).all(|pair| pair[0] < pair[1]),
        "each order confirmed after the one placed before it, o-0's retry first: {confirmed:?}"
    );
    assert!(
        racing.inbox_claims_beside() >= 3,
        "once o-0's retry was through, batches were claimed while the one before committed: {}",
        racing.inbox_claims_beside()
    );
    assert_eq!(app.lag().await.unwrap().max_lag, 0);
}

// issue 47: a batch of two waves (each order's placing and payment, two runs of one lane) claims
// the next batch beside its last wave's commit, not its first's: a wave before the last leaves
// the claim for it.
#[tokio::test]
async fn a_batch_of_two_waves_claims_the_next_beside_its_last_commit() {
    const ORDERS: usize = 20;
    let (racing, app) = pipelined(|app| {
        app.policy::<ConfirmOnOrderPlaced>()
            .policy::<NotifyOnOrderPaid>()
    })
    .await;
    for n in 0..ORDERS {
        let order_id = format!("o-{n}");
        app.dispatch(place(&order_id)).await.unwrap();
        app.dispatch(MarkOrderPaid { order_id }).await.unwrap();
    }
    app.run_until_idle_with(1).await.unwrap();
    let beside = racing.inbox_claims_beside();
    // Four batches of five orders in the pass, each batch two waves: the last three are
    // claimed beside the commits before them (on SQLite all three; a claim a round trip away
    // may start only once a commit is through).
    assert!(
        beside >= 2,
        "the batches after the first were claimed beside the last wave's commit: {beside}"
    );
    app.run_until_idle().await.unwrap();
    assert_eq!(app.lag().await.unwrap().max_lag, 0);
    assert!(support::letters(&app).await.is_empty(), "no run gave up");
}

/// An app of what `build` lists on a store a round trip away, in batches of ten.
async fn pipelined(
    build: impl FnOnce(AppBuilder) -> AppBuilder,
) -> (Arc<support::racing::Racing>, TestApp) {
    let racing = Arc::new(support::racing::Racing::pipelined().await);
    let mut config = bounda::config::Config::default();
    config.dispatcher.batch_size = 10;
    let builder = App::builder_shared(racing.clone())
        .only_listed()
        .config(config);
    (racing, test_app(build(builder)).await)
}

const ORDERS_READ_AHEAD: usize = 20;

/// An app of policy `P` alone on a store that counts its reads.
async fn counting_reads<P: bounda::Policy>() -> (Arc<support::racing::Racing>, TestApp) {
    let racing = Arc::new(support::racing::Racing::losing(0).await);
    let app = test_app(
        App::builder_shared(racing.clone())
            .only_listed()
            .policy::<P>(),
    )
    .await;
    (racing, app)
}

/// `app`, with orders `o-{from}` to `o-{to - 1}` placed and nothing run.
async fn orders_placed(app: &TestApp, from: usize, to: usize) {
    for n in from..to {
        app.dispatch(place(&format!("o-{n}"))).await.unwrap();
    }
}

// issue 47: a policy whose commands go to the instance whose event it handles has those
// instances read ahead, once for its wave, instead of each run reading its own in turn.
#[tokio::test]
async fn a_wave_of_reactions_reads_the_instances_of_their_events_ahead() {
    let (racing, app) = counting_reads::<ConfirmOnOrderPlaced>().await;
    orders_placed(&app, 0, ORDERS_READ_AHEAD).await;
    let before = racing.reads();
    app.run_until_idle().await.unwrap();
    let (streams, tails) = racing.reads_since(before);
    for n in 0..ORDERS_READ_AHEAD {
        assert_eq!(
            app.events_of::<Order>(&format!("o-{n}"))
                .await
                .unwrap()
                .types(),
            ["OrderPlaced", "ConfirmationSent"],
            "o-{n}"
        );
    }
    assert_eq!(tails, 1, "one read of the orders for the wave");
    assert_eq!(streams, 0, "no run read its order itself");
}

// issue 47: a policy whose commands go elsewhere is read ahead for one wave at most: it learns
// from its runs where they send, and its later waves read nothing they would not use.
#[tokio::test]
async fn a_policy_sending_elsewhere_stops_having_its_events_instances_read_ahead() {
    let (racing, app) = counting_reads::<ConfirmCopyOnOrderPlaced>().await;
    orders_placed(&app, 0, ORDERS_READ_AHEAD).await;
    let before = racing.reads();
    app.run_until_idle().await.unwrap();
    let first = racing.reads_since(before);
    assert_eq!(
        first,
        (ORDERS_READ_AHEAD as u32, 1),
        "the first wave guesses, reading ahead orders no run uses; each run reads its copy"
    );
    orders_placed(&app, ORDERS_READ_AHEAD, 2 * ORDERS_READ_AHEAD).await;
    let before = racing.reads();
    app.run_until_idle().await.unwrap();
    let second = racing.reads_since(before);
    assert_eq!(
        second,
        (ORDERS_READ_AHEAD as u32, 0),
        "learned: nothing read ahead, each run reads the copy it sends to"
    );
    for n in 0..2 * ORDERS_READ_AHEAD {
        assert_eq!(
            app.events_of::<Order>(&format!("o-{n}-copy"))
                .await
                .unwrap()
                .types(),
            ["ConfirmationSent"],
            "o-{n}-copy"
        );
    }
}
