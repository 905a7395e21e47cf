//! A small domain the trybuild cases in `tests/ui` share: an order, a payment that names its
//! order, and a customer that does not.

use bounda::prelude::*;

/// An order was placed.
#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Order)]
pub struct OrderPlaced {
    /// The order.
    pub order_id: String,
}

/// An order was paid.
#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Order)]
pub struct OrderPaid {
    /// The order.
    pub order_id: String,
}

/// An order was cancelled.
#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Order)]
pub struct OrderCancelled {
    /// The order.
    pub order_id: String,
}

/// The order's events.
#[derive(Debug, Clone, Serialize, Deserialize, Events)]
pub enum OrderEvent {
    /// See [`OrderPlaced`].
    Placed(OrderPlaced),
    /// See [`OrderPaid`].
    Paid(OrderPaid),
    /// See [`OrderCancelled`].
    Cancelled(OrderCancelled),
}

/// An order.
#[derive(Debug, Default)]
pub struct Order {
    /// Whether it was placed.
    pub placed: bool,
}

impl Aggregate for Order {
    const NAME: &'static str = "Order";
    const ID_FIELD: &'static str = "order_id";
    type Event = OrderEvent;

    fn apply(&mut self, event: &OrderEvent) {
        self.placed = matches!(event, OrderEvent::Placed(_)) || self.placed;
    }
}

/// A payment settled; it names its order in `order_id`.
#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Payment)]
pub struct PaymentSettled {
    /// The payment.
    pub payment_id: String,
    /// The order it pays.
    pub order_id: String,
}

/// The payment's events.
#[derive(Debug, Clone, Serialize, Deserialize, Events)]
pub enum PaymentEvent {
    /// See [`PaymentSettled`].
    Settled(PaymentSettled),
}

/// A payment.
#[derive(Debug, Default)]
pub struct Payment;

impl Aggregate for Payment {
    const NAME: &'static str = "Payment";
    const ID_FIELD: &'static str = "payment_id";
    type Event = PaymentEvent;

    fn apply(&mut self, _: &PaymentEvent) {}
}

/// A customer moved house; it names no order.
#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Customer)]
pub struct CustomerMoved {
    /// The customer.
    pub customer_id: String,
    /// The new address.
    pub address: String,
}

/// The customer's events.
#[derive(Debug, Clone, Serialize, Deserialize, Events)]
pub enum CustomerEvent {
    /// See [`CustomerMoved`].
    Moved(CustomerMoved),
}

/// A customer.
#[derive(Debug, Default)]
pub struct Customer;

impl Aggregate for Customer {
    const NAME: &'static str = "Customer";
    const ID_FIELD: &'static str = "customer_id";
    type Event = CustomerEvent;

    fn apply(&mut self, _: &CustomerEvent) {}
}

/// Not an event at all.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NotAnEvent {
    /// The order.
    pub order_id: String,
}
