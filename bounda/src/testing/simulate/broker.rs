//! A simulation's broker: the sink its relays publish to and the source of the commands its
//! inputs deliver, failing by the schedule's seed. Publishes fail, an acknowledgement is lost
//! after the broker stored the message (the relay sends it again), the broker goes down for
//! minutes at a time; a command is delivered again after it was decided. It keeps one copy per
//! message id, as JetStream's duplicate window does, and the simulation checks what reached it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::app::App;
use crate::clock::{Clock, SimulatedClock};
use crate::ids::derived_id;
use crate::ingress::{Answer, Arrival, Ingested, Refusal};
use crate::relay::{Message, Sink, SinkError};
use crate::testing::simulate::Sent;

/// What the broker's sink says it publishes to: the relays the simulation checks.
pub(crate) const DESCRIBED: &str = "the simulation's broker";

/// How a publish goes, by the seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Not taken: the relay tries again.
    Fail,
    /// Stored, its acknowledgement lost on the way back: the relay sends it again.
    AckLost,
}

/// The fates of a message that meets a fault, for each of its publishes in order; later ones go
/// through. A command delivered under a key that meets one is delivered once more per fate.
const TABLE: [&[Fate]; 6] = {
    use Fate::{AckLost, Fail};
    [
        &[Fail],
        &[Fail, Fail],
        &[AckLost],
        &[AckLost],
        &[Fail, AckLost],
        &[AckLost, AckLost],
    ]
};

/// Of a hundred hours, how many start with the broker down, for 1 to 20 minutes.
const DOWN_HOURS: u64 = 10;

/// What a schedule's broker did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BrokerFaults {
    /// Publishes failed.
    pub failures: u64,
    /// Acknowledgements lost after the message was stored.
    pub acks_lost: u64,
    /// Publishes refused because the broker was down.
    pub down: u64,
    /// Messages published again and dropped as repeats of their id.
    pub repeats: u64,
    /// Commands delivered again.
    pub redeliveries: u64,
}

impl BrokerFaults {
    pub(crate) fn add(&mut self, other: &BrokerFaults) {
        self.failures += other.failures;
        self.acks_lost += other.acks_lost;
        self.down += other.down;
        self.repeats += other.repeats;
        self.redeliveries += other.redeliveries;
    }
}

/// A broker that fails by the schedule's seed. A simulation hands one to the app it builds
/// ([`Setup::broker`](super::Setup::broker)): give it to a relay as its sink, and deliver the
/// inputs that arrive from other services through [`deliver`](Broker::deliver). Every runner
/// and restart of a schedule shares it.
#[derive(Debug, Clone)]
pub struct Broker {
    inner: Arc<State>,
}

#[derive(Debug)]
struct State {
    seed: u64,
    per_cent: u64,
    clock: Arc<SimulatedClock>,
    kept: Mutex<Kept>,
    played: [AtomicU64; 5],
}

#[derive(Debug, Default)]
struct Kept {
    /// Publishes of each message id so far.
    invoked: HashMap<String, usize>,
    /// The ids stored, in the order first stored, with their stream and version.
    stored: Vec<(String, String, u64)>,
    ids: HashSet<String>,
    /// The first answer each delivered key got.
    answers: HashMap<String, Answer>,
}

impl Broker {
    /// A broker for `seed`, meeting faults on `per_cent` messages in a hundred, down at times
    /// on `clock` when `per_cent` is not 0.
    pub(crate) fn new(seed: u64, per_cent: u64, clock: Arc<SimulatedClock>) -> Broker {
        Broker {
            inner: Arc::new(State {
                seed,
                per_cent: per_cent.min(100),
                clock,
                kept: Mutex::default(),
                played: Default::default(),
            }),
        }
    }

