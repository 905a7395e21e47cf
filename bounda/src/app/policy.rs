//! Policies: one event in, commands out, no memory.

use std::future::Future;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::future::BoxFuture;

use crate::aggregate::{Aggregate, Command, Event, EventKey, Rejection};
use crate::app::App;
use crate::app::RejectionRecord;
use crate::app::decide::{Decision, decide};
use crate::app::reaction::{Attempt, Reaction};
use crate::registered::PolicyRegistered;
use crate::store::Metadata;
use crate::{Duration, DurationError, Error, RecordedEvent};

/// A policy: reacts to one event type with commands, and keeps no memory.
///
/// ```
/// # use bounda::prelude::*;
/// # use bounda::{DurationError, Policy, Reaction, env_duration, policy};
/// # #[derive(Debug, Clone, Serialize, Deserialize, Event)]
/// # #[event(aggregate = Order)]
/// # pub struct OrderPlaced { pub order_id: String }
/// # #[derive(Debug, Clone, Serialize, Deserialize, Events)]
/// # pub enum OrderEvent { Placed(OrderPlaced) }
/// # #[derive(Debug, Default)]
/// # pub struct Order;
/// # impl Aggregate for Order {
/// #     const NAME: &'static str = "Order";
/// #     const ID_FIELD: &'static str = "order_id";
/// #     type Event = OrderEvent;
/// #     fn apply(&mut self, _: &OrderEvent) {}
/// # }
/// /// Welcomes every new order a minute after it is placed.
/// pub struct WelcomeOnOrderPlaced;
///
/// #[policy]
/// impl Policy for WelcomeOnOrderPlaced {
///     const NAME: &'static str = "welcome_on_order_placed";
///     type Event = OrderPlaced;
///
///     fn delay() -> Result<Option<Duration>, DurationError> {
///         env_duration("WELCOME_DELAY", minutes(1)).map(Some)
///     }
///
///     async fn handle(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
///         println!("welcome, order {} (key {})", cx.event().order_id, cx.idempotency_key());
///         Ok(())
///     }
/// }
/// ```
pub trait Policy: PolicyRegistered + Send + Sync + 'static {
    /// The policy's key: its inbox entries, idempotency keys and dead letters are named by it.
    /// Unique in the app.
    const NAME: &'static str;
    /// The event it reacts to.
    type Event: Event;
    /// The ports it reads (`#[policy(ports = [..])]`): an app without one of them is refused
    /// when it is built, and a read of another fails, naming it.
    const PORTS: &'static [crate::PortDecl] = &[];

    /// Run this long after the event's time instead of at once. Read once, when the
    /// app is built; an error refuses the app, naming the policy. Use
    /// [`env_duration`](crate::env_duration) for a delay from the environment.
    fn delay() -> Result<Option<Duration>, DurationError> {
        Ok(None)
    }

    /// Reacts to one event. The commands it sends are stored when the run commits; an error
    /// fails the run, which is retried and then dead-lettered.
    fn handle(cx: Reaction<'_, Self::Event>) -> impl Future<Output = anyhow::Result<()>> + Send;
}

/// A registered policy, its type erased.
pub(crate) trait PolicyRunner: Send + Sync {
    fn name(&self) -> &'static str;
    fn key(&self) -> EventKey;
    fn delay(&self) -> Option<Duration>;
    /// The ports it declares.
    fn declared(&self) -> crate::app::ports::Declared;
    /// Where its runs have been sending their commands.
    fn aim(&self) -> &Aim;
    fn run<'a>(
        &'a self,
        attempt: &'a Attempt,
        event: &'a RecordedEvent,
    ) -> BoxFuture<'a, anyhow::Result<()>>;
}

pub(crate) struct PolicyEntry<P> {
    delay: Option<Duration>,
    aim: Aim,
    policy: PhantomData<fn() -> P>,
}

/// Whether a policy's runs send their commands to the aggregate instance whose event they
/// handle, as most reactions do ("when an order is placed, confirm it"). While they do, a wave
/// of its runs reads those streams ahead, one read per stream type, where each run would
/// otherwise read its own in turn. Learned from each run's commands, the first wave guessing
/// yes: a wrong guess costs one read, never a wrong answer, as a run's writes are fenced on the
/// versions it read.
#[derive(Debug)]
pub(crate) struct Aim(AtomicBool);

