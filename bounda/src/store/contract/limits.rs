//! Limits: permits counted per window at once for every runner, and a used-up limit's entries
//! left by the claim of due entries until its window ends.

use serde_json::json;

use super::{claimable, due, t};
use crate::store::{LimitKey, LimitKind, ScheduledEntry, Store, WriteSet};
use crate::{Instant, millis, seconds};

fn key(kind: LimitKind, name: &str) -> LimitKey {
    LimitKey {
        kind,
        name: name.to_owned(),
    }
}

/// Permits are taken up to the window's cap, a later window starts afresh, a window another
/// runner opened later is counted into, and the windows not yet ended are listed.
pub async fn permits_are_counted_per_window_up_to_the_cap(store: &dyn Store) {
    let sms = key(LimitKind::Process, "Reminders");
    let first = t("2026-01-01T00:00:01Z");
    let take = |ends: Instant, wanted: u32| {
        let sms = sms.clone();
        async move {
            super::kept(store.capabilities().limits())
                .take_permits(&sms, ends, seconds(1), 5, wanted)
                .await
                .unwrap()
        }
    };
    assert_eq!(take(first, 3).await, 3);
    assert_eq!(take(first, 3).await, 2, "what is left of the window");
    assert_eq!(take(first, 1).await, 0, "used up");
    let windows = super::kept(store.capabilities().limits())
        .limit_windows(t("2026-01-01T00:00:00Z"))
        .await
        .unwrap();
    assert_eq!(windows.len(), 1, "{windows:?}");
    assert_eq!(
        (
            &windows[0].key,
            windows[0].ends,
            windows[0].cap,
            windows[0].taken
        ),
        (&sms, first, 5, 5)
    );
    assert!(windows[0].used_up());
    assert!(
        super::kept(store.capabilities().limits())
            .limit_windows(first)
            .await
            .unwrap()
            .is_empty(),
        "a window has ended at its end"
    );

    // The next window starts afresh; a runner whose clock is behind counts into it.
    let second = first + seconds(1);
    assert_eq!(take(second, 4).await, 4);
    assert_eq!(take(first, 4).await, 1, "counted into the later window");
    assert_eq!(take(second, 1).await, 0);

    // Permits of runs that did not run come back to their window; another window's do not.
    super::kept(store.capabilities().limits())
        .return_permits(&sms, second, 2)
        .await
        .unwrap();
    super::kept(store.capabilities().limits())
        .return_permits(&sms, first, 5)
        .await
        .unwrap();
    assert_eq!(take(second, 5).await, 2);

    // A window far ahead (a clock that was wrong), or of another length (the rate changed), is
    // replaced, not counted into.
    let far = first + seconds(3600);
    assert_eq!(take(far, 5).await, 5);
    assert_eq!(take(second, 3).await, 3, "the window far ahead is replaced");
    assert_eq!(
        super::kept(store.capabilities().limits())
            .take_permits(&sms, second, millis(500), 5, 4)
            .await
            .unwrap(),
        4,
        "a window of another length starts afresh"
    );
    // Keys are counted apart: a policy of the same name has its own.
    let policy = key(LimitKind::Policy, "Reminders");
    assert_eq!(
        super::kept(store.capabilities().limits())
            .take_permits(&policy, second, seconds(1), 5, 9)
            .await
            .unwrap(),
        5
    );
    let kinds = async || -> Vec<LimitKind> {
        let windows = super::kept(store.capabilities().limits())
            .limit_windows(first)
            .await
            .unwrap();
        windows.into_iter().map(|window| window.key.kind).collect()
    };
    assert_eq!(
        kinds().await,
        [LimitKind::Policy, LimitKind::Process],
        "by kind as stored"
    );
    // A limit no longer configured is forgotten.
    super::kept(store.capabilities().limits())
        .drop_limit(&sms)
        .await
        .unwrap();
    assert_eq!(kinds().await, [LimitKind::Policy]);
}

/// Two runners taking at once take no more than the cap between them.
pub async fn permits_taken_at_once_stay_within_the_cap(store: &dyn Store) {
    let limit = key(LimitKind::Command, "SendSms");
    let ends = t("2026-01-01T00:00:01Z");
    let takes = (0..20).map(|_| {
        super::kept(store.capabilities().limits()).take_permits(&limit, ends, seconds(1), 25, 3)
    });
    let granted: u32 = futures_util::future::join_all(takes)
        .await
        .into_iter()
        .map(Result::unwrap)
        .sum();
    assert_eq!(granted, 25);
}

