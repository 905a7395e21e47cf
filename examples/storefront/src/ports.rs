//! The storefront's ways out: a notifier and a payment gateway, with in-memory fakes.

use std::sync::{Arc, Mutex, PoisonError};

/// What the notifier is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// The order.
    pub order_id: String,
    /// Its customer.
    pub customer_id: String,
    /// Its total, in cents.
    pub total: u64,
    /// The run's key: the provider drops a repeat.
    pub idempotency_key: String,
}

/// Tells customers about their orders.
pub trait Notifier: Send + Sync {
    /// Sends a confirmation.
    fn notify(&self, notification: Notification) -> anyhow::Result<()>;
}

/// The payment provider.
pub trait PaymentGateway: Send + Sync {
    /// Opens a payment intent; the same key opens it once.
    fn create_intent(
        &self,
        payment_id: &str,
        order_id: &str,
        amount: u64,
        key: &str,
    ) -> anyhow::Result<String>;
    /// Refunds an intent; the same key refunds once.
    fn refund(&self, intent_id: &str, amount: u64, key: &str) -> anyhow::Result<String>;
}

/// A notifier that remembers what it sent.
#[derive(Debug, Default)]
pub struct MemoryNotifier {
    sent: Mutex<Vec<Notification>>,
}

impl MemoryNotifier {
    /// Everything sent, in order.
    pub fn sent(&self) -> Vec<Notification> {
        self.sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Notifier for MemoryNotifier {
    fn notify(&self, notification: Notification) -> anyhow::Result<()> {
        let mut sent = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
        if !sent
            .iter()
            .any(|n| n.idempotency_key == notification.idempotency_key)
        {
            sent.push(notification);
        }
        Ok(())
    }
}

/// A gateway call, as the fake saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GatewayCall {
    /// An intent opened: payment, amount, key.
    Intent {
        payment_id: String,
        amount: u64,
        key: String,
    },
    /// A refund made: intent, amount, key.
    Refund {
        intent_id: String,
        amount: u64,
        key: String,
    },
}

/// A gateway that keeps to itself, dedupes by key, and can be told to fail.
#[derive(Debug, Default)]
pub struct FakeGateway {
    calls: Mutex<Vec<GatewayCall>>,
    attempts: Mutex<Vec<GatewayCall>>,
    fail_next_intent: Mutex<u32>,
    fail_next_refund: Mutex<u32>,
}

impl FakeGateway {
    /// Every call that went through, in order.
    pub fn calls(&self) -> Vec<GatewayCall> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Every call made, failed ones and repeats included, in order: what a retry sent.
    pub fn attempts(&self) -> Vec<GatewayCall> {
        self.attempts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn attempted(&self, call: &GatewayCall) {
        self.attempts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(call.clone());
    }

    /// The refunds made.
    pub fn refunds(&self) -> Vec<GatewayCall> {
        self.calls()
            .into_iter()
            .filter(|c| matches!(c, GatewayCall::Refund { .. }))
            .collect()
    }

    /// The intents opened.
    pub fn intents(&self) -> Vec<GatewayCall> {
        self.calls()
            .into_iter()
            .filter(|c| matches!(c, GatewayCall::Intent { .. }))
            .collect()
    }

    /// Fails the next `n` intent calls.
    pub fn fail_intents(&self, n: u32) {
        *self
            .fail_next_intent
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = n;
    }

    /// Fails the next `n` refund calls.
    pub fn fail_refunds(&self, n: u32) {
        *self
            .fail_next_refund
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = n;
    }

    fn should_fail(counter: &Mutex<u32>) -> bool {
        let mut left = counter.lock().unwrap_or_else(PoisonError::into_inner);
        if *left > 0 {
            *left -= 1;
            return true;
        }
        false
    }
}

impl PaymentGateway for FakeGateway {
    fn create_intent(
        &self,
        payment_id: &str,
        _order_id: &str,
        amount: u64,
        key: &str,
    ) -> anyhow::Result<String> {
        let call = GatewayCall::Intent {
            payment_id: payment_id.to_owned(),
            amount,
            key: key.to_owned(),
        };
        self.attempted(&call);
        if Self::should_fail(&self.fail_next_intent) {
            anyhow::bail!("the gateway is unavailable");
        }
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        if !calls
            .iter()
            .any(|c| matches!(c, GatewayCall::Intent { key: k, .. } if k == key))
        {
            calls.push(call);
        }
        Ok(format!("intent-{payment_id}"))
    }

    fn refund(&self, intent_id: &str, amount: u64, key: &str) -> anyhow::Result<String> {
        let call = GatewayCall::Refund {
            intent_id: intent_id.to_owned(),
            amount,
            key: key.to_owned(),
        };
        self.attempted(&call);
        if Self::should_fail(&self.fail_next_refund) {
            anyhow::bail!("the gateway is unavailable");
        }
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        if !calls
            .iter()
            .any(|c| matches!(c, GatewayCall::Refund { key: k, .. } if k == key))
        {
            calls.push(call);
        }
        Ok(format!("refund-{intent_id}"))
    }
}

/// The ports as the app holds them.
pub type NotifierPort = Arc<dyn Notifier>;
/// The ports as the app holds them.
pub type GatewayPort = Arc<dyn PaymentGateway>;

/// A notifier that appends one line per confirmation to a file, `<order> <key> <pid>`: several
/// processes can share it, each line written whole.
#[derive(Debug)]
pub struct FileNotifier {
    path: std::path::PathBuf,
}

impl FileNotifier {
    /// Appends to `path`.
    pub fn new(path: impl Into<std::path::PathBuf>) -> FileNotifier {
        FileNotifier { path: path.into() }
    }
}

impl Notifier for FileNotifier {
    fn notify(&self, notification: Notification) -> anyhow::Result<()> {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        let line = format!(
            "{} {} {}\n",
            notification.order_id,
            notification.idempotency_key,
            std::process::id()
        );
        file.write_all(line.as_bytes())?;
        Ok(())
    }
}

/// The notifier and the gateway of a preview: each call recorded in the preview's
/// [`PortCalls`](bounda::preview::PortCalls) and answered with success, so nobody is told and
/// nothing is charged or refunded.
#[derive(Debug, Clone)]
pub struct Recording {
    calls: bounda::preview::PortCalls,
}

impl Recording {
    /// A double that records into `calls`.
    pub fn new(calls: bounda::preview::PortCalls) -> Recording {
        Recording { calls }
    }
}

impl Notifier for Recording {
    fn notify(&self, notification: Notification) -> anyhow::Result<()> {
        self.calls.record(
            "Notifier",
            "notify",
            Some(&notification.idempotency_key),
            serde_json::json!({
                "orderId": notification.order_id,
                "customerId": notification.customer_id,
                "total": notification.total,
            }),
        );
        Ok(())
    }
}

impl PaymentGateway for Recording {
    fn create_intent(
        &self,
        payment_id: &str,
        order_id: &str,
        amount: u64,
        key: &str,
    ) -> anyhow::Result<String> {
        self.calls.record(
            "PaymentGateway",
            "create_intent",
            Some(key),
            serde_json::json!({ "paymentId": payment_id, "orderId": order_id, "amount": amount }),
        );
        Ok(format!("intent-{payment_id}"))
    }

    fn refund(&self, intent_id: &str, amount: u64, key: &str) -> anyhow::Result<String> {
        self.calls.record(
            "PaymentGateway",
            "refund",
            Some(key),
            serde_json::json!({ "intentId": intent_id, "amount": amount }),
        );
        Ok(format!("refund-{key}"))
    }
}
