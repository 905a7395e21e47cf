//! Bookmarks: a checkpoint passes held events leaving a bookmark with its move, and goes back to
//! it as the bookmark is deleted, each in one transaction.

use crate::store::{Bookmark, Cursor, Store};

fn bookmark(handler: &str, lane: Option<&str>, position: u64) -> Bookmark {
    Bookmark {
        handler: handler.to_owned(),
        lane: lane.map(str::to_owned),
        position,
    }
}

/// A pass leaves its bookmarks with its move, or nothing when the checkpoint moved first; an
/// earlier bookmark of the same holder is kept; a return deletes the bookmarks it names and
/// takes the checkpoint back to just before the first of them, once.
pub async fn a_checkpoint_passes_held_events_and_returns_to_its_bookmarks(store: &dyn Store) {
    assert_eq!(store.cursor("policies").await.unwrap(), None);
    assert!(store.move_checkpoint("policies", None, 0).await.unwrap());
    assert_eq!(
        store.cursor("policies").await.unwrap(),
        Some(Cursor::default()),
        "a checkpoint with no bookmark"
    );
    let sms = bookmark("SendSms", None, 3);
    let one = bookmark("Billing", Some("o-1"), 5);
    assert!(
        store
            .pass_checkpoint("policies", 0, 10, &[sms.clone(), one.clone()])
            .await
            .unwrap()
    );
    assert!(
        !store
            .pass_checkpoint("policies", 0, 12, &[bookmark("Mail", None, 1)])
            .await
            .unwrap(),
        "moved by someone else: nothing written"
    );
    let cursor = store.cursor("policies").await.unwrap().unwrap();
    assert_eq!(cursor.checkpoint, 10);
    assert_eq!(cursor.bookmarks, [one.clone(), sms.clone()], "by handler");
    assert_eq!(cursor.handled_to(), 2, "just before the first bookmark");

    // A later pass meeting the same holder again keeps where its events start.
    assert!(
        store
            .pass_checkpoint("policies", 10, 20, &[bookmark("SendSms", None, 12)])
            .await
            .unwrap()
    );
    assert_eq!(
        store.cursor("policies").await.unwrap().unwrap().bookmarks,
        [one.clone(), sms.clone()]
    );
    // An earlier position than the one kept wins (a pass after a return met it sooner).
    assert!(
        store
            .pass_checkpoint("policies", 20, 21, &[bookmark("Billing", Some("o-1"), 4)])
            .await
            .unwrap()
    );
    let moved_back = bookmark("Billing", Some("o-1"), 4);
    assert_eq!(
        store.cursor("policies").await.unwrap().unwrap().bookmarks,
        [moved_back, sms.clone()]
    );

    // A handler's bookmark and a lane's of another are apart; returning to one keeps the other.
    let go_back = |subscriber: &'static str, holders: &'static [(&'static str, &'static str)]| async move {
        store
            .return_to_bookmarks(subscriber, holders)
            .await
            .unwrap();
        store.cursor(subscriber).await.unwrap().unwrap()
    };
    let stands = |checkpoint: u64, bookmarks: Vec<Bookmark>| Cursor {
        checkpoint,
        bookmarks,
    };
    assert_eq!(
        go_back("policies", &[("Billing", "o-1")]).await,
        stands(3, vec![sms.clone()])
    );
    assert_eq!(
        go_back("policies", &[("SendSms", ""), ("Billing", "o-1")]).await,
        stands(2, Vec::new())
    );
    assert_eq!(
        go_back("policies", &[("SendSms", "")]).await,
        stands(2, Vec::new()),
        "a bookmark returned to is nothing to return to"
    );

    // Bookmarks are the subscriber's own, and a pass with none moves the checkpoint alone.
    assert!(store.move_checkpoint("processes", None, 0).await.unwrap());
    assert!(
        store
            .pass_checkpoint("processes", 0, 4, &[bookmark("SendSms", None, 1)])
            .await
            .unwrap()
    );
    assert!(store.pass_checkpoint("policies", 2, 9, &[]).await.unwrap());
    assert_eq!(
        go_back("policies", &[("SendSms", "")]).await,
        stands(9, Vec::new())
    );
    assert_eq!(
        store.cursor("processes").await.unwrap().unwrap().checkpoint,
        4,
        "another subscriber's bookmark is not returned to"
    );
}

