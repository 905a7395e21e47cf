//! The reference model: what the runtime should have done, computed without SQLite, claims or
//! passes. Time is milliseconds; work is a list of timed items run in order, as `TestApp` runs
//! them (at each moment: event steps, then due scheduled work; a failed run again after its
//! back-off, which `run_until_idle` waits for).
//!
//! Left to the runtime's own tests, and kept out of the schedules by the driver: a deadline due
//! while an event step of its instance is in back-off (it waits ten worker rounds), and events
//! arriving while work is pending (commands come when the app has caught up).

use std::collections::{BTreeMap, HashMap};

use bounda::testing::simulate::{Fate, PortFaults};

use super::domain::{self, Ask};

const SECOND: i64 = 1_000;
/// The fixed back-off of every retried run, and the runs before a letter.
pub const BACKOFF: i64 = SECOND;
pub const MAX_ATTEMPTS: usize = 3;

/// An instance's status, as the runtime names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    Started,
    Completed,
    Failed,
    TimedOut,
}

/// A process instance, as the model has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    pub status: Status,
    pub paid: u64,
    pub links: u32,
    pub hits: u32,
    pub chain: Option<i64>,
    pub movable: Option<i64>,
    pub timeout_at: i64,
    /// (moment, field) of every deadline reached, in order.
    pub reached: Vec<(i64, &'static str)>,
    /// Events parked behind a failure: version and stored time.
    pub parked: Vec<(u64, i64)>,
    /// Given up by a discarded letter: nothing runs for it again.
    pub given_up: bool,
    /// What failed: an event's version, or a deadline's field and moment.
    failed: Option<Step>,
}

/// A step of an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Event(u64),
    Deadline(&'static str, i64),
}

/// An account: its events (type, time), and its instance.
#[derive(Debug, Clone, Default)]
pub struct Account {
    pub opened: bool,
    pub cancelled: bool,
    pub events: Vec<(&'static str, i64)>,
    pub instance: Option<Instance>,
    /// The amount of each payment, by version.
    amounts: HashMap<u64, u64>,
    /// The target of each move, by version.
    moves: HashMap<u64, Option<i64>>,
}

/// A dead letter, as the model has it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Letter {
    pub process: bool,
    pub account: String,
    pub retried: bool,
    pub discarded: bool,
    /// For a policy letter, the payment's version.
    version: u64,
}

/// Work due at a moment.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Item {
    /// The process handles event `version` of `account`; `retry` once it failed.
    EventStep {
        account: String,
        version: u64,
        retry: bool,
    },
    /// A deadline step of `account` failed and runs again.
    DeadlineRetry {
        account: String,
        field: &'static str,
        moment: i64,
    },
    /// The acknowledgement of payment `version`.
    Ack {
        account: String,
        version: u64,
        retry: bool,
    },
    /// The ping a chain link scheduled.
    Ping { account: String },
}

impl Item {
    fn is_retry(&self) -> bool {
        matches!(
            self,
            Item::EventStep { retry: true, .. }
                | Item::DeadlineRetry { .. }
                | Item::Ack { retry: true, .. }
        )
    }

    /// Event steps run before scheduled work at one moment.
    fn rank(&self) -> u8 {
        match self {
            Item::EventStep { .. } => 0,
            _ => 1,
        }
    }
}

/// The next work: its moment, rank and sequence (for order), and the queued item's index or
/// the account whose deadline it is.
type Next = (i64, u8, u64, Option<usize>, Option<String>);

/// The whole model.
#[derive(Debug, Clone)]
pub struct Model {
    pub seed: u64,
    pub now: i64,
    pub accounts: BTreeMap<String, Account>,
    pub letters: Vec<Letter>,
    items: Vec<(i64, u64, Item)>,
    sequence: u64,
    invoked: HashMap<String, usize>,
}

