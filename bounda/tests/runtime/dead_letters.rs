//! Dead letters: listed, counted, retried and discarded, fenced on their status.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use crate::support;

use std::cell::Cell;
use std::sync::Arc;

use tokio::sync::Notify;

use bounda::prelude::*;
use bounda::store::{LetterFilter, LetterKind, LetterStatus};
use bounda::{Error, Retried};
use support::storefront::*;

thread_local! {
    /// Whether the confirmation policy fails, per test thread.
    static BROKEN: Cell<bool> = const { Cell::new(true) };
    /// The idempotency keys the policy ran under, in order.
    static KEYS: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
    /// When set, the policy's next run says it is running and waits for the word to go on.
    static GATE: std::cell::RefCell<Option<(Arc<Notify>, Arc<Notify>)>> =
        const { std::cell::RefCell::new(None) };
}

struct ConfirmOnOrderPlaced;

#[policy]
impl Policy for ConfirmOnOrderPlaced {
    const NAME: &'static str = "confirm_on_order_placed";
    type Event = OrderPlaced;

    async fn handle(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
        KEYS.with(|keys| keys.borrow_mut().push(cx.idempotency_key().to_owned()));
        // Another task may run meanwhile, as another operator's retry would.
        tokio::task::yield_now().await;
        if let Some((running, go)) = GATE.with(|gate| gate.borrow_mut().take()) {
            running.notify_one();
            go.notified().await;
        }
        if BROKEN.with(Cell::get) {
            anyhow::bail!("the mail server is down");
        }
        cx.send(RecordConfirmationSent {
            order_id: cx.event().order_id.clone(),
        })
        .await?;
        Ok(())
    }
}

struct ReminderIn1h;

#[policy]
impl Policy for ReminderIn1h {
    const NAME: &'static str = "reminder_in_1h";
    type Event = OrderPlaced;

    async fn handle(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
        let order_id = cx.event().order_id.clone();
        cx.send_after(
            CancelOrder {
                order_id,
                reason: "late".into(),
            },
            hours(1),
        )
        .await?;
        Ok(())
    }
}

async fn app_with_a_letter() -> (TestApp, String) {
    app_with_a_letter_on(support::database::store().await).await
}

