use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(on = Order, started_by = [OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {}

#[process]
impl OrderPayment {
    #[correlate(Self::order_of)]
    async fn on_customer_moved(_cx: On<'_, Self, CustomerMoved>) -> Result<()> {
        Ok(())
    }

    fn order_of(moved: &CustomerMoved) -> bool {
        moved.address.is_empty()
    }
}

fn main() {}
