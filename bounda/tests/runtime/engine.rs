//! The run engine: claimed runs committed in groups, one instance's steps in order, each
//! deadline waiting only for its own instance's earlier events.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use crate::support;

use std::sync::Arc;

use bounda::clock::Clock;
use bounda::prelude::*;
use bounda::store::{Snapshot, Store, WriteSet};
use support::storefront::*;

mod fragile {
    use bounda::prelude::*;

    use crate::support::storefront::*;

    /// A process whose starting handler panics.
    #[process(on = Order, started_by = [OrderPlaced])]
    #[derive(Debug, Default, Clone, Serialize, Deserialize)]
    pub struct Fragile {
        pub started: bool,
    }

    #[process]
    impl Fragile {
        async fn on_order_placed(_cx: On<'_, Self, OrderPlaced>) -> Result<FragilePatch> {
            panic!("the fragile handler broke on purpose")
        }
    }
}

/// How often `confirm_on_reminder_sent` ran.
static CONFIRMATIONS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Records a confirmation, every time.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ConfirmAgain {
    order_id: String,
}

#[command]
impl Command for ConfirmAgain {
    const NAME: &'static str = "ConfirmAgain";
    type Aggregate = Order;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.order_id
    }

    fn decide(&self, _order: &Order) -> Decision<Self> {
        Ok(vec![
            ConfirmationSent {
                order_id: self.order_id.clone(),
            }
            .into(),
        ])
    }
}

/// Confirms each reminder, counting its runs.
#[policy]
async fn confirm_on_reminder_sent(cx: Reaction<'_, ReminderSent>) -> Result<()> {
    CONFIRMATIONS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    cx.send(ConfirmAgain {
        order_id: cx.event().order_id.clone(),
    })
    .await?;
    Ok(())
}

/// A test app with the order-payment process on `store`.
async fn app_on(store: &Arc<dyn Store>) -> TestApp {
    let shared: Arc<dyn Store> = store.clone();
    TestApp::new(
        App::builder_shared(shared)
            .only_listed()
            .process::<OrderPayment>(),
    )
    .await
    .unwrap()
}

async fn reminders(app: &TestApp, id: &str) -> usize {
    app.app()
        .store()
        .read_stream("process:OrderPayment", id)
        .await
        .unwrap()
        .iter()
        .filter(|e| e.payload["field"] == "next_reminder")
        .count()
}

/// Starts `instances` orders, then moves the clock to their first reminder with batches of
/// `batch_size`: every reminder runs once and every checkpoint keeps up. Returns the write
/// transactions the firings took.
async fn transactions_to_fire(instances: usize, batch_size: usize) -> u64 {
    // SQLite's own count of write transactions.
    let store = Arc::new(bounda_sqlite::SqliteStore::in_memory().unwrap());
    let mut config = bounda::config::Config::default();
    config.dispatcher.batch_size = batch_size;
    let shared: Arc<dyn Store> = store.clone();
    let builder = App::builder_shared(shared).only_listed().config(config);
    let app = TestApp::new(builder.process::<OrderPayment>())
        .await
        .unwrap();
    for n in 0..instances {
        app.dispatch(place(&format!("o-{n}"))).await.unwrap();
    }
    app.run_until_idle().await.unwrap();
    let before = store.write_transactions();
    app.advance(hours(24)).await.unwrap();
    let spent = store.write_transactions() - before;
    for n in 0..instances {
        assert_eq!(
            reminders(&app, &format!("o-{n}")).await,
            1,
            "o-{n} reminded once"
        );
    }
    assert_eq!(
        app.lag().await.unwrap().max_lag,
        0,
        "the checkpoints moved with them"
    );
    spent
}

// Issue 8: a batch of due deadlines commits together, not one transaction per firing, and
// recording lifecycle events costs the subscribers no checkpoint writes of their own.
#[tokio::test]
async fn a_batch_of_due_deadlines_commits_in_a_few_transactions() {
    let spent = transactions_to_fire(50, 100).await;
    assert!(
        spent <= 3,
        "50 firings took {spent} write transactions: a claim and a commit are enough"
    );
}

// Issue 8: when each batch holds one run, each commit claims the next, so a firing costs about
// one write transaction.
#[tokio::test]
async fn batches_of_one_cost_about_one_transaction_a_firing() {
    let spent = transactions_to_fire(40, 1).await;
    assert!(
        spent <= 42,
        "40 firings one at a time took {spent} write transactions"
    );
}