/// An app on `store` whose confirmation policy failed for good on order `o-1`, and its letter.
async fn app_with_a_letter_on(
    store: std::sync::Arc<dyn bounda::store::Store>,
) -> (TestApp, String) {
    BROKEN.with(|b| b.set(true));
    let app = TestApp::new(
        App::builder_shared(store)
            .only_listed()
            .policy::<ConfirmOnOrderPlaced>(),
    )
    .await
    .unwrap()
    .expecting_letters();
    app.dispatch(PlaceOrder {
        order_id: "o-1".into(),
        total: 1,
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    let letters = support::letters(&app).await;
    assert_eq!(letters.len(), 1);
    (app, letters[0].id.clone())
}

// spec 163, 165
#[tokio::test]
async fn letters_are_listed_counted_and_read_with_what_failed() {
    let (app, id) = app_with_a_letter().await;
    let letters = app.app().dead_letters();
    let letter = letters.get(&id).await.unwrap().unwrap();
    assert_eq!(letter.kind, LetterKind::Policy);
    assert_eq!(letter.status, LetterStatus::Failed);
    assert_eq!(letter.event_type.as_deref(), Some("OrderPlaced"));
    assert_eq!(letter.error_message, "the mail server is down");
    let policies = LetterFilter {
        kind: Some(LetterKind::Policy),
        ..LetterFilter::default()
    };
    assert_eq!(letters.count(&policies).await.unwrap(), 1);
    let scheduled = LetterFilter {
        kind: Some(LetterKind::Scheduled),
        ..LetterFilter::default()
    };
    assert_eq!(letters.count(&scheduled).await.unwrap(), 0);
    assert!(letters.get("nope").await.unwrap().is_none());
}

// Issue 19: nothing fails in silence. Each failed try is a warning naming the handler, the event
// and its instance, the attempt, the next try and the error; the letter is an error naming its id,
// what it is for and the command that retries it.
#[tokio::test]
async fn each_failed_try_and_the_letter_are_logged_with_their_causes() {
    let logs = bounda::testing::Logs::check();
    let (_app, id) = app_with_a_letter().await;
    let seen = logs.seen();
    let tries: Vec<_> = seen
        .iter()
        .filter(|line| line.level == bounda::testing::Level::WARN)
        .collect();
    // The policy's default retry: three tries, two of them retried.
    assert_eq!(tries.len(), 2, "{seen:#?}");
    for (n, line) in tries.iter().enumerate() {
        let text = &line.text;
        assert!(
            text.starts_with("policy `confirm_on_order_placed` on `OrderPlaced` `"),
            "{text}"
        );
        assert!(text.contains("of `o-1`"), "{text}");
        assert!(
            text.contains(&format!(
                "failed (attempt {}), trying again at 2026-",
                n + 1
            )),
            "{text}"
        );
        assert!(text.contains(": the mail server is down"), "{text}");
    }
    let filed: Vec<_> = seen
        .iter()
        .filter(|line| line.level == bounda::testing::Level::ERROR)
        .collect();
    assert_eq!(filed.len(), 1, "{seen:#?}");
    let text = &filed[0].text;
    assert!(text.starts_with(&format!("dead letter `{id}` filed: policy `confirm_on_order_placed` on `OrderPlaced` of `o-1` gave up after 3 attempt(s)")), "{text}");
    assert!(text.contains("the mail server is down"), "{text}");
    assert!(
        text.contains(&format!("retry it with `dead-letters retry {id}`")),
        "{text}"
    );
    logs.expect(bounda::testing::Level::WARN, "the mail server is down");
    logs.expect(bounda::testing::Level::ERROR, "the mail server is down");
}

// A retry that ran answers what it did, though its claim cannot be released afterwards: the
// claim lapses with its lease, and the release's failure is logged, not returned instead.
#[tokio::test]
async fn a_retry_answers_its_outcome_though_its_claim_cannot_be_released() {
    let racing = std::sync::Arc::new(support::racing::Racing::losing(0).await);
    let (app, id) = app_with_a_letter_on(racing.clone()).await;
    BROKEN.with(|b| b.set(false));
    racing
        .release_fails
        .store(true, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        app.app().dead_letters().retry(&id).await.unwrap(),
        Retried::Done
    );
    assert_eq!(
        support::letters(&app).await[0].status,
        LetterStatus::Retried
    );
}

// spec 138, 142, 167
#[tokio::test]
async fn retrying_a_policy_letter_runs_the_handler_once_more_with_a_new_key() {
    let (app, id) = app_with_a_letter().await;
    BROKEN.with(|b| b.set(false));
    assert_eq!(
        app.app().dead_letters().retry(&id).await.unwrap(),
        Retried::Done
    );
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced", "ConfirmationSent"]
    );
    assert_eq!(
        app.app()
            .dead_letters()
            .get(&id)
            .await
            .unwrap()
            .unwrap()
            .status,
        LetterStatus::Retried
    );
    let keys = KEYS.with(|keys| keys.borrow().clone());
    assert_eq!(keys.len(), 4, "three automatic runs and the operator's");
    assert!(
        keys[..3].iter().all(|key| *key == keys[0]),
        "the same key on every automatic retry"
    );
    assert_ne!(keys[3], keys[0], "a new key for the operator's retry");
}

// spec 166, 170
#[tokio::test]
async fn a_retry_that_fails_again_leaves_the_letter_failed() {
    let (app, id) = app_with_a_letter().await;
    let error = app.app().dead_letters().retry(&id).await.unwrap_err();
    assert_eq!(error.code(), "RETRY_FAILED");
    assert!(
        error.to_string().contains("the mail server is down"),
        "{error}"
    );
    assert_eq!(
        app.app()
            .dead_letters()
            .get(&id)
            .await
            .unwrap()
            .unwrap()
            .status,
        LetterStatus::Failed
    );
    assert_eq!(app.events_of::<Order>("o-1").await.unwrap().len(), 1);
}

// spec 170, 172
#[tokio::test]
async fn a_settled_letter_refuses_a_second_retry_or_discard() {
    let (app, id) = app_with_a_letter().await;
    let letters = app.app().dead_letters();
    letters.discard(&id).await.unwrap();
    assert_eq!(
        letters.get(&id).await.unwrap().unwrap().status,
        LetterStatus::Discarded
    );
    BROKEN.with(|b| b.set(false));
    let retry = letters.retry(&id).await.unwrap_err();
    assert!(matches!(retry, Error::LetterSettled { .. }), "{retry}");
    assert_eq!(retry.code(), "DEAD_LETTER_SETTLED");
    assert!(matches!(
        letters.discard(&id).await,
        Err(Error::LetterSettled { .. })
    ));
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().len(),
        1,
        "a refused retry stores nothing"
    );
    assert!(matches!(
        letters.discard("nope").await,
        Err(Error::NotFound { .. })
    ));
}

