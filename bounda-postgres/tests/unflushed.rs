//! What commits without waiting for the disk (issue 47), on a server that flushes every commit:
//! an inbox claim and a pass's move of a checkpoint, which a crash may lose with no harm; a
//! checkpoint moved otherwise waits. In a file of its own, so nothing else writes to the server
//! meanwhile.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use bounda::store::{InOrder, InboxPair, Store};
use bounda::{Instant, seconds};
use bounda_postgres::{Options, PostgresStore, testing};

mod support;

/// How many of 20 rounds of `write` leave log unflushed just after it returns, as
/// `session` sees at once.
async fn unflushed<F, Fut>(session: &tokio_postgres::Client, write: F) -> usize
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut unflushed = 0;
    for round in 0..20 {
        write(round).await;
        let row = session
            .query_one(
                "SELECT pg_current_wal_insert_lsn() > pg_current_wal_flush_lsn()",
                &[],
            )
            .await
            .unwrap();
        unflushed += usize::from(row.get::<_, bool>(0));
    }
    unflushed
}

#[tokio::test]
async fn claims_and_a_pass_commit_without_waiting_for_the_disk_and_other_moves_wait() {
    let (url, schema) = testing::durable_schema("unflushed").unwrap_or_else(|how| panic!("{how}"));
    let options = Options {
        schema,
        ..Options::default()
    };
    let store = PostgresStore::connect(&url, options).await.unwrap();
    let session = support::session(&url).await;
    let now = Instant::from_millis(1_767_225_600_000).unwrap();
    let claims = unflushed(&session, |round| {
        let store = &store;
        async move {
            let id = format!("e-{round}");
            let pair = InboxPair {
                handler: "notify",
                event_id: &id,
                lane: &id,
            };
            store
                .claim_inbox_batch(&[pair], "mine", now, seconds(60), &mut InOrder::new(1))
                .await
                .unwrap();
        }
    })
    .await;
    // A pass's move, and the same move outside a pass (a read model's), of a checkpoint each.
    let moves = |subscriber: &'static str, pass: bool| {
        let store = &store;
        move |round: usize| async move {
            let round = round as u64;
            let moved = match pass {
                true => {
                    store
                        .pass_checkpoint(subscriber, round, round + 1, &[])
                        .await
                }
                false => {
                    store
                        .move_checkpoint(subscriber, Some(round), round + 1)
                        .await
                }
            };
            assert!(moved.unwrap());
        }
    };
    for subscriber in ["s", "d"] {
        assert!(store.move_checkpoint(subscriber, None, 0).await.unwrap());
    }
    let passes = unflushed(&session, moves("s", true)).await;
    let moves = unflushed(&session, moves("d", false)).await;
    // The server's log writer flushes what waits within a fifth of a second, so now and then a
    // round finds it flushed already.
    assert!(claims >= 10, "{claims} of 20 claims left the log unflushed");
    assert!(passes >= 10, "{passes} of 20 passes left the log unflushed");
    assert_eq!(
        moves, 0,
        "a checkpoint moved outside a pass waits for the disk"
    );
}