// Issue 8: runs of one instance in one batch commit one after another, each deciding on the
// state the one before committed: no handler runs twice for a stream its neighbour moved.
#[tokio::test]
async fn one_instances_runs_in_a_batch_run_in_order_on_each_others_state() {
    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .policy::<ConfirmOnReminderSent>(),
    )
    .await
    .unwrap();
    app.dispatch(place("o-1")).await.unwrap();
    for _ in 0..3 {
        app.dispatch(SendReminder {
            order_id: "o-1".into(),
        })
        .await
        .unwrap();
    }
    app.run_until_idle().await.unwrap();
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        [
            "OrderPlaced",
            "ReminderSent",
            "ReminderSent",
            "ReminderSent",
            "ConfirmationSent",
            "ConfirmationSent",
            "ConfirmationSent"
        ]
    );
    assert_eq!(
        CONFIRMATIONS.load(std::sync::atomic::Ordering::SeqCst),
        3,
        "each reaction ran once: none decided on a state its neighbour had moved"
    );
}

// spec 85: a due deadline waits for the unhandled events of its own instance only.
#[tokio::test]
async fn a_deadline_waits_only_for_its_own_instances_earlier_events() {
    let store = support::database::store().await;
    let app = app_on(&store).await;
    app.dispatch(place("o-1")).await.unwrap();
    app.dispatch(place("o-2")).await.unwrap();
    app.advance(hours(24) - seconds(1)).await.unwrap();
    // o-2 is paid a second before its reminder, and another runner holds that event's step.
    let paid = app
        .dispatch(MarkOrderPaid {
            order_id: "o-2".into(),
        })
        .await
        .unwrap();
    let claim = store
        .claim_inbox(
            "OrderPayment",
            &paid.event_ids[0],
            "another-runner",
            app.now(),
            hours(1),
        )
        .await
        .unwrap();
    assert!(matches!(claim, bounda::store::InboxClaim::Claimed { .. }));
    app.clock().advance(seconds(1));
    app.run_until_idle_with(3).await.unwrap();
    assert_eq!(
        reminders(&app, "o-1").await,
        1,
        "o-1 has nothing unhandled: it runs"
    );
    assert_eq!(reminders(&app, "o-2").await, 0, "o-2 waits for its payment");
    assert_eq!(app.lag().await.unwrap().waiting_deadlines, 1);
}

// spec 85: an instance's event stored after the deadline's moment does not hold it back.
#[tokio::test]
async fn a_deadline_does_not_wait_for_its_instances_later_events() {
    let store = support::database::store().await;
    let app = app_on(&store).await;
    app.dispatch(place("o-1")).await.unwrap();
    app.advance(hours(24) + seconds(5)).await.unwrap();
    assert_eq!(reminders(&app, "o-1").await, 1);
    // The next reminder is due at +48h; an event of o-1 stored after that moment is held by
    // another runner when the worker looks.
    app.clock().advance(hours(24));
    let paid = app
        .dispatch(MarkOrderPaid {
            order_id: "o-1".into(),
        })
        .await
        .unwrap();
    store
        .claim_inbox(
            "OrderPayment",
            &paid.event_ids[0],
            "another-runner",
            app.now(),
            hours(1),
        )
        .await
        .unwrap();
    app.run_until_idle_with(3).await.unwrap();
    assert_eq!(
        reminders(&app, "o-1").await,
        2,
        "the payment came after the moment: the reminder does not wait for it"
    );
}

// spec 157: a panicking process handler's letter says what the panic said.
#[tokio::test]
async fn a_panicking_process_handler_leaves_its_message_in_the_letter() {
    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .process::<fragile::Fragile>(),
    )
    .await
    .unwrap()
    .expecting_letters();
    app.dispatch(place("o-1")).await.unwrap();
    app.run_until_idle().await.unwrap();
    let letters = support::letters(&app).await;
    assert_eq!(letters.len(), 1);
    assert!(
        letters[0]
            .error_message
            .contains("the fragile handler broke on purpose"),
        "{}",
        letters[0].error_message
    );
}

