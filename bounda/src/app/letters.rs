//! Dead letters: list, count, get, retry and discard, fenced on their status (spec 162–172).

use crate::Error;
use crate::app::App;
use crate::app::reaction::{Cause, RejectionRecord};
use crate::app::run::{self, run_policy};
use crate::app::telemetry::{self, CommandOutcome};
use crate::ids::derived_id;
use crate::store::{
    CommitError, DeadLetter, LetterFilter, LetterKind, LetterSettle, LetterStatus, Metadata,
    WriteSet,
};

/// The dead letters of an app: `app.dead_letters()`.
#[derive(Debug, Clone, Copy)]
pub struct DeadLetters<'a> {
    app: &'a App,
}

/// What retrying a letter did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Retried {
    /// The run committed; the letter is `retried`.
    Done,
    /// The scheduled command rejected; the letter is settled as `retried` (spec 169).
    Rejected(RejectionRecord),
}

impl App {
    /// The dead letters.
    pub fn dead_letters(&self) -> DeadLetters<'_> {
        DeadLetters { app: self }
    }
}

impl DeadLetters<'_> {
    /// The letters matching `filter`, oldest first.
    pub fn list(&self, filter: &LetterFilter) -> Result<Vec<DeadLetter>, Error> {
        Ok(self.app.store().dead_letters(filter)?)
    }

    /// How many letters match `filter`.
    pub fn count(&self, filter: &LetterFilter) -> Result<u64, Error> {
        Ok(self.app.store().count_dead_letters(filter)?)
    }

    /// The letter `id`.
    pub fn get(&self, id: &str) -> Result<Option<DeadLetter>, Error> {
        Ok(self.app.store().dead_letter(id)?)
    }

    /// The letter `id`, still `failed`.
    fn failed(&self, id: &str) -> Result<DeadLetter, Error> {
        let letter = self.get(id)?.ok_or_else(|| Error::NotFound {
            what: format!("dead letter `{id}`"),
        })?;
        if letter.status != LetterStatus::Failed {
            return Err(Error::LetterSettled { id: id.to_owned() });
        }
        Ok(letter)
    }

    /// Gives the letter up: `discarded`, nothing run (spec 172).
    pub fn discard(&self, id: &str) -> Result<(), Error> {
        self.failed(id)?;
        let writes = WriteSet {
            settle_letter: Some(LetterSettle {
                id: id.to_owned(),
                status: LetterStatus::Discarded,
            }),
            ..WriteSet::default()
        };
        settled(id, self.app.commit(&writes))
    }

    /// Runs the letter's work again, as a new request: a new idempotency key and new derived ids
    /// (spec 138, 142). A policy letter runs its handler once on the stored event, bypassing the
    /// inbox, and is marked `retried` with what the run writes (spec 39, 167); a scheduled letter
    /// dispatches its command with the recorded payload in a new correlation caused by the
    /// letter (spec 142, 169). A retry that fails leaves the letter `failed` and returns the
    /// error; of two retries, or a retry and a discard, the second gets `DEAD_LETTER_SETTLED`
    /// (spec 170).
    pub async fn retry(&self, id: &str) -> Result<Retried, Error> {
        let letter = self.failed(id)?;
        let settle = Some(LetterSettle {
            id: id.to_owned(),
            status: LetterStatus::Retried,
        });
        match letter.kind {
            LetterKind::Policy => {
                let not_retriable = |reason: &str| Error::LetterNotRetriable {
                    id: id.to_owned(),
                    reason: reason.to_owned(),
                };
                let policy = self
                    .app
                    .policies()
                    .find(|policy| policy.name() == letter.handler)
                    .ok_or_else(|| not_retriable("its policy is no longer in the app"))?;
                let event_id = letter.event_id.as_deref().unwrap_or_default();
                let event = self
                    .app
                    .store()
                    .read_event(event_id)?
                    .ok_or_else(|| not_retriable("its event is not in the store"))?;
                if !event.has_key(policy.key()) {
                    return Err(not_retriable("its policy no longer handles the event"));
                }
                let key = derived_id(&[
                    "policy",
                    policy.name(),
                    &event.id,
                    "retry",
                    &self.app.next_id(),
                ]);
                let span = run::policy_span(&**policy, &event, 1);
                let staging = run_policy(self.app, &**policy, &event, key, &span)
                    .await
                    .map_err(|failure| Error::RetryFailed {
                        id: id.to_owned(),
                        message: failure.message,
                    })?;
                let writes = WriteSet {
                    appends: staging.appends,
                    schedule: staging.scheduled,
                    settle_letter: settle,
                    ..WriteSet::default()
                };
                settled(id, self.app.commit(&writes))?;
                Ok(Retried::Done)
            }
            LetterKind::Scheduled => {
                let runner = self.app.command_runner(&letter.handler).ok_or_else(|| {
                    Error::LetterNotRetriable {
                        id: id.to_owned(),
                        reason: format!("command `{}` is not registered", letter.handler),
                    }
                })?;
                let cause = Cause {
                    correlation_id: self.app.next_id(),
                    causation_id: id.to_owned(),
                    depth: 0,
                };
                let metadata = Metadata {
                    depth: 0,
                    ..cause.metadata()
                };
                let payload = letter.payload.clone().unwrap_or_default();
                let span = telemetry::command_span(
                    &letter.handler,
                    runner.aggregate(),
                    letter.aggregate_id.as_deref().unwrap_or_default(),
                    &metadata.correlation_id,
                    &metadata.causation_id,
                );
                let decided = span.in_scope(|| runner.decide(self.app, &payload, &metadata))?;
                match decided {
                    Ok(decision) => {
                        let count = decision.append.as_ref().map_or(0, |a| a.events.len());
                        let writes = WriteSet {
                            appends: decision.append.into_iter().collect(),
                            settle_letter: settle,
                            ..WriteSet::default()
                        };
                        settled(id, self.app.commit(&writes))?;
                        let stored = CommandOutcome::Stored;
                        telemetry::command_outcome(&span, &letter.handler, stored, count);
                        Ok(Retried::Done)
                    }
                    Err(rejection) => {
                        let writes = WriteSet {
                            settle_letter: settle,
                            ..WriteSet::default()
                        };
                        settled(id, self.app.commit(&writes))?;
                        // Logged as `command rejected` (spec 169).
                        let outcome = CommandOutcome::Rejected {
                            code: rejection.rejected,
                            message: &rejection.message,
                        };
                        telemetry::command_outcome(&span, &letter.handler, outcome, 0);
                        Ok(Retried::Rejected(rejection))
                    }
                }
            }
            LetterKind::Process => self.app.retry_process_letter(&letter).await,
        }
    }
}

/// Maps a settling commit's refusal to the operator's answer.
fn settled(id: &str, result: Result<crate::store::Committed, CommitError>) -> Result<(), Error> {
    match result {
        Ok(_) => Ok(()),
        Err(CommitError::LetterSettled { .. }) => Err(Error::LetterSettled { id: id.to_owned() }),
        Err(CommitError::Store(error)) => Err(error.into()),
        Err(other) => Err(Error::RetryFailed {
            id: id.to_owned(),
            message: other.to_string(),
        }),
    }
}
