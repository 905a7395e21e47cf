// A handler whose name misspells its deadline, returning the deadline's own result: one error,
// leading with the name to fix, never advising a result type that does not exist.
use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(on = Order, started_by = [OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    #[deadline]
    remind_at: Deadline,
}

#[process]
impl OrderPayment {
    async fn at_remindat(_cx: At<'_, Self>) -> Result<AtRemindAt> {
        Ok(AtRemindAt::new(Deadline::none()))
    }
}

fn main() {}
