use bounda::prelude::*;

#[derive(Debug, Events)]
pub enum ShippingEvent {}

fn main() {}