// Issue 8: a step keeps the instance's snapshot; a load starts from it and folds only what
// came after, and a snapshot that does not read is folded again from the stream. Issue 21: a
// step writes one only once four lifecycle events have come since the last.
#[tokio::test]
async fn an_instance_loads_from_its_snapshot_and_survives_a_bad_one() {
    let store = support::database::store().await;
    let app = app_on(&store).await;
    app.dispatch(place("o-1")).await.unwrap();
    let snapshot_of = || store.snapshot("process:OrderPayment", "o-1");
    assert_eq!(snapshot_of().await.unwrap(), None, "one event: folded");
    app.advance(hours(48)).await.unwrap();
    let stream = store
        .read_stream("process:OrderPayment", "o-1")
        .await
        .unwrap();
    let snapshot = snapshot_of().await.unwrap().unwrap();
    assert!(stream.len() >= 4, "{} events", stream.len());
    assert_eq!(
        snapshot.version,
        stream.len() as u64 / 4 * 4,
        "kept every fourth event"
    );
    let expected = app.instance::<OrderPayment>("o-1").await.unwrap().unwrap();
    assert_eq!(expected.state.reminders, 2);

    // A load reads the snapshot rather than refolding: a (made-up) newer one is what it sees.
    let mut newer = snapshot.state.clone();
    newer["version"] = serde_json::json!(snapshot.version + 1);
    newer["state"]["reminders"] = serde_json::json!(99);
    let keep = |version, state| WriteSet {
        snapshots: vec![Snapshot {
            aggregate_type: "process:OrderPayment".into(),
            aggregate_id: "o-1".into(),
            version,
            state,
        }],
        ..WriteSet::default()
    };
    store
        .commit(&keep(snapshot.version + 1, newer))
        .await
        .unwrap();
    let from_snapshot = app
        .app()
        .process_instance::<OrderPayment>("o-1")
        .await
        .unwrap();
    assert_eq!(from_snapshot.unwrap().state.reminders, 99);

    // A snapshot this build cannot read, newer than any kept: the stream is folded instead.
    let unreadable = serde_json::json!({ "not": "an instance" });
    store
        .commit(&keep(snapshot.version + 100, unreadable))
        .await
        .unwrap();
    let reread = app
        .app()
        .process_instance::<OrderPayment>("o-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reread, expected);
    app.advance(hours(24)).await.unwrap();
    assert_eq!(
        reminders(&app, "o-1").await,
        3,
        "the third reminder ran from the stream"
    );
    assert_eq!(
        app.app()
            .process_instance::<OrderPayment>("o-1")
            .await
            .unwrap()
            .unwrap()
            .state
            .reminders,
        3
    );
}

// Issue 9: lag counts the subscribers this app runs; a checkpoint of one it does not run (a
// deploy removed it, or another app on the store runs it) is listed apart as stale.
#[tokio::test]
async fn lag_counts_this_apps_subscribers_and_lists_others_as_stale() {
    let store: Arc<dyn Store> = support::database::store().await;
    let with_policy = TestApp::new(
        App::builder_shared(store.clone())
            .only_listed()
            .policy::<ConfirmOnReminderSent>(),
    )
    .await
    .unwrap();
    let processes_only = TestApp::new(
        App::builder_shared(store.clone())
            .only_listed()
            .process::<OrderPayment>(),
    )
    .await
    .unwrap();
    processes_only.dispatch(place("o-1")).await.unwrap();
    processes_only.run_until_idle().await.unwrap();
    let lag = processes_only.lag().await.unwrap();
    let head = store.head().await.unwrap();
    assert_eq!(
        lag.subscribers
            .iter()
            .map(|s| s.subscriber.as_str())
            .collect::<Vec<_>>(),
        ["processes"]
    );
    assert_eq!(
        lag.max_lag, 0,
        "the policies' checkpoint is not this app's lag"
    );
    assert_eq!(
        lag.stale
            .iter()
            .map(|s| (s.subscriber.as_str(), s.lag))
            .collect::<Vec<_>>(),
        [("policies", head)],
        "listed apart, with its lag"
    );
    assert_eq!(
        with_policy.lag().await.unwrap().max_lag,
        head,
        "the other app sees its own lag"
    );
}

// Issue 9: one scheduler entry that cannot be prepared (its event cannot be read) fails alone,
// with its back-off and then its letter; the rest of its round runs.
#[tokio::test]
async fn an_entry_that_cannot_be_read_fails_alone() {
    let store = Arc::new(support::racing::Racing::losing(0).await);
    let shared: Arc<dyn Store> = store.clone();
    let app = TestApp::new(
        App::builder_shared(shared)
            .only_listed()
            .policy::<ConfirmLater>(),
    )
    .await
    .unwrap()
    .expecting_letters();
    let placed = app.dispatch(place("o-1")).await.unwrap();
    app.dispatch(place("o-2")).await.unwrap();
    app.run_until_idle().await.unwrap();
    *store.unreadable.lock().unwrap() = Some(placed.event_ids[0].clone());
    app.advance(hours(2)).await.unwrap();
    assert_eq!(
        app.events_of::<Order>("o-2").await.unwrap().types(),
        ["OrderPlaced", "ConfirmationSent"],
        "the other entry ran"
    );
    let letters = support::letters(&app).await;
    assert_eq!(letters.len(), 1);
    assert_eq!(
        (
            letters[0].handler.as_str(),
            letters[0].event_id.as_deref(),
            letters[0].error_type.as_str(),
            letters[0].attempts
        ),
        (
            "confirm_later",
            Some(placed.event_ids[0].as_str()),
            "retriable_exhausted",
            3
        ),
        "retried with its back-off, then its letter"
    );
    assert!(
        letters[0].error_message.contains("disk I/O error"),
        "{}",
        letters[0].error_message
    );
}

/// How often `always_fails_on_order_placed` ran.
static FAILED_RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Fails every time.
#[policy]
async fn always_fails_on_order_placed(_cx: Reaction<'_, OrderPlaced>) -> Result<()> {
    FAILED_RUNS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    anyhow::bail!("down")
}

// Issue 9: a claim that lapsed (its runner killed) spends no attempt: the run still gets its
// three real tries before its letter.
#[tokio::test]
async fn lapsed_claims_spend_no_attempts() {
    let store = support::database::store().await;
    let shared: Arc<dyn Store> = store.clone();
    let app = TestApp::new(
        App::builder_shared(shared)
            .only_listed()
            .policy::<AlwaysFailsOnOrderPlaced>(),
    )
    .await
    .unwrap()
    .expecting_letters();
    let placed = app.dispatch(place("o-1")).await.unwrap();
    let event = &placed.event_ids[0];
    let lease = seconds(60); // twice the default 30 s time limit
    for crashed in ["crashed-1", "crashed-2"] {
        let claim = store
            .claim_inbox(
                "always_fails_on_order_placed",
                event,
                crashed,
                app.now(),
                lease,
            )
            .await
            .unwrap();
        assert!(
            matches!(claim, bounda::store::InboxClaim::Claimed { attempt: 1 }),
            "{crashed}: {claim:?}"
        );
        app.clock().advance(lease + millis(1));
    }
    app.run_until_idle().await.unwrap();
    assert_eq!(
        FAILED_RUNS.load(std::sync::atomic::Ordering::SeqCst),
        3,
        "three real runs"
    );
    let letters = support::letters(&app).await;
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].attempts, 3);
}

