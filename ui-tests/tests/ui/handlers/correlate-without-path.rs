use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(on = Order, started_by = [OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {}

#[process]
impl OrderPayment {
    #[correlate]
    async fn on_payment_settled(_cx: On<'_, Self, PaymentSettled>) -> Result<()> {
        Ok(())
    }
}

fn main() {}
