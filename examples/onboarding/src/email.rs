//! The email sender port: who sends the welcome email. The policy passes its run's key, so a
//! sender that honours it sends once however often the run is retried.

use std::sync::{Arc, Mutex};

/// What an email is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mail {
    /// The welcome, a minute after registering.
    Welcome,
    /// The weekly digest, Mondays at 08:00 the user's time until they activate.
    Digest,
}

impl Mail {
    /// As the log names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Mail::Welcome => "welcome email",
            Mail::Digest => "weekly digest",
        }
    }
}

/// One email to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Email {
    /// What it is.
    pub mail: Mail,
    /// The address.
    pub to: String,
    /// Whom it greets.
    pub name: String,
    /// The same for every attempt of one policy run.
    pub idempotency_key: String,
}

/// Sends emails.
pub trait EmailSender: Send + Sync {
    /// Sends `email`; an error fails the run, which is retried with the same key.
    fn send(&self, email: Email) -> anyhow::Result<()>;
}

/// The port as the app holds it.
pub type EmailPort = Arc<dyn EmailSender>;

/// Logs each email (`welcome email`) instead of sending it, from `EMAIL_FROM`.
#[derive(Debug, Clone)]
pub struct ConsoleSender {
    from: String,
}

impl ConsoleSender {
    /// A sender from `EMAIL_FROM`, `welcome@onboarding.localhost` unless set.
    pub fn from_env() -> ConsoleSender {
        let from = std::env::var("EMAIL_FROM")
            .unwrap_or_else(|_| "welcome@onboarding.localhost".to_owned());
        ConsoleSender { from }
    }

    /// The address emails come from.
    pub fn from(&self) -> &str {
        &self.from
    }
}

impl EmailSender for ConsoleSender {
    fn send(&self, email: Email) -> anyhow::Result<()> {
        tracing::info!(
            from = %self.from,
            to = %email.to,
            name = %email.name,
            idempotency_key = %email.idempotency_key,
            "{}",
            email.mail.as_str()
        );
        Ok(())
    }
}

/// Keeps the emails, one per key: a test reads them back.
#[derive(Debug, Default)]
pub struct MemorySender {
    sent: Mutex<Vec<Email>>,
}

impl MemorySender {
    /// The emails sent so far, in order.
    pub fn sent(&self) -> Vec<Email> {
        self.sent
            .lock()
            .map(|sent| sent.clone())
            .unwrap_or_default()
    }
}

impl EmailSender for MemorySender {
    fn send(&self, email: Email) -> anyhow::Result<()> {
        let mut sent = self
            .sent
            .lock()
            .map_err(|_| anyhow::anyhow!("the outbox is poisoned"))?;
        if !sent
            .iter()
            .any(|e| e.idempotency_key == email.idempotency_key)
        {
            sent.push(email);
        }
        Ok(())
    }
}

/// Records each email in a preview's calls and succeeds: a preview of a deploy tells nobody.
#[derive(Debug, Clone)]
pub struct RecordingSender {
    calls: bounda::preview::PortCalls,
}

impl RecordingSender {
    /// A sender recording into `calls`.
    pub fn new(calls: bounda::preview::PortCalls) -> RecordingSender {
        RecordingSender { calls }
    }
}

impl EmailSender for RecordingSender {
    fn send(&self, email: Email) -> anyhow::Result<()> {
        let detail =
            serde_json::json!({ "mail": email.mail.as_str(), "to": email.to, "name": email.name });
        self.calls
            .record("EmailSender", "send", Some(&email.idempotency_key), detail);
        Ok(())
    }
}
