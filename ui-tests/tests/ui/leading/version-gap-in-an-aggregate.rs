// A version gap in an event its aggregate's enum and a process use: the gap alone, no
// "is not an event" after it.
use bounda::prelude::*;

#[derive(Debug, Clone, Deserialize)]
pub struct LoanOpenedV2 {
    loan_id: String,
}

impl From<LoanOpenedV2> for LoanOpened {
    fn from(old: LoanOpenedV2) -> LoanOpened {
        LoanOpened { loan_id: old.loan_id, days: 14 }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Loan, version = 3, upcast(2 = LoanOpenedV2))]
pub struct LoanOpened {
    loan_id: String,
    days: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, Event)]
#[event(aggregate = Loan)]
pub struct LoanReturned {
    loan_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, Events)]
pub enum LoanEvent {
    Opened(LoanOpened),
    Returned(LoanReturned),
}

#[derive(Debug, Default)]
pub struct Loan;

impl Aggregate for Loan {
    const NAME: &'static str = "Loan";
    const ID_FIELD: &'static str = "loan_id";
    type Event = LoanEvent;

    fn apply(&mut self, _event: &LoanEvent) {}
}

#[process(on = Loan, started_by = [LoanOpened], completed_by = [LoanReturned])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct LoanTimeline {
    opened: bool,
}

#[process]
impl LoanTimeline {
    async fn on_loan_opened(_cx: On<'_, Self, LoanOpened>) -> Result<LoanTimelinePatch> {
        Ok(LoanTimelinePatch::default().opened(true))
    }
}

fn main() {}
