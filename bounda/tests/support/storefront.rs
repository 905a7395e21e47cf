//! A small storefront: an order, a payment, and the order-payment process of seed 001.

use bounda::prelude::*;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = Order)]
pub struct OrderPlaced {
    pub order_id: String,
    pub total: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = Order)]
pub struct OrderPaid {
    pub order_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = Order)]
pub struct OrderCancelled {
    pub order_id: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = Order)]
pub struct OrderFulfilled {
    pub order_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = Order)]
pub struct ReminderSent {
    pub order_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = Order)]
pub struct ConfirmationSent {
    pub order_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Events)]
pub enum OrderEvent {
    Placed(OrderPlaced),
    Paid(OrderPaid),
    Cancelled(OrderCancelled),
    Fulfilled(OrderFulfilled),
    ReminderSent(ReminderSent),
    ConfirmationSent(ConfirmationSent),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderStatus {
    Placed,
    Paid,
    Cancelled,
    Fulfilled,
}

#[derive(Debug, Default)]
pub struct Order {
    pub status: Option<OrderStatus>,
    pub total: u64,
    pub reminders: u32,
    pub confirmed: bool,
}

impl Aggregate for Order {
    const NAME: &'static str = "Order";
    const ID_FIELD: &'static str = "order_id";
    type Event = OrderEvent;

    fn apply(&mut self, event: &OrderEvent) {
        match event {
            OrderEvent::Placed(placed) => {
                self.total = placed.total;
                self.status = Some(OrderStatus::Placed);
            }
            OrderEvent::Paid(_) => self.status = Some(OrderStatus::Paid),
            OrderEvent::Cancelled(_) => self.status = Some(OrderStatus::Cancelled),
            OrderEvent::Fulfilled(_) => self.status = Some(OrderStatus::Fulfilled),
            OrderEvent::ReminderSent(_) => self.reminders += 1,
            OrderEvent::ConfirmationSent(_) => self.confirmed = true,
        }
    }
}

/// A payment, another aggregate whose events name the order in `order_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = Payment)]
pub struct PaymentSettled {
    pub payment_id: String,
    pub order_id: Option<String>,
}

/// A refund names its order only through a lookup: the process correlates it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = Payment)]
pub struct PaymentRefunded {
    pub payment_id: String,
    pub reference: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Events)]
pub enum PaymentEvent {
    Settled(PaymentSettled),
    Refunded(PaymentRefunded),
}

#[derive(Debug, Default)]
pub struct Payment {
    pub settled: bool,
}

impl Aggregate for Payment {
    const NAME: &'static str = "Payment";
    const ID_FIELD: &'static str = "payment_id";
    type Event = PaymentEvent;

    fn apply(&mut self, event: &PaymentEvent) {
        if let PaymentEvent::Settled(_) = event {
            self.settled = true;
        }
    }
}

#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shipping {
    pub address: String,
    pub express: bool,
}

/// Reminds the customer daily, three times at most, and gives up on the order after 72 hours.
#[process(
    on = Order,
    started_by = [OrderPlaced],
    completed_by = [OrderFulfilled, OrderCancelled],
    timeout = "30d",
)]
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderPayment {
    pub reminders: u32,
    #[deadline]
    pub next_reminder: Deadline,
    #[deadline]
    pub payment_deadline: Deadline,
    pub paid_at: Option<Instant>,
    pub shipping: Option<Shipping>,
    pub refunded: bool,
}

#[process]
impl OrderPayment {
    async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<OrderPaymentPatch> {
        Ok(OrderPaymentPatch::default()
            .next_reminder(cx.after(hours(24)))
            .payment_deadline(cx.after(hours(72))))
    }

    async fn on_order_paid(cx: On<'_, Self, OrderPaid>) -> Result<OrderPaymentPatch> {
        Ok(OrderPaymentPatch::default()
            .paid_at(Some(cx.event_time()))
            .next_reminder(Deadline::none())
            .payment_deadline(Deadline::none()))
    }

    async fn on_payment_settled(_cx: On<'_, Self, PaymentSettled>) -> Result<()> {
        Ok(())
    }

    #[correlate(Self::order_of_refund)]
    async fn on_payment_refunded(_cx: On<'_, Self, PaymentRefunded>) -> Result<OrderPaymentPatch> {
        Ok(OrderPaymentPatch::default().refunded(true))
    }

    async fn at_next_reminder(cx: At<'_, Self>) -> Result<AtNextReminder> {
        let reminders = cx.state().reminders + 1;
        let next = if reminders < 3 {
            cx.after(hours(24))
        } else {
            Deadline::none()
        };
        Ok(AtNextReminder::new(next).reminders(reminders))
    }

