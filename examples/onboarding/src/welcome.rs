//! The welcome email, a minute after registration, and the webhook that tells the mail
//! service's side of the company it went out.

use bounda::prelude::*;
use bounda::relay::{Contract, Relay};
use bounda_webhooks::Webhook;

use crate::email::{Email, EmailPort, Mail};
use crate::user::{RecordWelcomeEmailSent, UserRegistered, WelcomeEmailSent};

/// Sends the welcome email `WELCOME_EMAIL_DELAY` (a minute unless set) after the user
/// registered, then records it. It runs even if the user activated in that minute.
#[policy(delay = env("WELCOME_EMAIL_DELAY", "1m"), ports = [EmailPort])]
pub async fn send_welcome_email_on_user_registered(cx: Reaction<'_, UserRegistered>) -> Result<()> {
    let registered = cx.event();
    cx.port::<EmailPort>()?.send(Email {
        mail: Mail::Welcome,
        to: registered.email.clone(),
        name: registered.name.clone(),
        idempotency_key: cx.idempotency_key().to_owned(),
    })?;
    cx.send(RecordWelcomeEmailSent {
        user_id: registered.user_id.clone(),
        to: registered.email.clone(),
    })
    .await?;
    Ok(())
}

/// The welcome as it leaves the service: a public contract with its own version, not the
/// internal event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Welcome {
    /// The user.
    pub user_id: String,
    /// Where the welcome email went.
    pub to: String,
}

impl Contract for Welcome {
    const TYPE: &'static str = "com.example.onboarding.welcome.v1";
}

/// The endpoint the welcome is posted to, from `WELCOME_WEBHOOK_URL` and its secret
/// `WELCOME_WEBHOOK_SECRET`: `None` unless both are set; an error when one is set alone or
/// either is wrong, said before anything runs.
pub fn welcome_webhook() -> anyhow::Result<Option<Webhook>> {
    let url = std::env::var("WELCOME_WEBHOOK_URL").ok();
    let secret = std::env::var("WELCOME_WEBHOOK_SECRET").ok();
    match (url, secret) {
        (None, None) => Ok(None),
        (Some(url), Some(secret)) => Ok(Some(Webhook::new(&url, &secret)?)),
        (Some(_), None) => anyhow::bail!(
            "`WELCOME_WEBHOOK_URL` is set without `WELCOME_WEBHOOK_SECRET`: set both, or neither"
        ),
        (None, Some(_)) => anyhow::bail!(
            "`WELCOME_WEBHOOK_SECRET` is set without `WELCOME_WEBHOOK_URL`: set both, or neither"
        ),
    }
}

/// The relay posting each welcome that went out to `sink` as a signed webhook.
pub fn welcome_relay(sink: Webhook) -> Relay {
    Relay::new("welcome-webhook", sink)
        .event::<WelcomeEmailSent>()
        .contract(|sent: WelcomeEmailSent| Welcome {
            user_id: sent.user_id,
            to: sent.to,
        })
        .source("https://onboarding.example")
}
