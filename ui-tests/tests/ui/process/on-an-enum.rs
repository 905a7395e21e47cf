use bounda::prelude::*;

#[process(on = Order, started_by = [OrderPlaced])]
enum OrderPayment {
    Waiting,
}

fn main() {}
