//! Two bounda services talking with no glue: the desk's relay posts each ticket line as a signed
//! webhook whose CloudEvent type is a command of the escalation service, whose ingress route
//! decides it once; a message posted again after a crash decides nothing new.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use bounda::ingress::{Guard, Ingress, router};
use bounda::prelude::*;
use bounda::relay::{Relay, Sink};
use bounda_webhooks::Webhook;
use support::*;

mod support;

/// The escalation service, its ingress route served on a free local port: the app and the
/// route's address.
async fn escalations() -> (TestApp, String) {
    let app =
        TestApp::new(
            App::builder(bounda_sqlite::SqliteStore::in_memory().unwrap())
                .only_listed()
                .ingress(Ingress::new().command_as::<EscalateTicket>(
                    <EscalateTicket as bounda::relay::Contract>::TYPE,
                )),
        )
        .await
        .unwrap();
    let routes = router(app.app().clone(), Guard::signed(SECRET).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, routes).await });
    (app, format!("http://{address}/commands"))
}

fn escalating(sink: Webhook) -> Relay {
    Relay::new("escalations", sink)
        .event::<TicketOpened>()
        .contract(|opened: TicketOpened| EscalateTicket {
            ticket_id: opened.ticket_id,
            line: opened.line,
        })
        .source("https://desk.example")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_sends_commands_to_another_services_ingress_decided_once_each() {
    let (escalation, url) = escalations().await;
    let sink = Webhook::new(&url, SECRET).unwrap();
    let desk = TestApp::new(
        App::builder(bounda_sqlite::SqliteStore::in_memory().unwrap())
            .only_listed()
            .command::<AddLine>()
            .relay(escalating(sink.clone())),
    )
    .await
    .unwrap();
    for line in 1..=3 {
        desk.dispatch(AddLine {
            ticket_id: "t-1".to_owned(),
            line,
        })
        .await
        .unwrap();
    }
    desk.run_until_idle().await.unwrap();

    let decided = escalation
        .app()
        .events_of::<Escalation>("t-1")
        .await
        .unwrap();
    let lines: Vec<u64> = decided
        .iter()
        .map(|event| event.payload["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, [1, 2, 3], "each line once, in the desk's order");

    // A line escalated twice is the other service's rejection: answered, not a letter here.
    desk.dispatch(AddLine {
        ticket_id: "t-1".to_owned(),
        line: 2,
    })
    .await
    .unwrap();
    desk.run_until_idle().await.unwrap();
    let letters = desk
        .app()
        .dead_letters()
        .count(&bounda::store::LetterFilter::default())
        .await
        .unwrap();
    assert_eq!(letters, 0, "a rejection is an answer");

    // The desk's runner crashed after posting, before marking it done: the same message again.
    let opened = desk.app().events_of::<Ticket>("t-1").await.unwrap();
    let message = escalating(sink.clone()).message_of(&opened[0]).unwrap();
    sink.publish(&message).await.unwrap();
    assert_eq!(
        escalation
            .app()
            .events_of::<Escalation>("t-1")
            .await
            .unwrap()
            .len(),
        3,
        "the repeat is answered with the first answer and decides nothing"
    );

    // Posted unsigned, or signed with another secret, it is refused before it is read.
    let stranger = Webhook::new(&url, "whsec_c2VjcmV0LW9mLWFub3RoZXItZW5kcG9pbnQ=").unwrap();
    let refused = stranger.publish(&message).await.unwrap_err();
    assert!(refused.to_string().contains("401"), "{refused}");
}