/// What `slow_on_order_placed` reaches: the test's clock and store, and what it ran.
struct Hooks {
    clock: Arc<bounda::clock::SimulatedClock>,
    store: Arc<dyn Store>,
    /// The event another runner tries to take over once o-1's run has taken `slow_for`.
    rival_takes: std::sync::Mutex<Option<String>>,
    /// How long o-1's run takes.
    slow_for: Duration,
    /// The lease of the rival's claim.
    rival_lease: Duration,
    /// What the rival's claim came to.
    rival_got: std::sync::Mutex<Option<bounda::store::InboxClaim>>,
    ran: std::sync::Mutex<Vec<String>>,
}

impl Hooks {
    /// Hooks where o-1's run takes `slow_for`, then a rival with `rival_lease` claims the next.
    fn new(
        clock: &Arc<bounda::clock::SimulatedClock>,
        store: &Arc<dyn Store>,
        slow_for: Duration,
        rival_lease: Duration,
    ) -> Arc<Hooks> {
        Arc::new(Hooks {
            clock: clock.clone(),
            store: store.clone(),
            rival_takes: std::sync::Mutex::new(None),
            slow_for,
            rival_lease,
            rival_got: std::sync::Mutex::new(None),
            ran: std::sync::Mutex::new(Vec::new()),
        })
    }
}

/// An app of `SlowOnOrderPlaced` on `store`, with orders o-1 and o-2 placed, the rival set to
/// take o-2's run over, and the batch of both run once.
async fn slow_batch(store: &Arc<dyn Store>, hooks: &Arc<Hooks>) -> (TestApp, String) {
    let app = App::builder_shared(store.clone())
        .only_listed()
        .clock(hooks.clock.clone())
        .port(hooks.clone())
        .policy::<SlowOnOrderPlaced>()
        .build()
        .await
        .unwrap();
    let app = TestApp::with_app(app, hooks.clock.clone());
    app.dispatch(place("o-1")).await.unwrap();
    let second = app.dispatch(place("o-2")).await.unwrap();
    let second = second.event_ids[0].clone();
    *hooks.rival_takes.lock().unwrap() = Some(second.clone());
    app.run_until_idle_with(1).await.unwrap();
    (app, second)
}

/// Takes longer than its lease on `o-1`, meanwhile another runner takes over the next claim.
#[policy(ports = [Arc<Hooks>])]
async fn slow_on_order_placed(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
    let hooks = cx.port::<Arc<Hooks>>()?;
    hooks.ran.lock().unwrap().push(cx.event().order_id.clone());
    if cx.event().order_id == "o-1" {
        hooks.clock.advance(hooks.slow_for);
        let rival_takes = hooks.rival_takes.lock().unwrap().take();
        if let Some(event) = rival_takes {
            let got = hooks
                .store
                .claim_inbox(
                    "slow_on_order_placed",
                    &event,
                    "rival",
                    hooks.clock.now(),
                    hooks.rival_lease,
                )
                .await?;
            *hooks.rival_got.lock().unwrap() = Some(got);
        }
    }
    Ok(())
}

