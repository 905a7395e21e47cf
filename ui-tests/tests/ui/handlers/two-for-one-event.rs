use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(on = Order, started_by = [OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    paid: bool,
}

#[process]
impl OrderPayment {
    async fn on_order_paid(_cx: On<'_, Self, OrderPaid>) -> Result<OrderPaymentPatch> {
        Ok(OrderPaymentPatch::default().paid(true))
    }

    async fn on_first_order_paid(_cx: On<'_, Self, OrderPaid>) -> Result<()> {
        Ok(())
    }
}

fn main() {}
