//! Schedules that once failed, shrunk, kept as tests.

#[allow(
    unused_imports,
    reason = "the schedules pasted here name steps and acts"
)]
use super::replay;
#[allow(
    unused_imports,
    reason = "the schedules pasted here name steps and acts"
)]
use super::schedule::{Act::*, Step::*};

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
