//! The users directory and each user's details: the `users-directory` and `user-details` read
//! models, kept from the `User` events, and the queries the pages ask.

use bounda::prelude::*;
use bounda::read_model::{Filter, Select};
use bounda::{App, Error, Instant};

use crate::user::{
    ProfileUpdated, RegistrationExpired, UserActivated, UserRegistered, UserStatus,
    WelcomeEmailSent,
};

/// A status as the tables keep it.
fn status_text(status: UserStatus) -> &'static str {
    match status {
        UserStatus::Registered => "registered",
        UserStatus::Active => "active",
        UserStatus::Expired => "expired",
    }
}

/// A status the tables keep; an unknown one reads as registered.
fn status_of(text: &str) -> UserStatus {
    match text {
        "active" => UserStatus::Active,
        "expired" => UserStatus::Expired,
        _ => UserStatus::Registered,
    }
}

/// One user as the directory lists them.
#[read_model(name = "users-directory")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectoryEntry {
    /// The user.
    #[key]
    pub user_id: String,
    /// Their address.
    #[index]
    pub email: String,
    /// Their name.
    pub name: String,
    /// `registered`, `active` or `expired`.
    #[index]
    pub status: String,
    /// When they registered.
    #[index]
    pub registered_at: Instant,
    /// Where their registration stands in the log: the later of two at one moment lists first.
    pub registration: u64,
}

#[read_model]
impl DirectoryEntry {
    async fn on_user_registered(
        event: Projected<'_, UserRegistered>,
        table: &mut Table<'_, Self>,
    ) -> Result<()> {
        let entry = DirectoryEntry {
            user_id: event.user_id.clone(),
            email: event.email.clone(),
            name: event.name.clone(),
            status: status_text(UserStatus::Registered).into(),
            registered_at: event.at(),
            registration: event.position(),
        };
        table.upsert(&entry).await?;
        Ok(())
    }

    async fn on_user_activated(
        event: Projected<'_, UserActivated>,
        table: &mut Table<'_, Self>,
    ) -> Result<()> {
        let status = DirectoryEntry::STATUS.set(status_text(UserStatus::Active));
        table
            .update(DirectoryEntry::USER_ID.eq(&event.user_id), [status])
            .await?;
        Ok(())
    }

    async fn on_registration_expired(
        event: Projected<'_, RegistrationExpired>,
        table: &mut Table<'_, Self>,
    ) -> Result<()> {
        let status = DirectoryEntry::STATUS.set(status_text(UserStatus::Expired));
        table
            .update(DirectoryEntry::USER_ID.eq(&event.user_id), [status])
            .await?;
        Ok(())
    }

    async fn on_profile_updated(
        event: Projected<'_, ProfileUpdated>,
        table: &mut Table<'_, Self>,
    ) -> Result<()> {
        let name = DirectoryEntry::NAME.set(event.name.clone());
        table
            .update(DirectoryEntry::USER_ID.eq(&event.user_id), [name])
            .await?;
        Ok(())
    }
}

/// Everything known of one user, as their page shows it.
#[read_model(name = "user-details")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserDetailsRow {
    /// The user.
    #[key]
    pub user_id: String,
    /// Their address.
    pub email: String,
    /// Their name.
    pub name: String,
    /// `registered`, `active` or `expired`.
    pub status: String,
    /// When they registered.
    pub registered_at: Instant,
    /// When they activated, if they did.
    pub activated_at: Option<Instant>,
    /// When their registration expired, if it did.
    pub expired_at: Option<Instant>,
    /// When the welcome email went out, if it did.
    pub welcome_email_sent_at: Option<Instant>,
}

#[read_model]
impl UserDetailsRow {
    async fn on_user_registered(
        event: Projected<'_, UserRegistered>,
        table: &mut Table<'_, Self>,
    ) -> Result<()> {
        let row = UserDetailsRow {
            user_id: event.user_id.clone(),
            email: event.email.clone(),
            name: event.name.clone(),
            status: status_text(UserStatus::Registered).into(),
            registered_at: event.at(),
            activated_at: None,
            expired_at: None,
            welcome_email_sent_at: None,
        };
        table.upsert(&row).await?;
        Ok(())
    }

