//! The welcome email, a minute after registration.

use bounda::prelude::*;

use crate::email::{Email, EmailPort};
use crate::user::{RecordWelcomeEmailSent, UserRegistered};

/// Sends the welcome email `WELCOME_EMAIL_DELAY` (a minute unless set) after the user
/// registered, then records it. It runs even if the user activated in that minute.
#[policy(delay = env("WELCOME_EMAIL_DELAY", "1m"), ports = [EmailPort])]
pub async fn send_welcome_email_on_user_registered(cx: Reaction<'_, UserRegistered>) -> Result<()> {
    let registered = cx.event();
    cx.port::<EmailPort>()?.send(Email {
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
