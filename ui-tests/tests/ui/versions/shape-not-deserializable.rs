use bounda::prelude::*;

#[derive(Debug, Default)]
pub struct Appointment;

impl Aggregate for Appointment {
    const NAME: &'static str = "Appointment";
    const ID_FIELD: &'static str = "appointment_id";
    type Event = AppointmentEvent;

    fn apply(&mut self, _: &AppointmentEvent) {}
}

/// The shape version 1 was stored in; it forgot its derive.
#[derive(Debug, Clone)]
pub struct AppointmentBookedV1 {
    appointment_id: String,
    slot: Instant,
}

impl From<AppointmentBookedV1> for AppointmentBooked {
    fn from(old: AppointmentBookedV1) -> AppointmentBooked {
        AppointmentBooked { appointment_id: old.appointment_id, starts_at: old.slot }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Appointment, version = 2, upcast(1 = AppointmentBookedV1))]
pub struct AppointmentBooked {
    appointment_id: String,
    starts_at: Instant,
}

#[derive(Debug, Clone, Serialize, Deserialize, Events)]
pub enum AppointmentEvent {
    AppointmentBooked(AppointmentBooked),
}

fn main() {}
