//! The `UserOnboarding` process: it follows a user from registration to activation, sends
//! them a weekly digest every Monday at 08:00 their time meanwhile, and when its timeout comes
//! first, expires the registration.

use bounda::calendar::Zone;
use bounda::prelude::*;
use bounda::rule;

use crate::email::{Email, EmailPort, Mail};
use crate::user::{
    ExpireRegistration, RegistrationExpired, User, UserActivated, UserRegistered, WelcomeEmailSent,
};

/// Follows a registration. Its lifetime is the user aggregate's `processes_timeout`, which
/// [`crate::app`] sets from `ONBOARDING_TIMEOUT` (seven days unless set).
#[process(
    on = User,
    started_by = [UserRegistered],
    completed_by = [UserActivated, RegistrationExpired],
    ports = [EmailPort],
)]
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserOnboarding {
    /// Whether the welcome email went out.
    pub welcome_email_sent: bool,
    /// Where the digest goes.
    pub email: String,
    /// Whom it greets.
    pub name: String,
    /// The next weekly digest: Mondays at 08:00 in the user's zone, until they activate.
    #[deadline]
    pub digest: Deadline,
}

#[process]
impl UserOnboarding {
    async fn on_user_registered(cx: On<'_, Self, UserRegistered>) -> Result<UserOnboardingPatch> {
        let registered = cx.event();
        let zone = match &registered.zone {
            Some(zone) => Zone::named(zone)?,
            None => bounda::zone!("UTC"),
        };
        let mondays = rule!("FREQ=WEEKLY;BYDAY=MO;BYHOUR=8;BYMINUTE=0");
        Ok(UserOnboardingPatch::default()
            .email(registered.email.clone())
            .name(registered.name.clone())
            .digest(cx.next_occurrence(&mondays, &zone)?))
    }

    async fn on_welcome_email_sent(
        _: On<'_, Self, WelcomeEmailSent>,
    ) -> Result<UserOnboardingPatch> {
        Ok(UserOnboardingPatch::default().welcome_email_sent(true))
    }

    /// Sends the digest once, however late (a run after an outage covers the Mondays it
    /// missed), and goes on to the next Monday by the deadline's own rule.
    async fn at_digest(cx: At<'_, Self>) -> Result<AtDigest> {
        let key = cx.key_for("digest")?;
        cx.port::<EmailPort>()?.send(Email {
            mail: Mail::Digest,
            to: cx.state().email.clone(),
            name: cx.state().name.clone(),
            idempotency_key: key,
        })?;
        Ok(AtDigest::new(cx.recur()?))
    }

    async fn at_timeout(cx: At<'_, Self>) -> Result<()> {
        cx.send(ExpireRegistration { user_id: cx.id() }).await?;
        Ok(())
    }
}
