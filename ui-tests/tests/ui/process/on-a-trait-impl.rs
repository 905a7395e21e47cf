use bounda::prelude::*;

pub struct OrderPayment;

pub trait Steps {}

#[process]
impl Steps for OrderPayment {}

fn main() {}