impl Model {
    pub fn new(seed: u64, now: i64) -> Model {
        Model {
            seed,
            now,
            accounts: BTreeMap::new(),
            letters: Vec::new(),
            items: Vec::new(),
            sequence: 0,
            invoked: HashMap::new(),
        }
    }

    /// The fate of the next invocation of run `key`, counted.
    fn invoke(&mut self, key: &str) -> Fate {
        let n = self.invoked.entry(key.to_owned()).or_insert(0);
        *n += 1;
        PortFaults::fates(self.seed, domain::PORT_FAULTS, key)
            .get(*n - 1)
            .copied()
            .unwrap_or(Fate::Ok)
    }

    /// One invocation, as a letter's retry makes it.
    fn once(&mut self, key: &str) -> bool {
        self.invoke(key) == Fate::Ok
    }

    fn push(&mut self, at: i64, item: Item) {
        self.sequence += 1;
        self.items.push((at, self.sequence, item));
    }

    /// A command from outside, at `now`: whether it was accepted.
    pub fn dispatch(&mut self, account: &str, ask: &Ask) -> bool {
        let now = self.now;
        let acct = self.accounts.entry(account.to_owned()).or_default();
        let open = acct.opened && !acct.cancelled;
        let kind = match ask {
            Ask::Open if acct.opened => return false,
            Ask::Open => "Opened",
            _ if !open => return false,
            Ask::Pay(_) => "Paid",
            Ask::Move(_) => "Moved",
            Ask::Cancel => "Cancelled",
            Ask::Archive => "Archived",
        };
        acct.events.push((kind, now));
        let version = acct.events.len() as u64;
        match ask {
            Ask::Open => acct.opened = true,
            Ask::Cancel => acct.cancelled = true,
            Ask::Pay(amount) => {
                acct.amounts.insert(version, *amount);
            }
            Ask::Move(at) => {
                acct.moves.insert(version, at.map(|at| at.as_millis()));
            }
            Ask::Archive => {}
        }
        if kind != "Archived" {
            self.push(
                now,
                Item::EventStep {
                    account: account.to_owned(),
                    version,
                    retry: false,
                },
            );
        }
        if kind == "Paid" {
            self.push(
                now + domain::ACK_DELAY.as_millis() as i64,
                Item::Ack {
                    account: account.to_owned(),
                    version,
                    retry: false,
                },
            );
        }
        true
    }

    /// The earliest deadline of `account`'s instance that may run, if it is running.
    fn next_deadline(&self, account: &str) -> Option<(i64, &'static str)> {
        let instance = self.accounts.get(account)?.instance.as_ref()?;
        if instance.status != Status::Started || instance.given_up {
            return None;
        }
        pending(instance).into_iter().next()
    }

    /// The next item and its moment: a queued one, or a deadline.
    fn next(&self) -> Option<Next> {
        let queued = self
            .items
            .iter()
            .enumerate()
            .map(|(index, (at, seq, item))| (*at, item.rank(), *seq, Some(index), None));
        let deadlines = self.accounts.keys().filter_map(|account| {
            let busy = self.items.iter().any(|(_, _, item)| {
                matches!(item, Item::DeadlineRetry { account: a, .. } if a == account)
            });
            if busy {
                return None;
            }
            self.next_deadline(account)
                .map(|(at, _)| (at, 1, 0, None, Some(account.clone())))
        });
        queued
            .chain(deadlines)
            .min_by_key(|(at, rank, seq, _, account)| (*at, *rank, *seq, account.clone()))
    }

    /// Runs everything due up to `until`, moving the clock as it goes.
    fn run_to(&mut self, until: i64) {
        while let Some((at, _, _, index, account)) = self.next() {
            if at > until {
                break;
            }
            self.now = self.now.max(at);
            match (index, account) {
                (Some(index), _) => {
                    let (_, _, item) = self.items.remove(index);
                    self.run_item(item);
                }
                (None, Some(account)) => {
                    if let Some((moment, field)) = self.next_deadline(&account) {
                        self.deadline(&account, field, moment);
                    }
                }
                (None, None) => unreachable!("an item is queued or a deadline"),
            }
        }
    }