// spec 171
#[tokio::test]
async fn a_letter_whose_policy_is_gone_is_not_retriable() {
    let (app, id) = app_with_a_letter().await;
    let store = std::sync::Arc::clone(&app.app().store_arc());
    let without = App::builder_shared(store)
        .only_listed()
        .build()
        .await
        .unwrap();
    let error = without.dead_letters().retry(&id).await.unwrap_err();
    assert_eq!(error.code(), "DEAD_LETTER_NOT_RETRIABLE");
    assert!(
        error.to_string().contains("no longer in the app"),
        "{error}"
    );
    assert_eq!(
        without
            .dead_letters()
            .get(&id)
            .await
            .unwrap()
            .unwrap()
            .status,
        LetterStatus::Failed
    );
}

// spec 48, 169
#[tokio::test]
async fn a_scheduled_letter_is_retried_with_its_recorded_payload() {
    // No `.command::<CancelOrder>()`: the scheduled command cannot run and is dead-lettered.
    let store: std::sync::Arc<dyn bounda::store::Store> = support::database::store().await;
    let app = TestApp::new(
        App::builder_shared(store.clone())
            .only_listed()
            .policy::<ReminderIn1h>()
            .command::<CancelOrder>(),
    )
    .await
    .unwrap()
    .expecting_letters();
    app.dispatch(PlaceOrder {
        order_id: "o-1".into(),
        total: 1,
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    // A deploy drops the command; the entry fails for good when it comes due.
    let clock = app.clock().clone();
    let dropped = TestApp::with_app(
        App::builder_shared(store.clone())
            .only_listed()
            .clock(clock.clone())
            .ids(std::sync::Arc::new(bounda::ids::UuidV7))
            .build()
            .await
            .unwrap(),
        clock,
    );
    let dropped = dropped.expecting_letters();
    dropped.advance(hours(2)).await.unwrap();
    let letters = support::letters(&dropped).await;
    assert_eq!(letters.len(), 1);
    let letter = &letters[0];
    assert_eq!(
        (
            letter.kind,
            letter.handler.as_str(),
            letter.error_type.as_str()
        ),
        (LetterKind::Scheduled, "CancelOrder", "terminal")
    );
    assert_eq!(
        letter
            .payload
            .as_ref()
            .and_then(|p| p.get("reason"))
            .and_then(|r| r.as_str()),
        Some("late")
    );
    // Retried where the command is known: it runs with the recorded payload.
    assert_eq!(
        app.app().dead_letters().retry(&letter.id).await.unwrap(),
        Retried::Done
    );
    let events = app.events_of::<Order>("o-1").await.unwrap().0;
    assert_eq!(
        events.last().map(|e| e.event_type.as_str()),
        Some("OrderCancelled")
    );
    assert_eq!(
        events.last().unwrap().metadata.causation_id,
        letter.id,
        "caused by the letter (spec 142)"
    );
    // Retrying a scheduled letter whose command now rejects settles it (spec 169).
    assert!(matches!(
        app.app().dead_letters().retry(&letter.id).await,
        Err(Error::LetterSettled { .. })
    ));
}

/// Places order `o-1` in an app built by `with_handler`, then, after a deploy that dropped the
/// handler, moves the clock `by`: the run that came due is the one terminal letter of `kind`
/// naming `handler` as missing. Returns the store, the clock and that letter.
async fn letter_of_a_dropped_handler(
    with_handler: impl FnOnce(bounda::AppBuilder) -> bounda::AppBuilder,
    by: Duration,
    kind: LetterKind,
    handler: &str,
) -> (
    std::sync::Arc<dyn bounda::store::Store>,
    std::sync::Arc<bounda::clock::SimulatedClock>,
    bounda::store::DeadLetter,
) {
    let store: std::sync::Arc<dyn bounda::store::Store> = support::database::store().await;
    let first = TestApp::new(with_handler(
        App::builder_shared(store.clone()).only_listed(),
    ))
    .await
    .unwrap();
    first
        .dispatch(PlaceOrder {
            order_id: "o-1".into(),
            total: 1,
        })
        .await
        .unwrap();
    first.run_until_idle().await.unwrap();
    let clock = first.clock().clone();
    let dropped = support::another_app(&store, &clock, |builder| builder)
        .await
        .expecting_letters();
    dropped.advance(by).await.unwrap();
    let mut letters = support::letters(&dropped).await;
    assert_eq!(letters.len(), 1, "not completed in silence");
    let letter = letters.remove(0);
    assert_eq!(
        (
            letter.kind,
            letter.handler.as_str(),
            letter.error_type.as_str()
        ),
        (kind, handler, "terminal")
    );
    assert!(
        letter
            .error_message
            .contains(&format!("`{handler}` is no longer in the app")),
        "{}",
        letter.error_message
    );
    assert!(
        dropped.app().next_due_at().await.unwrap().is_none(),
        "given up, not left due"
    );
    (store, clock, letter)
}

// Issue 9: a delayed run whose policy a deploy removed is a terminal letter naming the policy,
// retriable once it is back.
#[tokio::test]
async fn a_delayed_run_whose_policy_is_gone_is_a_letter_until_it_is_back() {
    let (store, clock, letter) = letter_of_a_dropped_handler(
        |builder| builder.policy::<ConfirmLater>(),
        hours(2),
        LetterKind::Policy,
        "confirm_later",
    )
    .await;
    let back = support::another_app(&store, &clock, |builder| builder.policy::<ConfirmLater>())
        .await
        .expecting_letters();
    assert_eq!(
        back.app().dead_letters().retry(&letter.id).await.unwrap(),
        Retried::Done
    );
    assert_eq!(
        back.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced", "ConfirmationSent"]
    );
}

// Issue 9: a deadline of a process a deploy removed is a terminal letter naming the process;
// retried once the process is back, the instance's deadlines are armed again and run.
#[tokio::test]
async fn a_deadline_whose_process_is_gone_is_a_letter_until_it_is_back() {
    let (store, clock, letter) = letter_of_a_dropped_handler(
        |builder| builder.process::<OrderPayment>(),
        hours(25),
        LetterKind::Process,
        "OrderPayment",
    )
    .await;
    let back = support::another_app(&store, &clock, |builder| builder.process::<OrderPayment>())
        .await
        .expecting_letters();
    assert_eq!(
        back.app().dead_letters().retry(&letter.id).await.unwrap(),
        Retried::Done
    );
    back.run_until_idle().await.unwrap();
    let reached: Vec<String> = back
        .app()
        .store()
        .read_stream("process:OrderPayment", "o-1")
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.event_type == "ProcessDeadlineReached")
        .map(|e| e.payload["field"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        reached,
        ["next_reminder"],
        "the overdue reminder ran once back"
    );
}

// Issue 9, spec 170: two retries of one letter at the same moment: the letter is claimed before
// the handler runs, so one runs it and the other gets DEAD_LETTER_SETTLED and runs nothing.
#[tokio::test]
async fn two_retries_at_once_run_the_letter_once() {
    let (app, id) = app_with_a_letter().await;
    BROKEN.with(|b| b.set(false));
    let runs_before = KEYS.with(|keys| keys.borrow().len());
    let letters = app.app().dead_letters();
    let (first, second) = tokio::join!(letters.retry(&id), letters.retry(&id));
    let answers = [first, second];
    assert_eq!(
        answers
            .iter()
            .filter(|a| matches!(a, Ok(Retried::Done)))
            .count(),
        1,
        "{answers:?}"
    );
    let refused = answers.iter().find_map(|a| a.as_ref().err()).unwrap();
    assert_eq!(refused.code(), "DEAD_LETTER_SETTLED");
    assert_eq!(
        letters.get(&id).await.unwrap().unwrap().status,
        LetterStatus::Retried,
        "settled once, by the retry that ran"
    );
    assert_eq!(
        KEYS.with(|keys| keys.borrow().len()) - runs_before,
        1,
        "the handler ran once, under one key"
    );
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced", "ConfirmationSent"]
    );
}

// Issue 43, spec 170: a discard while a retry runs the letter's handler. Whichever comes second
// changes nothing: the discard refuses the letter the retry holds, and the retry commits what its
// handler did (before, the discard settled the letter and the retry's commit was refused: the
// customer notified, no `ConfirmationSent`, the letter `discarded`).
#[tokio::test]
async fn a_discard_while_a_retry_runs_changes_nothing() {
    let (app, id) = app_with_a_letter().await;
    BROKEN.with(|b| b.set(false));
    let (running, go) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    GATE.with(|gate| *gate.borrow_mut() = Some((running.clone(), go.clone())));
    let letters = app.app().dead_letters();
    let (retried, discarded) = tokio::join!(letters.retry(&id), async {
        running.notified().await;
        let discarded = letters.discard(&id).await;
        go.notify_one();
        discarded
    });
    assert!(matches!(retried, Ok(Retried::Done)), "{retried:?}");
    assert_eq!(discarded.unwrap_err().code(), "DEAD_LETTER_SETTLED");
    assert_eq!(
        letters.get(&id).await.unwrap().unwrap().status,
        LetterStatus::Retried
    );
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced", "ConfirmationSent"]
    );
}

