//! Issue 45: the simulation with a broker: every event goes out through a relay to a broker
//! that fails publishes, loses acknowledgements after storing and goes down for minutes, and the
//! accounts' commands arrive through it, delivered again after they were decided. The framework
//! checks that every event reaches the broker, each stream in order, and that each delivered
//! command decides once; the domain's invariants judge the rest.

use bounda::ingress::{Arrival, Ingress};
use bounda::relay::Relay;
use bounda::testing::simulate::{Broker, Input, Rng, Sent, SimRng, Simulation};
use bounda::{App, Instant};

use super::domain::Request;
use super::inputs::Outside;

/// An outside input, its commands arriving through the broker under a key of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    pub input: Outside,
    /// The message's id: its idempotency key.
    pub id: u64,
}

impl Delivered {
    fn of(input: Outside, rng: &mut SimRng) -> Delivered {
        Delivered {
            input,
            id: rng.random(),
        }
    }

    /// The command as it arrives at `now`.
    fn arrival(&self, now: Instant) -> Option<Arrival> {
        let ask = self.input.ask(now)?;
        let request = Request {
            account_id: self.input.account(),
            ask,
        };
        Some(Arrival {
            name: "Request".to_owned(),
            key: format!("m-{}", self.id),
            payload: serde_json::to_vec(&request).ok()?,
            correlation_id: None,
        })
    }
}

impl Input for Delivered {
    fn first(rng: &mut SimRng) -> Vec<Delivered> {
        Outside::first(rng)
            .into_iter()
            .map(|input| Delivered::of(input, rng))
            .collect()
    }

    fn draw(rng: &mut SimRng) -> Delivered {
        let input = Outside::draw(rng);
        Delivered::of(input, rng)
    }

    async fn send(&self, app: &App) -> Result<Sent, String> {
        match self.arrival(app.clock().now()) {
            Some(arrival) => {
                let broker = app
                    .port::<Broker>()
                    .map_err(|e| format!("the broker: {e}"))?;
                broker.deliver(app, &arrival).await
            }
            None => self.input.send(app).await,
        }
    }
}

/// The domain's app, every event relayed to the schedule's broker, its requests taken from it.
pub fn relayed() -> Simulation<Delivered> {
    let simulation = Simulation::new(super::Database::new, |setup| {
        super::app(setup)
            .relay(Relay::new("ledger", setup.broker()))
            .ingress(Ingress::new().command::<Request>())
    });
    super::judged_by_the_domain(simulation).replay_as("relayed()")
}

#[tokio::test]
async fn every_event_reaches_a_failing_broker_in_order_and_each_command_decides_once() {
    let report = relayed().check(1..=20).await;
    println!("{report}");
    let broker = report.broker;
    assert!(
        [
            broker.failures,
            broker.acks_lost,
            broker.down,
            broker.repeats,
            broker.redeliveries
        ]
        .iter()
        .all(|n| *n > 0),
        "every kind of broker fault was played: {report}"
    );
}
