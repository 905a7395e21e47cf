//! Raw identifiers lose their `r#` in every generated name and stored string.
use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(on = Order, started_by = [OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct r#Reminder {
    r#type: String,
    #[deadline]
    r#loop: Deadline,
}

#[process]
impl r#Reminder {
    async fn on_order_placed(cx: On<'_, Self, OrderPlaced>) -> Result<ReminderPatch> {
        Ok(ReminderPatch::default().r#type("daily".into()).r#loop(cx.after(hours(1))))
    }

    async fn at_loop(_cx: At<'_, Self>) -> Result<AtLoop> {
        Ok(AtLoop::new(Deadline::none()))
    }
}

fn main() {
    assert_eq!(<Reminder as ProcessState>::NAME, "Reminder");
    assert_eq!(<Reminder as ProcessState>::FIELDS, ["type", "loop"]);
}
