use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(on = Order, started_by = [OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    address: Option<String>,
}

#[process]
impl OrderPayment {
    // `CustomerMoved` names a customer, not an order: no instance can be found for it.
    async fn on_customer_moved(cx: On<'_, Self, CustomerMoved>) -> Result<OrderPaymentPatch> {
        Ok(OrderPaymentPatch::default().address(Some(cx.event().address.clone())))
    }
}

fn main() {}
