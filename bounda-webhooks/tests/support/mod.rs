//! The tests' domain: a help desk's tickets, whose lines another service escalates.

#![allow(dead_code, reason = "each test file uses part of it")]

use bounda::prelude::*;

/// The secret the tests' endpoints share with their senders.
pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = Ticket)]
pub struct TicketOpened {
    pub ticket_id: String,
    pub line: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Events)]
pub enum TicketEvent {
    Opened(TicketOpened),
}

#[derive(Debug, Default)]
pub struct Ticket;

impl Aggregate for Ticket {
    const NAME: &'static str = "Ticket";
    const ID_FIELD: &'static str = "ticket_id";
    type Event = TicketEvent;

    fn apply(&mut self, _: &TicketEvent) {}
}

/// Adds a line to a ticket: each a new event of its stream.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AddLine {
    pub ticket_id: String,
    pub line: u64,
}

#[command]
impl Command for AddLine {
    const NAME: &'static str = "AddLine";
    type Aggregate = Ticket;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.ticket_id
    }

    fn decide(&self, _: &Ticket) -> Decision<Self> {
        Ok(vec![
            TicketOpened {
                ticket_id: self.ticket_id.clone(),
                line: self.line,
            }
            .into(),
        ])
    }
}

/// What the desk publishes for another service to act on: a command of that service, with a
/// public type of its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EscalateTicket {
    pub ticket_id: String,
    pub line: u64,
}

impl bounda::relay::Contract for EscalateTicket {
    const TYPE: &'static str = "com.example.desk.escalate.v1";
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = Escalation)]
pub struct Escalated {
    pub ticket_id: String,
    pub line: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Events)]
pub enum EscalationEvent {
    Escalated(Escalated),
}

/// The other service's escalations, one stream per ticket.
#[derive(Debug, Default)]
pub struct Escalation {
    pub lines: Vec<u64>,
}

impl Aggregate for Escalation {
    const NAME: &'static str = "Escalation";
    const ID_FIELD: &'static str = "ticket_id";
    type Event = EscalationEvent;

    fn apply(&mut self, event: &EscalationEvent) {
        let EscalationEvent::Escalated(escalated) = event;
        self.lines.push(escalated.line);
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Rejection)]
pub enum EscalateRejection {
    #[rejection("line {line} of ticket `{ticket_id}` is escalated already")]
    AlreadyEscalated { ticket_id: String, line: u64 },
}

#[command]
impl Command for EscalateTicket {
    const NAME: &'static str = "EscalateTicket";
    type Aggregate = Escalation;
    type Rejection = EscalateRejection;

    fn aggregate_id(&self) -> &str {
        &self.ticket_id
    }

    fn decide(&self, escalation: &Escalation) -> Decision<Self> {
        if escalation.lines.contains(&self.line) {
            return Err(EscalateRejection::AlreadyEscalated {
                ticket_id: self.ticket_id.clone(),
                line: self.line,
            });
        }
        Ok(vec![
            Escalated {
                ticket_id: self.ticket_id.clone(),
                line: self.line,
            }
            .into(),
        ])
    }
}
