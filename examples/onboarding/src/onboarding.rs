//! The `UserOnboarding` process: it follows a user from registration to activation,
//! and when its timeout comes first, expires the registration.

use bounda::prelude::*;

use crate::user::{
    ExpireRegistration, RegistrationExpired, User, UserActivated, UserRegistered, WelcomeEmailSent,
};

/// Follows a registration. Its lifetime is the user aggregate's `processes_timeout`, which
/// [`crate::app`] sets from `ONBOARDING_TIMEOUT` (seven days unless set).
#[process(
    on = User,
    started_by = [UserRegistered],
    completed_by = [UserActivated, RegistrationExpired],
)]
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserOnboarding {
    /// Whether the welcome email went out.
    pub welcome_email_sent: bool,
}

#[process]
impl UserOnboarding {
    async fn on_welcome_email_sent(
        _: On<'_, Self, WelcomeEmailSent>,
    ) -> Result<UserOnboardingPatch> {
        Ok(UserOnboardingPatch::default().welcome_email_sent(true))
    }

    async fn at_timeout(cx: At<'_, Self>) -> Result<()> {
        cx.send(ExpireRegistration { user_id: cx.id() }).await?;
        Ok(())
    }
}
