//! Letters in bulk: retry or discard every open letter a filter matches, in paced batches, each
//! letter's outcome reported. Interrupted, it resumes by being run again: a letter it retried or
//! discarded is no longer open, so only the rest match.

use std::collections::BTreeMap;

use crate::app::letters::DeadLetters;
use crate::store::{LetterFilter, LetterStatus, RetryOutcome};
use crate::{Duration, Error, seconds};

/// How a bulk action goes: `batch` letters at a time, `pause` between batches, so that a
/// thousand retries do not all call a provider at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    /// Letters per batch (at least one).
    pub batch: usize,
    /// The pause after each batch but the last, on the app's clock.
    pub pause: Duration,
}

impl Default for Pace {
    /// Fifty letters, then a second's pause.
    fn default() -> Pace {
        Pace {
            batch: 50,
            pause: seconds(1),
        }
    }
}

/// What a bulk action did to one letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BulkOutcome {
    /// Retried: what the retry did (never [`RetryOutcome::Failed`], which is `Failed`).
    Retried(RetryOutcome),
    /// The retry or discard did not go through (its run failed again, the letter cannot be
    /// retried, the store refused); the letter stays open. With the error and its causes.
    Failed(String),
    /// Discarded.
    Discarded,
    /// Settled by someone else meanwhile (another operator, another worker): left alone.
    Skipped,
    /// Requested of the workers, none of which ran it in the time waited: the request stays,
    /// and a worker runs it when one runs.
    Waiting,
}

impl BulkOutcome {
    /// What a retry's outcome is as a bulk outcome.
    fn of(outcome: RetryOutcome) -> BulkOutcome {
        match outcome {
            RetryOutcome::Failed { code, .. } if code == SETTLED || code == NOT_FOUND => {
                BulkOutcome::Skipped
            }
            RetryOutcome::Failed { error, .. } => BulkOutcome::Failed(error),
            retried => BulkOutcome::Retried(retried),
        }
    }
}

/// The codes of a letter settled or gone meanwhile.
const SETTLED: &str = "DEAD_LETTER_SETTLED";
const NOT_FOUND: &str = "NOT_FOUND";

impl BulkOutcome {
    /// The outcome as the report counts it: `retried`, `failed`, `discarded`, `skipped`.
    pub fn name(&self) -> &'static str {
        match self {
            BulkOutcome::Retried(_) => "retried",
            BulkOutcome::Failed(_) => "failed",
            BulkOutcome::Discarded => "discarded",
            BulkOutcome::Skipped => "skipped",
            BulkOutcome::Waiting => "waiting",
        }
    }
}

/// What a bulk action did: each letter's outcome, in the order they were taken.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BulkReport {
    /// Letter id and outcome, oldest letter first.
    pub outcomes: Vec<(String, BulkOutcome)>,
    /// Letters that matched but were not taken: a batch of requested retries that no worker
    /// ran in the time waited stops the rest, so they do not pile up for a worker to run at
    /// once, unpaced.
    pub untaken: usize,
}

impl BulkReport {
    /// How many letters had each outcome, by [`BulkOutcome::name`].
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut counts = BTreeMap::new();
        for (_, outcome) in &self.outcomes {
            *counts.entry(outcome.name()).or_insert(0) += 1;
        }
        counts
    }
}

/// Which bulk action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action<'a> {
    /// Retry here.
    Retry,
    /// Request each retry of the workers on behalf of `by`, and wait for each batch's outcomes
    /// up to `wait`.
    Request {
        by: &'a str,
        wait: std::time::Duration,
    },
    Discard,
}

