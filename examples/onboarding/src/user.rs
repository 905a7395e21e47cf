//! The user: registered, then active or expired.
//!
//! The original validated payloads with a schema and raised `ValidationError`. Here the rules
//! are types: a [`UserId`] is a uuid, an [`Email`] has a local part and a domain, a [`Name`] is
//! not blank. A command cannot be built with a bad value, and JSON that breaks a rule does not
//! decode into one (`tests/scenarios.rs`, scenario 4).

use bounda::calendar::Zone;
use bounda::prelude::*;

/// A payload that breaks a rule: which field, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{path}` {message}")]
pub struct ValidationError {
    /// The field, as the payload names it.
    pub path: &'static str,
    /// What is wrong with it.
    pub message: &'static str,
}

/// A user's id: a uuid, kept in its hyphenated text form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct UserId(String);

impl UserId {
    /// Checks that `text` is a uuid.
    pub fn parse(text: &str) -> Result<UserId, ValidationError> {
        uuid::Uuid::parse_str(text)
            .map(|id| UserId(id.hyphenated().to_string()))
            .map_err(|_| ValidationError {
                path: "user_id",
                message: "must be a uuid",
            })
    }

    /// A fresh random id.
    pub fn random() -> UserId {
        UserId(uuid::Uuid::new_v4().hyphenated().to_string())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// An email address: something before one `@`, a dotted domain after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Email(String);

impl Email {
    /// Checks that `text` looks like an address.
    pub fn parse(text: &str) -> Result<Email, ValidationError> {
        let text = text.trim();
        let valid = text.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty()
                && !domain.contains('@')
                && domain.split('.').count() >= 2
                && domain.split('.').all(|part| !part.is_empty())
                && !text.contains(char::is_whitespace)
        });
        if valid {
            Ok(Email(text.to_owned()))
        } else {
            Err(ValidationError {
                path: "email",
                message: "must be an email address",
            })
        }
    }

    /// The address.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A user's name: not blank.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Name(String);

impl Name {
    /// Checks that `text` has something in it besides spaces.
    pub fn parse(text: &str) -> Result<Name, ValidationError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(ValidationError {
                path: "name",
                message: "must not be empty",
            });
        }
        Ok(Name(text.to_owned()))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

macro_rules! text_conversions {
    ($($ty:ident),*) => {$(
        impl TryFrom<String> for $ty {
            type Error = ValidationError;
            fn try_from(text: String) -> Result<$ty, ValidationError> {
                $ty::parse(&text)
            }
        }
        impl From<$ty> for String {
            fn from(value: $ty) -> String {
                value.0
            }
        }
    )*};
}

text_conversions!(UserId, Email, Name);

/// A user registered; the welcome email is not sent yet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = User)]
pub struct UserRegistered {
    /// The user.
    pub user_id: String,
    /// Where the welcome email goes.
    pub email: String,
    /// Their name.
    pub name: String,
    /// Their time zone, an IANA name; none when they gave none, and on registrations made
    /// before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
}

/// The user activated their account.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = User)]
pub struct UserActivated {
    /// The user.
    pub user_id: String,
}

/// The user did not activate in time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = User)]
pub struct RegistrationExpired {
    /// The user.
    pub user_id: String,
}

/// The welcome email went out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = User)]
pub struct WelcomeEmailSent {
    /// The user.
    pub user_id: String,
    /// Where it went.
    pub to: String,
}

/// The user changed their name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = User)]
pub struct ProfileUpdated {
    /// The user.
    pub user_id: String,
    /// The new name.
    pub name: String,
}

/// The user's events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Events)]
#[allow(missing_docs)]
pub enum UserEvent {
    Registered(UserRegistered),
    Activated(UserActivated),
    Expired(RegistrationExpired),
    WelcomeEmailSent(WelcomeEmailSent),
    ProfileUpdated(ProfileUpdated),
}

/// Where a user stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum UserStatus {
    Registered,
    Active,
    Expired,
}

/// A user; `status` is `None` until they register.
#[derive(Debug, Default)]
pub struct User {
    /// Where they stand.
    pub status: Option<UserStatus>,
    /// Their address.
    pub email: String,
    /// Their name.
    pub name: String,
    /// Whether the welcome email went out.
    pub welcome_email_sent: bool,
}

impl Aggregate for User {
    const NAME: &'static str = "User";
    const ID_FIELD: &'static str = "user_id";
    type Event = UserEvent;

    fn apply(&mut self, event: &UserEvent) {
        match event {
            UserEvent::Registered(registered) => {
                self.status = Some(UserStatus::Registered);
                self.email = registered.email.clone();
                self.name = registered.name.clone();
            }
            UserEvent::Activated(_) => self.status = Some(UserStatus::Active),
            UserEvent::Expired(_) => self.status = Some(UserStatus::Expired),
            UserEvent::WelcomeEmailSent(_) => self.welcome_email_sent = true,
            UserEvent::ProfileUpdated(updated) => self.name = updated.name.clone(),
        }
    }
}

