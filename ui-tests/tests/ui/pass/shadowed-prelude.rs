//! Generated code names everything by absolute path: a crate that shadows `Option`, `Result`
//! and `core` still compiles.
#![allow(dead_code)]

mod core {}
struct Option;
struct Result;
struct Some;
struct None;
struct Ok;
struct Err;
struct Default;
struct Box;
struct String;
struct Vec;

mod domain {
    pub use bounda_ui_tests::*;
}

use bounda::{At, Deadline, Instant, On, hours, process};
use domain::*;
use serde::{Deserialize, Serialize};

#[process(on = Order, started_by = [OrderPlaced], timeout = "7d")]
#[derive(Debug, ::core::default::Default, Clone, Serialize, Deserialize)]
pub struct Reminder {
    #[deadline]
    nudge: Deadline,
    noted: ::core::option::Option<Instant>,
}

#[process]
impl Reminder {
    async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> bounda::Result<ReminderPatch> {
        ::core::result::Result::Ok(
            <ReminderPatch as ::core::default::Default>::default().nudge(cx.after(hours(1))),
        )
    }

    #[correlate(Self::order_of)]
    async fn on_customer_moved(_cx: On<'_, Self, CustomerMoved>) -> bounda::Result<()> {
        ::core::result::Result::Ok(())
    }

    async fn at_nudge(_cx: At<'_, Self>) -> bounda::Result<AtNudge> {
        ::core::result::Result::Ok(AtNudge::new(Deadline::none()))
    }

    fn order_of(_: &CustomerMoved) -> ::core::option::Option<::std::string::String> {
        ::core::option::Option::None
    }
}

fn main() {}
