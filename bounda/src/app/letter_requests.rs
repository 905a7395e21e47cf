//! Retries asked of the workers: the operator's command and the page request a retry, a worker
//! runs it with production's build and configuration, and the asker reads back what it did.

use crate::Error;
use crate::app::App;
use crate::app::letters::{DeadLetters, Retried};
use crate::store::{
    CommitError, RetryOutcome, RetryRequest, ScheduledEntry, ScheduledOutcome, ScheduledRelease,
    WriteSet,
};

/// How often a wait for a request's outcome reads it again.
const POLL: std::time::Duration = std::time::Duration::from_millis(100);

impl DeadLetters<'_> {
    /// Asks the workers to retry letter `id` on behalf of `by`: a worker takes the request at
    /// once and runs [`retry`](DeadLetters::retry) there, with the handlers and configuration
    /// production runs, and records what it did, which [`requests`](DeadLetters::requests) and
    /// [`await_request`](DeadLetters::await_request) read. What no worker could retry is
    /// refused here: a letter that does not exist (`NOT_FOUND`), one already settled
    /// (`DEAD_LETTER_SETTLED`), one whose handler or instance is paused.
    pub async fn request_retry(&self, id: &str, by: &str) -> Result<RetryRequest, Error> {
        let letter = self.failed(id).await?;
        self.refuse_paused(&letter).await?;
        // Asked again before a worker ran it, it is the same request: a second would run after
        // the first and find the letter settled.
        if let Some(waiting) = self
            .requests(id)
            .await?
            .into_iter()
            .find(|request| request.outcome.is_none())
        {
            return Ok(waiting);
        }
        let app = self.app();
        let request = RetryRequest {
            id: app.next_id(),
            letter: letter.id,
            by: by.to_owned(),
            requested_at: app.clock().now(),
            finished_at: None,
            outcome: None,
        };
        let writes = WriteSet {
            schedule: vec![request.entry()],
            retry_requests: vec![request.clone()],
            ..WriteSet::default()
        };
        app.commit(&writes)
            .await
            .map_err(|error| crate::error::unwritten("cannot request a retry", error))?;
        Ok(request)
    }

    /// The retries requested of letter `id`, oldest first, each with its outcome once a worker
    /// ran it.
    pub async fn requests(&self, id: &str) -> Result<Vec<RetryRequest>, Error> {
        Ok(self.app().store().retry_requests(id).await?)
    }

    /// `request` as it stands once a worker has run it, or as it stands when `wait` (real
    /// time: the workers run in other processes) has passed without one.
    pub async fn await_request(
        &self,
        request: &RetryRequest,
        wait: std::time::Duration,
    ) -> Result<RetryRequest, Error> {
        let until = std::time::Instant::now() + wait;
        loop {
            let stands = self
                .requests(&request.letter)
                .await?
                .into_iter()
                .find(|stored| stored.id == request.id)
                .unwrap_or_else(|| request.clone());
            let left = until.saturating_duration_since(std::time::Instant::now());
            if stands.outcome.is_some() || left.is_zero() {
                return Ok(stands);
            }
            tokio::time::sleep(POLL.min(left)).await;
        }
    }
}

impl RetryOutcome {
    /// What a retry's result is as an outcome kept for its asker.
    pub(crate) fn of(result: &Result<Retried, Error>) -> RetryOutcome {
        match result {
            Ok(Retried::Done) => RetryOutcome::Retried,
            Ok(Retried::Rejected(rejection)) => RetryOutcome::Rejected {
                command_type: rejection.command_type.to_owned(),
                rejected: rejection.rejected.to_owned(),
                message: rejection.message.clone(),
            },
            Ok(Retried::Refused {
                command,
                code,
                message,
            }) => RetryOutcome::Rejected {
                command_type: command.clone(),
                rejected: code.clone(),
                message: message.clone(),
            },
            Ok(Retried::FailedAgain {
                letter,
                drained,
                parked,
            }) => RetryOutcome::FailedAgain {
                letter: letter.clone(),
                drained: *drained,
                parked: *parked,
            },
            Err(error) => RetryOutcome::Failed {
                code: error.code().to_owned(),
                error: crate::error::chain(error),
            },
        }
    }
}

