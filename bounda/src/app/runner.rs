//! Running on the real clock: a dispatcher pass and a worker pass every `pollInterval`, until
//! shut down.

use std::future::Future;
use std::sync::atomic::Ordering;

use crate::Error;
use crate::app::RejectionRecord;
use crate::app::{App, POLICIES, PROCESSES, RELAYS};

impl App {
    /// Runs the dispatcher and the scheduled worker until Ctrl-C or SIGTERM (what service
    /// managers send), finishing the run in flight. Returns [`Error::Stalled`] when the app
    /// cannot get further; see [`run_until`](App::run_until).
    pub async fn run(&self) -> Result<(), Error> {
        let shutdown = shutdown_signal();
        self.run_until(shutdown).await
    }

    /// Runs the dispatcher and the scheduled worker, and the sources of commands the app
    /// consumes, until `shutdown` completes. The attempt in flight when it does finishes and
    /// commits; nothing is left half-written, and what was not started is left for the next
    /// run.
    ///
    /// A subscriber whose pass fails waits its back-off and tries again. When one has failed
    /// `dispatcher.backoff.maxFailures` times in a row and nothing anywhere has moved since its
    /// first failure (a read-only file, a full disk), it returns [`Error::Stalled`] with the
    /// cause, rather than loop without end. A store out of reach (a database server restarting,
    /// a failover, a network cut) never stops it: it keeps trying with its back-off, logging
    /// each failure, and goes on once the store answers.
    pub async fn run_until(&self, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
        // A copy holds production's pending work: its runner would do it again through the
        // app's real ports (a second reminder to every patient).
        if let Some(mark) = crate::store::copy_mark(self.store()).await? {
            return Err(Error::Configuration {
                message: format!(
                    "this store is a copy of {} taken at {}: a runner on it would repeat \
                     production's work through the app's real ports; preview a deploy on it \
                     instead (`preview`), or move an app's data with `store::transfer`, which \
                     leaves no mark",
                    mark.source, mark.copied_at
                ),
            });
        }
        // The sources of commands run beside the workers, and stop with them.
        let sources = self.start_sources();
        let worked = self.work_until(shutdown).await;
        sources.stop().await;
        worked
    }

    /// The workers' loop of [`run_until`](Self::run_until).
    async fn work_until(&self, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
        let poll = self.config().dispatcher.poll_interval;
        tokio::pin!(shutdown);
        self.inner.stopping.store(false, Ordering::SeqCst);
        // Failures counted by an earlier run do not count against this one.
        self.inner
            .paused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
        // Other processes' writes wake the runner between polls, where the store can hear them.
        // Asking takes at most a poll interval, and a shutdown meanwhile is heard.
        let listening = async {
            match self.store().capabilities().wake_ups {
                Some(wake_ups) => wake_ups.listen().await.map(Some),
                None => Ok(None),
            }
        };
        let listening = tokio::time::timeout(poll.into(), listening);
        let listener = tokio::select! {
            biased;
            () = &mut shutdown => return Ok(()),
            listening = listening => match listening {
                Ok(Ok(listener)) => listener,
                Ok(Err(error)) => {
                    tracing::warn!(
                        error = %error,
                        "cannot listen for other processes' writes: polling every {poll}"
                    );
                    None
                }
                Err(_) => {
                    tracing::warn!(
                        "the store did not start listening within {poll}: polling every {poll}"
                    );
                    None
                }
            },
        };
        // The clock's moment at the last idle wait: one that has not moved since (a simulated
        // clock) waits the poll interval, rather than again and again for an entry it never
        // reaches.
        let mut idle_at = None;
        loop {
            // A stop that came before this pass begins ends the run here, with nothing claimed.
            if futures_util::FutureExt::now_or_never(shutdown.as_mut()).is_some() {
                return Ok(());
            }
            // Before the first pass: a build that would lose stored moments does not run; a
            // store out of reach is waited for like any pass's.
            match self.start().await {
                Ok(()) => {}
                Err(error) if error.is_unavailable() => {
                    tracing::warn!(
                        "cannot check the instances before the first pass: {} (the store is out of reach: waiting for it)",
                        crate::error::chain(&error)
                    );
                    tokio::select! {
                        biased;
                        () = &mut shutdown => return Ok(()),
                        () = tokio::time::sleep(poll.into()) => continue,
                    }
                }
                Err(error) => {
                    tracing::error!(code = error.code(), "{}", crate::error::chain(&error));
                    return Err(error);
                }
            }
            let pass = self.pass_once();
            tokio::pin!(pass);
            let result = tokio::select! {
                biased;
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
                self.inner.moves.fetch_add(1, Ordering::SeqCst);
            }
            if let Some(stalled) = self.stalled() {
                tracing::error!(code = stalled.code(), "{stalled}");
                return Err(stalled);
            }
            if moved {
                continue;
            }
            let now = self.clock().now();
            let still = idle_at.replace(now) == Some(now);
            let idle = async {
                let wait = match still {
                    true => poll,
                    // The read is bounded too: a store that does not answer costs a poll.
                    false => tokio::time::timeout(poll.into(), self.idle_wait(now, poll))
                        .await
                        .unwrap_or(poll),
                };
                tokio::time::sleep(wait.into()).await;
            };
            tokio::select! {
                biased;
                () = &mut shutdown => return Ok(()),
                () = idle => {}
                () = woken(listener.as_deref()) => {}
            }
        }
    }

