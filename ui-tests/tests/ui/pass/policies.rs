//! Policies declared with `#[policy]`: immediate, delayed by a literal, delayed from the
//! environment.
use bounda::prelude::*;
use bounda_ui_tests::*;

/// Notifies at once.
#[policy]
pub async fn notify_on_order_placed(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
    let _ = cx.event().order_id.len();
    Ok(())
}

#[policy(delay = "1.5s")]
async fn welcome_on_order_placed(_cx: Reaction<'_, OrderPlaced>) -> Result<()> {
    Ok(())
}

#[policy(delay = env("BOUNDA_UI_UNSET_DELAY", "2m"))]
async fn chase_on_order_paid(_cx: Reaction<'_, OrderPaid>) -> bounda::Result<(), std::io::Error> {
    Ok(())
}

fn main() {
    assert_eq!(<NotifyOnOrderPlaced as Policy>::NAME, "notify_on_order_placed");
    assert_eq!(<NotifyOnOrderPlaced as Policy>::delay(), Ok(None));
    assert_eq!(<WelcomeOnOrderPlaced as Policy>::delay(), Ok(Some(millis(1500))));
    assert_eq!(<ChaseOnOrderPaid as Policy>::delay(), Ok(Some(minutes(2))));
}