/// Registers a user.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RegisterUser {
    /// The new user's id.
    pub user_id: UserId,
    /// Their address.
    pub email: Email,
    /// Their name.
    pub name: Name,
    /// Their time zone, for the weekly digest (UTC unless given): a name the IANA database
    /// does not hold is refused when the command arrives.
    #[serde(default)]
    pub zone: Option<Zone>,
}

/// Why a user cannot register.
#[derive(Debug, Clone, PartialEq, Eq, Rejection)]
pub enum RegisterUserRejection {
    /// The id is taken.
    #[rejection("the user is registered already")]
    AlreadyRegistered,
}

#[command]
impl Command for RegisterUser {
    const NAME: &'static str = "RegisterUser";
    type Aggregate = User;
    type Rejection = RegisterUserRejection;

    fn aggregate_id(&self) -> &str {
        self.user_id.as_str()
    }

    fn decide(&self, user: &User) -> Decision<Self> {
        if user.status.is_some() {
            return Err(RegisterUserRejection::AlreadyRegistered);
        }
        Ok(vec![
            UserRegistered {
                user_id: self.user_id.as_str().to_owned(),
                email: self.email.as_str().to_owned(),
                name: self.name.as_str().to_owned(),
                zone: self.zone.as_ref().map(|zone| zone.name().to_owned()),
            }
            .into(),
        ])
    }
}

/// Activates a registered user.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ActivateUser {
    /// The user.
    pub user_id: String,
}

/// Why a user cannot be activated.
#[derive(Debug, Clone, PartialEq, Eq, Rejection)]
pub enum ActivateUserRejection {
    /// Their registration expired.
    #[rejection("the registration expired")]
    Expired,
    /// Nobody registered under the id.
    #[rejection("the user does not exist")]
    NotFound,
    /// They are active already.
    #[rejection("the user is active already")]
    AlreadyActive,
}

#[command]
impl Command for ActivateUser {
    const NAME: &'static str = "ActivateUser";
    type Aggregate = User;
    type Rejection = ActivateUserRejection;

    fn aggregate_id(&self) -> &str {
        &self.user_id
    }

    fn decide(&self, user: &User) -> Decision<Self> {
        match user.status {
            None => Err(ActivateUserRejection::NotFound),
            Some(UserStatus::Expired) => Err(ActivateUserRejection::Expired),
            Some(UserStatus::Active) => Err(ActivateUserRejection::AlreadyActive),
            Some(UserStatus::Registered) => Ok(vec![
                UserActivated {
                    user_id: self.user_id.clone(),
                }
                .into(),
            ]),
        }
    }
}

/// Renames a registered or active user.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UpdateProfile {
    /// The user.
    pub user_id: String,
    /// The new name.
    pub name: Name,
}

/// Why a profile cannot be updated.
#[derive(Debug, Clone, PartialEq, Eq, Rejection)]
pub enum UpdateProfileRejection {
    /// Nobody registered under the id, or the registration expired.
    #[rejection("only a registered or active user can update their profile")]
    NotOpen,
}

#[command]
impl Command for UpdateProfile {
    const NAME: &'static str = "UpdateProfile";
    type Aggregate = User;
    type Rejection = UpdateProfileRejection;

    fn aggregate_id(&self) -> &str {
        &self.user_id
    }

    fn decide(&self, user: &User) -> Decision<Self> {
        match user.status {
            Some(UserStatus::Registered | UserStatus::Active)
                if user.name == self.name.as_str() =>
            {
                Ok(vec![])
            }
            Some(UserStatus::Registered | UserStatus::Active) => Ok(vec![
                ProfileUpdated {
                    user_id: self.user_id.clone(),
                    name: self.name.as_str().to_owned(),
                }
                .into(),
            ]),
            _ => Err(UpdateProfileRejection::NotOpen),
        }
    }
}

/// Expires a registration that was never activated; anything else is left as it is.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExpireRegistration {
    /// The user.
    pub user_id: String,
}

#[command]
impl Command for ExpireRegistration {
    const NAME: &'static str = "ExpireRegistration";
    type Aggregate = User;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.user_id
    }

    fn decide(&self, user: &User) -> Decision<Self> {
        if user.status != Some(UserStatus::Registered) {
            return Ok(vec![]);
        }
        Ok(vec![
            RegistrationExpired {
                user_id: self.user_id.clone(),
            }
            .into(),
        ])
    }
}

/// Records that the welcome email went out; a repeat records nothing.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecordWelcomeEmailSent {
    /// The user.
    pub user_id: String,
    /// Where it went.
    pub to: String,
}

#[command]
impl Command for RecordWelcomeEmailSent {
    const NAME: &'static str = "RecordWelcomeEmailSent";
    type Aggregate = User;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.user_id
    }

    fn decide(&self, user: &User) -> Decision<Self> {
        if user.welcome_email_sent {
            return Ok(vec![]);
        }
        Ok(vec![
            WelcomeEmailSent {
                user_id: self.user_id.clone(),
                to: self.to.clone(),
            }
            .into(),
        ])
    }
}
