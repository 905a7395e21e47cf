//! The simulation catches a bug planted in a user's process: an activation reminder whose
//! handler for the activation forgets to clear the reminder's deadline, so an active user is
//! reminded to activate. The simulation finds it, shrinks the schedule to a few steps and
//! prints it as a test to paste; with the deadline cleared, the same seeds pass.

use bounda::prelude::*;
use bounda::testing::simulate::{Effects, Input, Sent, SimRng, Simulation, draw_from};
use bounda_sqlite::ScratchFile;
use onboarding::user::{
    ActivateUser, Email, Name, RegisterUser, User, UserActivated, UserId, UserRegistered,
};
use proptest::prelude::*;

/// Whether the activation handler clears the reminder, as it should: the planted bug is `false`.
#[derive(Debug, Clone, Copy)]
struct ClearsOnActivation(bool);

/// Reminds a registered user to activate two days later.
#[process(on = User, started_by = [UserRegistered], completed_by = [], timeout = "30d", ports = [ClearsOnActivation, Effects])]
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
struct ActivationReminder {
    #[deadline]
    remind_at: Deadline,
}

#[process]
impl ActivationReminder {
    async fn on_user_registered(
        cx: On<'_, Self, UserRegistered>,
    ) -> Result<ActivationReminderPatch> {
        Ok(ActivationReminderPatch::default().remind_at(cx.after(days(2))))
    }

    async fn on_user_activated(cx: On<'_, Self, UserActivated>) -> Result<ActivationReminderPatch> {
        let patch = ActivationReminderPatch::default();
        Ok(if cx.port::<ClearsOnActivation>()?.0 {
            patch.remind_at(Deadline::none())
        } else {
            patch
        })
    }

    async fn at_remind_at(cx: At<'_, Self>) -> Result<AtRemindAt> {
        let key = format!("remind:{}", cx.id());
        cx.port::<Effects>()?.record(
            &key,
            // Of the moment it was due, not of when it ran: a retry records the same effect.
            format!("remind {} at {}", cx.id(), cx.due_at().as_millis()),
        );
        Ok(AtRemindAt::new(Deadline::none()))
    }
}

/// User `n` registers or activates.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Visitor {
    Register(u8),
    Activate(u8),
}

fn user_id(n: u8) -> String {
    format!("00000000-0000-4000-8000-{n:012}")
}

/// What the visitors do, as a proptest strategy.
fn visitor() -> impl Strategy<Value = Visitor> {
    prop_oneof![
        (0..3u8).prop_map(Visitor::Register),
        (0..3u8).prop_map(Visitor::Activate),
    ]
}

impl Input for Visitor {
    fn draw(rng: &mut SimRng) -> Visitor {
        draw_from(&visitor(), rng).expect("a strategy without filters never rejects a draw")
    }

    async fn send(&self, app: &App) -> Result<Sent, String> {
        match *self {
            Visitor::Register(n) => Sent::of(
                app.dispatch(RegisterUser {
                    zone: None,
                    user_id: UserId::parse(&user_id(n)).map_err(|e| e.to_string())?,
                    email: Email::parse(&format!("user{n}@example.com"))
                        .map_err(|e| e.to_string())?,
                    name: Name::parse("A user").map_err(|e| e.to_string())?,
                })
                .await,
            ),
            Visitor::Activate(n) => Sent::of(
                app.dispatch(ActivateUser {
                    user_id: user_id(n),
                })
                .await,
            ),
        }
    }
}

/// No user is reminded to activate after activating.
async fn active_users_are_not_reminded(app: App) -> Result<(), String> {
    let effects = app.port::<Effects>().map_err(|e| e.to_string())?.all();
    for effect in effects.into_values() {
        let [_, id, _, at] = effect.split(' ').collect::<Vec<_>>()[..] else {
            return Err(format!("an effect of another shape: {effect}"));
        };
        let at = at.parse::<i64>().map_err(|e| e.to_string())?;
        let activated = app
            .events_of::<User>(id)
            .await
            .map_err(|e| e.to_string())?
            .into_iter()
            .find(|e| e.event_type == "UserActivated");
        if let Some(activated) = activated
            && activated.timestamp.as_millis() < at
        {
            let reminded = Instant::from_millis(at).map_or(at.to_string(), |t| t.to_string());
            return Err(format!(
                "{id} was reminded to activate at {reminded}, after activating at {}",
                activated.timestamp
            ));
        }
    }
    Ok(())
}

fn simulation(clears: bool) -> Simulation<Visitor> {
    Simulation::new(ScratchFile::new, move |setup| {
        App::builder_shared(setup.store())
            .only_listed()
            .command::<RegisterUser>()
            .command::<ActivateUser>()
            .process::<ActivationReminder>()
            .port(ClearsOnActivation(clears))
    })
    .invariant(
        "active users are not reminded",
        active_users_are_not_reminded,
    )
    .steps(40)
    .replay_as(&format!("simulation({clears})"))
}

#[tokio::test]
async fn the_simulation_finds_a_deadline_left_set_and_shrinks_it() {
    let finding = simulation(false)
        .find(1..=20)
        .await
        .expect("the planted bug is found");
    println!("{finding}");
    assert!(
        finding.error.contains("active users are not reminded"),
        "{finding}"
    );
    assert!(finding.shrunk <= 4, "shrunk to a few steps: {finding}");
    for needed in [
        "async fn seed_",
        "simulation(false)",
        ".replay(",
        "Send(Register(",
        "Send(Activate(",
    ] {
        assert!(
            finding.test.contains(needed),
            "the test has {needed}: {finding}"
        );
    }
}

#[tokio::test]
async fn with_the_deadline_cleared_the_same_seeds_pass() {
    assert_eq!(simulation(true).find(1..=20).await, None);
}
