//! The ticket: the smallest domain that exercises what is measured. One aggregate with two
//! events, two commands, a process with one deadline and a policy that sends one command.

use bounda::prelude::*;

/// A ticket was opened.
#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Ticket)]
pub struct TicketOpened {
    /// The ticket.
    pub ticket_id: String,
}

/// A ticket was acknowledged.
#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Ticket)]
pub struct TicketAcknowledged {
    /// The ticket.
    pub ticket_id: String,
}

/// The ticket's events.
#[derive(Debug, Clone, Serialize, Deserialize, Events)]
pub enum TicketEvent {
    /// See [`TicketOpened`].
    Opened(TicketOpened),
    /// See [`TicketAcknowledged`].
    Acknowledged(TicketAcknowledged),
}

/// A ticket; every field false until its event.
#[derive(Debug, Default)]
pub struct Ticket {
    /// Whether it was opened.
    pub opened: bool,
    /// Whether it was acknowledged.
    pub acknowledged: bool,
}

impl Aggregate for Ticket {
    const NAME: &'static str = "Ticket";
    const ID_FIELD: &'static str = "ticket_id";
    type Event = TicketEvent;

    fn apply(&mut self, event: &TicketEvent) {
        match event {
            TicketEvent::Opened(_) => self.opened = true,
            TicketEvent::Acknowledged(_) => self.acknowledged = true,
        }
    }
}

/// Opens a ticket: always one `TicketOpened`, so every dispatch appends one event.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpenTicket {
    /// The ticket.
    pub ticket_id: String,
}

#[command]
impl Command for OpenTicket {
    const NAME: &'static str = "OpenTicket";
    type Aggregate = Ticket;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.ticket_id
    }

    fn decide(&self, _ticket: &Ticket) -> Decision<Self> {
        Ok(vec![
            TicketOpened {
                ticket_id: self.ticket_id.clone(),
            }
            .into(),
        ])
    }
}

/// Acknowledges a ticket: always one `TicketAcknowledged`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AcknowledgeTicket {
    /// The ticket.
    pub ticket_id: String,
}

#[command]
impl Command for AcknowledgeTicket {
    const NAME: &'static str = "AcknowledgeTicket";
    type Aggregate = Ticket;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.ticket_id
    }

    fn decide(&self, _ticket: &Ticket) -> Decision<Self> {
        Ok(vec![
            TicketAcknowledged {
                ticket_id: self.ticket_id.clone(),
            }
            .into(),
        ])
    }
}

/// Acknowledges every ticket opened: one reaction, one command, one event.
#[policy]
pub async fn acknowledge_on_ticket_opened(cx: Reaction<'_, TicketOpened>) -> Result<()> {
    cx.send(AcknowledgeTicket {
        ticket_id: cx.event().ticket_id.clone(),
    })
    .await?;
    Ok(())
}

/// Audits every ticket opened: the policy paused beside `acknowledge_on_ticket_opened` when its
/// reactions are measured past a paused one.
#[policy]
pub async fn audit_on_ticket_opened(_cx: Reaction<'_, TicketOpened>) -> Result<()> {
    Ok(())
}

/// The process whose deadline firings are measured, in a module of its own as bounda asks of
/// processes (its generated `At<Field>` types live next to it).
pub mod expiry {
    use bounda::prelude::*;

    use super::{Ticket, TicketOpened};

    /// The hour after which an opened ticket expires; a year after, the instance times out.
    pub const EXPIRES_AFTER_HOURS: u64 = 1;

    /// One deadline, set when the ticket opens and cleared when it fires. The instance stays
    /// open (its timeout is a year away), so a firing is exactly one deadline, not an ending.
    #[process(on = Ticket, started_by = [TicketOpened], timeout = "365d")]
    #[derive(Debug, Default, Clone, Serialize, Deserialize)]
    pub struct Expiry {
        #[deadline]
        expires: Deadline,
    }

    #[process]
    impl Expiry {
        async fn on_ticket_opened(cx: On<'_, Self, TicketOpened>) -> Result<ExpiryPatch> {
            Ok(ExpiryPatch::default().expires(cx.after(hours(EXPIRES_AFTER_HOURS))))
        }

        async fn at_expires(_cx: At<'_, Self>) -> Result<AtExpires> {
            Ok(AtExpires::new(Deadline::none()))
        }
    }
}

