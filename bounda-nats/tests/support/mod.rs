//! The tests' domain: orders, placed again and again, each a new event of its stream.

#![allow(dead_code, reason = "each test file uses part of it")]

use bounda::prelude::*;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Event)]
#[event(aggregate = Order)]
pub struct OrderPlaced {
    pub order_id: String,
    pub total: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Events)]
pub enum OrderEvent {
    Placed(OrderPlaced),
}

#[derive(Debug, Default)]
pub struct Order {
    placed: u32,
}

impl Aggregate for Order {
    const NAME: &'static str = "Order";
    const ID_FIELD: &'static str = "order_id";
    type Event = OrderEvent;

    fn apply(&mut self, event: &OrderEvent) {
        match event {
            OrderEvent::Placed(_) => self.placed += 1,
        }
    }
}

/// Places an order, again and again: each a new event of its stream.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlaceOrder {
    pub order_id: String,
    pub total: u64,
}

#[command]
impl Command for PlaceOrder {
    const NAME: &'static str = "PlaceOrder";
    type Aggregate = Order;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.order_id
    }

    fn decide(&self, _: &Order) -> Decision<Self> {
        Ok(vec![
            OrderPlaced {
                order_id: self.order_id.clone(),
                total: self.total,
            }
            .into(),
        ])
    }
}
