use bounda::prelude::*;

#[policy]
pub struct WelcomeOnOrderPlaced;

fn main() {}
