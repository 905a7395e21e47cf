//! Claims that scale past one box (issue 12): workers claiming due entries at once each take
//! different ones (`FOR UPDATE SKIP LOCKED`), and a claim is fenced by its id once its lease
//! lapses and another worker takes it over.

#![allow(
    clippy::unwrap_used,
    reason = "a failed expectation in a test is a panic"
)]

use std::collections::HashMap;
use std::sync::Arc;

use bounda::{Instant, seconds};
mod support;

use bounda::store::{InOrder, InboxClaim, InboxPair, Store};
use bounda_postgres::{Options, PostgresStore, testing};
use support::entry;

const ENTRIES: usize = 400;
const WORKERS: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workers_claiming_at_once_take_each_entry_once() {
    let store = Arc::new(support::store("claims", WORKERS * 2).await);
    let now = Instant::from_millis(1_767_225_600_000).unwrap();
    for n in 0..ENTRIES {
        support::schedule(&store, &entry(n, now)).await;
    }
    let workers: Vec<_> = (0..WORKERS)
        .map(|worker| {
            let store = store.clone();
            tokio::spawn(async move {
                let claim = format!("worker-{worker}");
                let mut ran = Vec::new();
                loop {
                    let batch = store.claim_due(&claim, now, seconds(60), 10).await.unwrap();
                    if batch.is_empty() {
                        return ran;
                    }
                    for entry in batch {
                        assert!(support::complete(&store, &entry.dedupe_key, &claim).await);
                        ran.push(entry.dedupe_key);
                    }
                }
            })
        })
        .collect();
    let mut runs: HashMap<String, usize> = HashMap::new();
    let mut busy = 0;
    for worker in workers {
        let ran = worker.await.unwrap();
        busy += usize::from(!ran.is_empty());
        for key in ran {
            *runs.entry(key).or_default() += 1;
        }
    }
    assert_eq!(runs.len(), ENTRIES, "every entry ran");
    assert!(runs.values().all(|n| *n == 1), "none twice");
    assert!(
        busy > 1,
        "the work was shared, not queued behind one worker"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_lease_lapsed_is_taken_over_and_its_holder_fenced() {
    let store = support::store("fenced", 2).await;
    let now = Instant::from_millis(1_767_225_600_000).unwrap();
    support::schedule(&store, &entry(1, now)).await;
    let first = store
        .claim_due("first", now, seconds(60), 10)
        .await
        .unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].claim_id.as_deref(), Some("first"));
    assert!(
        store
            .claim_due("second", now + seconds(60), seconds(60), 10)
            .await
            .unwrap()
            .is_empty(),
        "held while its lease lasts"
    );
    let second = store
        .claim_due("second", now + seconds(61), seconds(60), 10)
        .await
        .unwrap();
    assert_eq!(second.len(), 1, "taken over once it lapsed");
    assert!(
        !support::complete(&store, "entry-001", "first").await,
        "the late holder is fenced"
    );
    assert!(support::complete(&store, "entry-001", "second").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_skips_a_row_another_worker_is_claiming_instead_of_waiting() {
    let (url, schema) = testing::schema("skip").unwrap_or_else(|how| panic!("{how}"));
    let store = PostgresStore::connect(
        &url,
        Options {
            schema: schema.clone(),
            ..Options::default()
        },
    )
    .await
    .unwrap();
    let now = Instant::from_millis(1_767_225_600_000).unwrap();
    for n in 0..3 {
        support::schedule(&store, &entry(n, now)).await;
    }
    // Another worker is in the middle of claiming entry 0: its row is locked.
    let (mut other, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let tx = other.transaction().await.unwrap();
    tx.query(
        &format!(
            "SELECT 1 FROM \"{schema}\".scheduled_commands WHERE dedupe_key = 'entry-000' FOR UPDATE"
        ),
        &[],
    )
    .await
    .unwrap();
    let claimed = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        store.claim_due("mine", now, seconds(60), 10),
    )
    .await
    .expect("the claim does not wait for the locked row")
    .unwrap();
    let keys: Vec<&str> = claimed.iter().map(|e| e.dedupe_key.as_str()).collect();
    assert_eq!(keys, ["entry-001", "entry-002"]);
    tx.rollback().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_rescheduled_while_held_keeps_its_new_schedule_when_the_holder_completes() {
    let store = support::store("rescheduled", 2).await;
    let now = Instant::from_millis(1_767_225_600_000).unwrap();
    support::schedule(&store, &entry(7, now)).await;
    assert_eq!(
        store
            .claim_due("worker", now, seconds(60), 10)
            .await
            .unwrap()
            .len(),
        1
    );
    let later = now + seconds(3_600);
    support::schedule(&store, &entry(7, later)).await;
    assert!(
        support::complete(&store, "entry-007", "worker").await,
        "the claim was held"
    );
    assert!(
        store
            .claim_due("next", now + seconds(1), seconds(60), 10)
            .await
            .unwrap()
            .is_empty(),
        "kept, at its new moment"
    );
    let due = store
        .claim_due("next", later, seconds(60), 10)
        .await
        .unwrap();
    assert_eq!(due.len(), 1, "runs at the new moment");
    assert_eq!(due[0].execute_at, later);
}

/// Issue 21: several runners claim the same subscriber's inbox pairs at once, each a batch, a
/// page at a time; a lane (one instance's pairs of one handler) goes to one of them from its
/// first pair on, so its steps run in order on one runner, and what a claimer answered it did
/// not take is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claimers_of_one_inbox_keep_each_lane_on_one_of_them_in_order() {
    const LANES: usize = 120;
    const PER_LANE: usize = 3;
    const CLAIMERS: usize = 8;
    const LIMIT: usize = 30;
    const PAGE: usize = 20;
    let store = Arc::new(support::store("lanes", CLAIMERS * 2).await);
    let now = Instant::from_millis(1_767_225_600_000).unwrap();
    let lease = seconds(60);
    let mut shared = 0;
    for round in 0..5 {
        // In the log's order: ten instances at a time, each step of the ten in turn.
        let pairs: Vec<(String, String)> = (0..LANES / 10)
            .flat_map(|block| {
                (0..PER_LANE).flat_map(move |n| {
                    (block * 10..block * 10 + 10)
                        .map(move |lane| (format!("r{round}-e{n}-l{lane}"), format!("l{lane}")))
                })
            })
            .collect();
        let pairs = Arc::new(pairs);
        let claimers: Vec<_> = (0..CLAIMERS)
            .map(|claimer| {
                let (store, pairs) = (store.clone(), pairs.clone());
                tokio::spawn(async move {
                    let batch: Vec<InboxPair<'_>> = pairs
                        .iter()
                        .map(|(event_id, lane)| InboxPair {
                            handler: "notify",
                            event_id,
                            lane,
                        })
                        .collect();
                    let claim = format!("r{round}-c{claimer}");
                    // A page at a time, as a pass reads them, until the claimer has its batch.
                    let mut order = InOrder::new(LIMIT);
                    let mut answers = Vec::new();
                    for page in batch.chunks(PAGE) {
                        match order.full() {
                            true => answers.extend(page.iter().map(|_| InboxClaim::Skipped)),
                            false => answers.extend(
                                store
                                    .claim_inbox_batch(page, &claim, now, lease, &mut order)
                                    .await
                                    .unwrap(),
                            ),
                        }
                    }
                    answers
                })
            })
            .collect();
        let mut owner: HashMap<&str, usize> = HashMap::new();
        let mut by_lane: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
        let mut busy = 0;
        for (claimer, handle) in claimers.into_iter().enumerate() {
            let answers = handle.await.unwrap();
            assert_eq!(answers.len(), pairs.len());
            let taken = answers
                .iter()
                .filter(|a| matches!(a, InboxClaim::Claimed { .. }))
                .count();
            assert!(
                taken <= LIMIT,
                "claimer {claimer} took {taken}, over its limit"
            );
            busy += usize::from(taken > 0);
            for (n, ((event_id, lane), answer)) in pairs.iter().zip(&answers).enumerate() {
                if matches!(answer, InboxClaim::Claimed { .. }) {
                    assert!(
                        owner.insert(event_id.as_str(), claimer).is_none(),
                        "{event_id} claimed twice"
                    );
                    by_lane
                        .entry(lane.as_str())
                        .or_default()
                        .push((n % (PER_LANE * 10) / 10, claimer));
                }
            }
        }
        for (lane, taken) in &by_lane {
            let claimers: std::collections::HashSet<usize> = taken.iter().map(|t| t.1).collect();
            assert_eq!(
                claimers.len(),
                1,
                "lane {lane} went to one claimer: {taken:?}"
            );
            let steps: Vec<usize> = taken.iter().map(|t| t.0).collect();
            assert_eq!(
                steps,
                (0..steps.len()).collect::<Vec<_>>(),
                "lane {lane} was taken from its first pair on, in order"
            );
        }
        for (event_id, _) in pairs.iter() {
            let probe = store
                .claim_inbox("notify", event_id, "probe", now, lease)
                .await
                .unwrap();
            match owner.contains_key(event_id.as_str()) {
                true => assert_eq!(probe, InboxClaim::Held, "{event_id} is its claimer's"),
                false => assert_eq!(
                    probe,
                    InboxClaim::Claimed { attempt: 1 },
                    "{event_id}, answered not taken, is free"
                ),
            }
        }
        shared += usize::from(busy > 1);
    }
    assert!(shared > 0, "the claimers shared the work in some round");
}

/// Issue 21: a pair another runner claims between a batch claim's reading and its taking is
/// answered held, and a later pair of its lane the batch took meanwhile is given back, free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pair_taken_between_reading_and_claiming_gives_back_its_lanes_later_pairs() {
    let (url, schema) = testing::schema("raced").unwrap_or_else(|how| panic!("{how}"));
    let options = Options {
        schema: schema.clone(),
        ..Options::default()
    };
    let store = Arc::new(PostgresStore::connect(&url, options).await.unwrap());
    let now = Instant::from_millis(1_767_225_600_000).unwrap();
    let lease = seconds(60);
    // Another runner is taking e-0 at this moment: its claim is not committed yet.
    let mut other = support::session(&url).await;
    let tx = other.transaction().await.unwrap();
    tx.execute(
        &format!(
            "INSERT INTO \"{schema}\".inbox
                 (handler, event_id, status, attempts, claimed_at, lease_until, claim_id)
             VALUES ('notify', 'e-0', 'pending', 0, $1, $2, 'other')"
        ),
        &[&now.to_chrono(), &(now + lease).to_chrono()],
    )
    .await
    .unwrap();
    let claiming = tokio::spawn({
        let store = store.clone();
        async move {
            let pair = |event_id, lane| InboxPair {
                handler: "notify",
                event_id,
                lane,
            };
            let batch = [pair("e-0", "a"), pair("e-1", "a"), pair("e-2", "b")];
            store
                .claim_inbox_batch(&batch, "mine", now, lease, &mut InOrder::new(10))
                .await
                .unwrap()
        }
    });
    // The batch read e-0 as free and waits on it to claim.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    tx.commit().await.unwrap();
    assert_eq!(
        claiming.await.unwrap(),
        [
            InboxClaim::Held,
            InboxClaim::Skipped,
            InboxClaim::Claimed { attempt: 1 }
        ],
        "e-0 is the other runner's, so its lane's e-1 waits; lane b goes on"
    );
    assert_eq!(
        store
            .claim_inbox("notify", "e-1", "probe", now, lease)
            .await
            .unwrap(),
        InboxClaim::Claimed { attempt: 1 },
        "e-1 was given back"
    );
}

/// Issue 47: a statement's plan is kept once made, so one made while the inbox and the
/// scheduler were nearly empty (a schema just created) must still look each key up once they
/// have grown: the reads of where pairs stand and of a page of entries, and a wave's settling of
/// its pairs, never scan either table.
#[tokio::test]
async fn lookups_planned_on_small_tables_stay_lookups_once_they_grow() {
    let (url, schema) = testing::schema("plans").unwrap_or_else(|how| panic!("{how}"));
    // Each store's connections named after its part, so the counts are read once they are
    // closed: a connection's counts reach the server as it closes, a moment after the store
    // lets it go. Read at once, the migrations' scans (each index built reads its table whole)
    // arrived after the first count on some runs, 10 of them, and were taken for the lookups'.
    let named = |part: &str| Options {
        schema: schema.clone(),
        pool_size: 1,
        application_name: Some(format!("{part} {schema}")),
        ..Options::default()
    };
    let session = support::session(&url).await;
    // The schema made and the store closed, so the counts below start after its migrations.
    drop(
        PostgresStore::connect(&url, named("migrate"))
            .await
            .unwrap(),
    );
    support::until_closed(&session, &format!("migrate {schema}")).await;
    // The plans made before the server has analyzed the tables are what this shows. Analyzed
    // while they hold a few rows, the tables are scanned, as the server should then (a page
    // read whole), until the analyze after they grow; so autovacuum is off for these two
    // tables, lest it analyze them within the test.
    session
        .batch_execute(&format!(
            "ALTER TABLE \"{schema}\".inbox SET (autovacuum_enabled = false);
             ALTER TABLE \"{schema}\".scheduled_commands SET (autovacuum_enabled = false)"
        ))
        .await
        .unwrap();
    let scans = || async {
        let row = session
            .query_one(
                "SELECT coalesce(sum(seq_scan), 0)::bigint, coalesce(sum(idx_scan), 0)::bigint
                 FROM pg_stat_user_tables
                 WHERE schemaname = $1 AND relname IN ('inbox', 'scheduled_commands')",
                &[&schema],
            )
            .await
            .unwrap();
        (row.get::<_, i64>(0), row.get::<_, i64>(1))
    };
    let before = support::once_counted(&session, scans, |_| true).await;
    // One connection, so each statement is planned on it: more runs than the server's five
    // before it keeps a plan, on tables of a few rows; then the tables grow by hand.
    let store = PostgresStore::connect(&url, named("look")).await.unwrap();
    let now = Instant::from_millis(1_767_225_600_000).unwrap();
    let look = |round: usize| {
        let store = &store;
        async move {
            let ids: Vec<String> = (0..10).map(|n| format!("e-{round}-{n}")).collect();
            support::claim_pairs(store, &ids, now).await;
            store.scheduled_many(&ids).await.unwrap();
            support::handle_pairs(store, &ids).await;
        }
    };
    for round in 0..8 {
        look(round).await;
    }
    session
        .batch_execute(&format!(
            "INSERT INTO \"{schema}\".inbox (handler, event_id, status, attempts)
                 SELECT 'notify', 'grown-' || g, 'succeeded', 1 FROM generate_series(1, 20000) g;
             INSERT INTO \"{schema}\".scheduled_commands
                 (dedupe_key, command_type, aggregate_id, payload, execute_at, context)
                 SELECT 'grown-' || g, 'Grown', 'g', '{{}}', now(), '{{}}'
                 FROM generate_series(1, 20000) g"
        ))
        .await
        .unwrap();
    for round in 8..12 {
        look(round).await;
    }
    drop(store);
    support::until_closed(&session, &format!("look {schema}")).await;
    let after = support::once_counted(&session, scans, |_| true).await;
    assert!(after.1 > before.1, "the store's lookups were counted");
    assert_eq!(
        after.0 - before.0,
        0,
        "no scan of the inbox or the scheduler by the store's lookups"
    );
}

// Issue 47: taking a scheduler entry and settling an inbox pair as handled rewrite their rows in
// their pages (heap-only updates), with no entry in any index: no index reads the columns they
// write, and pages keep room for the new versions. An update that wrote index entries would be
// counted as a plain one.
#[tokio::test]
async fn a_claim_and_a_success_rewrite_their_rows_in_place() {
    let (url, schema) = testing::schema("in-place").unwrap_or_else(|how| panic!("{how}"));
    let options = Options {
        schema: schema.clone(),
        pool_size: 1,
        ..Options::default()
    };
    let now = Instant::from_millis(1_767_225_600_000).unwrap();
    let store = PostgresStore::connect(&url, options.clone()).await.unwrap();
    for n in 0..40 {
        support::schedule(&store, &entry(n, now)).await;
    }
    drop(store);
    let session = support::session(&url).await;
    // Rows inserted, updated and updated in place: the scheduler's, then the inbox's.
    let updates = || async {
        let row = session
            .query_one(
                "SELECT s.n_tup_ins, s.n_tup_upd, s.n_tup_hot_upd,
                     i.n_tup_ins, i.n_tup_upd, i.n_tup_hot_upd
                 FROM pg_stat_user_tables s, pg_stat_user_tables i
                 WHERE s.schemaname = $1 AND s.relname = 'scheduled_commands'
                     AND i.schemaname = $1 AND i.relname = 'inbox'",
                &[&schema],
            )
            .await
            .unwrap();
        (0..6).map(|n| row.get::<_, i64>(n)).collect::<Vec<_>>()
    };
    let before = support::once_counted(&session, updates, |counts| counts[0] == 40).await;
    let store = PostgresStore::connect(&url, options).await.unwrap();
    let claimed = store.claim_due("w", now, seconds(60), 100).await.unwrap();
    assert_eq!(claimed.len(), 40);
    let ids: Vec<String> = (0..40).map(|n| format!("e-{n}")).collect();
    support::claim_pairs(&store, &ids, now).await;
    support::handle_pairs(&store, &ids).await;
    drop(store);
    let after = support::once_counted(&session, updates, |after| {
        after[1] >= before[1] + 40 && after[4] >= before[4] + 40
    })
    .await;
    let delta: Vec<i64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    assert_eq!(
        (delta[1], delta[3], delta[4]),
        (40, 40, 40),
        "each claim an update; each pair claimed an insert, and handled an update"
    );
    // One statement claims all 40, and one settles all 40: a page their earlier rows filled
    // has no room for the rest until they commit (35 claims and 40 successes of 40 in place
    // here); with an index of a column they write, none.
    assert!(delta[2] >= 30, "{} of the 40 claims in place", delta[2]);
    assert!(delta[5] >= 30, "{} of the 40 successes in place", delta[5]);
}
