//! An event at its third version, read from both older shapes, and renamed once.
use bounda::prelude::*;

#[derive(Debug, Default)]
pub struct Appointment;

impl Aggregate for Appointment {
    const NAME: &'static str = "Appointment";
    const ID_FIELD: &'static str = "appointment_id";
    type Event = AppointmentEvent;

    fn apply(&mut self, _: &AppointmentEvent) {}
}

#[derive(Debug, Clone, Deserialize)]
pub struct AppointmentBookedV1 {
    appointment_id: String,
    slot: Instant,
}

#[derive(Debug, Clone, Deserialize)]
pub struct AppointmentBookedV2 {
    appointment_id: String,
    starts_at: Instant,
}

impl From<AppointmentBookedV1> for AppointmentBookedV2 {
    fn from(old: AppointmentBookedV1) -> AppointmentBookedV2 {
        AppointmentBookedV2 {
            appointment_id: old.appointment_id,
            starts_at: old.slot,
        }
    }
}

impl From<AppointmentBookedV2> for AppointmentBooked {
    fn from(old: AppointmentBookedV2) -> AppointmentBooked {
        AppointmentBooked {
            appointment_id: old.appointment_id,
            starts_at: old.starts_at,
            room: "front desk".into(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(
    aggregate = Appointment,
    version = 3,
    upcast(1 = AppointmentBookedV1, 2 = AppointmentBookedV2),
    renamed_from("SlotBooked")
)]
pub struct AppointmentBooked {
    appointment_id: String,
    starts_at: Instant,
    room: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, Events)]
pub enum AppointmentEvent {
    AppointmentBooked(AppointmentBooked),
}

fn main() {
    use bounda::Event;
    assert_eq!(AppointmentBooked::VERSION, 3);
    let read = AppointmentBooked::read(
        1,
        serde_json::json!({ "appointment_id": "a-1", "slot": "2026-03-01T09:00:00Z" }),
    )
    .expect("version 1 reads");
    assert_eq!(read.room, "front desk");
}
