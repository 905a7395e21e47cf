//! The onboarding example: a user registers, gets a welcome email a minute later,
//! and has seven days to activate before the registration expires.
//!
//! - [`user`]: the `User` aggregate, its commands, rejections and events; the payload rules
//!   (a uuid id, an email, a non-empty name) live in types that cannot hold a bad value.
//! - [`welcome`]: the delayed policy that sends the welcome email.
//! - [`onboarding`]: the `UserOnboarding` process, whose timeout expires the registration.
//! - [`email`]: the email sender port, with a console sender and an in-memory one for tests.
//! - [`directory`]: the users directory and user details, two read models kept from the events.

pub mod directory;
pub mod email;
pub mod onboarding;
pub mod user;
pub mod welcome;

use bounda::{AppBuilder, Duration, DurationError, days, env_duration};

use email::EmailPort;
use user::User;

/// How long a user has to activate: `ONBOARDING_TIMEOUT`, seven days unless set.
pub fn onboarding_timeout() -> Result<Duration, DurationError> {
    env_duration("ONBOARDING_TIMEOUT", days(7))
}

/// The onboarding's handlers and port on `builder`, with `onboarding_timeout` (see
/// [`onboarding_timeout`]) as the lifetime of the user's processes; the other settings are the
/// builder's.
pub fn app(builder: AppBuilder, sender: EmailPort, onboarding_timeout: Duration) -> AppBuilder {
    builder
        .configure(|config| {
            config
                .overrides
                .entry(<User as bounda::Aggregate>::NAME.to_owned())
                .or_default()
                .processes_timeout = Some(onboarding_timeout);
        })
        .port(sender)
}
