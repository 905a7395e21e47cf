//! Dead letters: list, count, get, retry and discard, fenced on their status.

use std::sync::Arc;

use crate::app::App;
use crate::app::RejectionRecord;
use crate::app::cause::Cause;
use crate::app::command_run::CommandRun;
use crate::app::engine::{Claim, Report, Run, Work};
use crate::app::policy_run::PolicyRun;
use crate::app::relay_run::RelayRun;
use crate::ids::derived_id;
use crate::store::{
    CommitError, DeadLetter, LetterFilter, LetterHold, LetterKind, LetterSettle, LetterStatus,
    WriteSet,
};
use crate::{Error, Instant};

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
    /// The scheduled command rejected; the letter is settled as `retried`.
    Rejected(RejectionRecord),
    /// The message an ingress letter kept was taken, and its command rejected: the rejection
    /// is its answer, and the letter is settled as `retried`.
    Refused {
        /// The command's `NAME`.
        command: String,
        /// The rejection's code.
        code: String,
        /// Its message.
        message: String,
    },
    /// A process letter's failed step ran, so the letter is `retried`, but a later step of the
    /// retry (an event parked behind it, or a deadline due before one) failed: that failure is
    /// the instance's new letter, `letter`, with `parked` events waiting behind it; `drained`
    /// parked events were handled before it.
    FailedAgain {
        /// The new letter.
        letter: String,
        /// Parked events handled before the new failure.
        drained: usize,
        /// Events parked behind the new letter.
        parked: usize,
    },
}

impl App {
    /// The dead letters.
    pub fn dead_letters(&self) -> DeadLetters<'_> {
        DeadLetters { app: self }
    }
}

impl<'a> DeadLetters<'a> {
    /// The app the letters are of.
    pub(crate) fn app(&self) -> &'a App {
        self.app
    }
}