// Issue 9, spec 128: a run of a long batch whose claim another runner took over meanwhile
// runs nothing; its claim is checked (and renewed) before it runs, not only at commit. Issue 40:
// the runner says so with what it means, for an operator to see that clocks may disagree.
#[tokio::test]
async fn a_run_whose_claim_was_taken_over_mid_batch_runs_nothing() {
    let logs = bounda::testing::Logs::check();
    logs.expect(
        bounda::testing::Level::WARN,
        "the runners' clocks disagree by more than half a lease",
    );
    let store = support::database::store().await;
    let clock = Arc::new(bounda::clock::SimulatedClock::default());
    let hooks = Hooks::new(&clock, &store, seconds(60) + millis(1), seconds(60));
    let (app, second) = slow_batch(&store, &hooks).await;
    // o-1's run outlasts its handler's limit on the simulated clock where the store answers a
    // round trip away: its retry is said too, and is no concern of this test.
    if logs
        .seen()
        .iter()
        .any(|line| line.text.contains("ran past its limit"))
    {
        logs.expect(bounda::testing::Level::WARN, "ran past its limit");
    }
    assert_eq!(
        *hooks.ran.lock().unwrap(),
        ["o-1"],
        "o-2's claim is the rival's: not run here"
    );
    assert_eq!(
        store
            .claim_inbox(
                "slow_on_order_placed",
                &second,
                "third",
                app.now(),
                seconds(60)
            )
            .await
            .unwrap(),
        bounda::store::InboxClaim::Held,
        "the rival holds it"
    );
}

// Issue 19: a claim is taken over only once the lease it was taken with has passed, whatever
// the lease of the runner that finds it. A rival with a 4 s lease finds o-2's claim (taken with
// 60 s) 5 s later: it is not its to take, so o-2 runs here, once, and commits. Before, the rival
// took it on its own lease and o-2's run here ran its handler for a commit that was refused.
#[tokio::test]
async fn a_claim_is_not_taken_over_before_its_own_lease_has_passed() {
    let store = support::database::store().await;
    let clock = Arc::new(bounda::clock::SimulatedClock::default());
    let hooks = Hooks::new(&clock, &store, seconds(5), seconds(4));
    let (app, second) = slow_batch(&store, &hooks).await;
    assert_eq!(
        *hooks.rival_got.lock().unwrap(),
        Some(bounda::store::InboxClaim::Held),
        "the rival may not take a claim whose lease has not passed"
    );
    assert_eq!(*hooks.ran.lock().unwrap(), ["o-1", "o-2"]);
    assert_eq!(
        store
            .claim_inbox(
                "slow_on_order_placed",
                &second,
                "third",
                app.now(),
                seconds(60)
            )
            .await
            .unwrap(),
        bounda::store::InboxClaim::Succeeded,
        "o-2's run here committed"
    );
}

/// An app running `ConfirmOnReminderSent` (and whatever `extra` adds) on the simulated clock,
/// polling every 5 ms, over a store whose log reads fail from the start: `configure` sets the
/// back-off.
async fn on_a_failing_log(
    configure: impl FnOnce(&mut bounda::config::Config),
    extra: impl FnOnce(bounda::AppBuilder) -> bounda::AppBuilder,
) -> (
    Arc<support::racing::Racing>,
    Arc<bounda::clock::SimulatedClock>,
    App,
) {
    let store = Arc::new(support::racing::Racing::losing(0).await);
    let clock = Arc::new(bounda::clock::SimulatedClock::default());
    let mut config = bounda::config::Config::default();
    config.dispatcher.poll_interval = millis(5);
    configure(&mut config);
    let shared: Arc<dyn Store> = store.clone();
    let builder = App::builder_shared(shared)
        .only_listed()
        .clock(clock.clone())
        .config(config)
        .policy::<ConfirmOnReminderSent>();
    let app = extra(builder).build().await.unwrap();
    (store, clock, app)
}

