//! The simulated app: an account opened, paid, moved, cancelled or archived from outside; the
//! `Watch` process with a chain that re-arms itself, a deadline moved by events, and the
//! timeout; a delayed policy; a scheduled command. Every handler asks the plan how its run goes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bounda::prelude::*;

/// How long the chain waits between links, and how many links it has.
pub const CHAIN_EVERY: Duration = hours(24);
pub const CHAIN_LINKS: u32 = 5;
/// The process's lifetime.
pub const LIFETIME: Duration = days(30);
/// How long after a payment its acknowledgement runs.
pub const ACK_DELAY: Duration = hours(3);
/// How long after a chain link its ping runs.
pub const PING_DELAY: Duration = hours(2);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = Account)]
pub struct Opened {
    pub account_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = Account)]
pub struct Paid {
    pub account_id: String,
    pub amount: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = Account)]
pub struct Moved {
    pub account_id: String,
    pub at: Option<Instant>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = Account)]
pub struct Cancelled {
    pub account_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = Account)]
pub struct Archived {
    pub account_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = Account)]
pub struct Acknowledged {
    pub account_id: String,
    pub amount: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = Account)]
pub struct Pinged {
    pub account_id: String,
    pub link: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Events)]
pub enum AccountEvent {
    Opened(Opened),
    Paid(Paid),
    Moved(Moved),
    Cancelled(Cancelled),
    Archived(Archived),
    Acknowledged(Acknowledged),
    Pinged(Pinged),
}

#[derive(Debug, Default)]
pub struct Account {
    pub opened: bool,
    pub cancelled: bool,
}

impl Aggregate for Account {
    const NAME: &'static str = "Account";
    const ID_FIELD: &'static str = "account_id";
    type Event = AccountEvent;

    fn apply(&mut self, event: &AccountEvent) {
        match event {
            AccountEvent::Opened(_) => self.opened = true,
            AccountEvent::Cancelled(_) => self.cancelled = true,
            _ => {}
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Rejection)]
pub enum Refused {
    AlreadyOpen,
    NotOpen,
}

/// What outside commands ask of an account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ask {
    Open,
    Pay(u64),
    Move(Option<Instant>),
    Cancel,
    Archive,
}

/// A command from outside.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    pub account_id: String,
    pub ask: Ask,
}

#[command]
impl Command for Request {
    const NAME: &'static str = "Request";
    type Aggregate = Account;
    type Rejection = Refused;

    fn aggregate_id(&self) -> &str {
        &self.account_id
    }

    fn decide(&self, account: &Account) -> Decision<Self> {
        let account_id = self.account_id.clone();
        let open = account.opened && !account.cancelled;
        Ok(match &self.ask {
            Ask::Open if account.opened => return Err(Refused::AlreadyOpen),
            Ask::Open => vec![Opened { account_id }.into()],
            _ if !open => return Err(Refused::NotOpen),
            Ask::Pay(amount) => vec![
                Paid {
                    account_id,
                    amount: *amount,
                }
                .into(),
            ],
            Ask::Move(at) => vec![
                Moved {
                    account_id,
                    at: *at,
                }
                .into(),
            ],
            Ask::Cancel => vec![Cancelled { account_id }.into()],
            Ask::Archive => vec![Archived { account_id }.into()],
        })
    }
}

/// Sent by the delayed policy.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Acknowledge {
    pub account_id: String,
    pub amount: u64,
}

#[command]
impl Command for Acknowledge {
    const NAME: &'static str = "Acknowledge";
    type Aggregate = Account;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.account_id
    }

    fn decide(&self, _: &Account) -> Decision<Self> {
        Ok(vec![
            Acknowledged {
                account_id: self.account_id.clone(),
                amount: self.amount,
            }
            .into(),
        ])
    }
}

/// Scheduled by each chain link.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ping {
    pub account_id: String,
    pub link: u32,
}

#[command]
impl Command for Ping {
    const NAME: &'static str = "Ping";
    type Aggregate = Account;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.account_id
    }

    fn decide(&self, _: &Account) -> Decision<Self> {
        Ok(vec![
            Pinged {
                account_id: self.account_id.clone(),
                link: self.link,
            }
            .into(),
        ])
    }
}

/// How the plan says one invocation of a handler goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    Ok,
    /// A retriable error.
    Fail,
    /// An error the runtime does not retry.
    Terminal,
    Panic,
    /// Runs past its time limit.
    Slow,
}

/// What the plan holds for one run, by its key: how its invocations go, in order, then `Ok`.
pub fn fates(seed: u64, key: &str) -> &'static [Fate] {
    use Fate::*;
    match mix(seed, key) % 100 {
        0..=79 => &[],
        80..=87 => &[Fail],
        88..=91 => &[Fail, Fail],
        92..=94 => &[Fail, Fail, Fail],
        95..=96 => &[Terminal],
        97..=98 => &[Panic],
        _ => &[Slow],
    }
}

