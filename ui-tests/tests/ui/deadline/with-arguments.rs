use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(on = Order, started_by = [OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    #[deadline(every = "24h")]
    next_reminder: Deadline,
}

#[process]
impl OrderPayment {
    async fn at_next_reminder(_cx: At<'_, Self>) -> Result<AtNextReminder> {
        Ok(AtNextReminder::new(Deadline::none()))
    }
}

fn main() {}