// Issue 9: a subscriber whose pass fails waits its back-off (`dispatcher.backoff`, 1 s first)
// instead of trying again every poll, and `lag` shows until when.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_subscriber_waits_its_back_off_and_lag_shows_it() {
    let (store, clock, app) = on_a_failing_log(|_| {}, |builder| builder).await;
    store
        .log_fails
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let runner = {
        let app = app.clone();
        tokio::spawn(async move {
            app.run_until(async {
                let _ = stopped.await;
            })
            .await
        })
    };
    let reads = || store.log_reads.load(std::sync::atomic::Ordering::SeqCst);
    let wait_for = |what: &str, done: &dyn Fn() -> bool| {
        let start = std::time::Instant::now();
        while !done() {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(10),
                "{what}"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    };
    wait_for("the first pass", &|| reads() >= 1);
    // Many polls pass; the simulated clock does not move, so the back-off does not end.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(reads(), 1, "tried once, then waiting its back-off");
    let lag = app.lag().await.unwrap();
    let policies = lag
        .subscribers
        .iter()
        .find(|s| s.subscriber == "policies")
        .unwrap();
    assert_eq!(
        policies.paused_until,
        Some(clock.now() + seconds(1)),
        "lag shows when it tries again"
    );
    clock.advance(seconds(1));
    wait_for("the second try", &|| reads() >= 2);
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(reads(), 2, "failed again: now it waits 2 s");
    let paused = async |app: &App| app.lag().await.unwrap().subscribers[0].paused_until;
    assert_eq!(
        paused(&app).await,
        Some(clock.now() + seconds(2)),
        "the back-off doubled"
    );
    store
        .log_fails
        .store(false, std::sync::atomic::Ordering::SeqCst);
    clock.advance(seconds(2));
    let start = std::time::Instant::now();
    while app.lag().await.unwrap().subscribers[0]
        .paused_until
        .is_some()
    {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "recovered"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let _ = stop.send(());
    runner.await.unwrap().unwrap();
}

// Issue 10: a loop that cannot progress says why and stops.
#[tokio::test]
async fn a_subscriber_that_keeps_failing_stops_the_run_with_its_cause() {
    let (store, clock, app) = on_a_failing_log(
        |config| config.dispatcher.backoff.max_failures = 3,
        |builder| builder,
    )
    .await;
    store
        .log_fails
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let runner = {
        let app = app.clone();
        tokio::spawn(async move { app.run_until(std::future::pending()).await })
    };
    // Its back-off waits 1 s, then 2 s, on the simulated clock.
    let start = std::time::Instant::now();
    while !runner.is_finished() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "still running after {} reads",
            store.log_reads.load(std::sync::atomic::Ordering::SeqCst)
        );
        clock.advance(seconds(1));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let error = runner.await.unwrap().unwrap_err();
    assert_stalled_on_policies(&error);
    assert_eq!(
        store.log_reads.load(std::sync::atomic::Ordering::SeqCst),
        3,
        "tried three times, then stopped"
    );
}

// Issue 19: a database out of reach (a server restarting, a failover) is waited out: the runner
// keeps trying with its back-off far past `maxFailures`, and goes on when the store answers.
#[tokio::test]
async fn a_store_out_of_reach_is_waited_out_however_long() {
    let (store, clock, app) = on_a_failing_log(
        |config| config.dispatcher.backoff.max_failures = 3,
        |builder| builder,
    )
    .await;
    let flag = std::sync::atomic::Ordering::SeqCst;
    store.log_unreachable.store(true, flag);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let runner = {
        let app = app.clone();
        tokio::spawn(async move {
            app.run_until(async {
                let _ = stopped.await;
            })
            .await
        })
    };
    // Ten minutes of simulated outage, the back-off capped at 30 s: many more failures than three.
    let start = std::time::Instant::now();
    while store.log_reads.load(flag) < 12 {
        assert!(
            !runner.is_finished(),
            "the runner stopped during the outage"
        );
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "no retries"
        );
        clock.advance(seconds(30));
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(!runner.is_finished(), "still waiting for the store");
    let paused = app.lag().await.unwrap();
    assert!(
        paused
            .subscribers
            .iter()
            .any(|s| s.subscriber == "policies" && s.paused_until.is_some()),
        "{paused:?}"
    );
    // Back: the next pass goes through and the pause ends.
    store.log_unreachable.store(false, flag);
    let start = std::time::Instant::now();
    loop {
        clock.advance(seconds(30));
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        let lag = app.lag().await.unwrap();
        if lag.subscribers.iter().all(|s| s.paused_until.is_none()) {
            break;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "{lag:?}"
        );
    }
    let _ = stop.send(());
    runner.await.unwrap().unwrap();
}

fn assert_stalled_on_policies(error: &bounda::Error) {
    let bounda::Error::Stalled {
        subscriber,
        failures,
        cause,
    } = error
    else {
        panic!("not stalled: {error:?}");
    };
    assert_eq!((subscriber.as_str(), *failures), ("policies", 3));
    assert!(cause.contains("disk I/O error"), "{cause}");
}

