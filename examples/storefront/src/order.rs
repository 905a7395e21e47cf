//! The order: placed, paying, paid, fulfilled or cancelled.

use bounda::prelude::*;

/// One line of an order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Item {
    /// The product.
    pub product_id: String,
    /// How many.
    pub quantity: u32,
    /// The price of one, in cents.
    pub price: u64,
}

macro_rules! order_events {
    ($($(#[$doc:meta])* $name:ident { $($field:ident: $ty:ty),* $(,)? })*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
        #[event(aggregate = Order)]
        pub struct $name {
            /// The order.
            pub order_id: String,
            $(#[allow(missing_docs)] pub $field: $ty,)*
        }
    )*};
}

/// An order was placed. Version 2 calls its total `amount`, as the payment does; an order placed
/// before reads through [`OrderPlacedV1`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = Order, version = 2, upcast(1 = OrderPlacedV1))]
pub struct OrderPlaced {
    /// The order.
    pub order_id: String,
    /// Who ordered.
    pub customer_id: String,
    /// What was ordered.
    pub items: Vec<Item>,
    /// What it costs, in cents.
    pub amount: u64,
    /// The customer's time zone, an IANA name; none on orders placed before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
}

/// `OrderPlaced` as the first storefront stored it, its amount called `total`.
#[derive(Debug, Clone, Deserialize)]
pub struct OrderPlacedV1 {
    /// The order.
    pub order_id: String,
    /// Who ordered.
    pub customer_id: String,
    /// What was ordered.
    pub items: Vec<Item>,
    /// What it costs, in cents.
    pub total: u64,
}

impl From<OrderPlacedV1> for OrderPlaced {
    fn from(old: OrderPlacedV1) -> OrderPlaced {
        OrderPlaced {
            order_id: old.order_id,
            customer_id: old.customer_id,
            items: old.items,
            amount: old.total,
            zone: None,
        }
    }
}

order_events! {
    /// The order waits for its payment to go through.
    OrderLockedForPayment {}
    /// The payment failed; the order is open again.
    OrderPaymentFailed { reason: String }
    /// The order was paid.
    OrderPaid {}
    /// The order was shipped.
    OrderFulfilled {}
    /// The order was cancelled.
    OrderCancelled { reason: String }
    /// The confirmation went out.
    ConfirmationSent {}
    /// A reminder went out.
    ReminderSent {}
    /// The customer was reminded to pay before the payment window closes.
    PaymentReminderSent {}
}

/// The order's events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Events)]
#[allow(missing_docs)]
pub enum OrderEvent {
    Placed(OrderPlaced),
    Locked(OrderLockedForPayment),
    PaymentFailed(OrderPaymentFailed),
    Paid(OrderPaid),
    Fulfilled(OrderFulfilled),
    Cancelled(OrderCancelled),
    Confirmed(ConfirmationSent),
    Reminded(ReminderSent),
    RemindedToPay(PaymentReminderSent),
}

/// Where an order stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum OrderStatus {
    Placed,
    Paying,
    Paid,
    Fulfilled,
    Cancelled,
}

impl OrderStatus {
    /// The status as the scenarios write it.
    pub fn name(status: Option<OrderStatus>) -> &'static str {
        match status {
            None => "new",
            Some(OrderStatus::Placed) => "placed",
            Some(OrderStatus::Paying) => "paying",
            Some(OrderStatus::Paid) => "paid",
            Some(OrderStatus::Fulfilled) => "fulfilled",
            Some(OrderStatus::Cancelled) => "cancelled",
        }
    }
}

/// An order; `status` is `None` until it is placed.
#[derive(Debug, Default)]
pub struct Order {
    /// Where it stands.
    pub status: Option<OrderStatus>,
    /// Who ordered.
    pub customer_id: String,
    /// What it costs, in cents.
    pub total: u64,
    /// Whether the confirmation went out.
    pub confirmation_sent: bool,
    /// Whether a reminder went out.
    pub reminder_sent: bool,
    /// Whether the customer was reminded to pay.
    pub payment_reminder_sent: bool,
}

impl Aggregate for Order {
    const NAME: &'static str = "Order";
    const ID_FIELD: &'static str = "order_id";
    type Event = OrderEvent;

    fn apply(&mut self, event: &OrderEvent) {
        match event {
            OrderEvent::Placed(placed) => {
                self.status = Some(OrderStatus::Placed);
                self.customer_id = placed.customer_id.clone();
                self.total = placed.amount;
            }
            OrderEvent::Locked(_) => self.status = Some(OrderStatus::Paying),
            OrderEvent::PaymentFailed(_) => self.status = Some(OrderStatus::Placed),
            OrderEvent::Paid(_) => self.status = Some(OrderStatus::Paid),
            OrderEvent::Fulfilled(_) => self.status = Some(OrderStatus::Fulfilled),
            OrderEvent::Cancelled(_) => self.status = Some(OrderStatus::Cancelled),
            OrderEvent::Confirmed(_) => self.confirmation_sent = true,
            OrderEvent::Reminded(_) => self.reminder_sent = true,
            OrderEvent::RemindedToPay(_) => self.payment_reminder_sent = true,
        }
    }
}

