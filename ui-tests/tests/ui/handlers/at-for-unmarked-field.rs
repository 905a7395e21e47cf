use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(on = Order, started_by = [OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    paid_at: Option<Instant>,
}

#[process]
impl OrderPayment {
    async fn at_paid_at(_cx: At<'_, Self>) -> Result<()> {
        Ok(())
    }
}

fn main() {}
