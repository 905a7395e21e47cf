//! Scheduled work that cannot run: its handler is gone (a policy or a process a deploy
//! removed), its entry no longer reads, or the store failed reading what it needs. Never
//! completed in silence: it fails as its run, with a letter that names what is missing,
//! retriable once it is back.

use futures_util::future::BoxFuture;

use crate::app::App;
use crate::app::engine::{Outcome, Work};
use crate::app::failure::Failure;
use crate::store::{DeadLetter, ScheduledEntry, WriteSet};
use crate::{Error, Instant};

/// The letter a missing handler's run files: built from its failure, attempts and time.
pub(crate) type LetterOf = Box<dyn Fn(&Failure, u32, Instant) -> DeadLetter + Send>;

/// A run that cannot run: it fails at once with its failure, and giving up files its letter.
pub(crate) struct Missing {
    failure: Failure,
    letter: LetterOf,
    subject: String,
}

impl Missing {
    /// A run missing what `reason` says: terminal; giving up files `letter`.
    pub(crate) fn new(reason: String, letter: LetterOf) -> Missing {
        let error = Error::Configuration { message: reason };
        Missing::failing(&error, letter)
    }

    /// A run that could not be prepared because of `error` (a store that failed reading what
    /// it needs): retried as the error says, then `letter`.
    pub(crate) fn failing(error: &Error, letter: LetterOf) -> Missing {
        Missing {
            failure: Failure::of_error(error),
            letter,
            subject: "scheduled work".to_owned(),
        }
    }

    /// The same run, named after the scheduler entry it came from.
    pub(crate) fn of_entry(mut self, entry: &ScheduledEntry) -> Missing {
        self.subject = format!(
            "scheduled `{}` entry `{}` for `{}`",
            entry.command_type, entry.dedupe_key, entry.aggregate_id
        );
        self
    }
}

impl Work for Missing {
    fn execute<'a>(&'a mut self, _app: &'a App, _attempt: u32) -> BoxFuture<'a, Outcome> {
        Box::pin(std::future::ready(Outcome::Failed(self.failure.clone())))
    }

    fn aggregate(&self) -> &'static str {
        ""
    }

    fn subject(&self) -> String {
        self.subject.clone()
    }

    fn give_up(
        &self,
        _app: &App,
        failure: &Failure,
        attempts: u32,
        now: Instant,
    ) -> Result<WriteSet, Error> {
        Ok(WriteSet {
            dead_letters: vec![(self.letter)(failure, attempts, now)],
            ..WriteSet::default()
        })
    }
}
