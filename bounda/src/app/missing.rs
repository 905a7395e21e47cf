//! Scheduled work whose handler the app no longer has (a policy, a process or a command a
//! deploy removed), or whose entry no longer reads: never completed in silence, but given up at
//! once with a terminal letter that names what is missing, retriable once it is back.

use futures_util::future::BoxFuture;

use crate::app::App;
use crate::app::engine::{Failure, Outcome, Work};
use crate::store::{DeadLetter, WriteSet};
use crate::{Error, Instant};

/// The letter a missing handler's run files: built from its failure, attempts and time.
pub(crate) type LetterOf = Box<dyn Fn(&Failure, u32, Instant) -> DeadLetter + Send>;

/// A run that cannot run: it fails at once, terminally, with `reason`.
pub(crate) struct Missing {
    reason: String,
    letter: LetterOf,
}

impl Missing {
    /// A run missing what `reason` says; giving up files `letter`.
    pub(crate) fn new(reason: String, letter: LetterOf) -> Missing {
        Missing { reason, letter }
    }
}

impl Work for Missing {
    fn execute<'a>(&'a mut self, _app: &'a App, _attempt: u32) -> BoxFuture<'a, Outcome> {
        let error = Error::Configuration {
            message: self.reason.clone(),
        };
        Box::pin(std::future::ready(Outcome::Failed(Failure::of_error(
            &error,
        ))))
    }

    fn aggregate(&self) -> &'static str {
        ""
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
