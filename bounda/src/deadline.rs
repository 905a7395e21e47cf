//! `Deadline`: a moment a process acts at, or nothing due.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::Instant;

/// A moment a process acts at, or none while nothing is due.
///
/// A process keeps each deadline as a field of its state marked `#[deadline]`: setting it
/// schedules its `at_<field>` handler, changing it moves it, [`Deadline::none`] cancels it. It is
/// distinct from an `Option<Instant>`, which only records a moment. It serialises as the
/// moment or `null`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Deadline(Option<Instant>);

impl Deadline {
    /// Nothing due.
    pub const fn none() -> Deadline {
        Deadline(None)
    }

    /// Due at `moment`.
    pub const fn at(moment: Instant) -> Deadline {
        Deadline(Some(moment))
    }

    /// The moment it is due, if any.
    pub const fn moment(self) -> Option<Instant> {
        self.0
    }

    /// Whether a moment is set.
    pub const fn is_set(self) -> bool {
        self.0.is_some()
    }

    /// Whether it is set and its moment is at or before `now`: a deadline never comes due early.
    pub fn is_due(self, now: Instant) -> bool {
        matches!(self.0, Some(moment) if moment <= now)
    }
}

impl From<Instant> for Deadline {
    fn from(moment: Instant) -> Deadline {
        Deadline::at(moment)
    }
}

impl From<Option<Instant>> for Deadline {
    fn from(moment: Option<Instant>) -> Deadline {
        Deadline(moment)
    }
}

impl fmt::Display for Deadline {
    /// The moment, or `none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(moment) => moment.fmt(f),
            None => f.write_str("none"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_is_the_default_and_serialises_as_null() {
        assert_eq!(Deadline::default(), Deadline::none());
        assert_eq!(serde_json::to_string(&Deadline::none()).unwrap(), "null");
        assert_eq!(
            serde_json::from_str::<Deadline>("null").unwrap(),
            Deadline::none()
        );
    }

    #[test]
    fn a_set_deadline_serialises_as_its_moment() {
        let moment: Instant = "2026-01-04T00:00:00Z".parse().unwrap();
        let json = serde_json::to_string(&Deadline::at(moment)).unwrap();
        assert_eq!(json, "\"2026-01-04T00:00:00.000Z\"");
        assert_eq!(
            serde_json::from_str::<Deadline>(&json).unwrap(),
            Deadline::at(moment)
        );
    }

    #[test]
    fn due_means_at_or_before_now() {
        let moment: Instant = "2026-01-04T00:00:00Z".parse().unwrap();
        let deadline = Deadline::at(moment);
        assert!(!deadline.is_due(moment.checked_sub(crate::millis(1)).unwrap()));
        assert!(deadline.is_due(moment));
        assert!(deadline.is_due(moment + crate::millis(1)));
        assert!(!Deadline::none().is_due(moment));
    }
}
