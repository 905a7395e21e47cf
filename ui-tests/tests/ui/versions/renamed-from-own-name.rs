use bounda::prelude::*;

#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Appointment, renamed_from("SlotBooked", "AppointmentBooked"))]
pub struct AppointmentBooked {
    appointment_id: String,
}

fn main() {}
