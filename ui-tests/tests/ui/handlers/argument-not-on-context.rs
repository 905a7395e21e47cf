use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(on = Order, started_by = [OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {}

#[process]
impl OrderPayment {
    async fn on_order_paid(_paid: &OrderPaid) -> Result<()> {
        Ok(())
    }
}

fn main() {}
