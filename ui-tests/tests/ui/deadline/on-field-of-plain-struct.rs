// Rust refuses attribute macros on fields, so `#[deadline]` outside a `#[process(..)]` state
// is reported by rustc itself: `#[process]` removes it before rustc ever sees it on a field.
use bounda::prelude::*;

#[derive(Debug, Default)]
struct Reminder {
    #[deadline]
    at: Deadline,
}

fn main() {}
