use bounda::prelude::*;

#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Appointment, version = 0)]
pub struct AppointmentBooked {
    appointment_id: String,
}

fn main() {}
