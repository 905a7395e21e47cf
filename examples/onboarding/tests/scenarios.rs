//! The onboarding's five scenarios, on simulated time and SQLite in memory, read through the
//! state and the `users-directory` and `user-details` read models; and the weekly digest in the
//! user's own time zone.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use std::sync::Arc;

use bounda::ProcessStatus;
use bounda::prelude::*;
use bounda::testing::Logs;
use bounda_sqlite::SqliteStore;
use onboarding::directory::{list_users, user_details};
use onboarding::email::{EmailPort, Mail, MemorySender};
use onboarding::onboarding::UserOnboarding;
use onboarding::user::*;

struct Onboarding {
    app: TestApp,
    /// Every warning and error the scenario logs must be one it expects.
    _logs: Logs,
    outbox: Arc<MemorySender>,
}

async fn onboarding() -> Onboarding {
    onboarding_for(days(7)).await
}

async fn onboarding_for(timeout: Duration) -> Onboarding {
    let outbox = Arc::new(MemorySender::default());
    let builder = onboarding::app(
        App::builder(SqliteStore::in_memory().unwrap()),
        outbox.clone() as EmailPort,
        timeout,
    );
    let logs = Logs::check();
    Onboarding {
        app: TestApp::new(builder).await.unwrap(),
        _logs: logs,
        outbox,
    }
}

impl Onboarding {
    async fn register(&self, name: &str) -> String {
        let user_id = UserId::random();
        let registered = self
            .app
            .dispatch(RegisterUser {
                zone: None,
                user_id: user_id.clone(),
                email: Email::parse(&format!("{}@example.com", name.to_lowercase())).unwrap(),
                name: Name::parse(name).unwrap(),
            })
            .await
            .unwrap();
        // As the registration form's next page would: the directory shows the new user.
        let caught = self.app.app().catch_up(&registered).await.unwrap();
        assert_eq!(caught.caught_up, ["users-directory", "user-details"]);
        user_id.as_str().to_owned()
    }

    async fn user(&self, user_id: &str) -> User {
        self.app.app().load::<User>(user_id).await.unwrap().state
    }
}

// 1. No email at once; a minute later one, recorded, and nothing left behind.
#[tokio::test]
async fn the_welcome_email_goes_a_minute_after_registration() {
    let o = onboarding().await;
    let ada = o.register("Ada").await;
    let registered_at = o.app.now();
    o.app.run_until_idle().await.unwrap();
    assert!(o.outbox.sent().is_empty(), "not yet");
    assert_eq!(
        o.app.events_of::<User>(&ada).await.unwrap().types(),
        ["UserRegistered"]
    );

    o.app.advance(minutes(1)).await.unwrap();
    let sent = o.outbox.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (sent[0].to.as_str(), sent[0].name.as_str()),
        ("ada@example.com", "Ada")
    );
    let details = user_details(o.app.app(), &ada).await.unwrap().unwrap();
    assert!(details.welcome_email_sent_at.is_some());
    assert!(o.user(&ada).await.welcome_email_sent);
    let process = o
        .app
        .app()
        .process_instance::<UserOnboarding>(&ada)
        .await
        .unwrap()
        .unwrap();
    assert!(process.state.welcome_email_sent, "the process saw it");
    assert_eq!(process.status, ProcessStatus::Started);
    assert_eq!(process.timeout_at, Some(registered_at + days(7)));
    assert_eq!(o.app.lag().await.unwrap().max_lag, 0);
}

// 2. Activated at once: eight days later still active, never expired, and the email still went.
#[tokio::test]
async fn an_activated_user_is_never_expired_and_still_gets_the_email() {
    let o = onboarding().await;
    let ada = o.register("Ada").await;
    o.app
        .dispatch(ActivateUser {
            user_id: ada.clone(),
        })
        .await
        .unwrap();
    o.app.advance(days(8)).await.unwrap();
    let details = user_details(o.app.app(), &ada).await.unwrap().unwrap();
    assert_eq!(details.status, UserStatus::Active);
    assert_eq!(details.expired_at, None);
    assert_eq!(
        o.outbox.sent().len(),
        1,
        "the delayed policy runs after activation too"
    );
    assert_eq!(
        o.app.events_of::<User>(&ada).await.unwrap().types(),
        ["UserRegistered", "UserActivated", "WelcomeEmailSent"]
    );
}

