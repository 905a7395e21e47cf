//! Registration that cannot be forgotten: every `#[process]`, `#[policy]` and `#[command]` of the
//! binary is in an app built without a list, and `TestApp` fails a call that files a letter the
//! test did not expect (issue 10).

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

mod support;

use bounda::prelude::*;
use bounda::{Error, PendingDeadline};
use support::storefront::*;

/// Confirms every order an hour after it is placed, through a command it schedules: the policy
/// and the command reach the app only through their registration.
#[policy]
async fn confirm_on_order_placed(cx: Reaction<'_, OrderPlaced>) -> Result<()> {
    let order_id = cx.event().order_id.clone();
    cx.send_after(RecordConfirmationSent { order_id }, hours(1))
        .await?;
    Ok(())
}

async fn deadlines(app: &TestApp) -> Vec<String> {
    app.app()
        .pending_deadlines()
        .await
        .unwrap()
        .iter()
        .map(|PendingDeadline { process, field, .. }| format!("{process}.{field}"))
        .collect()
}

#[tokio::test]
async fn an_app_built_without_a_list_runs_every_process_policy_and_command_of_the_binary() {
    let app = TestApp::new(App::builder_shared(support::database::store().await))
        .await
        .unwrap();
    app.dispatch(place("o-1")).await.unwrap();
    app.advance(hours(1)).await.unwrap();
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced", "ConfirmationSent"],
        "the policy ran, and the command it scheduled ran an hour later"
    );
    assert_eq!(
        deadlines(&app).await,
        [
            "OrderPayment.next_reminder",
            "OrderPayment.payment_deadline",
            "OrderPayment.timeout"
        ],
        "the support module's process follows the order"
    );
}

#[tokio::test]
async fn only_listed_runs_what_the_builder_names_and_nothing_else() {
    let listed = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .process::<OrderPayment>(),
    )
    .await
    .unwrap();
    listed.dispatch(place("o-1")).await.unwrap();
    listed.advance(hours(1)).await.unwrap();
    assert_eq!(
        listed.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced"],
        "the policy is not listed"
    );
    assert_eq!(deadlines(&listed).await.len(), 3, "the process is");

    let nothing = TestApp::new(App::builder_shared(support::database::store().await).only_listed())
        .await
        .unwrap();
    nothing.dispatch(place("o-1")).await.unwrap();
    nothing.advance(days(5)).await.unwrap();
    assert!(deadlines(&nothing).await.is_empty());
    assert_eq!(nothing.lag().await.unwrap().max_lag, 0);
}

#[tokio::test]
async fn listing_what_the_binary_registers_adds_it_once() {
    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .policy::<ConfirmOnOrderPlaced>()
            .process::<OrderPayment>()
            .command::<RecordConfirmationSent>(),
    )
    .await
    .unwrap();
    app.dispatch(place("o-1")).await.unwrap();
    app.advance(hours(1)).await.unwrap();
    assert_eq!(
        app.events_of::<Order>("o-1").await.unwrap().types(),
        ["OrderPlaced", "ConfirmationSent"],
        "one confirmation, not two"
    );
}

#[tokio::test]
async fn a_call_that_files_an_unexpected_letter_fails_and_names_it() {
    // The command the policy schedules is left out: its run is a dead letter.
    let app = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .policy::<ConfirmOnOrderPlaced>(),
    )
    .await
    .unwrap();
    app.dispatch(place("o-1")).await.unwrap();
    let error = app.advance(hours(1)).await.unwrap_err();
    let Error::UnexpectedDeadLetters { letters } = &error else {
        panic!("not the letters error: {error:?}");
    };
    assert_eq!(letters.len(), 1, "{letters:?}");
    let message = error.to_string();
    assert!(
        message.contains("`confirm_on_order_placed` on OrderPlaced of `o-1`")
            && message.contains("add `.command::<RecordConfirmationSent>()`")
            && message.contains("`.expecting_letters()`"),
        "{message}"
    );
    // The work is done all the same, and a later call that files nothing passes.
    assert_eq!(support::letters(&app).await.len(), 1);
    app.advance(hours(1)).await.unwrap();

    let expecting = TestApp::new(
        App::builder_shared(support::database::store().await)
            .only_listed()
            .policy::<ConfirmOnOrderPlaced>(),
    )
    .await
    .unwrap()
    .expecting_letters();
    expecting.dispatch(place("o-1")).await.unwrap();
    expecting.run_until_idle().await.unwrap();
    assert_eq!(support::letters(&expecting).await.len(), 1);
}