/// A used-up limit's entries (a process's deadlines, a policy's delayed runs, a command's
/// entries) are left by the claim until its window ends, when they are due; others are not.
pub async fn a_used_up_limits_entries_wait_for_its_window_to_end(store: &dyn Store) {
    let deadline = |k: &str, process: &str| {
        due(
            k,
            "bounda.ProcessDeadline",
            &format!("id-{k}"),
            json!({ "process": process, "instance": format!("id-{k}"), "at": 1_767_225_600_000_i64 }),
        )
    };
    let policy_run = |k: &str, policy: &str| {
        due(
            k,
            "bounda.PolicyRun",
            "id-p",
            json!({ "policy": policy, "eventId": "e" }),
        )
    };
    store
        .commit(&WriteSet {
            schedule: vec![
                deadline("d-limited", "Reminders"),
                deadline("d-free", "Payments"),
                policy_run("p-limited", "Notify"),
                due("c-limited", "SendSms", "id-c1", json!({})),
                due("c-free", "Ship", "id-c2", json!({})),
            ],
            ..WriteSet::default()
        })
        .await
        .unwrap();
    let now = t("2026-01-01T00:00:00.500Z");
    let ends = t("2026-01-01T00:00:01Z");
    for limit in [
        key(LimitKind::Process, "Reminders"),
        key(LimitKind::Policy, "Notify"),
        key(LimitKind::Command, "SendSms"),
    ] {
        assert_eq!(
            super::kept(store.capabilities().limits())
                .take_permits(&limit, ends, seconds(1), 1, 1)
                .await
                .unwrap(),
            1
        );
    }
    // A limit with permits left holds nothing.
    let payments = key(LimitKind::Process, "Payments");
    assert_eq!(
        super::kept(store.capabilities().limits())
            .take_permits(&payments, ends, seconds(1), 2, 1)
            .await
            .unwrap(),
        1
    );
    let lease = seconds(30);
    assert_eq!(claimable(store, now).await, ["c-free", "d-free"]);
    // What each used-up limit holds back is counted; a limit with permits left holds nothing.
    assert_eq!(
        super::kept(store.capabilities().limits())
            .held_by_limits(now)
            .await
            .unwrap(),
        [
            (key(LimitKind::Command, "SendSms"), 1),
            (key(LimitKind::Policy, "Notify"), 1),
            (key(LimitKind::Process, "Reminders"), 1),
        ]
    );
    // The claimed ones are due after their lease; the limited ones when the window ends.
    assert_eq!(store.next_due_at(now, lease).await.unwrap(), Some(ends));
    assert_eq!(
        store.next_due_at(ends, lease).await.unwrap(),
        Some(t("2026-01-01T00:00:00Z")),
        "at its end the window holds nothing"
    );
    assert_eq!(
        claimable(store, ends).await,
        ["c-limited", "d-limited", "p-limited"]
    );
    assert!(
        super::kept(store.capabilities().limits())
            .held_by_limits(ends)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.next_due_at(ends, lease).await.unwrap(),
        Some(now + lease + millis(1)),
        "the first claim's lease ends first"
    );
}

/// After the older fixture's migration (`the_instances_an_older_build_wrote_are_indexed`), its
/// deadline entries obey a used-up limit: a process's are left until the window ends.
pub async fn the_deadlines_an_older_build_wrote_obey_limits(store: &dyn Store) {
    // A day after the pauses' check, whose claims have lapsed.
    let now = t("2026-03-02T00:00:00Z");
    let ends = now + seconds(1);
    let payment = key(LimitKind::Process, "OrderPayment");
    assert_eq!(
        super::kept(store.capabilities().limits())
            .take_permits(&payment, ends, seconds(1), 1, 1)
            .await
            .unwrap(),
        1
    );
    let whose = |claimed: Vec<ScheduledEntry>| {
        let mut whose: Vec<String> = claimed
            .iter()
            .map(|e| e.payload["process"].as_str().unwrap().to_owned())
            .collect();
        whose.sort();
        whose
    };
    let claimed = store
        .claim_due("probe", now, seconds(30), 100)
        .await
        .unwrap();
    assert_eq!(whose(claimed), ["Fussy", "Fussy"]);
    let claimed = store
        .claim_due("probe", ends - millis(1), seconds(30), 100)
        .await
        .unwrap();
    assert!(claimed.is_empty(), "held to the window's end: {claimed:?}");
    let claimed = store
        .claim_due("probe", ends, seconds(30), 100)
        .await
        .unwrap();
    assert_eq!(whose(claimed), ["OrderPayment", "OrderPayment"]);
}