// 3. Not activated: registered until the last minute, expired at exactly seven days, and an
// activation then rejected.
#[tokio::test]
async fn an_unactivated_registration_expires_at_exactly_seven_days() {
    let o = onboarding().await;
    let ada = o.register("Ada").await;
    let registered_at = o.app.now();
    o.app.advance(days(7) - minutes(1)).await.unwrap();
    assert_eq!(o.user(&ada).await.status, Some(UserStatus::Registered));

    o.app.advance(minutes(1)).await.unwrap();
    let details = user_details(o.app.app(), &ada).await.unwrap().unwrap();
    assert_eq!(details.status, UserStatus::Expired);
    assert_eq!(details.expired_at, Some(registered_at + days(7)));
    let process = o
        .app
        .app()
        .process_instance::<UserOnboarding>(&ada)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(process.status, ProcessStatus::TimedOut);
    let rejected = o
        .app
        .dispatch(ActivateUser {
            user_id: ada.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(rejected.rejection(), Some(&ActivateUserRejection::Expired));
}

// 4. A second registration under the id is rejected; a bad email or an empty name is a
// validation error, whether built in code or decoded from JSON.
#[tokio::test]
async fn duplicates_are_rejected_and_bad_payloads_do_not_validate() {
    let o = onboarding().await;
    let ada = o.register("Ada").await;
    let again = RegisterUser {
        zone: None,
        user_id: UserId::parse(&ada).unwrap(),
        email: Email::parse("ada@example.com").unwrap(),
        name: Name::parse("Ada").unwrap(),
    };
    let rejected = o.app.dispatch(again).await.unwrap_err();
    assert_eq!(
        rejected.rejection(),
        Some(&RegisterUserRejection::AlreadyRegistered)
    );

    assert_eq!(Email::parse("not-an-email").unwrap_err().path, "email");
    assert_eq!(Email::parse("ada@localhost").unwrap_err().path, "email");
    assert_eq!(Name::parse("   ").unwrap_err().path, "name");
    assert_eq!(UserId::parse("u-1").unwrap_err().path, "user_id");
    let decoded = serde_json::from_value::<RegisterUser>(serde_json::json!({
        "user_id": UserId::random().as_str(),
        "email": "ada@example.com",
        "name": "",
    }));
    let error = decoded.unwrap_err().to_string();
    assert!(error.contains("`name` must not be empty"), "{error}");
    let decoded = serde_json::from_value::<RegisterUser>(serde_json::json!({
        "user_id": UserId::random().as_str(),
        "email": "ada-at-example.com",
        "name": "Ada",
    }));
    let error = decoded.unwrap_err().to_string();
    assert!(
        error.contains("`email` must be an email address"),
        "{error}"
    );

    let unknown = o.app.dispatch(ActivateUser {
        user_id: UserId::random().as_str().into(),
    });
    let refused = unknown.await.unwrap_err();
    assert_eq!(refused.rejection(), Some(&ActivateUserRejection::NotFound));
    assert!(refused.to_string().contains("does not exist"), "{refused}");
    o.app
        .dispatch(ActivateUser {
            user_id: ada.clone(),
        })
        .await
        .unwrap();
    let twice = o
        .app
        .dispatch(ActivateUser { user_id: ada })
        .await
        .unwrap_err();
    assert_eq!(
        twice.rejection(),
        Some(&ActivateUserRejection::AlreadyActive)
    );
}

// 5. Renaming to the same name changes nothing; the directory pages newest first.
#[tokio::test]
async fn the_same_name_changes_nothing_and_the_directory_pages_newest_first() {
    let o = onboarding().await;
    let ada = o.register("Ada").await;
    let same = UpdateProfile {
        user_id: ada.clone(),
        name: Name::parse("Ada").unwrap(),
    };
    let decided = o.app.dispatch(same).await.unwrap();
    assert!(decided.event_ids.is_empty(), "no event for the same name");
    let renamed = UpdateProfile {
        user_id: ada.clone(),
        name: Name::parse("Ada L.").unwrap(),
    };
    assert_eq!(o.app.dispatch(renamed).await.unwrap().event_ids.len(), 1);

    let mut ids = vec![ada];
    for name in ["Bob", "Cy", "Dee", "Eve"] {
        o.app.advance(seconds(1)).await.unwrap();
        ids.push(o.register(name).await);
    }
    let activated = o
        .app
        .dispatch(ActivateUser {
            user_id: ids[1].clone(),
        })
        .await
        .unwrap();
    o.app.app().catch_up(&activated).await.unwrap();

    let first = list_users(o.app.app(), 1, 2).await.unwrap();
    let names: Vec<_> = first.users.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["Eve", "Dee"]);
    assert_eq!(
        (
            first.total,
            first.active,
            first.page,
            first.page_size,
            first.pages
        ),
        (5, 1, 1, 2, 3)
    );
    let last = list_users(o.app.app(), 3, 2).await.unwrap();
    let names: Vec<_> = last.users.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["Ada L."]);
    assert_eq!(
        list_users(o.app.app(), 1, 1_000).await.unwrap().page_size,
        100,
        "pages are capped"
    );
    assert_eq!(list_users(o.app.app(), 0, 20).await.unwrap().page, 1);
}

