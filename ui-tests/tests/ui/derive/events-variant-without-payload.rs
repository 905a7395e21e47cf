use bounda::prelude::*;

#[derive(Debug, Events)]
pub enum ShippingEvent {
    Shipped,
}

fn main() {}