    /// `TestApp::advance`: everything due on the way, in order, then the clock at the target.
    pub fn advance(&mut self, by: i64) {
        self.settle();
        let target = self.now + by;
        self.run_to(target);
        self.now = self.now.max(target);
        self.settle();
    }

    /// The clock moves while nothing runs.
    pub fn outage(&mut self, by: i64) {
        self.now += by;
    }

    /// `TestApp::run_until_idle`: what is due now, and the retries pending, waited for.
    pub fn settle(&mut self) {
        loop {
            self.run_to(self.now);
            let last_retry = self
                .items
                .iter()
                .filter(|(_, _, item)| item.is_retry())
                .map(|(at, _, _)| *at)
                .max();
            let Some(last_retry) = last_retry else { break };
            let Some((next, ..)) = self.next() else { break };
            if next > last_retry {
                break;
            }
            self.now = self.now.max(next);
        }
    }

    fn run_item(&mut self, item: Item) {
        match item {
            Item::EventStep {
                account, version, ..
            } => self.event_step(&account, version),
            Item::DeadlineRetry {
                account,
                field,
                moment,
            } => self.deadline(&account, field, moment),
            Item::Ack {
                account, version, ..
            } => self.ack(&account, version),
            Item::Ping { account } => self.append(&account, "Pinged"),
        }
    }

    fn append(&mut self, account: &str, kind: &'static str) {
        let now = self.now;
        let acct = self.accounts.entry(account.to_owned()).or_default();
        acct.events.push((kind, now));
    }

    fn ack(&mut self, account: &str, version: u64) {
        let key = format!("ack:{account}:{version}");
        match self.invoke(&key) {
            Fate::Ok => self.append(account, "Acknowledged"),
            Fate::Terminal => self.letter(false, account, version),
            Fate::Fail | Fate::Panic | Fate::Hang => {
                if self.invoked[&key] >= MAX_ATTEMPTS {
                    self.letter(false, account, version);
                } else {
                    let at = self.now + BACKOFF;
                    self.push(
                        at,
                        Item::Ack {
                            account: account.to_owned(),
                            version,
                            retry: true,
                        },
                    );
                }
            }
        }
    }

    fn letter(&mut self, process: bool, account: &str, version: u64) {
        self.letters.push(Letter {
            process,
            account: account.to_owned(),
            retried: false,
            discarded: false,
            version,
        });
    }

    /// The process handles event `version` of `account` (a first try or a retry).
    fn event_step(&mut self, account: &str, version: u64) {
        let acct = &self.accounts[account];
        let (kind, stored) = acct.events[version as usize - 1];
        let instance = acct.instance.clone();
        match instance.as_ref().map(|i| (i.status, i.given_up)) {
            None if kind != "Opened" => return,
            Some((_, true)) => return,
            Some((Status::Completed | Status::TimedOut, _)) => return,
            Some((Status::Failed, _)) => {
                let instance = self.instance(account);
                if !instance.parked.iter().any(|(v, _)| *v == version) {
                    instance.parked.push((version, stored));
                }
                return;
            }
            _ => {}
        }
        let key = format!("on:{account}:{version}");
        match self.invoke(&key) {
            Fate::Ok => self.apply_event(account, version),
            Fate::Terminal => self.fail(account, Step::Event(version)),
            Fate::Fail | Fate::Panic | Fate::Hang => {
                if self.invoked[&key] >= MAX_ATTEMPTS {
                    self.fail(account, Step::Event(version));
                } else {
                    let at = self.now + BACKOFF;
                    self.push(
                        at,
                        Item::EventStep {
                            account: account.to_owned(),
                            version,
                            retry: true,
                        },
                    );
                }
            }
        }
    }

    fn instance(&mut self, account: &str) -> &mut Instance {
        self.accounts
            .get_mut(account)
            .and_then(|acct| acct.instance.as_mut())
            .expect("an instance")
    }

