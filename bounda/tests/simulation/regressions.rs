//! Schedules that once failed, shrunk, kept as tests.

use super::inputs::Outside;
use super::{faulty, simulation};

// Seed 3, shrunk: a letter's retry whose drain fails on a parked event counted that event as
// parked behind its own failure (the instance said 1, its letter 0).
#[tokio::test]
async fn a_parked_event_that_fails_again_is_not_parked_behind_itself() {
    use Outside::*;
    use bounda::testing::simulate::Step::*;
    simulation()
        .replay(
            3,
            &[
                Send(Open(2)),
                Advance(128995296),
                Send(Move(2, Some(2164627))),
                Send(Pay(2, 31)),
                Advance(169908641),
                Send(Move(2, None)),
                Send(Move(2, Some(38195726))),
                Send(RetryLetter(2)),
            ],
        )
        .await;
}

// Faults seed 12, shrunk: a process step whose commit failed, and whose failure could not be
// recorded either, left its claim to lapse, with events behind it: the runner is idle, the lag
// is not. The harness waits out the lease, as a real clock would, and the work is done then.
#[tokio::test]
async fn work_behind_a_claim_left_by_a_failed_commit_is_waited_for() {
    use Outside::*;
    use bounda::testing::simulate::Step::*;
    faulty()
        .replay(
            12,
            &[
                Send(Open(0)),
                Send(Open(1)),
                Send(Open(2)),
                Send(Open(3)),
                Advance(1477758),
                Advance(17157933),
                Send(Pay(0, 10)),
                Outage(2388917089),
                Send(Pay(1, 55)),
                Send(Open(3)),
            ],
        )
        .await;
}

// Paused seed 43, shrunk: a payment stored while its process was paused, and a deadline of its
// instance that came due meanwhile. Resumed, the payment's step failed once (a port fault) and
// waited a second for its retry, while the test app gave the deadline its ten worker rounds at
// that one moment and ran it first. A worker's rounds take a poll interval each: a retry due
// within them now runs first.
#[tokio::test]
async fn a_retry_due_within_a_waiting_deadlines_rounds_runs_first() {
    #[allow(unused_imports)]
    use Outside::*;
    use bounda::testing::simulate::Step;
    crate::held()
        .replay(
            43,
            &[
                Step::Send(Open(0)),
                Step::Send(Open(2)),
                Step::Advance(105577082),
                Step::Pause(0, 8),
                Step::Send(Pay(0, 35)),
                Step::Advance(112590999),
            ],
        )
        .await;
}