    async fn at_payment_deadline(_cx: At<'_, Self>) -> Result<AtPaymentDeadline> {
        Ok(AtPaymentDeadline::new(Deadline::none()).next_reminder(Deadline::none()))
    }

    async fn at_timeout(_cx: At<'_, Self>) -> Result<OrderPaymentPatch> {
        Ok(OrderPaymentPatch::default().next_reminder(Deadline::none()))
    }

    /// Refunds carry `order:<id>` in their reference; anything else names no order.
    fn order_of_refund(refund: &PaymentRefunded) -> Option<String> {
        refund.reference.strip_prefix("order:").map(str::to_owned)
    }
}

/// Places an order; an order placed already rejects `AlreadyPlaced`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlaceOrder {
    pub order_id: String,
    pub total: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Rejection)]
pub enum PlaceOrderRejection {
    #[rejection("order `{order_id}` is placed already")]
    AlreadyPlaced { order_id: String },
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
            return Err(PlaceOrderRejection::AlreadyPlaced {
                order_id: self.order_id.clone(),
            });
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

/// Marks an order paid: a paid order is "already done" (no events), anything but a placed order
/// rejects `NotOpen`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MarkOrderPaid {
    pub order_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Rejection)]
pub enum MarkOrderPaidRejection {
    #[rejection("only open orders can be paid; this one is {status}")]
    NotOpen { status: String },
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
            Some(OrderStatus::Placed) => Ok(vec![
                OrderPaid {
                    order_id: self.order_id.clone(),
                }
                .into(),
            ]),
            other => Err(MarkOrderPaidRejection::NotOpen {
                status: other.map_or("new".to_owned(), |s| format!("{s:?}").to_lowercase()),
            }),
        }
    }
}

/// Fulfils a paid order, then cancels nothing: two events in one decision.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PayAndFulfil {
    pub order_id: String,
}

#[command]
impl Command for PayAndFulfil {
    const NAME: &'static str = "PayAndFulfil";
    type Aggregate = Order;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.order_id
    }

    fn decide(&self, _: &Order) -> Decision<Self> {
        Ok(vec![
            OrderPaid {
                order_id: self.order_id.clone(),
            }
            .into(),
            OrderFulfilled {
                order_id: self.order_id.clone(),
            }
            .into(),
        ])
    }
}

/// Sends a reminder while the order is placed; otherwise there is nothing to remind of.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SendReminder {
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

/// Records that the confirmation went out, once.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecordConfirmationSent {
    pub order_id: String,
}

#[command]
impl Command for RecordConfirmationSent {
    const NAME: &'static str = "RecordConfirmationSent";
    type Aggregate = Order;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.order_id
    }

    fn decide(&self, order: &Order) -> Decision<Self> {
        if order.confirmed {
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

/// Cancels an order that is placed or paid; anything else rejects `NotCancellable`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CancelOrder {
    pub order_id: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Rejection)]
pub enum CancelOrderRejection {
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

/// Settles a payment for an order (another aggregate's event that names the order).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SettlePayment {
    pub payment_id: String,
    pub order_id: Option<String>,
}

#[command]
impl Command for SettlePayment {
    const NAME: &'static str = "SettlePayment";
    type Aggregate = Payment;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.payment_id
    }

    fn decide(&self, _: &Payment) -> Decision<Self> {
        Ok(vec![
            PaymentSettled {
                payment_id: self.payment_id.clone(),
                order_id: self.order_id.clone(),
            }
            .into(),
        ])
    }
}

/// Refunds a payment; the refund names its order only in `reference`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RefundPayment {
    pub payment_id: String,
    pub reference: String,
}

#[command]
impl Command for RefundPayment {
    const NAME: &'static str = "RefundPayment";
    type Aggregate = Payment;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.payment_id
    }

    fn decide(&self, _: &Payment) -> Decision<Self> {
        Ok(vec![
            PaymentRefunded {
                payment_id: self.payment_id.clone(),
                reference: self.reference.clone(),
            }
            .into(),
        ])
    }
}

/// Confirms an order an hour after it is placed.
pub struct ConfirmLater;

#[policy]
impl Policy for ConfirmLater {
    const NAME: &'static str = "confirm_later";
    type Event = OrderPlaced;

    fn delay() -> Result<Option<Duration>, DurationError> {
        Ok(Some(hours(1)))
    }

    async fn handle(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
        cx.send(RecordConfirmationSent {
            order_id: cx.event().order_id.clone(),
        })
        .await?;
        Ok(())
    }
}

/// Places order `id`, of 139.
pub fn place(id: &str) -> PlaceOrder {
    PlaceOrder {
        order_id: id.into(),
        total: 139,
    }
}
