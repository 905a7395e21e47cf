//! Aggregates, their events and the commands that decide them.

use std::fmt::Debug;

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use crate::event::EventKey;
use crate::registered::AggregateOfRegistered;

/// An aggregate: state folded from its own events, the unit commands decide on.
///
/// ```
/// # use bounda::prelude::*;
/// #[derive(Debug, Clone, Serialize, Deserialize, Event)]
/// #[event(aggregate = Order)]
/// pub struct OrderPlaced { pub order_id: String, pub total: u64 }
///
/// #[derive(Debug, Clone, Serialize, Deserialize, Events)]
/// pub enum OrderEvent { OrderPlaced(OrderPlaced) }
///
/// #[derive(Debug, Default)]
/// pub struct Order { pub placed: bool, pub total: u64 }
///
/// impl Aggregate for Order {
///     const NAME: &'static str = "Order";
///     const ID_FIELD: &'static str = "order_id";
///     type Event = OrderEvent;
///
///     fn apply(&mut self, event: &OrderEvent) {
///         match event {
///             OrderEvent::OrderPlaced(e) => { self.placed = true; self.total = e.total; }
///         }
///     }
/// }
/// ```
pub trait Aggregate: Default + Send + Sync + 'static {
    /// The aggregate type as stored with its events (`Order`); unique in an app.
    const NAME: &'static str;
    /// The payload field that names an instance of this aggregate in other aggregates' events
    /// and in commands, by convention `<aggregate>_id` (`order_id`).
    const ID_FIELD: &'static str;
    /// The aggregate's events: an enum deriving [`Events`](macro@crate::Events).
    type Event: EventSet<Aggregate = Self>;

    /// Folds one event into the state. The state before the first event is `Default`.
    fn apply(&mut self, event: &Self::Event);
}

/// One event type of one aggregate, a serde payload.
///
/// Derive it with `#[derive(Event)]` and `#[event(aggregate = Order)]`; the type name is the
/// struct's name unless `#[event(name = "..")]` says otherwise. An event type is scoped to its
/// aggregate: two aggregates may both have a `Cancelled`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an event",
    label = "not an event",
    note = "derive it: `#[derive(Serialize, Deserialize, Event)]` with `#[event(aggregate = ..)]`"
)]
pub trait Event: Serialize + DeserializeOwned + Debug + Send + Sync + 'static {
    /// The aggregate whose stream holds this event.
    type Aggregate: Aggregate;
    /// The event type as stored (`OrderPlaced`).
    const TYPE: &'static str;
    /// The payload's field names, as serialised: an event of another aggregate reaches a
    /// process through the field named after the process's aggregate id.
    const FIELDS: &'static [&'static str];
    /// The version of the payload's shape that this build writes, from 1:
    /// `#[event(version = 2, upcast(1 = OrderPlacedV1))]`.
    const VERSION: u32 = 1;
    /// The names this event type was stored under before it was renamed:
    /// `#[event(renamed_from("OrderTaken"))]`. Events stored under them read as this type.
    const RENAMED_FROM: &'static [&'static str] = &[];

    /// Reads a payload stored at `version`: today's shape as it is, an older one through its
    /// upcasts, one step at a time. `#[derive(Event)]` writes it from the shapes it is given.
    fn read(version: u32, payload: serde_json::Value) -> Result<Self, crate::event::ShapeError> {
        if version == Self::VERSION {
            crate::event::read_shape(version, payload)
        } else {
            Err(crate::event::ShapeError::Newer {
                stored: version,
                known: Self::VERSION,
            })
        }
    }

    /// The key the runtime routes this event type by.
    fn key() -> EventKey {
        EventKey {
            aggregate: <Self::Aggregate as Aggregate>::NAME,
            event: Self::TYPE,
        }
    }
}

/// All the events of one aggregate, as an enum with one variant per event type.
///
/// Derive it with `#[derive(Events)]` on an enum whose variants each wrap one event struct.
pub trait EventSet: Debug + Send + Sync + Sized + 'static {
    /// The aggregate the events belong to.
    type Aggregate: Aggregate;
    /// Every event type of the set, in declaration order.
    const TYPES: &'static [&'static str];

    /// Every event type of the set as the runtime reads it untyped: names, version, upcasts.
    const SHAPES: &'static [crate::event::EventShape];

    /// The stored type name of this event.
    fn type_name(&self) -> &'static str;
    /// The version of its shape this build writes.
    fn schema_version(&self) -> u32;
    /// The payload as JSON.
    fn to_json(&self) -> Result<serde_json::Value, serde_json::Error>;
    /// Reads a stored event back, by its type name (today's or one it was renamed from) and its
    /// payload at the version it was stored at.
    fn read(event: &crate::RecordedEvent) -> Result<Self, crate::Error>;
}

