//! The simulated app: an account opened, paid, moved, cancelled or archived from outside; the
//! `Watch` process with a chain that re-arms itself, a deadline moved by events, and the
//! timeout; a delayed policy; a scheduled command. Every handler plays a port call of its run
//! through the simulation's `PortFaults`, which fails it, panics or hangs by the seed.

use bounda::prelude::*;
use bounda::testing::simulate::PortFaults;

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

/// Port calls in a hundred that meet a fault: every handler plays one call, keyed by its run.
pub const PORT_FAULTS: u64 = 20;

#[process(
    on = Account,
    started_by = [Opened],
    completed_by = [Cancelled],
    timeout = "30d",
    ports = [PortFaults],
)]
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
    async fn play(faults: Result<&PortFaults, bounda::Error>, key: String) -> Result<()> {
        faults?.call(&key).await
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
#[policy(delay = "3h", ports = [PortFaults])]
pub async fn acknowledge_on_paid(cx: Reaction<'_, Paid>) -> Result<()> {
    let key = format!("ack:{}:{}", cx.event().account_id, cx.recorded().version);
    cx.port::<PortFaults>()?.call(&key).await?;
    cx.send(Acknowledge {
        account_id: cx.event().account_id.clone(),
        amount: cx.event().amount,
    })
    .await?;
    Ok(())
}
