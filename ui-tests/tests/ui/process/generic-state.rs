use bounda::prelude::*;

#[process(on = Order, started_by = [OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct OrderPayment<T> {
    #[deadline]
    next_reminder: Deadline,
    extra: T,
}

fn main() {}
