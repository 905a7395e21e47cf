use bounda::prelude::*;

#[derive(Debug, Default)]
pub struct Parcel;

impl Aggregate for Parcel {
    const NAME: &'static str = "Parcel";
    const ID_FIELD: &'static str = "parcel_id";
    type Event = ParcelEvent;
    fn apply(&mut self, _: &ParcelEvent) {}
}

#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Parcel, name = "ParcelMoved")]
pub struct ParcelShipped {
    parcel_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Parcel, name = "ParcelMoved")]
pub struct ParcelReturned {
    parcel_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, Events)]
pub enum ParcelEvent {
    Shipped(ParcelShipped),
    Returned(ParcelReturned),
}

fn main() {}
