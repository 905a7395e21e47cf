//! The storefront of the design notes: orders and payments, their policies, and the
//! order-lifecycle process, on bounda.

pub mod lifecycle;
pub mod order;
pub mod payment;
pub mod policies;
pub mod ports;
pub mod read;

use bounda::{AppBuilder, Duration, hours};

use lifecycle::PaymentWindow;
use policies::ReminderDelay;
use ports::{GatewayPort, NotifierPort};

/// How long things take in the storefront.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// How long a customer has to pay.
    pub payment_window: Duration,
    /// When the reminder goes.
    pub reminder_delay: Duration,
}

impl Default for Timing {
    /// The original's: 72 hours to pay, a reminder after 24.
    fn default() -> Timing {
        Timing {
            payment_window: hours(72),
            reminder_delay: hours(24),
        }
    }
}

/// The storefront's ports on `builder`; its policies, process and commands register themselves.
pub fn app(
    builder: AppBuilder,
    notifier: NotifierPort,
    gateway: GatewayPort,
    timing: Timing,
) -> AppBuilder {
    builder
        .port(notifier)
        .port(gateway)
        .port(PaymentWindow(timing.payment_window))
        .port(ReminderDelay(timing.reminder_delay))
}
