//! Schedules that once failed, shrunk, kept as tests.

#[allow(
    unused_imports,
    reason = "the schedules pasted here name steps and acts"
)]
use super::schedule::{Act::*, Step::*};
#[allow(
    unused_imports,
    reason = "the schedules pasted here name steps and acts"
)]
use super::{replay, replay_with_faults};

// Seed 3, shrunk: a letter's retry whose drain fails on a parked event counted that event as
// parked behind its own failure (the instance said 1, its letter 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_parked_event_that_fails_again_is_not_parked_behind_itself() {
    replay(
        3,
        &[
            Send(2, Open),
            Advance(128995296),
            Send(2, Move(Some(2164627))),
            Send(2, Pay(31)),
            Advance(169908641),
            Send(2, Move(None)),
            Send(2, Move(Some(38195726))),
            Retry(2),
        ],
    )
    .await;
}

// Faults seed 12, shrunk: a process step whose commit failed, and whose failure could not be
// recorded either, left its claim to lapse, with events behind it: the runner is idle, the lag
// is not. The driver waits out the lease, as a real clock would, and the work is done then.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn work_behind_a_claim_left_by_a_failed_commit_is_waited_for() {
    replay_with_faults(
        12,
        &[
            Send(0, Open),
            Send(1, Open),
            Send(2, Open),
            Send(3, Open),
            Advance(1477758),
            Advance(17157933),
            Send(0, Pay(10)),
            Outage(2388917089),
            Send(1, Pay(55)),
            Send(3, Open),
        ],
    )
    .await;
}