    /// The effect of event `version`'s handler.
    fn apply_event(&mut self, account: &str, version: u64) {
        let acct = self.accounts.get_mut(account).expect("an account");
        let (kind, stored) = acct.events[version as usize - 1];
        match kind {
            "Opened" => {
                // A start retried after a failure keeps what was parked behind it.
                let parked = acct
                    .instance
                    .take()
                    .map(|instance| instance.parked)
                    .unwrap_or_default();
                acct.instance = Some(Instance {
                    status: Status::Started,
                    paid: 0,
                    links: 0,
                    hits: 0,
                    chain: Some(stored + domain::CHAIN_EVERY.as_millis() as i64),
                    movable: None,
                    timeout_at: stored + domain::LIFETIME.as_millis() as i64,
                    reached: Vec::new(),
                    parked,
                    given_up: false,
                    failed: None,
                });
            }
            "Paid" => {
                let amount = acct.amounts[&version];
                let instance = acct.instance.as_mut().expect("an instance");
                instance.paid += amount;
            }
            "Moved" => {
                let at = acct.moves[&version];
                let instance = acct.instance.as_mut().expect("an instance");
                instance.movable = at;
            }
            "Cancelled" => {
                let instance = acct.instance.as_mut().expect("an instance");
                instance.status = Status::Completed;
            }
            _ => {}
        }
    }

    /// Deadline `field` of `account` due at `moment` runs (a first try or a retry).
    fn deadline(&mut self, account: &str, field: &'static str, moment: i64) {
        if field == "timeout" {
            let instance = self.instance(account);
            instance.reached.push((moment, field));
            instance.status = Status::TimedOut;
            return;
        }
        let key = format!("at:{account}:{field}:{moment}");
        let fate = self.invoke(&key);
        match fate {
            Fate::Ok => self.apply_deadline(account, field, moment),
            Fate::Terminal => self.fail(account, Step::Deadline(field, moment)),
            Fate::Fail | Fate::Panic | Fate::Hang => {
                if self.invoked[&key] >= MAX_ATTEMPTS {
                    self.fail(account, Step::Deadline(field, moment));
                } else {
                    let at = self.now + BACKOFF;
                    self.push(
                        at,
                        Item::DeadlineRetry {
                            account: account.to_owned(),
                            field,
                            moment,
                        },
                    );
                }
            }
        }
    }

    fn apply_deadline(&mut self, account: &str, field: &'static str, moment: i64) {
        let now = self.now;
        let instance = self.instance(account);
        instance.reached.push((moment, field));
        match field {
            "chain" => {
                instance.links += 1;
                instance.chain = (instance.links < domain::CHAIN_LINKS)
                    .then(|| moment + domain::CHAIN_EVERY.as_millis() as i64);
                let at = now + domain::PING_DELAY.as_millis() as i64;
                self.push(
                    at,
                    Item::Ping {
                        account: account.to_owned(),
                    },
                );
            }
            "movable" => {
                instance.hits += 1;
                instance.movable = None;
            }
            _ => unreachable!("a deadline of `Watch`"),
        }
    }

    fn fail(&mut self, account: &str, step: Step) {
        let acct = self.accounts.get_mut(account).expect("an account");
        // A start that fails leaves an instance that failed before it started.
        let instance = acct.instance.get_or_insert_with(|| Instance {
            status: Status::Failed,
            paid: 0,
            links: 0,
            hits: 0,
            chain: None,
            movable: None,
            timeout_at: i64::MAX,
            reached: Vec::new(),
            parked: Vec::new(),
            given_up: false,
            failed: None,
        });
        instance.status = Status::Failed;
        instance.failed = Some(step);
        self.letter(true, account, 0);
    }

    /// The failed letter `retry_letter` and `discard_letter` pick for `account`: its process
    /// letter first, then its policy letters by payment.
    pub fn pick(&self, account: &str) -> Option<usize> {
        self.letters
            .iter()
            .enumerate()
            .filter(|(_, l)| l.account == account && !l.retried && !l.discarded)
            .min_by_key(|(_, l)| (!l.process, l.version))
            .map(|(index, _)| index)
    }