// Issue 10: a subscriber that keeps failing does not stop an app that still gets somewhere.
#[tokio::test]
async fn a_failing_subscriber_does_not_stop_an_app_whose_other_work_moves() {
    let (store, clock, app) = on_a_failing_log(
        |config| {
            config.dispatcher.backoff.max_failures = 3;
            config.dispatcher.backoff.max_delay = seconds(1);
        },
        |builder| builder.command::<PlaceOrder>(),
    )
    .await;
    // The scheduled worker has work due each second for six seconds; the policies' log reads fail.
    for i in 1..=6 {
        let order = PlaceOrder {
            order_id: format!("o-{i}"),
            total: 1,
        };
        app.dispatch_with(order, bounda::DispatchOptions::default().delay(seconds(i)))
            .await
            .unwrap();
    }
    store
        .log_fails
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let runner = {
        let app = app.clone();
        tokio::spawn(async move { app.run_until(std::future::pending()).await })
    };
    let start = std::time::Instant::now();
    let mut seconds_passed = 0;
    while !runner.is_finished() {
        assert!(start.elapsed() < std::time::Duration::from_secs(10));
        clock.advance(seconds(1));
        seconds_passed += 1;
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    }
    let error = runner.await.unwrap().unwrap_err();
    assert_stalled_on_policies(&error);
    let mut placed = 0;
    for i in 1..=6 {
        let stream = app.store().read_stream("Order", &format!("o-{i}")).await;
        placed += usize::from(!stream.unwrap().is_empty());
    }
    assert_eq!(
        placed, 6,
        "the worker ran everything before the app stopped"
    );
    assert!(seconds_passed > 6, "stopped after {seconds_passed} s");
}

// A store that answers a batch of inbox claims, or a group commit, with fewer answers than it
// was asked is broken, and what it did is unknown: the pass fails whole, saying so, and its
// runs run again once the store answers right.
#[tokio::test]
async fn a_batch_answered_short_fails_whole_and_runs_again() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let racing = Arc::new(support::racing::Racing::losing(0).await);
    let store: Arc<dyn Store> = racing.clone();
    let app = app_on(&store).await;
    let flags: [(&AtomicBool, &str, [&str; 2]); 2] = [
        (
            &racing.short_claims,
            "claims for 2 deliveries",
            ["o-1", "o-2"],
        ),
        (
            &racing.short_answers,
            "results for 2 write sets",
            ["o-3", "o-4"],
        ),
    ];
    for (flag, told, orders) in flags {
        for id in orders {
            app.dispatch(place(id)).await.unwrap();
        }
        flag.store(true, Ordering::SeqCst);
        let error = app.run_until_idle().await.unwrap_err();
        let error = format!("{error:#}");
        assert!(
            error.contains(told) && error.contains("a store must answer each"),
            "{error}"
        );
        flag.store(false, Ordering::SeqCst);
        // Claims taken meanwhile lapse with their lease (twice the handlers' 30 s).
        app.advance(minutes(5)).await.unwrap();
        for id in orders {
            assert!(
                app.app()
                    .process_instance::<OrderPayment>(id)
                    .await
                    .unwrap()
                    .is_some(),
                "{id} started"
            );
        }
    }
    assert_eq!(app.lag().await.unwrap().max_lag, 0);
}

// A scheduler entry whose payload this build cannot read is lettered with why (serde's own
// words), not only that it does not read; a command's is called a command (issue 43: it was
// called an event with an empty id).
#[tokio::test]
async fn an_entry_whose_payload_does_not_read_is_lettered_with_why() {
    let store = support::database::store().await;
    let app = TestApp::new(
        App::builder_shared(store.clone())
            .only_listed()
            .process::<OrderPayment>()
            .command::<CancelOrder>(),
    )
    .await
    .unwrap()
    .expecting_letters();
    // A command's context as the runtime writes it: its id and its cause.
    let context = serde_json::json!({
        "commandId": "c-1",
        "cause": { "correlationId": "c-1", "causationId": "c-1", "depth": 0 },
    });
    let garbled =
        |key: &str, command_type: &str, payload: serde_json::Value| bounda::store::ScheduledEntry {
            context: context.clone(),
            ..bounda::store::ScheduledEntry::new(key, command_type, "o-1", payload, app.now())
        };
    store
        .commit(&WriteSet {
            schedule: vec![
                garbled(
                    "garbled",
                    "bounda.ProcessDeadline",
                    serde_json::json!({ "process": "OrderPayment", "instance": "o-1", "at": "noon" }),
                ),
                garbled(
                    "garbled-command",
                    "CancelOrder",
                    serde_json::json!({ "order_id": 7 }),
                ),
            ],
            ..WriteSet::default()
        })
        .await
        .unwrap();
    app.advance(minutes(1)).await.unwrap();
    let letters = support::letters(&app).await;
    assert_eq!(letters.len(), 2, "{letters:?}");
    let errors: Vec<&str> = letters.iter().map(|l| l.error_message.as_str()).collect();
    assert!(
        errors
            .iter()
            .any(|error| error.contains("cannot read (invalid type: string \"noon\"")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|error| error
            .starts_with("command `CancelOrder` has a stored payload its type cannot read")
            && error.contains("invalid type: integer `7`")),
        "{errors:?}"
    );
}

mod shared {
    //! Two runners on one store, each recording what it ran.

    use std::sync::{Arc, Mutex};

    use bounda::prelude::*;

    use crate::support::storefront::*;

    /// One step a runner ran: which runner, which kind, which order, the event's version.
    pub type Step = (&'static str, &'static str, String, u64);

