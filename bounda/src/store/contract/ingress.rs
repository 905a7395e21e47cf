//! Arrived commands' keys: kept with the command's events in one write, read back with their
//! answer, and a second write under a kept key refused whole.

use serde_json::json;

use super::{append, t};
use crate::store::{CommitError, IngressRecord, Store, WriteSet};

fn record(key: &str, answer: serde_json::Value) -> IngressRecord {
    IngressRecord {
        key: key.to_owned(),
        fingerprint: "sha256:ab12".to_owned(),
        answer,
        decided_at: t("2026-01-01T00:00:00Z"),
    }
}

/// A key is kept with the events decided under it and read back with its answer; a second
/// delivery's write under the same key is refused with `KeyTaken` and writes none of its
/// events; a key never kept reads as none.
pub async fn an_arrived_commands_key_is_kept_with_its_events_once(store: &dyn Store) {
    let kept = super::kept(store.capabilities().ingress());
    let first = record("shop:m-1", json!({ "decided": { "version": 1 } }));
    store
        .commit(&WriteSet {
            appends: vec![append("Order", "o-1", 0, &["e-1"])],
            ingress: Some(first.clone()),
            ..WriteSet::default()
        })
        .await
        .unwrap();
    assert_eq!(
        kept.ingress_answer("shop:m-1").await.unwrap(),
        Some(first.clone())
    );

    let again = WriteSet {
        appends: vec![append("Order", "o-1", 1, &["e-2"])],
        ingress: Some(record("shop:m-1", json!({ "decided": { "version": 2 } }))),
        ..WriteSet::default()
    };
    let refused = store.commit(&again).await.unwrap_err();
    assert!(
        matches!(&refused, CommitError::KeyTaken { key } if key == "shop:m-1"),
        "{refused:?}"
    );
    assert_eq!(
        store.read_stream("Order", "o-1").await.unwrap().len(),
        1,
        "nothing of the second delivery is written"
    );
    assert_eq!(
        kept.ingress_answer("shop:m-1").await.unwrap(),
        Some(first),
        "the first answer stands"
    );

    // A rejection is kept without events.
    let rejected = record("shop:m-2", json!({ "rejected": { "code": "NotOpen" } }));
    store
        .commit(&WriteSet {
            ingress: Some(rejected.clone()),
            ..WriteSet::default()
        })
        .await
        .unwrap();
    assert_eq!(
        kept.ingress_answer("shop:m-2").await.unwrap(),
        Some(rejected)
    );
    assert_eq!(kept.ingress_answer("shop:m-3").await.unwrap(), None);

    // Read a page at a time in key order, as a copy reads them.
    let keys = |page: Vec<IngressRecord>| page.into_iter().map(|r| r.key).collect::<Vec<_>>();
    assert_eq!(
        keys(kept.ingress_page(None, 1).await.unwrap()),
        ["shop:m-1"]
    );
    assert_eq!(
        keys(kept.ingress_page(Some("shop:m-1"), 10).await.unwrap()),
        ["shop:m-2"]
    );
    assert!(
        kept.ingress_page(Some("shop:m-2"), 10)
            .await
            .unwrap()
            .is_empty()
    );
}
