use bounda::prelude::*;

#[derive(Debug, Clone, Deserialize)]
pub struct AppointmentBookedV1 {
    appointment_id: String,
    slot: Instant,
}

#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Appointment, upcast(1 = AppointmentBookedV1))]
pub struct AppointmentBooked {
    appointment_id: String,
    starts_at: Instant,
}

fn main() {}
