use bounda::prelude::*;

pub struct OrderPayment<T> {
    extra: T,
}

#[process]
impl<T> OrderPayment<T> {}

fn main() {}
