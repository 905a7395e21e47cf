//! The onboarding under seeded simulation: users registering, activating and renaming
//! themselves at random moments, through outages, restarts, several runners, failing commits
//! and an email provider that fails and panics; the onboarding's rules hold throughout.
//!
//! `cargo test -p onboarding --test simulation` runs the CI slice; a long run:
//! `BOUNDA_SIMULATION_SCHEDULES=2000 cargo test --release -p onboarding --test simulation`.

use std::collections::BTreeMap;
use std::sync::Arc;

use bounda::store::{LetterFilter, LetterStatus};
use bounda::testing::simulate::{Effects, Input, PortFaults, Rng, Sent, SimRng, Simulation};
use bounda::{App, RecordedEvent, days};
use bounda_sqlite::ScratchFile;
use onboarding::email::{Email as Message, EmailSender};
use onboarding::user::{ActivateUser, Email, Name, RegisterUser, UpdateProfile, User, UserId};

/// Users a schedule uses.
const USERS: u8 = 4;

/// Where user `n` lives: two zones with their clock changes in the spring and autumn of the
/// north, one with its changes in the south's, one without.
const ZONES: [&str; USERS as usize] = [
    "Europe/Berlin",
    "America/New_York",
    "Australia/Sydney",
    "Asia/Kolkata",
];

fn zone_of(n: u8) -> Result<bounda::calendar::Zone, String> {
    bounda::calendar::Zone::named(ZONES[usize::from(n % USERS)]).map_err(|e| e.to_string())
}

/// What user `n` does.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Visitor {
    Register(u8),
    Activate(u8),
    Rename(u8),
}

fn user_id(n: u8) -> String {
    format!("00000000-0000-4000-8000-{n:012}")
}

impl Input for Visitor {
    fn first(rng: &mut SimRng) -> Vec<Visitor> {
        (0..USERS)
            .filter(|_| rng.random_bool(0.6))
            .map(Visitor::Register)
            .collect()
    }

    fn draw(rng: &mut SimRng) -> Visitor {
        let n = rng.random_range(0..USERS);
        match rng.random_range(0..10) {
            0..=3 => Visitor::Register(n),
            4..=7 => Visitor::Activate(n),
            _ => Visitor::Rename(n),
        }
    }

    async fn send(&self, app: &App) -> Result<Sent, String> {
        let invalid = |e: onboarding::user::ValidationError| e.to_string();
        match *self {
            Visitor::Register(n) => Sent::of(
                app.dispatch(RegisterUser {
                    zone: Some(zone_of(n)?),
                    user_id: UserId::parse(&user_id(n)).map_err(invalid)?,
                    email: Email::parse(&format!("user{n}@example.com")).map_err(invalid)?,
                    name: Name::parse(&format!("User {n}")).map_err(invalid)?,
                })
                .await,
            ),
            Visitor::Activate(n) => Sent::of(
                app.dispatch(ActivateUser {
                    user_id: user_id(n),
                })
                .await,
            ),
            Visitor::Rename(n) => Sent::of(
                app.dispatch(UpdateProfile {
                    user_id: user_id(n),
                    name: Name::parse(&format!("User {n} renamed")).map_err(invalid)?,
                })
                .await,
            ),
        }
    }
}

/// The email provider as the simulation plays it.
struct SimulatedSender {
    faults: PortFaults,
    effects: Effects,
}

impl EmailSender for SimulatedSender {
    fn send(&self, email: Message) -> anyhow::Result<()> {
        let key = &email.idempotency_key;
        self.faults.try_call(&format!("email:{key}"))?;
        self.effects
            .record(key, format!("{} {}", email.mail.as_str(), email.to));
        Ok(())
    }
}

/// Every registered user, with their events.
async fn users(app: &App) -> Result<BTreeMap<u8, Vec<RecordedEvent>>, String> {
    let mut users = BTreeMap::new();
    for n in 0..USERS {
        let events = app
            .events_of::<User>(&user_id(n))
            .await
            .map_err(|e| e.to_string())?;
        if !events.is_empty() {
            users.insert(n, events);
        }
    }
    Ok(users)
}