/// A command: a request to one aggregate instance that decides events or is rejected.
///
/// ```
/// # use bounda::prelude::*;
/// # #[derive(Debug, Clone, Serialize, Deserialize, Event)]
/// # #[event(aggregate = Order)]
/// # pub struct OrderPlaced { pub order_id: String, pub total: u64 }
/// # #[derive(Debug, Clone, Serialize, Deserialize, Events)]
/// # pub enum OrderEvent { OrderPlaced(OrderPlaced) }
/// # #[derive(Debug, Default)]
/// # pub struct Order { pub placed: bool }
/// # impl Aggregate for Order {
/// #     const NAME: &'static str = "Order";
/// #     const ID_FIELD: &'static str = "order_id";
/// #     type Event = OrderEvent;
/// #     fn apply(&mut self, _: &OrderEvent) { self.placed = true; }
/// # }
/// #[derive(Debug, Clone, Serialize, Deserialize)]
/// pub struct PlaceOrder { pub order_id: String, pub total: u64 }
///
/// #[derive(Debug, Clone, PartialEq, Rejection)]
/// pub enum PlaceOrderRejection {
///     #[rejection("order `{order_id}` is already placed")]
///     AlreadyPlaced { order_id: String },
/// }
///
/// #[command]
/// impl Command for PlaceOrder {
///     const NAME: &'static str = "PlaceOrder";
///     type Aggregate = Order;
///     type Rejection = PlaceOrderRejection;
///
///     fn aggregate_id(&self) -> &str { &self.order_id }
///
///     fn decide(&self, order: &Order) -> Decision<Self> {
///         if order.placed {
///             return Err(PlaceOrderRejection::AlreadyPlaced { order_id: self.order_id.clone() });
///         }
///         Ok(vec![OrderPlaced { order_id: self.order_id.clone(), total: self.total }.into()])
///     }
/// }
///
/// let decided = PlaceOrder { order_id: "o-1".into(), total: 139 }.decide(&Order::default());
/// assert_eq!(decided.unwrap().len(), 1);
/// let refused = PlaceOrder { order_id: "o-1".into(), total: 139 }.decide(&Order { placed: true });
/// assert_eq!(refused.unwrap_err().code(), "AlreadyPlaced");
/// ```
pub trait Command: Serialize + DeserializeOwned + Debug + Send + Sync + 'static {
    /// The command type (`PlaceOrder`), used in outcomes, rejections and the scheduler.
    const NAME: &'static str;
    /// The aggregate the command decides on.
    type Aggregate: Aggregate + AggregateOfRegistered<Self>;
    /// The codes the command may reject with; [`NoRejection`] when it never rejects.
    type Rejection: Rejection;

    /// The instance the command is for.
    fn aggregate_id(&self) -> &str;

    /// Decides the events to append, given the instance's current state. An empty list means
    /// "already done" and is not a rejection; a rejection stores nothing.
    fn decide(&self, state: &Self::Aggregate) -> Decision<Self>;
}

/// What a command decides: events, in order, or its typed rejection.
pub type Decision<C> =
    Result<Vec<<<C as Command>::Aggregate as Aggregate>::Event>, <C as Command>::Rejection>;

/// The typed reasons a command may refuse, an enum with one variant per code.
///
/// Derive it with `#[derive(Rejection)]`: the code is the variant's name (`NotOpen`), the
/// message comes from `#[rejection("..")]` on the variant (which may name the variant's fields,
/// `"{status}"`), or is the code itself when there is none.
pub trait Rejection: Debug + Send + Sync + 'static {
    /// The code, named after the reason: `NotOpen`.
    fn code(&self) -> &'static str;
    /// A message for people.
    fn message(&self) -> String;
}

/// The rejection of a command that never rejects: it has no values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoRejection {}

impl Rejection for NoRejection {
    fn code(&self) -> &'static str {
        match *self {}
    }

    fn message(&self) -> String {
        match *self {}
    }
}