impl DeadLetters<'_> {
    /// The letters matching `filter`, oldest first.
    pub async fn list(&self, filter: &LetterFilter) -> Result<Vec<DeadLetter>, Error> {
        Ok(self.app.store().dead_letters(filter).await?)
    }

    /// How many letters match `filter`.
    pub async fn count(&self, filter: &LetterFilter) -> Result<u64, Error> {
        Ok(self.app.store().count_dead_letters(filter).await?)
    }

    /// The letter `id`.
    pub async fn get(&self, id: &str) -> Result<Option<DeadLetter>, Error> {
        Ok(self.app.store().dead_letter(id).await?)
    }

    /// The letter `id`, still `failed`.
    pub(super) async fn failed(&self, id: &str) -> Result<DeadLetter, Error> {
        let letter = self.get(id).await?.ok_or_else(|| Error::NotFound {
            what: format!("dead letter `{id}`"),
        })?;
        if letter.status != LetterStatus::Failed {
            return Err(Error::LetterSettled { id: id.to_owned() });
        }
        Ok(letter)
    }

    /// How many events wait parked behind `letter`: those of its instance's failure, when the
    /// letter is that failure's and still `failed` (its own failed event not counted); 0 for a
    /// letter that is settled, superseded by a later failure, or not a process's.
    pub async fn parked(&self, letter: &DeadLetter) -> Result<usize, Error> {
        self.app.parked_behind_letter(letter).await
    }

    /// Gives the letter up: `discarded`, nothing run. The letter is claimed first, as a retry
    /// claims it: a discard refuses a letter a retry holds (`DEAD_LETTER_SETTLED`), and a retry
    /// that comes second finds it taken, so whichever comes second changes nothing.
    pub async fn discard(&self, id: &str) -> Result<(), Error> {
        self.failed(id).await?;
        self.holding(id, async |held| {
            let writes = WriteSet {
                require_letter: Some(LetterHold {
                    id: held.id.clone(),
                    claim_id: held.claim_id.clone(),
                }),
                settle_letter: Some(LetterSettle {
                    id: held.id.clone(),
                    status: LetterStatus::Discarded,
                }),
                ..WriteSet::default()
            };
            settled(&held.id, self.app.commit(&writes).await)
        })
        .await
    }

    /// Runs the letter's work again here, in this process, with this app's handlers and their
    /// configuration, as a new request: a new idempotency key and new derived ids. An operator's
    /// tool runs elsewhere than production's workers: it should
    /// [`request_retry`](DeadLetters::request_retry), which a worker runs.
    /// A policy letter runs its handler once on the stored event, bypassing the
    /// inbox, and is marked `retried` with what the run writes; a scheduled letter
    /// dispatches its command with the recorded payload in a new correlation caused by the
    /// letter. A retry that fails leaves the letter `failed` and returns the
    /// error; of two retries, or a retry and a discard, the second gets `DEAD_LETTER_SETTLED`.
    pub async fn retry(&self, id: &str) -> Result<Retried, Error> {
        let letter = self.failed(id).await?;
        self.refuse_paused(&letter).await?;
        self.holding(id, async |held| self.retry_claimed(letter, held).await)
            .await
    }

    /// Refuses to retry `letter` while what runs it is paused: what is paused runs nothing, a
    /// retry included.
    pub(super) async fn refuse_paused(&self, letter: &DeadLetter) -> Result<(), Error> {
        match self.holding_pause(letter).await? {
            Some(pause) => Err(Error::LetterNotRetriable {
                id: letter.id.clone(),
                reason: format!("{pause}; resume it first"),
            }),
            None => Ok(()),
        }
    }

    /// Runs `settle` holding letter `id`'s claim, taken before anything runs, so of two
    /// operators' actions on one letter at once (two retries, a retry and a discard), the second
    /// changes nothing and gets `DEAD_LETTER_SETTLED`.
    async fn holding<T>(
        &self,
        id: &str,
        settle: impl AsyncFnOnce(&mut LetterRetry) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let store = self.app.store();
        let mut held = LetterRetry {
            id: id.to_owned(),
            claim_id: self.app.claim_id(),
            claimed_at: self.app.clock().now(),
        };
        if !store
            .claim_letter(id, &held.claim_id, held.claimed_at, self.app.lease())
            .await?
        {
            return Err(Error::LetterSettled { id: id.to_owned() });
        }
        let outcome = settle(&mut held).await;
        // Settled, the claim no longer matters; failed again, the letter is free to retry. A
        // claim that cannot be released lapses with its lease: the action's own outcome is what
        // the caller needs, so the release's failure is logged, not returned in its place.
        if let Err(error) = store.release_letter(id, &held.claim_id).await {
            tracing::warn!(
                letter = %id,
                "a letter's claim could not be released; it lapses with its lease: {}",
                crate::error::chain(&error)
            );
        }
        outcome
    }

    /// The pause that holds `letter`'s work, if one does: its policy's, its process's or its
    /// instance's.
    async fn holding_pause(
        &self,
        letter: &crate::store::DeadLetter,
    ) -> Result<Option<crate::store::Pause>, Error> {
        let paused = self.app.paused().await?;
        let instance = crate::app::processes::writes::LetterPayload::of(letter)
            .map(|payload| payload.instance);
        Ok(match (letter.kind, instance) {
            (crate::store::LetterKind::Process, Some(id)) => {
                paused.instance(&letter.handler, &id).cloned()
            }
            (crate::store::LetterKind::Policy, _) => paused.handler(&letter.handler).cloned(),
            _ => None,
        })
    }

    /// The stored event letter `letter` failed on; a letter whose event is gone cannot be
    /// retried.
    async fn event_of(&self, letter: &DeadLetter) -> Result<crate::RecordedEvent, Error> {
        let event_id = letter.event_id.as_deref().unwrap_or_default();
        self.app
            .read_event(event_id)
            .await?
            .ok_or_else(|| Error::LetterNotRetriable {
                id: letter.id.clone(),
                reason: "its event is not in the store".to_owned(),
            })
    }

    /// Runs a letter's work again, its claim held.
    async fn retry_claimed(
        &self,
        letter: DeadLetter,
        held: &mut LetterRetry,
    ) -> Result<Retried, Error> {
        let id = letter.id.as_str();
        let not_retriable = |reason: &str| Error::LetterNotRetriable {
            id: id.to_owned(),
            reason: reason.to_owned(),
        };
        match letter.kind {
            LetterKind::Relay => {
                let relay = self
                    .app
                    .relays()
                    .find(|relay| relay.name() == letter.handler)
                    .ok_or_else(|| not_retriable("its relay is no longer in the app"))?;
                let event = self.event_of(&letter).await?;
                if !relay.takes(&event) {
                    return Err(not_retriable("its relay no longer publishes the event"));
                }
                let lane = format!("{}:{}", event.aggregate_type, event.aggregate_id);
                let work = RelayRun::new(Arc::clone(relay), event);
                self.app
                    .run_letter(held, Box::new(work), lane, true)
                    .await?;
                Ok(Retried::Done)
            }
            LetterKind::Policy => {
                let policy = self
                    .app
                    .policies()
                    .find(|policy| policy.name() == letter.handler)
                    .ok_or_else(|| not_retriable("its policy is no longer in the app"))?;
                let event = self.event_of(&letter).await?;
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
                let lane = event.aggregate_id.clone();
                let work = PolicyRun::with_key(Arc::clone(policy), event, key);
                self.app
                    .run_letter(held, Box::new(work), lane, true)
                    .await?;
                Ok(Retried::Done)
            }
            LetterKind::Scheduled => {
                if self.app.command_runner(&letter.handler).is_none() {
                    return Err(Error::LetterNotRetriable {
                        id: id.to_owned(),
                        reason: format!("command `{}` is not registered", letter.handler),
                    });
                }
                // A new request, caused by the letter (spec 142).
                let cause = Cause {
                    correlation_id: self.app.next_id(),
                    causation_id: id.to_owned(),
                    depth: 0,
                };
                let aggregate_id = letter.aggregate_id.clone().unwrap_or_default();
                let work = CommandRun::new(
                    self.app,
                    &letter.handler,
                    &aggregate_id,
                    letter.payload.clone().unwrap_or_default(),
                    Some(cause.metadata()),
                    id,
                );
                let mut rejections = self
                    .app
                    .run_letter(held, Box::new(work), aggregate_id, true)
                    .await?;
                // Logged as `command rejected` (spec 169).
                Ok(match rejections.pop() {
                    Some(rejection) => Retried::Rejected(rejection),
                    None => Retried::Done,
                })
            }
            LetterKind::Process => self.app.retry_process_letter(&letter, held).await,
            LetterKind::Ingress => {
                let ingested = self.app.retry_arrival_letter(&letter, held).await?;
                Ok(match ingested.answer {
                    crate::ingress::Answer::Rejected {
                        command,
                        code,
                        message,
                    } => Retried::Refused {
                        command,
                        code,
                        message,
                    },
                    crate::ingress::Answer::Decided { .. } => Retried::Done,
                })
            }
        }
    }
}

