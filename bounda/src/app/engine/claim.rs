//! What a run holds while it runs, and how its write set settles it: an inbox claim, a scheduler
//! claim, or a dead letter being retried.

use crate::store::{
    InboxMark, InboxOutcome, LetterHold, LetterSettle, LetterStatus, ScheduledOutcome,
    ScheduledRelease, Store, StoreError, WriteSet,
};
use crate::{Duration, Instant};

/// A run's claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Claim {
    /// `(handler, event)` in the inbox.
    Inbox {
        handler: &'static str,
        event_id: String,
        claim_id: String,
    },
    /// A scheduler entry.
    Scheduled {
        dedupe_key: String,
        claim_id: String,
    },
    /// A dead letter an operator retries under `claim_id`: the run is fenced on the letter
    /// still being `failed` and held by that claim and, if `settles`, settles it `retried`. A
    /// process letter's retry runs several steps, each fenced, and settles the letter in the
    /// last.
    Letter {
        id: String,
        claim_id: String,
        settles: bool,
    },
}

/// How a run's claim is settled.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Settle {
    /// It ran: never again.
    Done,
    /// It failed at `failed_at`: again at `at`.
    Retry {
        at: Instant,
        error: String,
        failed_at: Instant,
    },
    /// Given up on: its letter is in the same write set.
    GiveUp { error: String },
    /// Not run: given back, no attempt counted.
    Release,
}

impl Claim {
    /// Adds the settling of this claim to `writes`: written only while the claim is still the
    /// run's, or the whole write set is refused.
    pub(crate) fn settle(&self, writes: &mut WriteSet, how: Settle) {
        match self {
            Claim::Inbox {
                handler,
                event_id,
                claim_id,
            } => {
                let outcome = match how {
                    Settle::Done => InboxOutcome::Succeeded,
                    Settle::Retry {
                        at,
                        error,
                        failed_at,
                    } => InboxOutcome::Failed {
                        retry_at: at,
                        error,
                        failed_at,
                    },
                    Settle::GiveUp { error } => InboxOutcome::DeadLettered { error },
                    Settle::Release => InboxOutcome::Released,
                };
                writes.inbox = Some(InboxMark {
                    handler: (*handler).to_owned(),
                    event_id: event_id.clone(),
                    claim_id: claim_id.clone(),
                    outcome,
                });
            }
            Claim::Scheduled {
                dedupe_key,
                claim_id,
            } => {
                let outcome = match how {
                    Settle::Done | Settle::GiveUp { .. } => ScheduledOutcome::Complete,
                    Settle::Retry {
                        at,
                        error,
                        failed_at,
                    } => ScheduledOutcome::Retry {
                        execute_at: at,
                        error,
                        failed_at,
                    },
                    Settle::Release => ScheduledOutcome::Defer,
                };
                writes.scheduled = Some(ScheduledRelease {
                    dedupe_key: dedupe_key.clone(),
                    claim_id: claim_id.clone(),
                    outcome,
                });
            }
            Claim::Letter {
                id,
                claim_id,
                settles,
            } => {
                // Whatever the run writes, it writes only while the retry still holds the letter.
                writes.require_letter = Some(LetterHold {
                    id: id.clone(),
                    claim_id: claim_id.clone(),
                });
                // A step before the last, or a failure, leaves the letter `failed` (an
                // operator's retry is not retried by the runtime).
                if matches!(how, Settle::Done) && *settles {
                    writes.settle_letter = Some(LetterSettle {
                        id: id.clone(),
                        status: LetterStatus::Retried,
                    });
                }
            }
        }
    }

    /// Renews the claim until `now + lease`; `false` when it is no longer the run's.
    pub(crate) async fn renew(
        &self,
        store: &dyn Store,
        now: Instant,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        match self {
            Claim::Inbox {
                handler,
                event_id,
                claim_id,
            } => {
                store
                    .renew_inbox(handler, event_id, claim_id, now, lease)
                    .await
            }
            Claim::Scheduled {
                dedupe_key,
                claim_id,
            } => {
                store
                    .renew_scheduled(dedupe_key, claim_id, now, lease)
                    .await
            }
            Claim::Letter { id, claim_id, .. } => {
                store.renew_letter(id, claim_id, now, lease).await
            }
        }
    }

    /// Whether the runtime retries a failure itself: an operator's retry reports it instead.
    pub(crate) fn retries(&self) -> bool {
        !matches!(self, Claim::Letter { .. })
    }
}
