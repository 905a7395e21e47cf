//! Pauses: kept in the store, and obeyed by its claim of due entries.

use serde_json::json;

use super::{claimable, due, t};
use crate::seconds;
use crate::store::{Pause, PauseTarget, Store, WriteSet};

fn pause(target: PauseTarget) -> Pause {
    Pause {
        target,
        since: t("2026-01-01T00:00:00Z"),
        by: "alice".to_owned(),
        reason: Some("the provider is down".to_owned()),
    }
}

/// A pause is kept once, with who and why, until resumed; the claim of due entries leaves a
/// paused process's and instance's deadlines and a paused policy's delayed runs, and the next
/// due moment does not count them; a command's entry is never held.
pub async fn paused_entries_are_left_by_the_claim_until_resumed(store: &dyn Store) {
    let deadline = |key: &str, process: &str, id: &str| {
        due(
            key,
            "bounda.ProcessDeadline",
            id,
            json!({ "process": process, "instance": id, "at": 1_767_225_600_000_i64 }),
        )
    };
    store
        .commit(&WriteSet {
            schedule: vec![
                deadline("d-pay-1", "Payment", "o-1"),
                deadline("d-pay-2", "Payment", "o-2"),
                deadline("d-ship-1", "Shipping", "o-1"),
                due(
                    "r-notify",
                    "bounda.PolicyRun",
                    "o-1",
                    json!({ "policy": "notify", "eventId": "e-1" }),
                ),
                due(
                    "c-remind",
                    "SendReminder",
                    "o-1",
                    json!({ "order_id": "o-1" }),
                ),
            ],
            ..WriteSet::default()
        })
        .await
        .unwrap();

    let payment = PauseTarget::Process {
        name: "Payment".into(),
    };
    let shipping_1 = PauseTarget::Instance {
        process: "Shipping".into(),
        id: "o-1".into(),
    };
    let notify = PauseTarget::Policy {
        name: "notify".into(),
    };
    let policies = PauseTarget::Subscriber {
        name: "policies".into(),
    };
    for target in [&payment, &shipping_1, &notify, &policies] {
        assert!(
            super::kept(store.capabilities().pauses())
                .pause(&pause(target.clone()))
                .await
                .unwrap(),
            "{target}"
        );
    }
    let again = Pause {
        by: "bob".to_owned(),
        ..pause(payment.clone())
    };
    assert!(
        !super::kept(store.capabilities().pauses())
            .pause(&again)
            .await
            .unwrap(),
        "paused once"
    );
    let kept = super::kept(store.capabilities().pauses())
        .pauses()
        .await
        .unwrap();
    assert_eq!(kept.len(), 4, "{kept:?}");
    assert!(
        kept.contains(&pause(payment.clone())),
        "kept as it was: {kept:?}"
    );

    // Only the command's entry is claimable; the next due moment is its.
    let now = t("2026-01-02T00:00:00Z");
    assert_eq!(
        store
            .next_due_at(t("2026-01-01T00:00:00Z"), seconds(30))
            .await
            .unwrap(),
        Some(t("2026-01-01T00:00:00Z")),
        "the command's entry is due"
    );
    assert_eq!(claimable(store, now).await, ["c-remind"]);
    assert_eq!(
        store
            .next_due_at(t("2026-01-01T00:00:00Z"), seconds(30))
            .await
            .unwrap(),
        Some(now + seconds(30) + crate::millis(1)),
        "what is paused is not due; the claimed entry is, once its lease is past"
    );

    // Resumed, they are claimed in due order.
    assert!(
        super::kept(store.capabilities().pauses())
            .resume(&payment)
            .await
            .unwrap()
    );
    assert!(
        !super::kept(store.capabilities().pauses())
            .resume(&payment)
            .await
            .unwrap(),
        "resumed once"
    );
    assert_eq!(claimable(store, now).await, ["d-pay-1", "d-pay-2"]);
    assert!(
        super::kept(store.capabilities().pauses())
            .resume(&shipping_1)
            .await
            .unwrap()
    );
    assert!(
        super::kept(store.capabilities().pauses())
            .resume(&notify)
            .await
            .unwrap()
    );
    assert_eq!(claimable(store, now).await, ["d-ship-1", "r-notify"]);
    assert_eq!(
        super::kept(store.capabilities().pauses())
            .pauses()
            .await
            .unwrap(),
        vec![pause(policies)],
        "the subscriber's pause stays"
    );
}

/// The deadline entries of the fixtures `instances-v10.sql` (bounda-sqlite) and
/// `instances-v5.sql` (bounda-postgres), written before pauses, obey a pause once migrated:
/// paused, `OrderPayment`'s are left and `Fussy`'s claimed; resumed, `OrderPayment`'s are.
pub async fn the_deadlines_an_older_build_wrote_obey_pauses(store: &dyn Store) {
    let payment = PauseTarget::Process {
        name: "OrderPayment".into(),
    };
    assert!(
        super::kept(store.capabilities().pauses())
            .pause(&pause(payment.clone()))
            .await
            .unwrap()
    );
    let now = t("2026-03-01T00:00:00Z");
    let claimed = store
        .claim_due("probe", now, seconds(30), 100)
        .await
        .unwrap();
    let mut whose: Vec<(String, String)> = claimed
        .iter()
        .map(|e| {
            (
                e.payload["process"].as_str().unwrap().to_owned(),
                e.aggregate_id.clone(),
            )
        })
        .collect();
    whose.sort();
    assert_eq!(
        whose,
        [("Fussy", "o-done"), ("Fussy", "o-new")].map(|(p, i)| (p.to_owned(), i.to_owned()))
    );
    assert!(
        super::kept(store.capabilities().pauses())
            .resume(&payment)
            .await
            .unwrap()
    );
    let claimed = store
        .claim_due("probe", now, seconds(30), 100)
        .await
        .unwrap();
    assert_eq!(
        claimed.len(),
        2,
        "OrderPayment's o-failed and o-new: {claimed:?}"
    );
}