/// Declares a command on `Order` with its fields.
macro_rules! order_command {
    ($(#[$doc:meta])* $name:ident { $($field:ident: $ty:ty),* $(,)? } rejects $rejection:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Serialize, Deserialize)]
        pub struct $name {
            /// The order.
            pub order_id: String,
            $(#[allow(missing_docs)] pub $field: $ty,)*
        }
    };
}

/// Places an order: its total is the sum of its lines.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlaceOrder {
    /// The order.
    pub order_id: String,
    /// Who orders.
    pub customer_id: String,
    /// What they order.
    pub items: Vec<Item>,
    /// The customer's time zone, an IANA name (`Europe/Paris`): their payment reminder goes
    /// at 09:00 there the day after. Checked when the order is placed.
    #[serde(default)]
    pub zone: Option<String>,
}

/// Why an order cannot be placed.
#[derive(Debug, Clone, PartialEq, Eq, Rejection)]
pub enum PlaceOrderRejection {
    /// It exists already.
    #[rejection("order is placed already")]
    AlreadyPlaced,
    /// It has no lines, a line without quantity or price, or a total too large to count (the
    /// original's validation error).
    #[rejection(
        "an order needs at least one line, each with a quantity and a price, and a total that fits"
    )]
    InvalidItems,
    /// The customer's zone is not one of the IANA database.
    #[rejection(
        "the customer's zone is not a time zone of the IANA database: name it as `Area/City`, like `Europe/Paris`"
    )]
    UnknownZone,
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
        if self.items.is_empty() || self.items.iter().any(|i| i.quantity == 0 || i.price == 0) {
            return Err(PlaceOrderRejection::InvalidItems);
        }
        // Refused now, not when the reminder would be set: a zone in the log always reads.
        if let Some(zone) = &self.zone
            && bounda::calendar::Zone::named(zone).is_err()
        {
            return Err(PlaceOrderRejection::UnknownZone);
        }
        // A total past u64 cents is no order; refused, never a panic on the caller's numbers.
        let total = self
            .items
            .iter()
            .try_fold(0_u64, |total, i| {
                u64::from(i.quantity)
                    .checked_mul(i.price)
                    .and_then(|line| total.checked_add(line))
            })
            .ok_or(PlaceOrderRejection::InvalidItems)?;
        Ok(vec![
            OrderPlaced {
                order_id: self.order_id.clone(),
                customer_id: self.customer_id.clone(),
                items: self.items.clone(),
                amount: total,
                zone: self.zone.clone(),
            }
            .into(),
        ])
    }
}

order_command!(
    /// Cancels a placed or paid order.
    CancelOrder { reason: String } rejects CancelOrderRejection
);

/// Why an order cannot be cancelled.
#[derive(Debug, Clone, PartialEq, Eq, Rejection)]
pub enum CancelOrderRejection {
    /// Its payment is going through.
    #[rejection("Payment in progress")]
    PaymentInProgress,
    /// It is fulfilled, cancelled, or does not exist.
    #[rejection("the order cannot be cancelled")]
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
        match order.status {
            Some(OrderStatus::Paying) => Err(CancelOrderRejection::PaymentInProgress),
            Some(OrderStatus::Placed | OrderStatus::Paid) => Ok(vec![
                OrderCancelled {
                    order_id: self.order_id.clone(),
                    reason: self.reason.clone(),
                }
                .into(),
            ]),
            _ => Err(CancelOrderRejection::NotCancellable),
        }
    }
}

order_command!(
    /// Marks an order paid; a paid order is "already done".
    MarkOrderPaid {} rejects MarkOrderPaidRejection
);

/// Why an order cannot be paid.
#[derive(Debug, Clone, PartialEq, Eq, Rejection)]
pub enum MarkOrderPaidRejection {
    /// It is not open.
    #[rejection("Only open orders can be paid; this one is {status}")]
    NotOpen {
        /// Where it stands.
        status: &'static str,
    },
}

#[command]
impl Command for MarkOrderPaid {
    const NAME: &'static str = "MarkOrderPaid";
    type Aggregate = Order;
    type Rejection = MarkOrderPaidRejection;

    fn aggregate_id(&self) -> &str {
        &self.order_id
    }