// The onboarding's lifetime is the app's setting (ONBOARDING_TIMEOUT in the original).
#[tokio::test]
async fn the_onboarding_timeout_is_the_apps_setting() {
    let o = onboarding_for(days(2)).await;
    let ada = o.register("Ada").await;
    let registered_at = o.app.now();
    o.app.advance(days(2)).await.unwrap();
    let details = user_details(o.app.app(), &ada).await.unwrap().unwrap();
    assert_eq!(details.expired_at, Some(registered_at + days(2)));
    if std::env::var_os("ONBOARDING_TIMEOUT").is_none() {
        assert_eq!(
            onboarding::onboarding_timeout().unwrap(),
            days(7),
            "seven days unless set"
        );
    }
}

// Issue 38: a user who has not activated gets a digest every Monday at 08:00 their time, on
// either side of the change to summer time; activation ends them.
#[tokio::test]
async fn the_weekly_digest_goes_mondays_at_eight_in_the_users_zone_until_activation() {
    let o = onboarding_for(days(30)).await;
    // Thursday 19 March 2026; Berlin moves to summer time on Sunday the 29th.
    o.app
        .clock()
        .advance_to(Instant::parse("2026-03-19T10:00:00Z").unwrap());
    let user_id = UserId::random();
    o.app
        .dispatch(RegisterUser {
            user_id: user_id.clone(),
            email: Email::parse("grace@example.com").unwrap(),
            name: Name::parse("Grace").unwrap(),
            zone: Some(bounda::zone!("Europe/Berlin")),
        })
        .await
        .unwrap();
    let digests = |o: &Onboarding| {
        o.outbox
            .sent()
            .iter()
            .filter(|email| email.mail == Mail::Digest)
            .count()
    };
    let berlin = bounda::zone!("Europe/Berlin");
    o.app.advance(days(12)).await.unwrap();
    assert_eq!(digests(&o), 2, "Monday the 23rd and Monday the 30th");
    let story = o
        .app
        .app()
        .explain::<UserOnboarding>(user_id.as_str())
        .await
        .unwrap()
        .unwrap();
    let sent_at: Vec<String> = story
        .steps
        .iter()
        .filter_map(|step| match &step.what {
            bounda::explain::StepKind::DeadlineReached { local, .. } => local.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(
        sent_at,
        [
            "2026-03-23 08:00 Europe/Berlin (07:00Z)",
            "2026-03-30 08:00 Europe/Berlin (06:00Z)"
        ]
    );
    assert_eq!(
        berlin.describe(story.pending[0].at),
        "2026-04-06 08:00 Europe/Berlin (06:00Z)"
    );

    o.app
        .dispatch(ActivateUser {
            user_id: user_id.as_str().to_owned(),
        })
        .await
        .unwrap();
    o.app.advance(days(14)).await.unwrap();
    assert_eq!(digests(&o), 2, "none after activation");
}