/// A stable hash of `seed` and `key` (FNV-1a): the same on every run and machine.
pub fn mix(seed: u64, key: &str) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for byte in key.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash ^ (hash >> 29)
}

/// The plan, shared by every app of a schedule through a port: its seed, and how often each
/// run's handler was invoked.
#[derive(Debug, Default)]
pub struct Plan {
    pub seed: u64,
    pub invoked: Mutex<HashMap<String, usize>>,
    /// Set by a handler that is to run past its limit; the clock's sleep polled next takes it
    /// and ends at once. That sleep is the handler's own time limit: the runtime polls it right
    /// after the handler, in the same poll, while the handlers of a wave run at once in one task
    /// (a `Notify` would wake the oldest waiting sleep, another handler's).
    pub slow: Arc<AtomicBool>,
}

impl Plan {
    /// Counts an invocation of run `key`, and plays its fate.
    pub async fn play(&self, key: String) -> Result<()> {
        let n = {
            let mut invoked = self.invoked.lock().expect("not poisoned");
            let n = invoked.entry(key.clone()).or_insert(0);
            *n += 1;
            *n
        };
        match fates(self.seed, &key)
            .get(n - 1)
            .copied()
            .unwrap_or(Fate::Ok)
        {
            Fate::Ok => Ok(()),
            Fate::Fail => anyhow::bail!("planned failure of {key} (invocation {n})"),
            Fate::Terminal => Err(bounda::Error::Configuration {
                message: format!("planned terminal failure of {key}"),
            }
            .into()),
            Fate::Panic => panic!("planned panic of {key}"),
            Fate::Slow => {
                self.slow.store(true, Ordering::SeqCst);
                std::future::pending::<()>().await;
                Ok(())
            }
        }
    }
}

/// The plan, as handlers find it.
pub type PlanPort = Arc<Plan>;

#[process(on = Account, started_by = [Opened], completed_by = [Cancelled], timeout = "30d")]
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct Watch {
    pub paid: u64,
    pub links: u32,
    pub hits: u32,
    #[deadline]
    pub chain: Deadline,
    #[deadline]
    pub movable: Deadline,
}

impl Watch {
    async fn play(plan: Result<&PlanPort, bounda::Error>, key: String) -> Result<()> {
        plan?.play(key).await
    }
}

#[process]
impl Watch {
    async fn on_opened(cx: On<'_, Self, Opened>) -> Result<WatchPatch> {
        Self::play(
            cx.port(),
            format!("on:{}:{}", cx.id(), cx.recorded().version),
        )
        .await?;
        Ok(WatchPatch::default().chain(cx.after(CHAIN_EVERY)))
    }

    async fn on_paid(cx: On<'_, Self, Paid>) -> Result<WatchPatch> {
        Self::play(
            cx.port(),
            format!("on:{}:{}", cx.id(), cx.recorded().version),
        )
        .await?;
        Ok(WatchPatch::default().paid(cx.state().paid + cx.event().amount))
    }

    async fn on_moved(cx: On<'_, Self, Moved>) -> Result<WatchPatch> {
        Self::play(
            cx.port(),
            format!("on:{}:{}", cx.id(), cx.recorded().version),
        )
        .await?;
        Ok(WatchPatch::default().movable(Deadline::from(cx.event().at)))
    }

    async fn on_cancelled(cx: On<'_, Self, Cancelled>) -> Result<()> {
        Self::play(
            cx.port(),
            format!("on:{}:{}", cx.id(), cx.recorded().version),
        )
        .await
    }

    async fn at_chain(cx: At<'_, Self>) -> Result<AtChain> {
        Self::play(
            cx.port(),
            format!("at:{}:chain:{}", cx.id(), cx.due_at().as_millis()),
        )
        .await?;
        let links = cx.state().links + 1;
        cx.send_after(
            Ping {
                account_id: cx.id(),
                link: links,
            },
            PING_DELAY,
        )
        .await?;
        let next = if links < CHAIN_LINKS {
            cx.after(CHAIN_EVERY)
        } else {
            Deadline::none()
        };
        Ok(AtChain::new(next).links(links))
    }

    async fn at_movable(cx: At<'_, Self>) -> Result<AtMovable> {
        Self::play(
            cx.port(),
            format!("at:{}:movable:{}", cx.id(), cx.due_at().as_millis()),
        )
        .await?;
        Ok(AtMovable::new(Deadline::none()).hits(cx.state().hits + 1))
    }
}

/// Acknowledges each payment three hours after it.
#[policy(delay = "3h")]
pub async fn acknowledge_on_paid(cx: Reaction<'_, Paid>) -> Result<()> {
    let key = format!("ack:{}:{}", cx.event().account_id, cx.recorded().version);
    cx.port::<PlanPort>()?.play(key).await?;
    cx.send(Acknowledge {
        account_id: cx.event().account_id.clone(),
        amount: cx.event().amount,
    })
    .await?;
    Ok(())
}
