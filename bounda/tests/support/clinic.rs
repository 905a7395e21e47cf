//! A clinic, in the builds a deploy goes through: appointments, a reminder 24 hours before the
//! slot, a no-show 15 minutes after it. `v1` is the app as first deployed; `v2` renames an
//! event (`SlotBooked` becomes `AppointmentBooked`), renames its field (`slot` becomes
//! `starts_at`) and adds a field to another (`ReminderSent.channel`), each read from what `v1`
//! stored; and migrates the process state to version 2, its no-show renamed `missed_at` and a
//! call added two hours before the slot, computed from the old state. Every build's process is `AppointmentFlow`, so builds take over each other's
//! instances on one store.

#![allow(dead_code, reason = "each test file uses part of the builds")]

use std::sync::{Arc, Mutex};

use bounda::AppBuilder;
use bounda::prelude::*;

/// Messages sent to patients, and no-shows recorded at the desk: what a step did outside.
#[derive(Debug, Default)]
pub struct Outbox {
    sent: Mutex<Vec<String>>,
    /// A preview's record of port calls, when the outbox is a preview's double.
    calls: Option<bounda::preview::PortCalls>,
}

impl Outbox {
    /// An outbox that also records each message in a preview's `calls`.
    pub fn recording(calls: bounda::preview::PortCalls) -> Outbox {
        Outbox {
            sent: Mutex::default(),
            calls: Some(calls),
        }
    }

    /// Records `message`.
    pub fn send(&self, message: String) {
        if let Some(calls) = &self.calls {
            calls.record("Outbox", "send", None, serde_json::json!(message));
        }
        self.sent.lock().expect("the outbox").push(message);
    }

    /// What was sent, in order.
    pub fn sent(&self) -> Vec<String> {
        self.sent.lock().expect("the outbox").clone()
    }
}

/// One store, clock and outbox that the builds of a test take turns on, as deploys do.
pub struct Clinic {
    pub store: Arc<dyn bounda::store::Store>,
    pub clock: Arc<bounda::clock::SimulatedClock>,
    pub outbox: Arc<Outbox>,
}

impl Clinic {
    /// A fresh store (the suite's, SQLite or PostgreSQL), clock and outbox.
    pub async fn new() -> Clinic {
        Clinic {
            store: crate::support::database::store().await,
            clock: Arc::new(bounda::clock::SimulatedClock::default()),
            outbox: Arc::new(Outbox::default()),
        }
    }

    /// The app `build` makes (`v1::build`, `v2::build`, ..), deployed on this clinic's store.
    pub async fn deploy(&self, build: fn(AppBuilder, &Arc<Outbox>) -> AppBuilder) -> TestApp {
        crate::support::another_app(&self.store, &self.clock, |b| build(b, &self.outbox)).await
    }

    /// A moment `hours` after the clock's now.
    pub fn in_hours(&self, hours: u64) -> Instant {
        bounda::clock::Clock::now(&*self.clock) + bounda::hours(hours)
    }
}

/// The first build.
pub mod v1 {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
    #[event(aggregate = Appointment)]
    pub struct SlotBooked {
        pub appointment_id: String,
        pub slot: Instant,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
    #[event(aggregate = Appointment)]
    pub struct ReminderSent {
        pub appointment_id: String,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
    #[event(aggregate = Appointment)]
    pub struct PatientArrived {
        pub appointment_id: String,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Events)]
    pub enum AppointmentEvent {
        SlotBooked(SlotBooked),
        ReminderSent(ReminderSent),
        PatientArrived(PatientArrived),
    }

    #[derive(Debug, Default)]
    pub struct Appointment {
        pub slot: Option<Instant>,
        pub reminded: bool,
    }

    impl Aggregate for Appointment {
        const NAME: &'static str = "Appointment";
        const ID_FIELD: &'static str = "appointment_id";
        type Event = AppointmentEvent;

