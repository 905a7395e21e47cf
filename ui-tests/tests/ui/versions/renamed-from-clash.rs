use bounda::prelude::*;

#[derive(Debug, Default)]
pub struct Appointment;

impl Aggregate for Appointment {
    const NAME: &'static str = "Appointment";
    const ID_FIELD: &'static str = "appointment_id";
    type Event = AppointmentEvent;

    fn apply(&mut self, _: &AppointmentEvent) {}
}

#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Appointment, renamed_from("SlotBooked"))]
pub struct AppointmentBooked {
    appointment_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Appointment)]
pub struct SlotBooked {
    appointment_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, Events)]
pub enum AppointmentEvent {
    AppointmentBooked(AppointmentBooked),
    SlotBooked(SlotBooked),
}

fn main() {}
