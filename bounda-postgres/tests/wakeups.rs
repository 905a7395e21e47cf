//! Wake-ups past one machine (issue 12): a runner idle between polls wakes when another process
//! appends an event, or schedules an entry earlier than any pending, instead of at its next poll.
//! The runners here poll every minute; each test gives them five seconds.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use std::time::Duration as Wall;

use bounda::prelude::*;
use bounda::store::Store;
use bounda_postgres::{Options, PostgresStore, testing};

#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Ball)]
pub struct Pinged {
    pub ball_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Ball)]
pub struct Ponged {
    pub ball_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, Events)]
pub enum BallEvent {
    Pinged(Pinged),
    Ponged(Ponged),
}

#[derive(Debug, Default)]
pub struct Ball;

impl Aggregate for Ball {
    const NAME: &'static str = "Ball";
    const ID_FIELD: &'static str = "ball_id";
    type Event = BallEvent;
    fn apply(&mut self, _: &BallEvent) {}
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ping {
    pub ball_id: String,
}

#[command]
impl Command for Ping {
    const NAME: &'static str = "Ping";
    type Aggregate = Ball;
    type Rejection = NoRejection;
    fn aggregate_id(&self) -> &str {
        &self.ball_id
    }
    fn decide(&self, _: &Ball) -> Decision<Self> {
        Ok(vec![
            Pinged {
                ball_id: self.ball_id.clone(),
            }
            .into(),
        ])
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pong {
    pub ball_id: String,
}

#[command]
impl Command for Pong {
    const NAME: &'static str = "Pong";
    type Aggregate = Ball;
    type Rejection = NoRejection;
    fn aggregate_id(&self) -> &str {
        &self.ball_id
    }
    fn decide(&self, _: &Ball) -> Decision<Self> {
        Ok(vec![
            Ponged {
                ball_id: self.ball_id.clone(),
            }
            .into(),
        ])
    }
}

#[policy]
async fn pong_on_pinged(cx: Reaction<'_, Pinged>) -> Result<()> {
    let ball_id = cx.event().ball_id.clone();
    cx.send(Pong { ball_id }).await?;
    Ok(())
}

/// Two processes' stores on one schema.
async fn two_processes(test: &str) -> (PostgresStore, PostgresStore) {
    let (url, schema) = testing::schema(test).unwrap_or_else(|how| panic!("{how}"));
    let options = Options {
        schema,
        ..Options::default()
    };
    let runner = PostgresStore::connect(&url, options.clone()).await.unwrap();
    let other = PostgresStore::connect(&url, options).await.unwrap();
    (runner, other)
}

/// Runs every registered handler on `store`, polling once a minute, until the returned sender
/// is dropped; gives it a moment to make its first pass and go idle.
async fn run_idle(store: PostgresStore) -> tokio::sync::oneshot::Sender<()> {
    let mut config = bounda::config::Config::default();
    config.dispatcher.poll_interval = minutes(1);
    let app = App::builder(store).config(config).build().await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        app.run_until(async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    tokio::time::sleep(Wall::from_millis(500)).await;
    stop
}

/// Waits up to five seconds for `ball`'s stream to hold `types`.
async fn until_stream(store: &PostgresStore, ball: &str, types: &[&str]) {
    let deadline = std::time::Instant::now() + Wall::from_secs(5);
    loop {
        let events = store.read_stream("Ball", ball).await.unwrap();
        let seen: Vec<&str> = events.iter().map(|e| e.event_type.as_str()).collect();
        if seen == types {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "after 5 s (the runner polls once a minute) `{ball}` holds {seen:?}, not {types:?}"
        );
        tokio::time::sleep(Wall::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_runner_wakes_when_another_process_appends() {
    let (runner, other) = two_processes("wake_append").await;
    let stop = run_idle(runner).await;
    let app = App::builder(other.clone())
        .only_listed()
        .command::<Ping>()
        .build()
        .await
        .unwrap();
    app.dispatch(Ping {
        ball_id: "b-1".into(),
    })
    .await
    .unwrap();
    until_stream(&other, "b-1", &["Pinged", "Ponged"]).await;
    drop(stop);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_runner_wakes_for_an_entry_another_process_schedules_before_its_next_poll() {
    let (runner, other) = two_processes("wake_schedule").await;
    let stop = run_idle(runner).await;
    let app = App::builder(other.clone())
        .only_listed()
        .command::<Ping>()
        .build()
        .await
        .unwrap();
    let options = bounda::DispatchOptions::default().delay(seconds(1));
    app.dispatch_with(
        Ping {
            ball_id: "b-2".into(),
        },
        options,
    )
    .await
    .unwrap();
    until_stream(&other, "b-2", &["Pinged", "Ponged"]).await;
    drop(stop);
}

// Issue 39: the listening connection goes to `Options::listen_url` when it names an address
// other than the pool's (behind a pooler in transaction mode, the server's own): with the
// pool's address cut off, another process's append is still heard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listening_connection_goes_to_its_own_address() {
    let (url, schema) = testing::schema("listen_url").unwrap_or_else(|how| panic!("{how}"));
    let proxy = testing::Proxy::start(testing::address().unwrap())
        .await
        .unwrap();
    let options = |listen_url: Option<String>| Options {
        schema: schema.clone(),
        listen_url,
        ..Options::default()
    };
    let listening = PostgresStore::connect(
        &testing::url_via(proxy.address()).unwrap(),
        options(Some(url.clone())),
    )
    .await
    .unwrap();
    let writer = PostgresStore::connect(&url, options(None)).await.unwrap();
    let wakeups = listening.wakeups().await.unwrap();
    // A new listening connection counts as one notification: it may have missed writes.
    tokio::time::timeout(Wall::from_secs(10), wakeups.next())
        .await
        .expect("the listening connection is made");
    proxy.cut();
    let append = bounda::store::Append {
        aggregate_type: "Ball".into(),
        aggregate_id: "b-1".into(),
        expected_version: 0,
        events: vec![bounda::store::NewEvent {
            id: "e-1".into(),
            event_type: "Pinged".into(),
            payload: serde_json::json!({ "ball_id": "b-1" }),
            timestamp: Instant::from_millis(0).unwrap(),
            metadata: bounda::store::Metadata::of_command("c"),
        }],
    };
    writer
        .commit(&bounda::store::WriteSet {
            appends: vec![append],
            ..Default::default()
        })
        .await
        .unwrap();
    tokio::time::timeout(Wall::from_secs(10), wakeups.next())
        .await
        .expect("the append was heard on the listening address, the pool's cut off");
    proxy.heal();
}