    /// What a runner's handlers see: its name, and the log every runner writes to.
    pub struct Seen {
        pub runner: &'static str,
        pub log: Arc<Mutex<Vec<Step>>>,
    }

    impl Seen {
        /// Records `step`, then takes a millisecond of real time, as a handler calling out would.
        pub async fn record(&self, kind: &'static str, order: &str, version: u64) {
            self.log
                .lock()
                .unwrap()
                .push((self.runner, kind, order.to_owned(), version));
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }

    /// Counts each order's confirmations, checking that each comes right after the one before.
    #[process(on = Order, started_by = [OrderPlaced], ports = [Seen])]
    #[derive(Debug, Default, Clone, Serialize, Deserialize)]
    pub struct Tally {
        /// The version of the last event taken.
        pub last: u64,
        /// Whether an event came out of order.
        pub out_of_order: bool,
    }

    #[process]
    impl Tally {
        async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<TallyPatch> {
            Ok(TallyPatch::default().last(cx.recorded().version))
        }

        async fn on_confirmation_sent(cx: On<'_, Self, ConfirmationSent>) -> Result<TallyPatch> {
            let version = cx.recorded().version;
            let seen = cx.port::<Seen>()?;
            seen.record("step", &cx.event().order_id, version).await;
            let out_of_order = cx.state().out_of_order || version != cx.state().last + 1;
            Ok(TallyPatch::default()
                .last(version)
                .out_of_order(out_of_order))
        }
    }

    /// Records each confirmation as a reaction.
    #[policy(ports = [Seen])]
    pub async fn note_on_confirmation_sent(cx: Reaction<'_, ConfirmationSent>) -> Result<()> {
        let seen = cx.port::<Seen>()?;
        seen.record("reaction", &cx.event().order_id, cx.recorded().version)
            .await;
        Ok(())
    }
}

// Issue 21: two runners on one store share a subscriber's work, policy runs and process steps
// alike, each instance's steps once, in order, on one runner at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runners_share_policy_runs_and_process_steps_each_instance_in_order() {
    const ORDERS: usize = 40;
    const CONFIRMATIONS: u64 = 4;
    let store = support::database::store().await;
    let clock = Arc::new(bounda::clock::SimulatedClock::default());
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let runner = |name: &'static str| {
        let mut config = bounda::config::Config::default();
        config.dispatcher.batch_size = 10;
        let seen = shared::Seen {
            runner: name,
            log: log.clone(),
        };
        support::another_app(&store, &clock, move |builder| {
            builder
                .process::<shared::Tally>()
                .policy::<shared::NoteOnConfirmationSent>()
                .command::<PlaceOrder>()
                .command::<ConfirmAgain>()
                .port(seen)
                .config(config)
        })
    };
    let (a, b) = (runner("a").await, runner("b").await);
    for n in 0..ORDERS {
        let id = format!("o-{n}");
        a.dispatch(place(&id)).await.unwrap();
        for _ in 0..CONFIRMATIONS {
            a.dispatch(ConfirmAgain {
                order_id: id.clone(),
            })
            .await
            .unwrap();
        }
    }
    for _ in 0..20 {
        let (one, other) = tokio::join!(a.run_until_idle(), b.run_until_idle());
        one.unwrap();
        other.unwrap();
        if a.lag().await.unwrap().max_lag == 0 {
            break;
        }
    }
    assert_eq!(a.lag().await.unwrap().max_lag, 0, "all done");
    let log = log.lock().unwrap().clone();
    for kind in ["step", "reaction"] {
        let runs: Vec<&shared::Step> = log.iter().filter(|s| s.1 == kind).collect();
        assert_eq!(
            runs.len(),
            ORDERS * CONFIRMATIONS as usize,
            "each {kind} ran once"
        );
        for n in 0..ORDERS {
            let id = format!("o-{n}");
            let versions: Vec<u64> = runs.iter().filter(|s| s.2 == id).map(|s| s.3).collect();
            assert_eq!(
                versions,
                (2..2 + CONFIRMATIONS).collect::<Vec<_>>(),
                "{id}'s {kind}s once each, in order"
            );
        }
        for name in ["a", "b"] {
            let share = runs.iter().filter(|s| s.0 == name).count();
            assert!(
                share * 5 >= runs.len(),
                "runner {name} ran {share} of {} {kind}s: the work was not shared",
                runs.len()
            );
        }
    }
    for n in 0..ORDERS {
        let state = a
            .app()
            .store()
            .read_stream("process:Tally", &format!("o-{n}"))
            .await
            .unwrap();
        let last = state.last().unwrap();
        assert!(
            !last.payload.to_string().contains("\"out_of_order\":true"),
            "o-{n} saw its events out of order: {}",
            last.payload
        );
    }
}