    /// How long an idle runner waits from `now`: the poll interval, or less when an entry comes
    /// due sooner. One due already that the pass left (a deadline waiting for its instance's
    /// events) waits the poll interval, so the runner does not spin.
    async fn idle_wait(&self, now: crate::Instant, poll: crate::Duration) -> crate::Duration {
        match self.next_due_at().await {
            Ok(Some(due)) if due > now && due < now + poll => due.saturating_since(now),
            // A failing read is the next pass's to report.
            _ => poll,
        }
    }

    /// One dispatcher pass and one worker pass at the clock's time.
    ///
    /// A subscriber that fails is logged (`subscriber failed`) and the others still
    /// run; the failed one waits its back-off (`dispatcher.backoff`), doubling while it keeps
    /// failing, shown in `lag` (`paused_until`).
    async fn pass_once(&self) -> Result<(bool, Vec<RejectionRecord>), Error> {
        let mut rejections = Vec::new();
        let now = self.clock().now();
        let mut moved = false;
        if self.may_run(POLICIES, now) {
            let policies = self.policy_pass(now, &mut rejections).await;
            moved |= self.subscriber_result(POLICIES, policies);
        }
        if self.may_run(PROCESSES, now) {
            let processes = self.process_pass(now, &mut rejections).await;
            moved |= self.subscriber_result(PROCESSES, processes);
        }
        if self.may_run(RELAYS, now) {
            let relays = self.relay_pass(now, &mut rejections).await;
            moved |= self.subscriber_result(RELAYS, relays);
        }
        if self.may_run(SCHEDULED, now) {
            let work = self.worker_pass(now, &mut rejections).await;
            moved |= self.subscriber_result(SCHEDULED, work);
        }
        for model in self.read_models() {
            if self.may_run(model.subscriber(), now) {
                let pass = self.read_model_pass(model.as_ref()).await;
                moved |= self.subscriber_result(model.subscriber(), pass);
            }
        }
        Ok((moved, rejections))
    }

    /// The error to stop with, once a subscriber has failed `max_failures` times in a row with
    /// no pass moving anything in between.
    fn stalled(&self) -> Option<Error> {
        let moves = self.inner.moves.load(Ordering::SeqCst);
        let max = self.config().dispatcher.backoff.max_failures;
        let paused = self
            .inner
            .paused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        paused
            .iter()
            .find(|(_, failure)| failure.stuck >= max && failure.moves == moves)
            .map(|(subscriber, failure)| Error::Stalled {
                subscriber: subscriber.clone(),
                failures: failure.stuck,
                cause: failure.cause.clone(),
            })
    }

    /// Whether `subscriber` may run at `now`: not while it waits its back-off.
    pub(crate) fn may_run(&self, subscriber: &str, now: crate::Instant) -> bool {
        self.paused_until(subscriber)
            .is_none_or(|until| now >= until)
    }

    /// When `subscriber`, whose pass failed, tries again.
    pub(crate) fn paused_until(&self, subscriber: &str) -> Option<crate::Instant> {
        let paused = self
            .inner
            .paused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        paused.get(subscriber).map(|failure| failure.until)
    }

