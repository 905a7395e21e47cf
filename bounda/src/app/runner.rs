//! Running on the real clock: a dispatcher pass and a worker pass every `pollInterval`, until
//! shut down (spec 50, 178, 203).

use std::future::Future;
use std::sync::atomic::Ordering;

use crate::Error;
use crate::app::RejectionRecord;
use crate::app::{App, POLICIES, PROCESSES, telemetry};

impl App {
    /// Runs the dispatcher and the scheduled worker until Ctrl-C.
    pub async fn run(&self) -> Result<(), Error> {
        self.run_until(async {
            // Without a signal handler, run until the process is killed.
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        })
        .await
    }

    /// Runs the dispatcher and the scheduled worker until `shutdown` completes. The attempt in
    /// flight when it does finishes and commits; nothing is left half-written, and what was not
    /// started is left for the next run (spec 188).
    pub async fn run_until(&self, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
        let poll = self.config().dispatcher.poll_interval;
        tokio::pin!(shutdown);
        self.inner.stopping.store(false, Ordering::SeqCst);
        loop {
            let pass = self.pass_once();
            tokio::pin!(pass);
            let result = tokio::select! {
                result = &mut pass => result,
                () = &mut shutdown => {
                    self.inner.stopping.store(true, Ordering::SeqCst);
                    let result = pass.await;
                    self.report(result);
                    return Ok(());
                }
            };
            let moved = self.report(result);
            if moved {
                continue;
            }
            tokio::select! {
                () = &mut shutdown => return Ok(()),
                () = tokio::time::sleep(poll.into()) => {}
            }
        }
    }

    /// One dispatcher pass and one worker pass at the clock's time.
    ///
    /// A subscriber that fails is logged (`subscriber failed`, spec 226) and the others still
    /// run; the failed one tries again on the next pass.
    async fn pass_once(&self) -> Result<(bool, Vec<RejectionRecord>), Error> {
        let mut rejections = Vec::new();
        let now = self.clock().now();
        let policies = self.policy_pass(now, &mut rejections).await;
        let policies = subscriber_result(POLICIES, policies);
        let processes = self.process_pass(now, &mut rejections).await;
        let processes = subscriber_result(PROCESSES, processes);
        let work = self.worker_pass(now, &mut rejections).await;
        let work = subscriber_result("scheduled", work);
        telemetry::lag(self);
        Ok((policies || processes || work, rejections))
    }

    /// Whether a pass moved anything; a failure is logged. Rejections were logged in their
    /// commands' spans (spec 222).
    fn report(&self, result: Result<(bool, Vec<RejectionRecord>), Error>) -> bool {
        match result {
            Ok((moved, _)) => moved,
            Err(error) => {
                tracing::error!(
                    code = error.code(),
                    "pass failed: {}",
                    crate::error::chain(&error)
                );
                false
            }
        }
    }

    /// Whether the app is shutting down: passes stop between attempts.
    pub(crate) fn stopping(&self) -> bool {
        self.inner.stopping.load(Ordering::SeqCst)
    }
}

/// Whether a subscriber's pass moved anything; a failure is logged and counts as not moving.
fn subscriber_result(subscriber: &str, result: Result<bool, Error>) -> bool {
    match result {
        Ok(moved) => moved,
        Err(error) => {
            // The store failed; the next pass tries again after the poll interval.
            tracing::warn!(
                bounda.subscriber = subscriber,
                code = error.code(),
                "subscriber failed: {}",
                crate::error::chain(&error)
            );
            false
        }
    }
}