    fn kept(&self) -> MutexGuard<'_, Kept> {
        self.inner
            .kept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn fates(&self, key: &str) -> &'static [Fate] {
        let hash = crate::hash::fnv1a(&format!("{}:broker:{key}", self.inner.seed));
        let hash = hash ^ (hash >> 29);
        if hash % 100 >= self.inner.per_cent {
            return &[];
        }
        TABLE[(hash / 100 % TABLE.len() as u64) as usize]
    }

    /// Whether the broker is down now: some hours start with it down for a few minutes.
    fn down(&self) -> bool {
        if self.inner.per_cent == 0 {
            return false;
        }
        let now = self.inner.clock.now().as_millis();
        let hour = now.div_euclid(3_600_000);
        let hash = crate::hash::fnv1a(&format!("{}:down:{hour}", self.inner.seed));
        let minutes = i64::try_from(hash / 100 % 20 + 1).unwrap_or(1);
        hash % 100 < DOWN_HOURS && now.rem_euclid(3_600_000) < minutes * 60_000
    }

    fn count(&self, fault: usize) {
        self.inner.played[fault].fetch_add(1, Ordering::Relaxed);
    }

    /// Keeps `message` unless its id is kept: one copy per id.
    fn store(&self, message: &Message) {
        let mut kept = self.kept();
        if kept.ids.insert(message.id().to_owned()) {
            let stream = format!("{}:{}", message.aggregate_type, message.aggregate_id);
            kept.stored
                .push((message.id().to_owned(), stream, message.version));
        } else {
            drop(kept);
            self.count(3);
        }
    }

    /// Delivers `arrival` to `app`'s ingress as a broker would: again after a store failure,
    /// and again after it was decided when its key's fate loses the acknowledgement. Every
    /// delivery after the first must get the first's answer, replayed. The first answer, as
    /// an input's answer: a rejection is one, a refusal a finding.
    pub async fn deliver(&self, app: &App, arrival: &Arrival) -> Result<Sent, String> {
        let first = self.until_decided(app, arrival).await?;
        for _ in self.fates(&arrival.key) {
            self.count(4);
            let again = self.until_decided(app, arrival).await?;
            if !again.replayed || again.answer != first.answer {
                return Err(format!(
                    "command under key `{}` delivered again was decided again: {:?}, then {:?}",
                    arrival.key, first.answer, again
                ));
            }
        }
        self.kept()
            .answers
            .entry(arrival.key.clone())
            .or_insert_with(|| first.answer.clone());
        Ok(match &first.answer {
            Answer::Decided { .. } => Sent::Accepted,
            Answer::Rejected { code, message, .. } => Sent::Rejected(format!("{code}: {message}")),
        })
    }

    /// Delivers `arrival` until the store takes it: a store failing on purpose redelivers.
    async fn until_decided(&self, app: &App, arrival: &Arrival) -> Result<Ingested, String> {
        for _ in 0..100 {
            match app.ingest(arrival).await {
                Ok(ingested) => return Ok(ingested),
                Err(Refusal::Failed(_)) => continue,
                Err(refusal) => {
                    return Err(format!("the ingress refused `{}`: {refusal}", arrival.key));
                }
            }
        }
        Err(format!("the ingress never took `{}`", arrival.key))
    }

    /// What it did so far.
    pub(crate) fn played(&self) -> BrokerFaults {
        let [failures, acks_lost, down, repeats, redeliveries] =
            std::array::from_fn(|i| self.inner.played[i].load(Ordering::Relaxed));
        BrokerFaults {
            failures,
            acks_lost,
            down,
            repeats,
            redeliveries,
        }
    }

    /// What the simulation checks at rest: every event the broker's relays take reached it,
    /// each stream's in version order; each delivered command's key decided only the events of
    /// its first answer.
    pub(crate) async fn holds(&self, app: &App) -> Result<(), String> {
        let relays: Vec<_> = app
            .relays()
            .filter(|relay| relay.sink() == DESCRIBED)
            .collect();
        let events = super::checks::every_event(app).await?;
        let (stored, answers) = {
            let kept = self.kept();
            (kept.stored.clone(), kept.answers.clone())
        };
        if !relays.is_empty() {
            let reached: HashSet<&str> = stored.iter().map(|(id, _, _)| id.as_str()).collect();
            if let Some(missed) = events.iter().find(|event| {
                relays.iter().any(|r| r.takes(event)) && !reached.contains(event.id.as_str())
            }) {
                return Err(format!(
                    "event {} ({} {}:{} v{}) never reached the broker",
                    missed.id,
                    missed.event_type,
                    missed.aggregate_type,
                    missed.aggregate_id,
                    missed.version
                ));
            }
            let mut last: HashMap<&str, u64> = HashMap::new();
            for (id, stream, version) in &stored {
                let before = last.insert(stream, *version).unwrap_or(0);
                if *version <= before {
                    return Err(format!(
                        "the broker got {stream} v{version} ({id}) after v{before}: out of order"
                    ));
                }
            }
        }
        for (key, answer) in &answers {
            let command = derived_id(&["ingress", key]);
            let decided: Vec<&str> = events
                .iter()
                .filter(|event| event.metadata.causation_id == command)
                .map(|event| event.id.as_str())
                .collect();
            let answered: Vec<&str> = match answer {
                Answer::Decided { event_ids, .. } => event_ids.iter().map(String::as_str).collect(),
                Answer::Rejected { .. } => Vec::new(),
            };
            if decided != answered {
                return Err(format!(
                    "the command delivered under key `{key}` decided {decided:?}, not its answer's \
                     {answered:?}: it was decided more than once"
                ));
            }
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl Sink for Broker {
    fn describe(&self) -> String {
        DESCRIBED.to_owned()
    }

    async fn publish(&self, message: &Message) -> Result<(), SinkError> {
        if self.down() {
            self.count(2);
            return Err(SinkError::Unavailable(anyhow::anyhow!(
                "the broker is down"
            )));
        }
        let n = {
            let mut kept = self.kept();
            let n = kept.invoked.entry(message.id().to_owned()).or_insert(0);
            *n += 1;
            *n
        };
        match self.fates(message.id()).get(n - 1) {
            Some(Fate::Fail) => {
                self.count(0);
                Err(SinkError::Unavailable(anyhow::anyhow!(
                    "planned failure of publish {} (try {n})",
                    message.id()
                )))
            }
            Some(Fate::AckLost) => {
                self.store(message);
                self.count(1);
                Err(SinkError::Unavailable(anyhow::anyhow!(
                    "planned loss of the acknowledgement of {} (try {n})",
                    message.id()
                )))
            }
            None => {
                self.store(message);
                Ok(())
            }
        }
    }
}
