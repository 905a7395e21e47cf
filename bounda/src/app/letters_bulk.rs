//! Letters in bulk: retry or discard every open letter a filter matches, in paced batches, each
//! letter's outcome reported. Interrupted, it resumes by being run again: a letter it retried or
//! discarded is no longer open, so only the rest match.

use std::collections::BTreeMap;

use crate::app::letters::{DeadLetters, Retried};
use crate::store::{LetterFilter, LetterStatus};
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
    /// Retried: what the retry did.
    Retried(Retried),
    /// The retry or discard did not go through (its run failed again, the letter cannot be
    /// retried, the store refused); the letter stays open. With the error and its causes.
    Failed(String),
    /// Discarded.
    Discarded,
    /// Settled by someone else meanwhile (another operator, another worker): left alone.
    Skipped,
}

impl BulkOutcome {
    /// The outcome as the report counts it: `retried`, `failed`, `discarded`, `skipped`.
    pub fn name(&self) -> &'static str {
        match self {
            BulkOutcome::Retried(_) => "retried",
            BulkOutcome::Failed(_) => "failed",
            BulkOutcome::Discarded => "discarded",
            BulkOutcome::Skipped => "skipped",
        }
    }
}

/// What a bulk action did: each letter's outcome, in the order they were taken.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BulkReport {
    /// Letter id and outcome, oldest letter first.
    pub outcomes: Vec<(String, BulkOutcome)>,
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
enum Action {
    Retry,
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
        action: Action,
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
            for id in batch.iter() {
                let outcome = self.settle_one(id, action).await;
                each(id, &outcome);
                report.outcomes.push((id.clone(), outcome));
            }
            if index + 1 < batches.len() && pace.pause > Duration::ZERO {
                self.app().clock().sleep(pace.pause).await;
            }
        }
        Ok(report)
    }

    /// Retries or discards letter `id`, unless it is no longer open (settled or gone meanwhile:
    /// retry and discard read it and refuse it then).
    async fn settle_one(&self, id: &str, action: Action) -> BulkOutcome {
        let done = match action {
            Action::Retry => self.retry(id).await.map(BulkOutcome::Retried),
            Action::Discard => self.discard(id).await.map(|()| BulkOutcome::Discarded),
        };
        match done {
            Ok(outcome) => outcome,
            Err(Error::LetterSettled { .. } | Error::NotFound { .. }) => BulkOutcome::Skipped,
            Err(error) => BulkOutcome::Failed(crate::error::chain(&error)),
        }
    }
}

/// `filter` on open letters.
fn open(filter: &LetterFilter) -> LetterFilter {
    LetterFilter {
        status: Some(LetterStatus::Failed),
        ..filter.clone()
    }
}