        fn apply(&mut self, event: &AppointmentEvent) {
            match event {
                AppointmentEvent::SlotBooked(e) => self.slot = Some(e.slot),
                AppointmentEvent::ReminderSent(_) => self.reminded = true,
                AppointmentEvent::PatientArrived(_) => {}
            }
        }
    }

    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct Book {
        pub appointment_id: String,
        pub slot: Instant,
    }

    #[command]
    impl Command for Book {
        const NAME: &'static str = "Book";
        type Aggregate = Appointment;
        type Rejection = NoRejection;

        fn aggregate_id(&self) -> &str {
            &self.appointment_id
        }

        fn decide(&self, _: &Appointment) -> Decision<Self> {
            Ok(vec![
                SlotBooked {
                    appointment_id: self.appointment_id.clone(),
                    slot: self.slot,
                }
                .into(),
            ])
        }
    }

    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct Remind {
        pub appointment_id: String,
    }

    #[command]
    impl Command for Remind {
        const NAME: &'static str = "Remind";
        type Aggregate = Appointment;
        type Rejection = NoRejection;

        fn aggregate_id(&self) -> &str {
            &self.appointment_id
        }

        fn decide(&self, appointment: &Appointment) -> Decision<Self> {
            if appointment.reminded {
                return Ok(vec![]);
            }
            Ok(vec![
                ReminderSent {
                    appointment_id: self.appointment_id.clone(),
                }
                .into(),
            ])
        }
    }

    #[process(on = Appointment, started_by = [SlotBooked], completed_by = [PatientArrived], timeout = "30d", ports = [Arc<Outbox>])]
    #[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
    pub struct AppointmentFlow {
        pub missed: bool,
        #[deadline]
        pub reminder: Deadline,
        #[deadline]
        pub no_show: Deadline,
    }

    #[process]
    impl AppointmentFlow {
        async fn on_slot_booked(cx: On<'_, Self, SlotBooked>) -> Result<AppointmentFlowPatch> {
            let slot = cx.event().slot;
            Ok(AppointmentFlowPatch::default()
                .reminder(Deadline::at(slot - hours(24)))
                .no_show(Deadline::at(slot + minutes(15))))
        }

        async fn at_reminder(cx: At<'_, Self>) -> Result<AtReminder> {
            cx.port::<Arc<Outbox>>()?
                .send(format!("v1 reminds {}", cx.id()));
            cx.send(Remind {
                appointment_id: cx.id(),
            })
            .await?;
            Ok(AtReminder::new(Deadline::none()))
        }

        async fn at_no_show(cx: At<'_, Self>) -> Result<AtNoShow> {
            cx.port::<Arc<Outbox>>()?
                .send(format!("v1 no-show {}", cx.id()));
            Ok(AtNoShow::new(Deadline::none()).missed(true))
        }
    }

    /// This build's app on `store` and `clock`, its outbox `outbox`.
    pub fn build(builder: AppBuilder, outbox: &Arc<Outbox>) -> AppBuilder {
        builder
            .process::<AppointmentFlow>()
            .command::<Book>()
            .command::<Remind>()
            .port(outbox.clone())
    }
}

/// The second build: `SlotBooked` is `AppointmentBooked` with `starts_at`, and a reminder
/// names its channel.
pub mod v2 {
    use super::*;

    /// `SlotBooked` as the first build stored it.
    #[derive(Debug, Clone, Deserialize)]
    pub struct AppointmentBookedV1 {
        pub appointment_id: String,
        pub slot: Instant,
    }

    impl From<AppointmentBookedV1> for AppointmentBooked {
        fn from(old: AppointmentBookedV1) -> AppointmentBooked {
            AppointmentBooked {
                appointment_id: old.appointment_id,
                starts_at: old.slot,
            }
        }
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
    #[event(
        aggregate = Appointment,
        version = 2,
        upcast(1 = AppointmentBookedV1),
        renamed_from("SlotBooked")
    )]
    pub struct AppointmentBooked {
        pub appointment_id: String,
        pub starts_at: Instant,
    }

