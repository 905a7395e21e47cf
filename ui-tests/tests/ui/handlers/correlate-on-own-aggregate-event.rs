use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(on = Order, started_by = [OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    paid: bool,
}

#[process]
impl OrderPayment {
    #[correlate(Self::order_of)]
    async fn on_order_paid(_cx: On<'_, Self, OrderPaid>) -> Result<OrderPaymentPatch> {
        Ok(OrderPaymentPatch::default().paid(true))
    }

    fn order_of(paid: &OrderPaid) -> Result<Option<String>> {
        Ok(Some(paid.order_id.clone()))
    }
}

fn main() {}
