use bounda::prelude::*;

#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Appointment, version = 4000000000)]
pub struct AppointmentBooked {
    appointment_id: String,
}

fn main() {}