impl Default for Aim {
    fn default() -> Aim {
        Aim(AtomicBool::new(true))
    }
}

impl Aim {
    /// Whether the last run sent to its event's instance.
    pub(crate) fn at_its_event(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Learns where a run sent: to its event's instance, or not.
    pub(crate) fn learn(&self, at_its_event: bool) {
        self.0.store(at_its_event, Ordering::Relaxed);
    }
}

impl<P: Policy> PolicyEntry<P> {
    /// The entry, with the policy's delay read once (an invalid one refuses the app).
    pub(crate) fn new() -> Result<PolicyEntry<P>, String> {
        let delay = P::delay()
            .map_err(|error| format!("policy `{}` has an invalid delay: {error}", P::NAME))?;
        Ok(PolicyEntry {
            delay,
            aim: Aim::default(),
            policy: PhantomData,
        })
    }
}

impl<P: Policy> PolicyRunner for PolicyEntry<P> {
    fn name(&self) -> &'static str {
        P::NAME
    }

    fn key(&self) -> EventKey {
        P::Event::key()
    }

    fn delay(&self) -> Option<Duration> {
        self.delay
    }

    fn declared(&self) -> crate::app::ports::Declared {
        crate::app::ports::Declared {
            kind: "policy",
            name: P::NAME,
            ports: P::PORTS,
        }
    }

    fn aim(&self) -> &Aim {
        &self.aim
    }

    fn run<'a>(
        &'a self,
        attempt: &'a Attempt,
        event: &'a RecordedEvent,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            let payload = event.decode::<P::Event>()?;
            P::handle(Reaction::new(attempt, &payload, event)).await
        })
    }
}

/// A command the scheduled worker can run by its type name.
pub(crate) trait CommandRunner: Send + Sync {
    fn aggregate(&self) -> &'static str;
    /// The command's Rust type, to name it when two share a name.
    fn type_name(&self) -> &'static str;
    /// Whether `payload` reads as the command: if not, where (`customer.email`, empty for the
    /// whole) and why.
    fn parse(&self, payload: &serde_json::Value) -> Result<(), (String, String)>;
    /// Decides the command stored as `payload`: a failure, or its decision or rejection.
    fn decide<'a>(
        &'a self,
        app: &'a App,
        payload: &'a serde_json::Value,
        metadata: &'a Metadata,
    ) -> BoxFuture<'a, Result<Result<Decision, RejectionRecord>, Error>>;
}

pub(crate) struct CommandEntry<C>(PhantomData<fn() -> C>);

impl<C> CommandEntry<C> {
    pub(crate) fn new() -> CommandEntry<C> {
        CommandEntry(PhantomData)
    }
}

impl<C: Command> CommandRunner for CommandEntry<C> {
    fn aggregate(&self) -> &'static str {
        <C::Aggregate as Aggregate>::NAME
    }

    fn type_name(&self) -> &'static str {
        std::any::type_name::<C>()
    }

    fn parse(&self, payload: &serde_json::Value) -> Result<(), (String, String)> {
        serde_path_to_error::deserialize::<_, C>(payload)
            .map(drop)
            .map_err(|error| {
                let path = error.path().to_string();
                let field = if path == "." { String::new() } else { path };
                (field, error.into_inner().to_string())
            })
    }

    fn decide<'a>(
        &'a self,
        app: &'a App,
        payload: &'a serde_json::Value,
        metadata: &'a Metadata,
    ) -> BoxFuture<'a, Result<Result<Decision, RejectionRecord>, Error>> {
        Box::pin(async move {
            // Read as validated when it runs, so the type's rules apply once (spec 43).
            let command: C = serde_json::from_value(payload.clone()).map_err(|source| {
                Error::InvalidCommand {
                    command: C::NAME.to_owned(),
                    source,
                }
            })?;
            Ok(decide(app, &command, metadata)
                .await?
                .map_err(|rejection| RejectionRecord {
                    command_type: C::NAME,
                    rejected: rejection.code(),
                    message: rejection.message(),
                    aggregate_type: <C::Aggregate as Aggregate>::NAME,
                    aggregate_id: command.aggregate_id().to_owned(),
                }))
        })
    }
}