/// Passes and returns racing for one checkpoint never leave a held event passed without a
/// bookmark: whichever wins, the checkpoint stands before the held event, or a bookmark at or
/// before it does. The calls race on a store whose calls wait on a server; a store that answers
/// each call at once (SQLite) takes them in the order given, both orders in turn.
pub async fn passes_and_returns_at_once_never_lose_a_held_event(store: &dyn Store) {
    use futures_util::FutureExt;
    assert!(store.move_checkpoint("processes", None, 0).await.unwrap());
    for round in 0..20u64 {
        let from = round * 5;
        let held = from + 1;
        let pass = || {
            async move {
                let bookmark = bookmark("Reminders", None, held);
                store
                    .pass_checkpoint("processes", from, from + 10, &[bookmark])
                    .await
                    .unwrap();
            }
            .boxed()
        };
        let go_back = || {
            async {
                store
                    .return_to_bookmarks("processes", &[("Reminders", "")])
                    .await
                    .unwrap();
            }
            .boxed()
        };
        // A cursor read among them sees each write whole: never the checkpoint past the held
        // event without the bookmark before it.
        let passed_without_a_bookmark = |cursor: &Cursor| {
            cursor.checkpoint >= held && !cursor.bookmarks.iter().any(|b| b.position <= held)
        };
        let read = || {
            async move {
                let cursor = store.cursor("processes").await.unwrap().unwrap();
                assert!(
                    !passed_without_a_bookmark(&cursor),
                    "round {round}: read mid-race, the held event at {held} was passed without \
                     a bookmark: {cursor:?}"
                );
            }
            .boxed()
        };
        let mut racers = vec![
            pass(),
            read(),
            go_back(),
            read(),
            pass(),
            go_back(),
            read(),
            pass(),
        ];
        if round % 2 == 1 {
            racers.reverse();
        }
        futures_util::future::join_all(racers).await;
        let cursor = store.cursor("processes").await.unwrap().unwrap();
        assert!(
            !passed_without_a_bookmark(&cursor),
            "round {round}: the held event at {held} was passed without a bookmark: {cursor:?}"
        );
        // Whatever stands, return to it, and go on from a little further.
        go_back().await;
        let cursor = store.cursor("processes").await.unwrap().unwrap();
        assert_eq!(
            cursor,
            Cursor {
                checkpoint: from,
                bookmarks: Vec::new()
            }
        );
        assert!(
            store
                .move_checkpoint("processes", Some(from), from + 5)
                .await
                .unwrap()
        );
    }
}

/// A checkpoint an older build wrote, before bookmarks, reads with none, passes held events
/// leaving one, and returns to it.
pub async fn the_checkpoints_an_older_build_wrote_take_bookmarks(store: &dyn Store) {
    let (subscriber, position) = store
        .checkpoints()
        .await
        .unwrap()
        .into_iter()
        .find(|(subscriber, _)| subscriber == "processes")
        .expect("the older build's processes checkpoint");
    assert!(position > 0, "the older build's runs moved it");
    assert_eq!(
        store.cursor(&subscriber).await.unwrap(),
        Some(Cursor {
            checkpoint: position,
            bookmarks: Vec::new(),
        })
    );
    let held = bookmark("OrderPayment", Some("o-new"), position + 1);
    assert!(
        store
            .pass_checkpoint(
                &subscriber,
                position,
                position + 3,
                std::slice::from_ref(&held)
            )
            .await
            .unwrap()
    );
    assert_eq!(
        store.cursor(&subscriber).await.unwrap().unwrap().bookmarks,
        [held]
    );
    store
        .return_to_bookmarks(&subscriber, &[("OrderPayment", "o-new")])
        .await
        .unwrap();
    assert_eq!(
        store.cursor(&subscriber).await.unwrap(),
        Some(Cursor {
            checkpoint: position,
            bookmarks: Vec::new(),
        })
    );
}