    /// `ReminderSent` as the first build stored it, before reminders had channels.
    #[derive(Debug, Clone, Deserialize)]
    pub struct ReminderSentV1 {
        pub appointment_id: String,
    }

    impl From<ReminderSentV1> for ReminderSent {
        fn from(old: ReminderSentV1) -> ReminderSent {
            ReminderSent {
                appointment_id: old.appointment_id,
                channel: "sms".into(),
            }
        }
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
    #[event(aggregate = Appointment, version = 2, upcast(1 = ReminderSentV1))]
    pub struct ReminderSent {
        pub appointment_id: String,
        pub channel: String,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
    #[event(aggregate = Appointment)]
    pub struct PatientArrived {
        pub appointment_id: String,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Events)]
    pub enum AppointmentEvent {
        Booked(AppointmentBooked),
        ReminderSent(ReminderSent),
        PatientArrived(PatientArrived),
    }

    #[derive(Debug, Default)]
    pub struct Appointment {
        pub starts_at: Option<Instant>,
        pub reminded_by: Option<String>,
    }

    impl Aggregate for Appointment {
        const NAME: &'static str = "Appointment";
        const ID_FIELD: &'static str = "appointment_id";
        type Event = AppointmentEvent;

        fn apply(&mut self, event: &AppointmentEvent) {
            match event {
                AppointmentEvent::Booked(e) => self.starts_at = Some(e.starts_at),
                AppointmentEvent::ReminderSent(e) => self.reminded_by = Some(e.channel.clone()),
                AppointmentEvent::PatientArrived(_) => {}
            }
        }
    }

    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct Book {
        pub appointment_id: String,
        pub starts_at: Instant,
    }

    #[command]
    impl Command for Book {
        const NAME: &'static str = "Book";
        type Aggregate = Appointment;
        type Rejection = NoRejection;

        fn aggregate_id(&self) -> &str {
            &self.appointment_id
        }

        fn decide(&self, _: &Appointment) -> Decision<Self> {
            Ok(vec![
                AppointmentBooked {
                    appointment_id: self.appointment_id.clone(),
                    starts_at: self.starts_at,
                }
                .into(),
            ])
        }
    }

    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct Remind {
        pub appointment_id: String,
        pub channel: String,
    }

    #[command]
    impl Command for Remind {
        const NAME: &'static str = "Remind";
        type Aggregate = Appointment;
        type Rejection = NoRejection;

        fn aggregate_id(&self) -> &str {
            &self.appointment_id
        }

        fn decide(&self, appointment: &Appointment) -> Decision<Self> {
            if appointment.reminded_by.is_some() {
                return Ok(vec![]);
            }
            Ok(vec![
                ReminderSent {
                    appointment_id: self.appointment_id.clone(),
                    channel: self.channel.clone(),
                }
                .into(),
            ])
        }
    }

    /// `AppointmentFlow` as the first build stored it.
    #[derive(Debug, Clone, Deserialize)]
    pub struct AppointmentFlowV1 {
        pub missed: bool,
        pub reminder: Deadline,
        pub no_show: Deadline,
    }

    /// The no-show deadline is `missed_at` now, and a call goes out two hours before the slot:
    /// an instance the first build stored keeps its no-show, and gets its call from it.
    impl From<AppointmentFlowV1> for AppointmentFlow {
        fn from(old: AppointmentFlowV1) -> AppointmentFlow {
            let call = old
                .no_show
                .moment()
                .map(|no_show| no_show - minutes(15) - hours(2));
            AppointmentFlow {
                missed: old.missed,
                reminder: old.reminder,
                call: call.map_or_else(Deadline::none, Deadline::at),
                missed_at: old.no_show,
            }
        }
    }