    async fn on_user_activated(
        event: Projected<'_, UserActivated>,
        table: &mut Table<'_, Self>,
    ) -> Result<()> {
        let sets = [
            UserDetailsRow::STATUS.set(status_text(UserStatus::Active)),
            UserDetailsRow::ACTIVATED_AT.set(event.at()),
        ];
        table
            .update(UserDetailsRow::USER_ID.eq(&event.user_id), sets)
            .await?;
        Ok(())
    }

    async fn on_registration_expired(
        event: Projected<'_, RegistrationExpired>,
        table: &mut Table<'_, Self>,
    ) -> Result<()> {
        let sets = [
            UserDetailsRow::STATUS.set(status_text(UserStatus::Expired)),
            UserDetailsRow::EXPIRED_AT.set(event.at()),
        ];
        table
            .update(UserDetailsRow::USER_ID.eq(&event.user_id), sets)
            .await?;
        Ok(())
    }

    async fn on_welcome_email_sent(
        event: Projected<'_, WelcomeEmailSent>,
        table: &mut Table<'_, Self>,
    ) -> Result<()> {
        let sent = UserDetailsRow::WELCOME_EMAIL_SENT_AT.set(event.at());
        table
            .update(UserDetailsRow::USER_ID.eq(&event.user_id), [sent])
            .await?;
        Ok(())
    }

    async fn on_profile_updated(
        event: Projected<'_, ProfileUpdated>,
        table: &mut Table<'_, Self>,
    ) -> Result<()> {
        let name = UserDetailsRow::NAME.set(event.name.clone());
        table
            .update(UserDetailsRow::USER_ID.eq(&event.user_id), [name])
            .await?;
        Ok(())
    }
}

/// One user as their page shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserDetails {
    /// The user.
    pub user_id: String,
    /// Their address.
    pub email: String,
    /// Their name.
    pub name: String,
    /// Where they stand.
    pub status: UserStatus,
    /// When they registered.
    pub registered_at: Instant,
    /// When they activated, if they did.
    pub activated_at: Option<Instant>,
    /// When their registration expired, if it did.
    pub expired_at: Option<Instant>,
    /// When the welcome email went out, if it did.
    pub welcome_email_sent_at: Option<Instant>,
}

/// One user as the directory lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The user.
    pub user_id: String,
    /// Their address.
    pub email: String,
    /// Their name.
    pub name: String,
    /// Where they stand.
    pub status: UserStatus,
    /// When they registered.
    pub registered_at: Instant,
}

/// One page of the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserPage {
    /// The users on this page, newest registration first.
    pub users: Vec<Listed>,
    /// Users in all.
    pub total: u64,
    /// Active users in all.
    pub active: u64,
    /// This page, from 1.
    pub page: u64,
    /// Users per page, 1 to 100.
    pub page_size: u64,
    /// Pages in all.
    pub pages: u64,
}

/// The largest page.
pub const MAX_PAGE_SIZE: u64 = 100;

/// Page `page` (from 1) of `page_size` users (clamped to 1..=100), newest registration first.
pub async fn list_users(app: &App, page: u64, page_size: u64) -> Result<UserPage, Error> {
    let directory = app.read::<DirectoryEntry>();
    let newest = Select::filter(Filter::all())
        .order(DirectoryEntry::REGISTERED_AT.desc())
        .order(DirectoryEntry::REGISTRATION.desc());
    let found = directory
        .page(newest, page, page_size.clamp(1, MAX_PAGE_SIZE))
        .await?;
    let active = directory
        .count(DirectoryEntry::STATUS.eq(status_text(UserStatus::Active)))
        .await?;
    Ok(UserPage {
        users: found
            .rows
            .into_iter()
            .map(|entry| Listed {
                status: status_of(&entry.status),
                user_id: entry.user_id,
                email: entry.email,
                name: entry.name,
                registered_at: entry.registered_at,
            })
            .collect(),
        total: found.total,
        active,
        page: found.page,
        page_size: found.page_size,
        pages: if found.total == 0 { 0 } else { found.pages },
    })
}

/// One user, or `None` if nobody registered under `user_id`.
pub async fn user_details(app: &App, user_id: &str) -> Result<Option<UserDetails>, Error> {
    let row = app.read::<UserDetailsRow>().get(user_id).await?;
    Ok(row.map(|row| UserDetails {
        status: status_of(&row.status),
        user_id: row.user_id,
        email: row.email,
        name: row.name,
        registered_at: row.registered_at,
        activated_at: row.activated_at,
        expired_at: row.expired_at,
        welcome_email_sent_at: row.welcome_email_sent_at,
    }))
}