impl DeadLetters<'_> {
    /// How many open letters `filter` matches: a bulk action's dry run. The filter's status is
    /// taken as open.
    pub async fn count_open(&self, filter: &LetterFilter) -> Result<u64, Error> {
        self.count(&open(filter)).await
    }

    /// Retries every open letter `filter` matches (its status taken as open, its limit as the
    /// most to take), oldest first, `pace.batch` at a time with `pace.pause` between batches;
    /// `each` hears every outcome as it happens. A retry that does not go through is an outcome,
    /// not an error: the letter stays open. Fails only when the letters cannot be read.
    pub async fn retry_all(
        &self,
        filter: &LetterFilter,
        pace: Pace,
        each: impl FnMut(&str, &BulkOutcome),
    ) -> Result<BulkReport, Error> {
        self.bulk(filter, pace, Action::Retry, each).await
    }

    /// Requests of the workers the retry of every open letter `filter` matches, on behalf of
    /// `by`, as [`retry_all`](DeadLetters::retry_all) retries them: a batch is requested at
    /// once, and its outcomes waited for, up to `wait`, before the pause and the next batch. A
    /// batch no worker finished in time stops the rest ([`BulkReport::untaken`]); its letters
    /// are `Waiting`, their requests kept for a worker.
    pub async fn request_retry_all(
        &self,
        filter: &LetterFilter,
        pace: Pace,
        by: &str,
        wait: std::time::Duration,
        each: impl FnMut(&str, &BulkOutcome),
    ) -> Result<BulkReport, Error> {
        self.bulk(filter, pace, Action::Request { by, wait }, each)
            .await
    }

    /// Discards every open letter `filter` matches, as [`retry_all`](DeadLetters::retry_all)
    /// retries them; a discard that does not go through is an outcome too.
    pub async fn discard_all(
        &self,
        filter: &LetterFilter,
        pace: Pace,
        each: impl FnMut(&str, &BulkOutcome),
    ) -> Result<BulkReport, Error> {
        self.bulk(filter, pace, Action::Discard, each).await
    }

    async fn bulk(
        &self,
        filter: &LetterFilter,
        pace: Pace,
        action: Action<'_>,
        mut each: impl FnMut(&str, &BulkOutcome),
    ) -> Result<BulkReport, Error> {
        // The matching letters as they stand now: a letter that fails again stays open, and
        // must not be taken twice in one run.
        let ids: Vec<String> = self
            .list(&open(filter))
            .await?
            .into_iter()
            .map(|letter| letter.id)
            .collect();
        let mut report = BulkReport::default();
        let batches: Vec<&[String]> = ids.chunks(pace.batch.max(1)).collect();
        for (index, batch) in batches.iter().enumerate() {
            let outcomes = match action {
                Action::Request { by, wait } => self.request_batch(batch, by, wait).await,
                Action::Retry | Action::Discard => {
                    let mut outcomes = Vec::with_capacity(batch.len());
                    for id in batch.iter() {
                        outcomes.push(self.settle_one(id, action).await);
                    }
                    outcomes
                }
            };
            let waiting = outcomes.contains(&BulkOutcome::Waiting);
            for (id, outcome) in batch.iter().zip(outcomes) {
                each(id, &outcome);
                report.outcomes.push((id.clone(), outcome));
            }
            if waiting {
                report.untaken = ids.len() - report.outcomes.len();
                break;
            }
            if index + 1 < batches.len() && pace.pause > Duration::ZERO {
                self.app().clock().sleep(pace.pause).await;
            }
        }
        Ok(report)
    }

    /// Retries or discards letter `id` here, unless it is no longer open (settled or gone
    /// meanwhile: retry and discard read it and refuse it then).
    async fn settle_one(&self, id: &str, action: Action<'_>) -> BulkOutcome {
        match action {
            Action::Discard => match self.discard(id).await {
                Ok(()) => BulkOutcome::Discarded,
                Err(Error::LetterSettled { .. } | Error::NotFound { .. }) => BulkOutcome::Skipped,
                Err(error) => BulkOutcome::Failed(crate::error::chain(&error)),
            },
            _ => BulkOutcome::of(RetryOutcome::of(&self.retry(id).await)),
        }
    }

    /// Requests the retries of `batch` at once, then waits for their outcomes, all within
    /// `wait` of the first request.
    async fn request_batch(
        &self,
        batch: &[String],
        by: &str,
        wait: std::time::Duration,
    ) -> Vec<BulkOutcome> {
        let until = std::time::Instant::now() + wait;
        let mut requested = Vec::with_capacity(batch.len());
        for id in batch {
            requested.push(self.request_retry(id, by).await);
        }
        let mut outcomes = Vec::with_capacity(batch.len());
        for request in requested {
            let left = until.saturating_duration_since(std::time::Instant::now());
            let stands = match request {
                Ok(request) => self.await_request(&request, left).await,
                Err(error) => Err(error),
            };
            outcomes.push(match stands {
                Ok(stands) => stands.outcome.map_or(BulkOutcome::Waiting, BulkOutcome::of),
                Err(error) => BulkOutcome::of(RetryOutcome::of(&Err(error))),
            });
        }
        outcomes
    }
}

/// `filter` on open letters.
fn open(filter: &LetterFilter) -> LetterFilter {
    LetterFilter {
        status: Some(LetterStatus::Failed),
        ..filter.clone()
    }
}