impl App {
    /// Runs requested retries a worker claimed, one at a time, each recorded with its entry's
    /// completion; once the app is stopping, the rest are given back unrun for the next worker.
    pub(crate) async fn run_requested_retries(
        &self,
        requests: Vec<ScheduledEntry>,
        claim_id: &str,
    ) -> Result<(), Error> {
        for entry in requests {
            let release = |outcome| ScheduledRelease {
                claim_id: entry
                    .claim_id
                    .clone()
                    .unwrap_or_else(|| claim_id.to_owned()),
                dedupe_key: entry.dedupe_key.clone(),
                outcome,
            };
            let writes = match self.stopping() {
                true => WriteSet {
                    scheduled: Some(release(ScheduledOutcome::Defer)),
                    ..WriteSet::default()
                },
                false => WriteSet {
                    retry_requests: vec![
                        self.run_requested_retry(&entry, &release(ScheduledOutcome::Complete))
                            .await?,
                    ],
                    scheduled: Some(release(ScheduledOutcome::Complete)),
                    ..WriteSet::default()
                },
            };
            self.record_request(&entry, &writes).await?;
        }
        Ok(())
    }

    /// Runs the retry `entry` requests, keeping the entry's claim (`release`'s) while it runs,
    /// and answers the request with its outcome. An entry that does not read still answers
    /// its request, as one that could not be run.
    async fn run_requested_retry(
        &self,
        entry: &ScheduledEntry,
        release: &ScheduledRelease,
    ) -> Result<RetryRequest, Error> {
        let read = match &entry.unreadable {
            Some(unreadable) => Err(unreadable.to_string()),
            None => serde_json::from_value::<RetryRequest>(entry.payload.clone())
                .map_err(|error| error.to_string()),
        };
        let mut request = match read {
            Ok(request) => request,
            Err(why) => {
                tracing::error!(
                    key = %entry.dedupe_key,
                    "a requested retry's entry does not read, so its letter is not retried: {why}"
                );
                let id = RetryRequest::id_of_key(&entry.dedupe_key);
                return Ok(RetryRequest {
                    id: id.unwrap_or(&entry.dedupe_key).to_owned(),
                    letter: entry.aggregate_id.clone(),
                    by: "unknown".to_owned(),
                    requested_at: entry.execute_at,
                    finished_at: Some(self.clock().now()),
                    outcome: Some(RetryOutcome::Failed {
                        code: "UNREADABLE".to_owned(),
                        error: format!("the request's entry does not read: {why}"),
                    }),
                });
            }
        };
        // The entry stays this worker's while the retry runs, however many steps it takes: a
        // second worker would run it again and find the letter held.
        let letters = self.dead_letters();
        let retry = letters.retry(&request.letter);
        let result = tokio::select! {
            result = retry => result,
            never = self.keep_claim(release) => match never {},
        };
        match &result {
            Ok(_) => tracing::info!(
                letter = %request.letter,
                by = %request.by,
                "a letter was retried as requested"
            ),
            Err(error) => tracing::warn!(
                letter = %request.letter,
                by = %request.by,
                code = error.code(),
                "a requested retry of a letter did not go through: {}",
                crate::error::chain(error)
            ),
        }
        request.finished_at = Some(self.clock().now());
        request.outcome = Some(RetryOutcome::of(&result));
        Ok(request)
    }

    /// Renews `release`'s claim at half the lease, for as long as it is polled.
    async fn keep_claim(&self, release: &ScheduledRelease) -> std::convert::Infallible {
        let lease = self.lease();
        loop {
            self.clock()
                .sleep(crate::millis(lease.as_millis() / 2))
                .await;
            let now = self.clock().now();
            let renewed = self
                .store()
                .renew_scheduled(&release.dedupe_key, &release.claim_id, now, lease)
                .await;
            if let Err(error) = renewed {
                tracing::warn!(
                    key = %release.dedupe_key,
                    "a requested retry's claim could not be renewed; it lapses with its lease: {}",
                    crate::error::chain(&error)
                );
            }
        }
    }

    /// Commits what a requested retry's run writes.
    async fn record_request(&self, entry: &ScheduledEntry, writes: &WriteSet) -> Result<(), Error> {
        match self.commit(writes).await {
            Ok(_) => Ok(()),
            // Its lease lapsed and another worker took it: that worker records it.
            Err(error @ CommitError::ScheduledClaimLost { .. }) => {
                tracing::warn!(
                    key = %entry.dedupe_key,
                    "a requested retry's entry was taken by another worker before its outcome \
                     was recorded: {}",
                    crate::error::chain(&error)
                );
                Ok(())
            }
            Err(error) => Err(crate::error::unwritten(
                "cannot record what a requested retry did",
                error,
            )),
        }
    }
}
