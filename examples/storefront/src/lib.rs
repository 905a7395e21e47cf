//! The storefront of the design notes (spec §30.1): orders and payments, their policies, and the
//! order-lifecycle process, on bounda.

pub mod lifecycle;
pub mod order;
pub mod payment;
pub mod policies;
pub mod ports;

use bounda::AppBuilder;

use lifecycle::OrderLifecycle;
use order::{CancelOrder, SendReminder};
use policies::{
    RefundOnRefundRequested, ScheduleReminderOnOrderPlaced, SendConfirmationOnOrderPlaced,
};
use ports::{GatewayPort, NotifierPort};

/// The storefront's handlers and ports on `builder`.
pub fn app(builder: AppBuilder, notifier: NotifierPort, gateway: GatewayPort) -> AppBuilder {
    builder
        .port(notifier)
        .port(gateway)
        .policy::<SendConfirmationOnOrderPlaced>()
        .policy::<ScheduleReminderOnOrderPlaced>()
        .policy::<RefundOnRefundRequested>()
        .process::<OrderLifecycle>()
        .command::<SendReminder>()
        .command::<CancelOrder>()
}
