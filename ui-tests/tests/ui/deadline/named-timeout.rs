use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(on = Order, started_by = [OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment {
    #[deadline]
    timeout: Deadline,
}

#[process]
impl OrderPayment {
    async fn at_timeout(_cx: At<'_, Self>) -> Result<()> {
        Ok(())
    }
}

fn main() {}