/// A process whose steps, while its letter is retried, take the time `RETRY` says, and may try
/// to take the letter as another operator would.
mod slow {
    use std::cell::{Cell, RefCell};
    use std::sync::Arc;

    use bounda::clock::{Clock, SimulatedClock};
    use bounda::prelude::*;
    use bounda::store::Store;

    use crate::support::storefront::*;

    /// The lease of the app below: twice its handlers' 2 s time limit.
    pub const LEASE: Duration = seconds(4);

    /// What a step reaches while it runs: the app's clock, how long a step takes, and the
    /// store and letter another operator tries to take meanwhile, if any.
    pub struct Retry {
        pub clock: Arc<SimulatedClock>,
        pub takes: Duration,
        pub rival: Option<(Arc<dyn Store>, String)>,
    }

    thread_local! {
        /// Whether the confirmation's step fails, per test thread.
        pub static BROKEN: Cell<bool> = const { Cell::new(true) };
        /// Set while the letter is retried.
        pub static RETRY: RefCell<Option<Retry>> = const { RefCell::new(None) };
        /// What another operator's claim on the letter answered, one per step.
        pub static ANSWERS: RefCell<Vec<bool>> = const { RefCell::new(Vec::new()) };
    }

    /// One step of a retry: another operator may try to take the letter, then the step takes
    /// its time.
    async fn slow_step() {
        let Some((clock, takes, rival)) = RETRY.with(|retry| {
            retry
                .borrow()
                .as_ref()
                .map(|r| (r.clock.clone(), r.takes, r.rival.clone()))
        }) else {
            return;
        };
        if let Some((store, letter)) = rival {
            let taken = store
                .claim_letter(&letter, "another-operator", clock.now(), LEASE)
                .await
                .unwrap();
            ANSWERS.with(|answers| answers.borrow_mut().push(taken));
        }
        // Moved last, with nothing awaited after: the step returns before its time limit is
        // looked at.
        clock.advance(takes);
    }

