use bounda::prelude::*;

#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Appointment, version = 3, upcast(2 = AppointmentBookedV2))]
pub struct AppointmentBooked {
    appointment_id: String,
    starts_at: Instant,
}

fn main() {}