/// A daily deadline two ways, to weigh what resolving it on the calendar costs: each firing sets
/// the next day's. `Plain` adds 24 hours to the moment that came due; `Civil` takes the next
/// occurrence of a daily rule in a zone (02:00 in Paris, an hour after the simulated clock's
/// start), kept with its zone and rule in the state.
pub mod daily {
    use bounda::prelude::*;
    use bounda::{rule, zone};

    use super::{Ticket, TicketOpened};

    /// Due an hour after the ticket opens, then every 24 hours.
    #[process(on = Ticket, started_by = [TicketOpened], timeout = "365d")]
    #[derive(Debug, Default, Clone, Serialize, Deserialize)]
    pub struct Plain {
        #[deadline]
        daily: Deadline,
    }

    #[process]
    impl Plain {
        async fn on_ticket_opened(cx: On<'_, Self, TicketOpened>) -> Result<PlainPatch> {
            Ok(PlainPatch::default().daily(cx.after(hours(1))))
        }

        async fn at_daily(cx: At<'_, Self>) -> Result<AtDaily> {
            Ok(AtDaily::new(cx.after(hours(24))))
        }
    }

    /// Due at 02:00 Paris time, then every day at 02:00 there by its rule.
    #[process(on = Ticket, started_by = [TicketOpened], timeout = "365d")]
    #[derive(Debug, Default, Clone, Serialize, Deserialize)]
    pub struct Civil {
        #[deadline]
        nightly: Deadline,
    }

    #[process]
    impl Civil {
        async fn on_ticket_opened(cx: On<'_, Self, TicketOpened>) -> Result<CivilPatch> {
            let nightly = rule!("FREQ=DAILY;BYHOUR=2");
            Ok(
                CivilPatch::default()
                    .nightly(cx.next_occurrence(&nightly, &zone!("Europe/Paris"))?),
            )
        }

        async fn at_nightly(cx: At<'_, Self>) -> Result<AtNightly> {
            Ok(AtNightly::new(cx.recur()?))
        }
    }
}

/// A process whose deadline comes due a moment after its ticket opens, on the real clock: what
/// the latency of `App::run` is measured with.
pub mod soon {
    use bounda::prelude::*;

    use super::{Ticket, TicketOpened};

    /// How long after the ticket opens its deadline comes due, in milliseconds.
    pub const DUE_AFTER_MS: u64 = 250;

    /// One deadline, cleared when it fires.
    #[process(on = Ticket, started_by = [TicketOpened], timeout = "365d")]
    #[derive(Debug, Default, Clone, Serialize, Deserialize)]
    pub struct Soon {
        #[deadline]
        due: Deadline,
    }

    #[process]
    impl Soon {
        async fn on_ticket_opened(cx: On<'_, Self, TicketOpened>) -> Result<SoonPatch> {
            Ok(SoonPatch::default().due(cx.after(millis(DUE_AFTER_MS))))
        }

        async fn at_due(_cx: At<'_, Self>) -> Result<AtDue> {
            Ok(AtDue::new(Deadline::none()))
        }
    }
}

/// A process that only follows its ticket: each opening is one process step (the instance
/// starts), with no deadline but a timeout ten years on. What process steps are measured with.
pub mod tracking {
    use bounda::prelude::*;

    use super::{Ticket, TicketOpened};

    /// Whether the ticket was seen opened.
    #[process(on = Ticket, started_by = [TicketOpened], timeout = "3650d")]
    #[derive(Debug, Default, Clone, Serialize, Deserialize)]
    pub struct Tracking {
        opened: bool,
    }

    #[process]
    impl Tracking {
        async fn on_ticket_opened(_cx: On<'_, Self, TicketOpened>) -> Result<TrackingPatch> {
            Ok(TrackingPatch::default().opened(true))
        }
    }
}

/// A read model of the tickets: one row per ticket opened.
pub mod listing {
    use bounda::prelude::*;

    use super::TicketOpened;

    /// One ticket as a list shows it.
    #[read_model(name = "tickets")]
    #[derive(Debug, Clone, PartialEq)]
    pub struct TicketRow {
        /// The ticket.
        #[key]
        pub ticket_id: String,
        /// Where it stands.
        #[index]
        pub status: String,
        /// When it was opened.
        pub opened_at: Instant,
    }

    #[read_model]
    impl TicketRow {
        async fn on_ticket_opened(
            event: Projected<'_, TicketOpened>,
            table: &mut Table<'_, Self>,
        ) -> Result<()> {
            let row = TicketRow {
                ticket_id: event.ticket_id.clone(),
                status: "open".into(),
                opened_at: event.at(),
            };
            table.upsert(&row).await?;
            Ok(())
        }
    }
}