    #[process(on = Order, started_by = [OrderPlaced])]
    #[derive(Debug, Default, Clone, Serialize, Deserialize)]
    pub struct Slow {
        pub steps: u32,
    }

    #[process]
    impl Slow {
        async fn on_order_placed(_cx: On<'_, Self, OrderPlaced>) -> Result<SlowPatch> {
            Ok(SlowPatch::default())
        }

        async fn on_confirmation_sent(cx: On<'_, Self, ConfirmationSent>) -> Result<SlowPatch> {
            if BROKEN.with(Cell::get) {
                anyhow::bail!("the confirmation service is down");
            }
            slow_step().await;
            Ok(SlowPatch::default().steps(cx.state().steps + 1))
        }

        async fn on_reminder_sent(cx: On<'_, Self, ReminderSent>) -> Result<SlowPatch> {
            slow_step().await;
            Ok(SlowPatch::default().steps(cx.state().steps + 1))
        }

        async fn on_order_paid(cx: On<'_, Self, OrderPaid>) -> Result<SlowPatch> {
            slow_step().await;
            Ok(SlowPatch::default().steps(cx.state().steps + 1))
        }
    }
}

/// An app on `store` running `slow::Slow` under a 4 s lease, whose instance `o-1` failed on its
/// confirmation: the app and the letter.
async fn a_slow_process_letter_on(
    store: std::sync::Arc<dyn bounda::store::Store>,
) -> (TestApp, String) {
    let mut config = bounda::config::Config::default();
    config.commands.timeout = seconds(2);
    config.policies.timeout = seconds(2);
    config.processes.handler_timeout = seconds(2);
    let app = TestApp::new(
        App::builder_shared(store)
            .only_listed()
            .config(config)
            .process::<slow::Slow>(),
    )
    .await
    .unwrap()
    .expecting_letters();
    app.dispatch(PlaceOrder {
        order_id: "o-1".into(),
        total: 1,
    })
    .await
    .unwrap();
    app.dispatch(RecordConfirmationSent {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();
    let letter = support::letters(&app).await[0].id.clone();
    (app, letter)
}

/// The events the process handled on instance `o-1`, in order.
async fn slow_handled(app: &TestApp) -> Vec<String> {
    app.app()
        .store()
        .read_stream("process:Slow", "o-1")
        .await
        .unwrap()
        .iter()
        .filter(|e| e.event_type == "ProcessHandled")
        .map(|e| {
            e.payload["eventType"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

// Issue 19: an operator's retry of a process letter renews its claim on the letter as it goes,
// as runners renew theirs: a retry of three steps of 3 s each, under a 4 s lease, keeps the
// letter from another operator's retry to the end.
#[tokio::test]
async fn a_long_process_retry_keeps_its_letter_from_another_operators_retry() {
    let store = support::database::store().await;
    let (app, letter) = a_slow_process_letter_on(store.clone()).await;
    // Parked behind the letter: two more steps for its retry.
    app.dispatch(SendReminder {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.dispatch(MarkOrderPaid {
        order_id: "o-1".into(),
    })
    .await
    .unwrap();
    app.run_until_idle().await.unwrap();

    slow::BROKEN.with(|b| b.set(false));
    slow::RETRY.with(|retry| {
        *retry.borrow_mut() = Some(slow::Retry {
            clock: app.clock().clone(),
            // Three quarters of the lease.
            takes: millis(3_000),
            rival: Some((store.clone(), letter.clone())),
        });
    });
    let start = app.now();
    let retried = app.app().dead_letters().retry(&letter).await;
    assert_eq!(
        slow::ANSWERS.with(|answers| answers.borrow().clone()),
        [false, false, false],
        "the letter was held at 0 s, 3 s and 6 s, its 4 s claim renewed as the retry went"
    );
    assert_eq!(app.now(), start + seconds(9), "three steps of 3 s each");
    assert_eq!(retried.unwrap(), Retried::Done);
    assert_eq!(
        slow_handled(&app).await,
        [
            "OrderPlaced",
            "ConfirmationSent",
            "ReminderSent",
            "OrderPaid"
        ]
    );
    let events = app
        .app()
        .store()
        .read_stream("process:Slow", "o-1")
        .await
        .unwrap();
    assert_eq!(events.last().unwrap().event_type, "ProcessResumed");
    assert_eq!(
        app.app()
            .dead_letters()
            .get(&letter)
            .await
            .unwrap()
            .unwrap()
            .status,
        LetterStatus::Retried
    );
}

// Issue 19: a step of an operator's retry is written only while the retry holds its letter: a
// step that outlasted the lease, its letter taken over meanwhile by another operator's retry,
// commits nothing, and the retry answers that the letter is being retried.
#[tokio::test]
async fn a_retry_step_whose_letter_another_retry_took_over_writes_nothing() {
    let racing = std::sync::Arc::new(support::racing::Racing::losing(0).await);
    let (app, letter) = a_slow_process_letter_on(racing.clone()).await;
    slow::BROKEN.with(|b| b.set(false));
    let past_the_lease = slow::LEASE + millis(1);
    slow::RETRY.with(|retry| {
        *retry.borrow_mut() = Some(slow::Retry {
            clock: app.clock().clone(),
            takes: past_the_lease,
            rival: None,
        });
    });
    *racing.rival_retry.lock().unwrap() = Some((letter.clone(), app.now() + past_the_lease));
    let retried = app.app().dead_letters().retry(&letter).await;
    assert_eq!(
        retried.err().map(|error| error.code()),
        Some("DEAD_LETTER_SETTLED")
    );
    assert_eq!(
        slow_handled(&app).await,
        ["OrderPlaced"],
        "the confirmation's step ran, and was not written"
    );
    assert_eq!(
        app.app()
            .dead_letters()
            .get(&letter)
            .await
            .unwrap()
            .unwrap()
            .status,
        LetterStatus::Failed,
        "the other retry's to settle"
    );
}

/// An app on a fresh store whose confirmation policy failed for good on `orders` orders, one
/// letter each, an hour apart.
async fn app_with_letters(orders: usize) -> TestApp {
    BROKEN.with(|b| b.set(true));
    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .policy::<ConfirmOnOrderPlaced>(),
    )
    .await
    .unwrap()
    .expecting_letters();
    for n in 0..orders {
        app.dispatch(place(&format!("o-{n}"))).await.unwrap();
        app.run_until_idle().await.unwrap();
        app.advance(hours(1)).await.unwrap();
    }
    assert_eq!(support::letters(&app).await.len(), orders);
    app
}

// issue 24: every open letter a filter matches is retried, oldest first, in batches; a retry
// that fails again is reported and its letter stays open; run again, only what is open is taken.
#[tokio::test]
async fn open_letters_are_retried_in_bulk_and_a_second_run_resumes() {
    let app = app_with_letters(5).await;
    let letters = app.app().dead_letters();
    let all = LetterFilter {
        handler: Some("confirm_on_order_placed".into()),
        ..LetterFilter::default()
    };
    assert_eq!(letters.count_open(&all).await.unwrap(), 5, "the dry run");
    // Interrupted after two: what a limit does.
    BROKEN.with(|b| b.set(false));
    let pace = bounda::Pace {
        batch: 2,
        pause: Duration::ZERO,
    };
    let first = LetterFilter {
        limit: Some(2),
        ..all.clone()
    };
    let mut heard = Vec::new();
    let report = letters
        .retry_all(&first, pace, |id, outcome| {
            heard.push((id.to_owned(), outcome.name()))
        })
        .await
        .unwrap();
    assert_eq!(report.counts().get("retried"), Some(&2));
    assert_eq!(heard.len(), 2, "each outcome heard as it happens");
    assert_eq!(letters.count_open(&all).await.unwrap(), 3);
    // The rest, with the mail server down again: each failed retry is an outcome.
    BROKEN.with(|b| b.set(true));
    let report = letters.retry_all(&all, pace, |_, _| {}).await.unwrap();
    assert_eq!(report.counts().get("failed"), Some(&3), "{report:?}");
    assert!(
        matches!(&report.outcomes[0].1, bounda::BulkOutcome::Failed(error) if error.contains("the mail server is down"))
    );
    assert_eq!(letters.count_open(&all).await.unwrap(), 3, "still open");
    // Mended: the third run takes the three left, and the orders are confirmed.
    BROKEN.with(|b| b.set(false));
    let report = letters.retry_all(&all, pace, |_, _| {}).await.unwrap();
    assert_eq!(report.counts().get("retried"), Some(&3));
    assert_eq!(letters.count_open(&all).await.unwrap(), 0);
    for n in 0..5 {
        let order = app.app().load::<Order>(&format!("o-{n}")).await.unwrap();
        assert!(order.state.confirmed, "o-{n} confirmed");
    }
}

// issue 24: letters are discarded in bulk by when they last failed, and by error text.
#[tokio::test]
async fn letters_are_discarded_in_bulk_by_when_they_failed() {
    let app = app_with_letters(4).await;
    let letters = app.app().dead_letters();
    let listed = support::letters(&app).await;
    // The first two, by the moment between the second and the third failure.
    let until = LetterFilter {
        failed_until: Some(listed[2].last_failed_at),
        ..LetterFilter::default()
    };
    let report = letters
        .discard_all(&until, bounda::Pace::default(), |_, _| {})
        .await
        .unwrap();
    let discarded: Vec<&str> = report.outcomes.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(discarded, [listed[0].id.as_str(), listed[1].id.as_str()]);
    assert_eq!(report.counts().get("discarded"), Some(&2));
    let by_error = LetterFilter {
        error_contains: Some("mail server".into()),
        ..LetterFilter::default()
    };
    assert_eq!(letters.count_open(&by_error).await.unwrap(), 2);
    let none = LetterFilter {
        error_contains: Some("disk full".into()),
        ..LetterFilter::default()
    };
    let report = letters
        .discard_all(&none, bounda::Pace::default(), |_, _| {})
        .await
        .unwrap();
    assert!(report.outcomes.is_empty());
}
