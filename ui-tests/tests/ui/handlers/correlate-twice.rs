use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(on = Order, started_by = [OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {}

#[process]
impl OrderPayment {
    #[correlate(Self::order_of)]
    #[correlate(Self::order_of)]
    async fn on_payment_settled(_cx: On<'_, Self, PaymentSettled>) -> Result<()> {
        Ok(())
    }

    fn order_of(settled: &PaymentSettled) -> Option<String> {
        Some(settled.order_id.clone())
    }
}

fn main() {}
