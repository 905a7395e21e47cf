//! Copies' contract: what a copy reads of a store page by page.

use super::{kept, settle_inbox, t};
use crate::seconds;
use crate::store::{InboxEntry, InboxOutcome, InboxStatus, Store};

// What a copy reads of the inbox: every entry once, in key order, with its status, attempts,
// error and moments, whatever its claim.
pub async fn inbox_entries_are_read_a_page_at_a_time_with_where_they_stand(store: &dyn Store) {
    let now = t("2026-01-01T00:00:00Z");
    let lease = seconds(60);
    assert!(
        kept(store.capabilities().copies())
            .inbox_page(None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    for (handler, event) in [("b", "e-1"), ("a", "e-2"), ("a", "e-1"), ("c", "e-1")] {
        store
            .claim_inbox(handler, event, "c-1", now, lease)
            .await
            .unwrap();
    }
    settle_inbox(store, "a", "e-1", "c-1", InboxOutcome::Succeeded).await;
    let failed = InboxOutcome::Failed {
        retry_at: now + seconds(5),
        error: "boom".into(),
        failed_at: now,
    };
    settle_inbox(store, "a", "e-2", "c-1", failed).await;
    let dead = InboxOutcome::DeadLettered {
        error: "gone".into(),
    };
    settle_inbox(store, "c", "e-1", "c-1", dead).await;
    let entry =
        |handler: &str, event: &str, status, attempts, error: Option<&str>, retry| InboxEntry {
            handler: handler.into(),
            event_id: event.into(),
            status,
            attempts,
            last_error: error.map(Into::into),
            retry_at: retry,
            first_failed_at: None,
        };
    let mut all = Vec::new();
    let mut after: Option<(String, String)> = None;
    loop {
        let page = kept(store.capabilities().copies())
            .inbox_page(after.as_ref().map(|(h, e)| (h.as_str(), e.as_str())), 2)
            .await
            .unwrap();
        assert!(page.len() <= 2, "a page holds at most its limit");
        let Some(last) = page.last() else { break };
        after = Some((last.handler.clone(), last.event_id.clone()));
        all.extend(page);
    }
    let keys: Vec<(&str, &str)> = all
        .iter()
        .map(|e| (e.handler.as_str(), e.event_id.as_str()))
        .collect();
    assert_eq!(
        keys,
        [("a", "e-1"), ("a", "e-2"), ("b", "e-1"), ("c", "e-1")],
        "every entry once, in (handler, event) order"
    );
    assert_eq!(
        all[0],
        entry("a", "e-1", InboxStatus::Succeeded, 0, None, None)
    );
    assert_eq!(
        (all[1].status, all[1].attempts, all[1].last_error.as_deref()),
        (InboxStatus::Failed, 1, Some("boom"))
    );
    assert_eq!(all[1].retry_at, Some(now + seconds(5)));
    assert_eq!(
        all[1].first_failed_at,
        Some(now),
        "a failure keeps its first moment"
    );
    assert_eq!(
        (all[2].status, all[2].attempts),
        (InboxStatus::Pending, 0),
        "a claimed entry is pending, its claim not read"
    );
    assert_eq!(all[3].status, InboxStatus::DeadLettered);
    assert_eq!(
        kept(store.capabilities().copies())
            .inbox_page(None, usize::MAX)
            .await
            .unwrap(),
        all,
        "a limit beyond what the database counts is no limit"
    );
}
