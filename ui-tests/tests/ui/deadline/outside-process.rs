use bounda::prelude::*;

#[deadline]
fn remind() {}

#[deadline]
struct Reminder {
    at: Deadline,
}

fn main() {}
