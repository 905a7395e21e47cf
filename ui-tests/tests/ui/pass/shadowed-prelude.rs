//! Generated code names everything by absolute path: a crate that shadows `Option`, `Result`
//! and `core` still compiles, derives included. (`str` is not shadowed: serde's own derive
//! needs it.)
#![allow(dead_code, non_camel_case_types)]

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
struct From;
struct Debug;

use bounda::{Aggregate, At, Deadline, Event, Events, Instant, On, Rejection, hours, process};
use serde::{Deserialize, Serialize};

#[derive(::core::fmt::Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Ticket)]
pub struct TicketOpened {
    ticket_id: ::std::string::String,
}

#[derive(::core::fmt::Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Ticket)]
pub struct TicketClosed {
    ticket_id: ::std::string::String,
}

#[derive(::core::fmt::Debug, Clone, Serialize, Deserialize, Events)]
pub enum TicketEvent {
    Opened(TicketOpened),
    Closed(TicketClosed),
}

#[derive(::core::fmt::Debug, ::core::default::Default)]
pub struct Ticket;

impl Aggregate for Ticket {
    const NAME: &'static ::core::primitive::str = "Ticket";
    const ID_FIELD: &'static ::core::primitive::str = "ticket_id";
    type Event = TicketEvent;

    fn apply(&mut self, _: &TicketEvent) {}
}

#[derive(::core::fmt::Debug, Rejection)]
pub enum CloseRejection {
    #[rejection("ticket `{id}` is closed")]
    Closed { id: ::std::string::String },
    Unknown,
}

#[process(on = Ticket, started_by = [TicketOpened], completed_by = [TicketClosed], timeout = "7d")]
#[derive(::core::fmt::Debug, ::core::default::Default, Clone, Serialize, Deserialize)]
pub struct Escalation {
    #[deadline]
    nudge: Deadline,
    noted: ::core::option::Option<Instant>,
}

#[process]
impl Escalation {
    async fn on_ticket_opened(cx: On<'_, Self, TicketOpened>) -> bounda::Result<EscalationPatch> {
        ::core::result::Result::Ok(
            <EscalationPatch as ::core::default::Default>::default().nudge(cx.after(hours(1))),
        )
    }

    async fn at_nudge(_cx: At<'_, Self>) -> bounda::Result<AtNudge> {
        ::core::result::Result::Ok(AtNudge::new(Deadline::none()))
    }

    async fn at_timeout(_cx: At<'_, Self>) -> bounda::Result<()> {
        ::core::result::Result::Ok(())
    }
}

fn main() {}
