//! The users directory and user details, read from the event log when asked. The
//! original kept them as read models; here they are folds over the `User` events, which is
//! enough for an example and always up to date.

use std::collections::HashMap;

use bounda::{App, Error, Instant, RecordedEvent};

use crate::user::UserStatus;

/// One user as the directory shows them.
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

/// One page of the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserPage {
    /// The users on this page, newest registration first.
    pub users: Vec<UserDetails>,
    /// Users in all.
    pub total: usize,
    /// Active users in all.
    pub active: usize,
    /// This page, from 1.
    pub page: usize,
    /// Users per page, 1 to 100.
    pub page_size: usize,
    /// Pages in all.
    pub pages: usize,
}

/// The largest page.
pub const MAX_PAGE_SIZE: usize = 100;

/// Page `page` (from 1) of `page_size` users (clamped to 1..=100), newest registration first.
pub async fn list_users(app: &App, page: usize, page_size: usize) -> Result<UserPage, Error> {
    let mut users: Vec<(u64, UserDetails)> = all_users(app).await?.into_values().collect();
    users.sort_by(|(a_pos, a), (b_pos, b)| {
        b.registered_at.cmp(&a.registered_at).then(b_pos.cmp(a_pos))
    });
    let page = page.max(1);
    let page_size = page_size.clamp(1, MAX_PAGE_SIZE);
    let total = users.len();
    let active = users
        .iter()
        .filter(|(_, u)| u.status == UserStatus::Active)
        .count();
    let users = users
        .into_iter()
        .skip((page - 1).saturating_mul(page_size))
        .take(page_size)
        .map(|(_, user)| user)
        .collect();
    Ok(UserPage {
        users,
        total,
        active,
        page,
        page_size,
        pages: total.div_ceil(page_size),
    })
}

/// One user, or `None` if nobody registered under `user_id`.
pub async fn user_details(app: &App, user_id: &str) -> Result<Option<UserDetails>, Error> {
    let events = app.store().read_stream("User", user_id).await?;
    let mut user = None;
    for event in &events {
        fold(&mut user, event);
    }
    Ok(user.map(|(_, details)| details))
}

/// Every user, by id, with the position they registered at.
async fn all_users(app: &App) -> Result<HashMap<String, (u64, UserDetails)>, Error> {
    let mut users: HashMap<String, Option<(u64, UserDetails)>> = HashMap::new();
    let mut after = 0;
    loop {
        let events = app.store().read_all(after, 1_000).await?;
        let Some(last) = events.last() else { break };
        after = last.position;
        for event in events.iter().filter(|e| e.aggregate_type == "User") {
            fold(users.entry(event.aggregate_id.clone()).or_default(), event);
        }
    }
    Ok(users
        .into_iter()
        .filter_map(|(id, user)| user.map(|user| (id, user)))
        .collect())
}

fn text(event: &RecordedEvent, field: &str) -> String {
    event.payload[field].as_str().unwrap_or_default().to_owned()
}

fn fold(user: &mut Option<(u64, UserDetails)>, event: &RecordedEvent) {
    if event.event_type == "UserRegistered" {
        *user = Some((
            event.position,
            UserDetails {
                user_id: event.aggregate_id.clone(),
                email: text(event, "email"),
                name: text(event, "name"),
                status: UserStatus::Registered,
                registered_at: event.timestamp,
                activated_at: None,
                expired_at: None,
                welcome_email_sent_at: None,
            },
        ));
        return;
    }
    let Some((_, user)) = user else { return };
    match event.event_type.as_str() {
        "UserActivated" => {
            user.status = UserStatus::Active;
            user.activated_at = Some(event.timestamp);
        }
        "RegistrationExpired" => {
            user.status = UserStatus::Expired;
            user.expired_at = Some(event.timestamp);
        }
        "WelcomeEmailSent" => user.welcome_email_sent_at = Some(event.timestamp),
        "ProfileUpdated" => user.name = text(event, "name"),
        _ => {}
    }
}