    fn decide(&self, order: &Order) -> Decision<Self> {
        match order.status {
            Some(OrderStatus::Paid | OrderStatus::Fulfilled) => Ok(vec![]),
            Some(OrderStatus::Placed | OrderStatus::Paying) => Ok(vec![
                OrderPaid {
                    order_id: self.order_id.clone(),
                }
                .into(),
            ]),
            status => Err(MarkOrderPaidRejection::NotOpen {
                status: OrderStatus::name(status),
            }),
        }
    }
}

order_command!(
    /// Fulfils a paid order.
    FulfillOrder {} rejects FulfillOrderRejection
);

/// Why an order cannot be fulfilled.
#[derive(Debug, Clone, PartialEq, Eq, Rejection)]
pub enum FulfillOrderRejection {
    /// It is not paid.
    #[rejection("Only paid orders can be fulfilled; this one is {status}")]
    NotPaid {
        /// Where it stands.
        status: &'static str,
    },
}

#[command]
impl Command for FulfillOrder {
    const NAME: &'static str = "FulfillOrder";
    type Aggregate = Order;
    type Rejection = FulfillOrderRejection;

    fn aggregate_id(&self) -> &str {
        &self.order_id
    }

    fn decide(&self, order: &Order) -> Decision<Self> {
        match order.status {
            Some(OrderStatus::Paid) => Ok(vec![
                OrderFulfilled {
                    order_id: self.order_id.clone(),
                }
                .into(),
            ]),
            status => Err(FulfillOrderRejection::NotPaid {
                status: OrderStatus::name(status),
            }),
        }
    }
}

order_command!(
    /// Locks a placed order while its payment goes through.
    LockOrderForPayment {} rejects LockRejection
);

/// Why an order cannot be locked.
#[derive(Debug, Clone, PartialEq, Eq, Rejection)]
pub enum LockRejection {
    /// It is not placed.
    NotPlaced,
}

#[command]
impl Command for LockOrderForPayment {
    const NAME: &'static str = "LockOrderForPayment";
    type Aggregate = Order;
    type Rejection = LockRejection;

    fn aggregate_id(&self) -> &str {
        &self.order_id
    }

    fn decide(&self, order: &Order) -> Decision<Self> {
        match order.status {
            Some(OrderStatus::Paying) => Ok(vec![]),
            Some(OrderStatus::Placed) => Ok(vec![
                OrderLockedForPayment {
                    order_id: self.order_id.clone(),
                }
                .into(),
            ]),
            _ => Err(LockRejection::NotPlaced),
        }
    }
}

order_command!(
    /// Records that a payment failed: a paying order is open again.
    RecordPaymentFailure { reason: String } rejects PaymentFailureRejection
);

/// Why a payment failure cannot be recorded.
#[derive(Debug, Clone, PartialEq, Eq, Rejection)]
pub enum PaymentFailureRejection {
    /// The order is not paying.
    NotPaying,
}

#[command]
impl Command for RecordPaymentFailure {
    const NAME: &'static str = "RecordPaymentFailure";
    type Aggregate = Order;
    type Rejection = PaymentFailureRejection;

    fn aggregate_id(&self) -> &str {
        &self.order_id
    }

    fn decide(&self, order: &Order) -> Decision<Self> {
        match order.status {
            Some(OrderStatus::Paying) => Ok(vec![
                OrderPaymentFailed {
                    order_id: self.order_id.clone(),
                    reason: self.reason.clone(),
                }
                .into(),
            ]),
            _ => Err(PaymentFailureRejection::NotPaying),
        }
    }
}

order_command!(
    /// Records that the confirmation went out, once.
    RecordConfirmationSent {} rejects NoRejection
);

#[command]
impl Command for RecordConfirmationSent {
    const NAME: &'static str = "RecordConfirmationSent";
    type Aggregate = Order;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.order_id
    }

    fn decide(&self, order: &Order) -> Decision<Self> {
        if order.confirmation_sent {
            return Ok(vec![]);
        }
        Ok(vec![
            ConfirmationSent {
                order_id: self.order_id.clone(),
            }
            .into(),
        ])
    }
}

order_command!(
    /// Reminds the customer of an order still placed; otherwise does nothing.
    SendReminder {} rejects NoRejection
);

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

order_command!(
    /// Reminds the customer to pay an order still placed, once; otherwise does nothing.
    RemindToPay {} rejects NoRejection
);

#[command]
impl Command for RemindToPay {
    const NAME: &'static str = "RemindToPay";
    type Aggregate = Order;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.order_id
    }

    fn decide(&self, order: &Order) -> Decision<Self> {
        if order.status != Some(OrderStatus::Placed) || order.payment_reminder_sent {
            return Ok(vec![]);
        }
        Ok(vec![
            PaymentReminderSent {
                order_id: self.order_id.clone(),
            }
            .into(),
        ])
    }
}
