//! Civil-time literals checked while compiling, used from a process's handlers: a reminder at
//! 09:00 in the customer's zone the day after, then every Monday at 08:00 by its rule.
use bounda::prelude::*;
use bounda::{rule, time, zone};
use bounda_ui_tests::*;

#[process(on = Order, started_by = [OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Digest {
    #[deadline]
    send: Deadline,
}

#[process]
impl Digest {
    async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<DigestPatch> {
        let first = cx.days_later(1, time!("09:00"), &zone!("Europe/Paris"))?;
        Ok(DigestPatch::default().send(first))
    }

    async fn at_send(cx: At<'_, Self>) -> Result<AtSend> {
        let mondays = rule!("RRULE:FREQ=WEEKLY;BYDAY=MO;BYHOUR=8;BYMINUTE=0");
        Ok(AtSend::new(cx.next_occurrence(&mondays, &zone!("Europe/Berlin"))?))
    }
}

fn main() {}
