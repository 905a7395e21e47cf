//! The payment: requested, processing, settled, declined or cancelled, with its
//! refund. Its events name their order in `order_id`, which is how they reach the order's process.

use bounda::prelude::*;

macro_rules! payment_events {
    ($($(#[$doc:meta])* $name:ident { $($field:ident: $ty:ty),* $(,)? })*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
        #[event(aggregate = Payment)]
        pub struct $name {
            /// The payment.
            pub payment_id: String,
            /// The order it pays.
            pub order_id: String,
            $(#[allow(missing_docs)] pub $field: $ty,)*
        }
    )*};
}

payment_events! {
    /// A payment was requested from the gateway.
    PaymentRequested { amount: u64, intent_id: String }
    /// The gateway is processing it.
    PaymentProcessing {}
    /// The money arrived.
    PaymentSettled {}
    /// The gateway declined it.
    PaymentDeclined { reason: String }
    /// It was called off.
    PaymentCancelled { reason: String }
    /// Money that arrived after the payment was called off must go back.
    RefundRequested { intent_id: String, amount: u64 }
    /// The money went back.
    PaymentRefunded { refund_id: String }
}

/// The payment's events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Events)]
#[allow(missing_docs)]
pub enum PaymentEvent {
    Requested(PaymentRequested),
    Processing(PaymentProcessing),
    Settled(PaymentSettled),
    Declined(PaymentDeclined),
    Cancelled(PaymentCancelled),
    RefundRequested(RefundRequested),
    Refunded(PaymentRefunded),
}

/// Where a payment stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum PaymentStatus {
    Requested,
    Processing,
    Settled,
    Declined,
    Cancelled,
}

/// Where a refund stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum Refund {
    #[default]
    None,
    Due,
    Done,
}

/// A payment; `status` is `None` until it is requested.
#[derive(Debug, Default)]
pub struct Payment {
    /// Where it stands.
    pub status: Option<PaymentStatus>,
    /// Where its refund stands.
    pub refund: Refund,
    /// The order it pays.
    pub order_id: String,
    /// How much, in cents.
    pub amount: u64,
    /// The gateway's intent.
    pub intent_id: String,
}

impl Aggregate for Payment {
    const NAME: &'static str = "Payment";
    const ID_FIELD: &'static str = "payment_id";
    type Event = PaymentEvent;

    fn apply(&mut self, event: &PaymentEvent) {
        match event {
            PaymentEvent::Requested(requested) => {
                self.status = Some(PaymentStatus::Requested);
                self.order_id = requested.order_id.clone();
                self.amount = requested.amount;
                self.intent_id = requested.intent_id.clone();
            }
            PaymentEvent::Processing(_) => self.status = Some(PaymentStatus::Processing),
            PaymentEvent::Settled(_) => self.status = Some(PaymentStatus::Settled),
            PaymentEvent::Declined(_) => self.status = Some(PaymentStatus::Declined),
            PaymentEvent::Cancelled(_) => self.status = Some(PaymentStatus::Cancelled),
            PaymentEvent::RefundRequested(_) => self.refund = Refund::Due,
            PaymentEvent::Refunded(_) => self.refund = Refund::Done,
        }
    }
}

macro_rules! payment_command {
    ($(#[$doc:meta])* $name:ident { $($field:ident: $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Serialize, Deserialize)]
        pub struct $name {
            /// The payment.
            pub payment_id: String,
            $(#[allow(missing_docs)] pub $field: $ty,)*
        }
    };
}

payment_command!(
    /// Records a payment requested from the gateway; a second request is "already done".
    RequestPayment { order_id: String, amount: u64, intent_id: String }
);

#[command]
impl Command for RequestPayment {
    const NAME: &'static str = "RequestPayment";
    type Aggregate = Payment;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.payment_id
    }

    fn decide(&self, payment: &Payment) -> Decision<Self> {
        if payment.status.is_some() {
            return Ok(vec![]);
        }
        Ok(vec![
            PaymentRequested {
                payment_id: self.payment_id.clone(),
                order_id: self.order_id.clone(),
                amount: self.amount,
                intent_id: self.intent_id.clone(),
            }
            .into(),
        ])
    }
}

payment_command!(
    /// The gateway's webhook: the payment is being processed.
    MarkPaymentProcessing {}
);

#[command]
impl Command for MarkPaymentProcessing {
    const NAME: &'static str = "MarkPaymentProcessing";
    type Aggregate = Payment;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.payment_id
    }

    fn decide(&self, payment: &Payment) -> Decision<Self> {
        if payment.status != Some(PaymentStatus::Requested) {
            return Ok(vec![]);
        }
        let order_id = payment.order_id.clone();
        Ok(vec![
            PaymentProcessing {
                payment_id: self.payment_id.clone(),
                order_id,
            }
            .into(),
        ])
    }
}