fn count(events: &[RecordedEvent], event_type: &str) -> usize {
    events.iter().filter(|e| e.event_type == event_type).count()
}

/// How many welcome emails went to user `n`, each under its own key.
fn welcomes(app: &App, n: u8) -> Result<usize, String> {
    sent(app, &format!("welcome email user{n}@example.com"))
}

/// How many weekly digests user `n` got.
fn digests(app: &App, n: u8) -> Result<usize, String> {
    sent(app, &format!("weekly digest user{n}@example.com"))
}

/// How many emails were recorded as `to`.
fn sent(app: &App, to: &str) -> Result<usize, String> {
    let effects = app.port::<Effects>().map_err(|e| e.to_string())?;
    Ok(effects.all().values().filter(|e| **e == to).count())
}

/// How many of user `n`'s letters an operator retried: each retry is a new request with a new
/// idempotency key, so an email that went out before the letter was filed goes out again.
async fn retried(app: &App, n: u8) -> Result<usize, String> {
    let id = user_id(n);
    Ok(app
        .dead_letters()
        .list(&LetterFilter {
            status: Some(LetterStatus::Retried),
            ..LetterFilter::default()
        })
        .await
        .map_err(|e| e.to_string())?
        .iter()
        .filter(|letter| letter.aggregate_id.as_deref() == Some(id.as_str()))
        .count())
}

/// A registration ends once, activated or expired; a user gets one welcome email, and one more
/// for each of their letters an operator retried, at most.
async fn ends_once(app: App) -> Result<(), String> {
    for (n, events) in users(&app).await? {
        let ends = count(&events, "UserActivated") + count(&events, "RegistrationExpired");
        if ends > 1 {
            return Err(format!("user {n}'s registration ended {ends} times"));
        }
        let sent = welcomes(&app, n)?;
        let retried = retried(&app, n).await?;
        if sent > 1 + retried {
            return Err(format!(
                "user {n} was welcomed {sent} times, with {retried} letters retried"
            ));
        }
        // A seven-day registration meets one Monday 08:00 at most: however late a digest
        // runs, it goes once and moves on to the next Monday, past the registration's end.
        let digests = digests(&app, n)?;
        if digests > 1 + retried {
            return Err(format!(
                "user {n} got {digests} weekly digests, with {retried} letters retried"
            ));
        }
    }
    Ok(())
}

/// Every weekly digest that ran was due on a Monday at 08:00 in its user's zone, on whichever
/// side of a clock change, and ran at or after that moment: late after an outage, never early.
async fn digests_on_mondays_at_eight(app: App) -> Result<(), String> {
    for n in 0..USERS {
        let zone = zone_of(n)?;
        let lifecycle = app
            .store()
            .read_stream("process:UserOnboarding", &user_id(n))
            .await
            .map_err(|e| e.to_string())?;
        for event in lifecycle.iter().filter(|event| {
            event.event_type == "ProcessDeadlineReached" && event.payload["field"] == "digest"
        }) {
            let due: bounda::Instant =
                serde_json::from_value(event.payload["at"].clone()).map_err(|e| e.to_string())?;
            let local = zone.wall_clock(due).map_err(|e| e.to_string())?;
            let monday_at_eight = local.weekday() == jiff::civil::Weekday::Monday
                && (local.hour(), local.minute(), local.second()) == (8, 0, 0);
            if !monday_at_eight || event.timestamp < due {
                return Err(format!(
                    "user {n}'s digest was due {} and ran at {}",
                    zone.describe(due),
                    zone.describe(event.timestamp)
                ));
            }
        }
    }
    Ok(())
}

/// At the end: every registration ended, and every user was welcomed and it was recorded once,
/// unless a letter about them is open or was discarded.
async fn everyone_settled(app: App) -> Result<(), String> {
    let letters: Vec<_> = app
        .dead_letters()
        .list(&LetterFilter::default())
        .await
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|letter| letter.status != LetterStatus::Retried)
        .collect();
    for (n, events) in users(&app).await? {
        let id = user_id(n);
        if letters
            .iter()
            .any(|letter| letter.aggregate_id.as_deref() == Some(id.as_str()))
        {
            continue;
        }
        if count(&events, "UserActivated") + count(&events, "RegistrationExpired") == 0 {
            return Err(format!("user {n}'s registration never ended"));
        }
        if welcomes(&app, n)? == 0 || count(&events, "WelcomeEmailSent") != 1 {
            return Err(format!("user {n} was not welcomed"));
        }
    }
    Ok(())
}