    /// Whether a subscriber's pass moved anything. A failure is logged and pauses it for its
    /// back-off; a pass that went through ends the pause.
    pub(crate) fn subscriber_result(&self, subscriber: &str, result: Result<bool, Error>) -> bool {
        let mut paused = self
            .inner
            .paused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match result {
            Ok(moved) => {
                if let Some(failure) = paused.remove(subscriber) {
                    tracing::info!(
                        bounda.subscriber = subscriber,
                        failures = failure.failures,
                        "subscriber works again after {} failed pass(es)",
                        failure.failures
                    );
                }
                moved
            }
            Err(error) => {
                let previous = paused.get(subscriber);
                let failures = previous.map_or(0, |failure| failure.failures) + 1;
                // Failures count towards stopping only while nothing else moves, and never while
                // the store is out of reach: a server restarting or a failover is waited out.
                // Nor does a read model held by its projection: the rest of the app works on,
                // and `lag` shows where it waits for a fix.
                let unavailable = error.is_unavailable();
                let moves = self.inner.moves.load(Ordering::SeqCst);
                let stuck = match previous {
                    _ if unavailable || matches!(error, Error::Projection { .. }) => 0,
                    Some(failure) if failure.moves == moves => failure.stuck + 1,
                    _ => 1,
                };
                let until = self.clock().now() + self.backoff_after(failures);
                let cause = crate::error::chain(&error);
                let waiting = if unavailable {
                    " (the store is out of reach: waiting for it)"
                } else {
                    ""
                };
                tracing::warn!(
                    bounda.subscriber = subscriber,
                    code = error.code(),
                    failures,
                    unavailable,
                    "subscriber failed, trying again at {until}{waiting}: {cause}"
                );
                paused.insert(
                    subscriber.to_owned(),
                    Paused {
                        failures,
                        moves,
                        stuck,
                        until,
                        cause,
                    },
                );
                false
            }
        }
    }

    /// How long `subscriber` waits when its pass fails now: its back-off after one more
    /// failure in a row.
    pub(crate) fn next_backoff(&self, subscriber: &str) -> crate::Duration {
        let failures = self
            .inner
            .paused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(subscriber)
            .map_or(0, |failure| failure.failures);
        self.backoff_after(failures + 1)
    }

    /// The back-off after `failures` failed passes in a row.
    fn backoff_after(&self, failures: u32) -> crate::Duration {
        self.config().dispatcher.backoff.delay_after(failures)
    }

    /// Whether a pass moved anything; a failure is logged. Rejections were logged in their
    /// commands' spans.
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

/// A subscriber whose passes fail: how many in a row, when it tries again, and why the last
/// one failed.
#[derive(Debug, Clone)]
pub(crate) struct Paused {
    pub(crate) failures: u32,
    /// The app's count of passes that moved something, at the last of these failures.
    pub(crate) moves: u64,
    /// Failures in a row with that count unchanged: with nothing else moving.
    pub(crate) stuck: u32,
    pub(crate) until: crate::Instant,
    pub(crate) cause: String,
}

/// The scheduled worker, as its failures are named and paused.
const SCHEDULED: &str = "scheduled";

/// Completes on Ctrl-C (SIGINT), or on SIGTERM where there are signals: pass it to
/// [`App::run_until`] with other ways to stop. Without a signal handler it never completes.
///
/// The handlers are installed when this is called, not when the future is first polled: call
/// it first thing in `main`, before the app is built, and a signal that comes at any moment
/// after is heard, the first pass included. Call it inside a Tokio runtime.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{Signal, SignalKind, signal};
        let interrupt = signal(SignalKind::interrupt());
        let terminate = signal(SignalKind::terminate());
        for (name, installed) in [("SIGINT", &interrupt), ("SIGTERM", &terminate)] {
            if let Err(error) = installed {
                tracing::warn!(
                    "cannot handle {name}, which will stop the process at once: {error}"
                );
            }
        }
        async fn received(signal: std::io::Result<Signal>) {
            match signal {
                Ok(mut signal) => {
                    signal.recv().await;
                }
                Err(_) => std::future::pending().await,
            }
        }
        async move {
            tokio::select! {
                () = received(interrupt) => {}
                () = received(terminate) => {}
            }
        }
    }
    #[cfg(not(unix))]
    async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Completes at `listener`'s next wake-up; never without one.
async fn woken(listener: Option<&dyn crate::store::Listener>) {
    match listener {
        Some(listener) => listener.next().await,
        None => std::future::pending().await,
    }
}
