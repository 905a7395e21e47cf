//! The order: its events, its state, its commands.

use bounda::prelude::*;

/// An order was placed.
#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Order)]
pub struct OrderPlaced {
    /// The order.
    pub order_id: String,
    /// What it costs, in cents.
    pub total: u64,
}

/// An order was paid.
#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Order)]
pub struct OrderPaid {
    /// The order.
    pub order_id: String,
}

/// An order was fulfilled.
#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Order)]
pub struct OrderFulfilled {
    /// The order.
    pub order_id: String,
}

/// An order was cancelled.
#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Order)]
pub struct OrderCancelled {
    /// The order.
    pub order_id: String,
    /// Why.
    pub reason: String,
}

/// A reminder went out.
#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Order)]
pub struct ReminderSent {
    /// The order.
    pub order_id: String,
}

/// The welcome message went out.
#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Order)]
pub struct WelcomeSent {
    /// The order.
    pub order_id: String,
}

/// The order's events.
#[derive(Debug, Clone, Serialize, Deserialize, Events)]
pub enum OrderEvent {
    /// See [`OrderPlaced`].
    Placed(OrderPlaced),
    /// See [`ReminderSent`].
    ReminderSent(ReminderSent),
    /// See [`WelcomeSent`].
    WelcomeSent(WelcomeSent),
    /// See [`OrderPaid`].
    Paid(OrderPaid),
    /// See [`OrderFulfilled`].
    Fulfilled(OrderFulfilled),
    /// See [`OrderCancelled`].
    Cancelled(OrderCancelled),
}

/// Where an order stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderStatus {
    /// Waiting for payment.
    Placed,
    /// Paid.
    Paid,
    /// Shipped.
    Fulfilled,
    /// Given up.
    Cancelled,
}

/// An order; `status` is `None` until it is placed.
#[derive(Debug, Default)]
pub struct Order {
    /// Where it stands.
    pub status: Option<OrderStatus>,
    /// Whether the welcome went out.
    pub welcomed: bool,
}

impl Aggregate for Order {
    const NAME: &'static str = "Order";
    const ID_FIELD: &'static str = "order_id";
    type Event = OrderEvent;

    fn apply(&mut self, event: &OrderEvent) {
        self.status = Some(match event {
            OrderEvent::Placed(_) => OrderStatus::Placed,
            OrderEvent::Paid(_) => OrderStatus::Paid,
            OrderEvent::Fulfilled(_) => OrderStatus::Fulfilled,
            OrderEvent::Cancelled(_) => OrderStatus::Cancelled,
            OrderEvent::ReminderSent(_) => return,
            OrderEvent::WelcomeSent(_) => {
                self.welcomed = true;
                return;
            }
        });
    }
}

/// Places an order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlaceOrder {
    /// The order.
    pub order_id: String,
    /// What it costs, in cents.
    pub total: u64,
}

/// Why an order cannot be placed.
#[derive(Debug, Clone, PartialEq, Eq, Rejection)]
pub enum PlaceOrderRejection {
    /// It exists already.
    #[rejection("order is placed already")]
    AlreadyPlaced,
}

#[command]
impl Command for PlaceOrder {
    const NAME: &'static str = "PlaceOrder";
    type Aggregate = Order;
    type Rejection = PlaceOrderRejection;

    fn aggregate_id(&self) -> &str {
        &self.order_id
    }

    fn decide(&self, order: &Order) -> Decision<Self> {
        if order.status.is_some() {
            return Err(PlaceOrderRejection::AlreadyPlaced);
        }
        Ok(vec![
            OrderPlaced {
                order_id: self.order_id.clone(),
                total: self.total,
            }
            .into(),
        ])
    }
}

/// Reminds the customer of an order still waiting for payment; otherwise does nothing.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SendReminder {
    /// The order.
    pub order_id: String,
}

#[command]
impl Command for SendReminder {
    const NAME: &'static str = "SendReminder";
    type Aggregate = Order;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.order_id
    }

    fn decide(&self, order: &Order) -> Decision<Self> {
        if order.status != Some(OrderStatus::Placed) {
            return Ok(vec![]);
        }
        Ok(vec![
            ReminderSent {
                order_id: self.order_id.clone(),
            }
            .into(),
        ])
    }
}

/// Records that the welcome went out, once.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecordWelcome {
    /// The order.
    pub order_id: String,
}

#[command]
impl Command for RecordWelcome {
    const NAME: &'static str = "RecordWelcome";
    type Aggregate = Order;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.order_id
    }

    fn decide(&self, order: &Order) -> Decision<Self> {
        if order.welcomed {
            return Ok(vec![]);
        }
        Ok(vec![
            WelcomeSent {
                order_id: self.order_id.clone(),
            }
            .into(),
        ])
    }
}

/// Cancels an order that is still waiting for payment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CancelOrder {
    /// The order.
    pub order_id: String,
    /// Why.
    pub reason: String,
}

/// Why an order cannot be cancelled.
#[derive(Debug, Clone, PartialEq, Eq, Rejection)]
pub enum CancelOrderRejection {
    /// It was paid, fulfilled or cancelled already.
    #[rejection("only an order waiting for payment can be cancelled")]
    NotCancellable,
}

#[command]
impl Command for CancelOrder {
    const NAME: &'static str = "CancelOrder";
    type Aggregate = Order;
    type Rejection = CancelOrderRejection;

    fn aggregate_id(&self) -> &str {
        &self.order_id
    }

    fn decide(&self, order: &Order) -> Decision<Self> {
        if order.status != Some(OrderStatus::Placed) {
            return Err(CancelOrderRejection::NotCancellable);
        }
        Ok(vec![
            OrderCancelled {
                order_id: self.order_id.clone(),
                reason: self.reason.clone(),
            }
            .into(),
        ])
    }
}