fn simulation() -> Simulation<Visitor> {
    Simulation::new(ScratchFile::new, |setup| {
        onboarding::app(
            App::builder_shared(setup.store()),
            Arc::new(SimulatedSender {
                faults: setup.port_faults(),
                effects: setup.effects(),
            }),
            days(7),
        )
    })
    .port_faults(15)
    .store_faults(40)
    .invariant(
        "a registration ends once; one welcome email and one digest at most",
        ends_once,
    )
    .invariant(
        "a digest is due Mondays at 08:00 in its user's zone and never runs early",
        digests_on_mondays_at_eight,
    )
    .at_end(
        "every registration ended and was welcomed",
        everyone_settled,
    )
    .settle(days(8))
}

#[tokio::test]
async fn the_onboardings_rules_hold_through_random_schedules() {
    let report = simulation().run(20).await;
    assert!(report.effects > 0, "the sender was called: {report}");
}

// Seed 267, shrunk: the welcome email went out, its record's commit failed on the last
// attempt, and an operator retried the letter: a second email, under the retry's new key.
// Expected (a retry is a new request), and the invariant allows one more email per retry.
#[tokio::test]
async fn a_retried_letter_may_send_the_welcome_again() {
    use Visitor::*;
    use bounda::testing::simulate::Step::*;
    simulation()
        .replay(
            267,
            &[
                Send(Register(0)),
                Send(Register(1)),
                Advance(78442157),
                Restart(1),
                Restart(3),
                Retry(3),
            ],
        )
        .await;
}

// Issue 38: Berlin moves to summer time on Sunday 29 March 2026. A user registered on the
// Thursday before; no runner runs from Sunday morning to Tuesday noon, across the change and
// the Monday digest, which then runs once, late, still due at 08:00 Berlin time (06:00Z, summer
// time), while every invariant holds.
#[tokio::test]
async fn a_digest_missed_in_an_outage_across_the_clock_change_runs_once_late() {
    use Visitor::*;
    use bounda::testing::simulate::Step::*;
    const HOUR: u64 = 3_600_000;
    // From 2026-01-01T00:00Z to Thursday 26 March 10:00Z, then to Sunday 29 March 00:00Z,
    // then an outage to Tuesday 31 March 12:00Z.
    let to_thursday = (31 + 28 + 25) * 24 * HOUR + 10 * HOUR;
    let to_sunday = 2 * 24 * HOUR + 14 * HOUR;
    let outage = 2 * 24 * HOUR + 12 * HOUR;
    let report = simulation()
        .at_end(
            "the digest ran once, late, due 08:00 summer time",
            ran_late_once,
        )
        .replay(
            0,
            &[
                Advance(to_thursday),
                Send(Register(0)),
                Advance(to_sunday),
                Outage(outage),
                Advance(HOUR),
            ],
        )
        .await;
    assert!(report.effects >= 2, "the welcome and the digest: {report}");
}

/// User 0's digests: one, due Monday 30 March 2026 at 08:00 Berlin time (06:00Z), run when the
/// runners came back on Tuesday.
async fn ran_late_once(app: App) -> Result<(), String> {
    let lifecycle = app
        .store()
        .read_stream("process:UserOnboarding", &user_id(0))
        .await
        .map_err(|e| e.to_string())?;
    let ran: Vec<(String, String)> = lifecycle
        .iter()
        .filter(|event| {
            event.event_type == "ProcessDeadlineReached" && event.payload["field"] == "digest"
        })
        .map(|event| (event.payload["at"].to_string(), event.timestamp.to_string()))
        .collect();
    match ran.as_slice() {
        [(due, at)]
            if due == "\"2026-03-30T06:00:00.000Z\"" && at.as_str() >= "2026-03-31T12:00" =>
        {
            Ok(())
        }
        _ => Err(format!("user 0's digests ran as {ran:?}")),
    }
}