/// An operator's retry of a letter: the claim it holds on it, and when the claim was taken or
/// last renewed. Each run of the retry starts from it, so a retry of many steps renews the claim
/// at half its lease, as a worker renews its claims, and a step whose claim another retry took
/// runs nothing.
pub(crate) struct LetterRetry {
    pub(crate) id: String,
    pub(crate) claim_id: String,
    pub(crate) claimed_at: Instant,
}

impl App {
    /// Runs one piece of `held`'s work through the engine, fenced on the letter still held and,
    /// if `settles`, settling it `retried` with what the run writes. Returns the run's
    /// rejections; a run that failed is `RetryFailed`, a letter settled or taken over meanwhile
    /// `LetterSettled`.
    pub(crate) async fn run_letter(
        &self,
        held: &mut LetterRetry,
        work: Box<dyn Work>,
        lane: String,
        settles: bool,
    ) -> Result<Vec<RejectionRecord>, Error> {
        let id = held.id.as_str();
        let claim = Claim::Letter {
            id: id.to_owned(),
            claim_id: held.claim_id.clone(),
            settles,
        };
        let run = Run::new(work, claim, 1, lane).claimed_at(held.claimed_at);
        let mut report = Report::default();
        self.run_batch(vec![run], &mut report).await?;
        if let Some(at) = report.renewed_at {
            held.claimed_at = at;
        }
        if report.letter_settled.is_some() {
            return Err(Error::LetterSettled { id: id.to_owned() });
        }
        if let Some(failure) = report.failures.into_iter().next() {
            return Err(Error::RetryFailed {
                id: id.to_owned(),
                message: failure.message,
            });
        }
        Ok(report.rejections)
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
