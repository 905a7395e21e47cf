use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(on = Order, started_by = [OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    #[deadline]
    #[deadline]
    payment_deadline: Deadline,
}

#[process]
impl OrderPayment {
    async fn at_payment_deadline(_cx: At<'_, Self>) -> Result<AtPaymentDeadline> {
        Ok(AtPaymentDeadline::new(Deadline::none()))
    }
}

fn main() {}
