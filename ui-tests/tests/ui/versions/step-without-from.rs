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
        AppointmentBookedV2 { appointment_id: old.appointment_id, starts_at: old.slot }
    }
}

// Version 2 is never brought up to today's shape: `From<AppointmentBookedV2>` is missing.
#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Appointment, version = 3, upcast(1 = AppointmentBookedV1, 2 = AppointmentBookedV2))]
pub struct AppointmentBooked {
    appointment_id: String,
    starts_at: Instant,
    room: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, Events)]
pub enum AppointmentEvent {
    AppointmentBooked(AppointmentBooked),
}

fn main() {}