    /// An operator discards letter `index`.
    pub fn discard(&mut self, index: usize) {
        self.letters[index].discarded = true;
        if self.letters[index].process {
            let account = self.letters[index].account.clone();
            let instance = self.instance(&account);
            instance.given_up = true;
        }
    }

    /// An operator retries letter `index`: whether it went through.
    pub fn retry(&mut self, index: usize) -> bool {
        let letter = self.letters[index].clone();
        if !letter.process {
            let key = format!("ack:{}:{}", letter.account, letter.version);
            if !self.once(&key) {
                return false;
            }
            self.letters[index].retried = true;
            self.append(&letter.account, "Acknowledged");
            return true;
        }
        let account = letter.account;
        let failed = self.instance(&account).failed;
        // The failed step, once.
        let ok = match failed {
            Some(Step::Event(version)) => {
                let ok = self.once(&format!("on:{account}:{version}"));
                if ok {
                    self.instance(&account).status = Status::Started;
                    self.apply_event(&account, version);
                }
                ok
            }
            Some(Step::Deadline(field, moment)) => {
                let ok = self.once(&format!("at:{account}:{field}:{moment}"));
                if ok {
                    self.instance(&account).status = Status::Started;
                    self.apply_deadline(&account, field, moment);
                }
                ok
            }
            None => false,
        };
        if !ok {
            return false;
        }
        self.letters[index].retried = true;
        self.instance(&account).failed = None;
        // The parked events in order, deadlines due before each first.
        let parked = std::mem::take(&mut self.instance(&account).parked);
        for (position, (version, stored)) in parked.iter().enumerate() {
            while let Some((moment, field)) = self.next_deadline(&account) {
                if moment > *stored {
                    break;
                }
                if !self.drain_deadline(&account, field, moment) {
                    self.instance(&account).parked = parked[position..].to_vec();
                    return true;
                }
            }
            if self.instance(&account).status != Status::Started {
                // Ended while draining: what is left stays parked, never handled.
                self.instance(&account).parked = parked[position..].to_vec();
                break;
            }
            let key = format!("on:{account}:{version}");
            if self.once(&key) {
                self.apply_event(&account, *version);
            } else {
                self.fail(&account, Step::Event(*version));
                self.instance(&account).parked = parked[position + 1..].to_vec();
                return true;
            }
        }
        true
    }

    /// A deadline run while draining: once, failing the instance again if it fails.
    fn drain_deadline(&mut self, account: &str, field: &'static str, moment: i64) -> bool {
        if field == "timeout" {
            let instance = self.instance(account);
            instance.reached.push((moment, field));
            instance.status = Status::TimedOut;
            return true;
        }
        if self.once(&format!("at:{account}:{field}:{moment}")) {
            self.apply_deadline(account, field, moment);
            true
        } else {
            self.fail(account, Step::Deadline(field, moment));
            false
        }
    }

    /// Whether a deadline of `account` is due within `window` of now: the driver keeps
    /// commands to that account away from it.
    pub fn deadline_near(&self, account: &str, window: i64) -> Option<i64> {
        self.next_deadline(account)
            .map(|(at, _)| at)
            .filter(|at| *at <= self.now + window)
    }
}

/// An instance's pending deadlines, soonest first (ties by name), each (field, moment) once.
fn pending(instance: &Instance) -> Vec<(i64, &'static str)> {
    let mut pending: Vec<(i64, &'static str)> = [
        (instance.chain, "chain"),
        (instance.movable, "movable"),
        (Some(instance.timeout_at), "timeout"),
    ]
    .into_iter()
    .filter_map(|(at, field)| at.map(|at| (at, field)))
    .filter(|pair| !instance.reached.contains(pair))
    .collect();
    pending.sort();
    pending
}