    #[process(
        on = Appointment,
        started_by = [AppointmentBooked],
        completed_by = [PatientArrived],
        timeout = "30d",
        version = 2,
        migrate = [AppointmentFlowV1],
        ports = [Arc<Outbox>],
    )]
    #[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
    pub struct AppointmentFlow {
        pub missed: bool,
        #[deadline]
        pub reminder: Deadline,
        #[deadline]
        pub call: Deadline,
        #[deadline]
        pub missed_at: Deadline,
    }

    #[process]
    impl AppointmentFlow {
        async fn on_appointment_booked(
            cx: On<'_, Self, AppointmentBooked>,
        ) -> Result<AppointmentFlowPatch> {
            let starts_at = cx.event().starts_at;
            Ok(AppointmentFlowPatch::default()
                .reminder(Deadline::at(starts_at - hours(24)))
                .call(Deadline::at(starts_at - hours(2)))
                .missed_at(Deadline::at(starts_at + minutes(15))))
        }

        async fn at_reminder(cx: At<'_, Self>) -> Result<AtReminder> {
            cx.port::<Arc<Outbox>>()?
                .send(format!("v2 reminds {}", cx.id()));
            cx.send(Remind {
                appointment_id: cx.id(),
                channel: "sms".into(),
            })
            .await?;
            Ok(AtReminder::new(Deadline::none()))
        }

        async fn at_call(cx: At<'_, Self>) -> Result<AtCall> {
            cx.port::<Arc<Outbox>>()?
                .send(format!("v2 calls {}", cx.id()));
            Ok(AtCall::new(Deadline::none()))
        }

        async fn at_missed_at(cx: At<'_, Self>) -> Result<AtMissedAt> {
            cx.port::<Arc<Outbox>>()?
                .send(format!("v2 no-show {}", cx.id()));
            Ok(AtMissedAt::new(Deadline::none()).missed(true))
        }
    }

    /// This build's app on `store` and `clock`, its outbox `outbox`.
    pub fn build(builder: AppBuilder, outbox: &Arc<Outbox>) -> AppBuilder {
        builder
            .process::<AppointmentFlow>()
            .command::<Book>()
            .command::<Remind>()
            .port(outbox.clone())
    }
}

/// The first build with its no-show deadline renamed `missed_at`, without an alias: deployed
/// by mistake, then rolled back.
pub mod v1_renamed {
    use super::v1::{Appointment, Book, Remind, SlotBooked};
    use super::*;

    #[process(on = Appointment, started_by = [SlotBooked], timeout = "30d", ports = [Arc<Outbox>])]
    #[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
    pub struct AppointmentFlow {
        pub missed: bool,
        #[deadline]
        pub reminder: Deadline,
        #[deadline]
        pub missed_at: Deadline,
    }

    #[process]
    impl AppointmentFlow {
        async fn on_slot_booked(cx: On<'_, Self, SlotBooked>) -> Result<AppointmentFlowPatch> {
            let slot = cx.event().slot;
            Ok(AppointmentFlowPatch::default()
                .reminder(Deadline::at(slot - hours(24)))
                .missed_at(Deadline::at(slot + minutes(15))))
        }

        async fn at_reminder(_: At<'_, Self>) -> Result<AtReminder> {
            Ok(AtReminder::new(Deadline::none()))
        }

        async fn at_missed_at(cx: At<'_, Self>) -> Result<AtMissedAt> {
            cx.port::<Arc<Outbox>>()?
                .send(format!("renamed no-show {}", cx.id()));
            Ok(AtMissedAt::new(Deadline::none()).missed(true))
        }
    }

    /// This build's app, its outbox `outbox`.
    pub fn build(builder: AppBuilder, outbox: &Arc<Outbox>) -> AppBuilder {
        builder
            .process::<AppointmentFlow>()
            .command::<Book>()
            .command::<Remind>()
            .port(outbox.clone())
    }
}
