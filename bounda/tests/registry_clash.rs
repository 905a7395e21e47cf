//! Two command types, or two policies, with one name in one binary: an app built on it is
//! refused, naming both, since a scheduled command is found by its name and a policy's name is
//! its inbox key (issue 10).

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

mod support;

use bounda::prelude::*;
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

mod confirm {
    use super::*;

    #[policy]
    pub async fn confirm_on_order_placed(
        _cx: Reaction<'_, support::storefront::OrderPlaced>,
    ) -> Result<()> {
        Ok(())
    }
}

mod confirm_again {
    use super::*;

    #[policy]
    pub async fn confirm_on_order_placed(
        _cx: Reaction<'_, support::storefront::OrderPlaced>,
    ) -> Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn two_commands_or_policies_with_one_name_refuse_the_app_and_name_both() {
    let error = App::builder_shared(support::database::store().await)
        .build()
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("two commands are named `CancelOrder`")
            && message.contains("registry_clash::CancelOrder")
            && message.contains("support::storefront::CancelOrder"),
        "{message}"
    );
    assert!(
        message.contains("two reactions are named `confirm_on_order_placed`")
            && message.contains("confirm::ConfirmOnOrderPlaced")
            && message.contains("confirm_again::ConfirmOnOrderPlaced")
            && message.contains("`.only_listed()`"),
        "{message}"
    );
    // Listing one of each is the way out.
    App::builder_shared(support::database::store().await)
        .only_listed()
        .command::<CancelOrder>()
        .policy::<confirm::ConfirmOnOrderPlaced>()
        .build()
        .await
        .unwrap();
}
