//! Two command types with one name in one binary: an app built on it is refused, naming both,
//! since a scheduled command is found by its name (issue 10).

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

mod support;

use bounda::prelude::*;
use bounda_sqlite::SqliteStore;
use support::storefront::{Order, OrderCancelled};

/// A second command named `CancelOrder`, beside the support module's.
#[derive(Debug, Serialize, Deserialize)]
struct CancelOrder {
    order_id: String,
}

#[command]
impl Command for CancelOrder {
    const NAME: &'static str = "CancelOrder";
    type Aggregate = Order;
    type Rejection = NoRejection;

    fn aggregate_id(&self) -> &str {
        &self.order_id
    }

    fn decide(&self, _: &Order) -> Decision<Self> {
        Ok(vec![
            OrderCancelled {
                order_id: self.order_id.clone(),
                reason: "clash".into(),
            }
            .into(),
        ])
    }
}

#[test]
fn two_commands_with_one_name_refuse_the_app_and_name_both() {
    let error = App::builder(SqliteStore::in_memory().unwrap())
        .build()
        .unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("two commands are named `CancelOrder`")
            && message.contains("registry_clash::CancelOrder")
            && message.contains("support::storefront::CancelOrder"),
        "{message}"
    );
    // Listing one of them is the way out.
    App::builder(SqliteStore::in_memory().unwrap())
        .only_listed()
        .command::<CancelOrder>()
        .build()
        .unwrap();
}