payment_command!(
    /// The gateway's webhook: the money arrived.
    SettlePayment {}
);

/// Why a payment cannot settle.
#[derive(Debug, Clone, PartialEq, Eq, Rejection)]
pub enum SettleRejection {
    /// No such payment was requested.
    #[rejection("no payment was requested under this id")]
    NeverRequested,
}

#[command]
impl Command for SettlePayment {
    const NAME: &'static str = "SettlePayment";
    type Aggregate = Payment;
    type Rejection = SettleRejection;

    fn aggregate_id(&self) -> &str {
        &self.payment_id
    }

    fn decide(&self, payment: &Payment) -> Decision<Self> {
        let (payment_id, order_id) = (self.payment_id.clone(), payment.order_id.clone());
        let settled = || {
            PaymentSettled {
                payment_id: payment_id.clone(),
                order_id: order_id.clone(),
            }
            .into()
        };
        match (payment.status, payment.refund) {
            (None, _) => Err(SettleRejection::NeverRequested),
            (Some(PaymentStatus::Requested | PaymentStatus::Processing), _) => Ok(vec![settled()]),
            (Some(PaymentStatus::Cancelled | PaymentStatus::Declined), Refund::None) => Ok(vec![
                settled(),
                RefundRequested {
                    payment_id: payment_id.clone(),
                    order_id: order_id.clone(),
                    intent_id: payment.intent_id.clone(),
                    amount: payment.amount,
                }
                .into(),
            ]),
            _ => Ok(vec![]),
        }
    }
}

payment_command!(
    /// The gateway's webhook: the payment was declined.
    DeclinePayment { reason: String }
);

#[command]
impl Command for DeclinePayment {
    const NAME: &'static str = "DeclinePayment";
    type Aggregate = Payment;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.payment_id
    }

    fn decide(&self, payment: &Payment) -> Decision<Self> {
        match payment.status {
            Some(PaymentStatus::Requested | PaymentStatus::Processing) => Ok(vec![
                PaymentDeclined {
                    payment_id: self.payment_id.clone(),
                    order_id: payment.order_id.clone(),
                    reason: self.reason.clone(),
                }
                .into(),
            ]),
            _ => Ok(vec![]),
        }
    }
}

payment_command!(
    /// Calls the payment off; money already in goes back.
    CancelPayment { reason: String }
);

#[command]
impl Command for CancelPayment {
    const NAME: &'static str = "CancelPayment";
    type Aggregate = Payment;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.payment_id
    }

    fn decide(&self, payment: &Payment) -> Decision<Self> {
        let cancelled = PaymentCancelled {
            payment_id: self.payment_id.clone(),
            order_id: payment.order_id.clone(),
            reason: self.reason.clone(),
        };
        match (payment.status, payment.refund) {
            (Some(PaymentStatus::Requested | PaymentStatus::Processing), _) => {
                Ok(vec![cancelled.into()])
            }
            (Some(PaymentStatus::Settled), Refund::None) => Ok(vec![
                cancelled.into(),
                RefundRequested {
                    payment_id: self.payment_id.clone(),
                    order_id: payment.order_id.clone(),
                    intent_id: payment.intent_id.clone(),
                    amount: payment.amount,
                }
                .into(),
            ]),
            _ => Ok(vec![]),
        }
    }
}

payment_command!(
    /// Records the gateway's refund.
    RecordRefund { refund_id: String }
);

#[command]
impl Command for RecordRefund {
    const NAME: &'static str = "RecordRefund";
    type Aggregate = Payment;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.payment_id
    }

    fn decide(&self, payment: &Payment) -> Decision<Self> {
        if payment.refund != Refund::Due {
            return Ok(vec![]);
        }
        Ok(vec![
            PaymentRefunded {
                payment_id: self.payment_id.clone(),
                order_id: payment.order_id.clone(),
                refund_id: self.refund_id.clone(),
            }
            .into(),
        ])
    }
}
