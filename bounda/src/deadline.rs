//! `Deadline`: a moment a process acts at, or nothing due; a civil one keeps its zone and rule.

use std::fmt;
use std::sync::Arc;

use serde::de::{self, Deserializer, Visitor};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};

use crate::Instant;
use crate::calendar::{CalendarError, Civil, Recurrence, Zone};

/// A moment a process acts at, or none while nothing is due.
///
/// A process keeps each deadline as a field of its state marked `#[deadline]`: setting it
/// schedules its `at_<field>` handler, changing it moves it, [`Deadline::none`] cancels it. It is
/// distinct from an `Option<Instant>`, which only records a moment.
///
/// A deadline set on the calendar (`cx.next_local(..)`, `cx.next_occurrence(..)`) keeps its
/// zone, its wall-clock reading and its rule beside the instant it resolved to, so operators
/// read it as `2026-03-30 09:00 Europe/Paris (07:00Z)` and a recurring one goes on by its own
/// rule ([`At::recur`](crate::process::At::recur)). It always fires at its instant.
///
/// It serialises as the moment or `null`; a civil one as its wall-clock reading, whose offset
/// makes it the instant it fires at, then a recurring one's rule:
/// `"2026-03-30T09:00:00+02:00[Europe/Paris] FREQ=DAILY;BYHOUR=9"`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Deadline {
    at: Option<Instant>,
    civil: Option<Arc<Civil>>,
}

impl Deadline {
    /// Nothing due.
    pub const fn none() -> Deadline {
        Deadline {
            at: None,
            civil: None,
        }
    }

    /// Due at `moment`.
    pub const fn at(moment: Instant) -> Deadline {
        Deadline {
            at: Some(moment),
            civil: None,
        }
    }

    /// Due at `moment`, kept with what a wall clock in `zone` reads then: operators see the
    /// local time, and a newer zone database's change to the zone is reported by `check`.
    pub fn in_zone(moment: Instant, zone: &Zone) -> Result<Deadline, CalendarError> {
        Deadline::civil(moment, Civil::of(moment, zone, None)?)
    }

    /// Due at `moment`, an occurrence of `rule` in `zone`: what a recurring deadline holds, so
    /// its handler goes on to the rule's next occurrence.
    pub fn recurring(
        moment: Instant,
        zone: &Zone,
        rule: &Recurrence,
    ) -> Result<Deadline, CalendarError> {
        Deadline::civil(moment, Civil::of(moment, zone, Some(rule))?)
    }

    fn civil(moment: Instant, civil: Civil) -> Result<Deadline, CalendarError> {
        Ok(Deadline {
            at: Some(moment),
            civil: Some(Arc::new(civil)),
        })
    }

    /// The moment it is due, if any.
    pub const fn moment(&self) -> Option<Instant> {
        self.at
    }

    /// Its zone, wall-clock reading and rule, when it was set on the calendar.
    pub fn on_calendar(&self) -> Option<&Civil> {
        self.civil.as_deref()
    }

    /// Whether a moment is set.
    pub const fn is_set(&self) -> bool {
        self.at.is_some()
    }

    /// Whether it is set and its moment is at or before `now`: a deadline never comes due early.
    pub fn is_due(&self, now: Instant) -> bool {
        matches!(self.at, Some(moment) if moment <= now)
    }
}

impl From<Instant> for Deadline {
    fn from(moment: Instant) -> Deadline {
        Deadline::at(moment)
    }
}

impl From<Option<Instant>> for Deadline {
    fn from(moment: Option<Instant>) -> Deadline {
        Deadline {
            at: moment,
            civil: None,
        }
    }
}

impl fmt::Display for Deadline {
    /// The moment, with its local time and zone when it was set in one, or `none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.at, &self.civil) {
            (Some(moment), Some(civil)) => f.write_str(&civil.zone().describe(moment)),
            (Some(moment), None) => moment.fmt(f),
            (None, _) => f.write_str("none"),
        }
    }
}

impl Serialize for Deadline {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match (self.at, &self.civil) {
            (Some(_), Some(civil)) => match civil.rule() {
                Some(rule) => {
                    serializer.serialize_str(&format!("{} {}", civil.local(), rule.rule()))
                }
                None => serializer.serialize_str(civil.local()),
            },
            _ => self.at.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Deadline {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Deadline, D::Error> {
        deserializer.deserialize_any(Stored)
    }
}

/// Reads a stored deadline: `null`, a moment, or a civil one (a reading with its zone).
struct Stored;

impl<'de> Visitor<'de> for Stored {
    type Value = Deadline;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a deadline: null, a moment, or a moment with its zone")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Deadline, E> {
        Ok(Deadline::none())
    }

    fn visit_none<E: de::Error>(self) -> Result<Deadline, E> {
        Ok(Deadline::none())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Deadline, D::Error> {
        deserializer.deserialize_any(Stored)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Deadline, E> {
        // A civil reading names its zone in brackets; a moment never does.
        if !text.contains('[') {
            return Instant::parse(text).map(Deadline::at).map_err(E::custom);
        }
        let (at, civil) = Civil::read(text).map_err(E::custom)?;
        Deadline::civil(at, civil).map_err(E::custom)
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
    fn a_civil_deadline_keeps_its_zone_reading_and_rule_and_reads_back() {
        let paris = Zone::named("Europe/Paris").unwrap();
        let rule = Recurrence::parse("FREQ=DAILY;BYHOUR=9").unwrap();
        let moment: Instant = "2026-03-30T07:00:00Z".parse().unwrap();
        let deadline = Deadline::recurring(moment, &paris, &rule).unwrap();
        let json = serde_json::to_string(&deadline).unwrap();
        assert_eq!(
            json,
            r#""2026-03-30T09:00:00+02:00[Europe/Paris] FREQ=DAILY;BYHOUR=9""#
        );
        let read: Deadline = serde_json::from_str(&json).unwrap();
        assert_eq!(read, deadline);
        assert_eq!(read.to_string(), "2026-03-30 09:00 Europe/Paris (07:00Z)");
        let civil = read.on_calendar().unwrap();
        assert_eq!(
            civil.rule().map(Recurrence::rule),
            Some("FREQ=DAILY;BYHOUR=9")
        );
        assert_eq!(civil.resolved().unwrap(), moment);
        assert_ne!(read, Deadline::at(moment), "the zone is part of the value");
    }

    #[test]
    fn a_reading_the_zone_rules_now_place_elsewhere_keeps_its_instant_and_says_where() {
        // As a database that kept Paris on winter time all year would have written it.
        let json = r#""2026-07-01T09:00:00+01:00[Europe/Paris]""#;
        let read: Deadline = serde_json::from_str(json).unwrap();
        assert_eq!(read.moment(), Some("2026-07-01T08:00:00Z".parse().unwrap()));
        assert_eq!(
            read.on_calendar().unwrap().resolved().unwrap(),
            "2026-07-01T07:00:00Z".parse::<Instant>().unwrap()
        );
    }

    #[test]
    fn a_civil_deadline_that_does_not_read_says_why() {
        for (json, why) in [
            (
                r#""2026-03-30T09:00:00+02:00[Mars/Olympus]""#,
                "Mars/Olympus",
            ),
            (
                r#""2026-03-30T09:00:00+02:00[Europe/Paris] FREQ=HOURLY""#,
                "FREQ=HOURLY",
            ),
            (r#""2026-03-30T09:00:00[Europe/Paris]""#, "no offset"),
            (r#""2026-03-30T09:00:00+02:00[+02:00]""#, "names no zone"),
            (r#""2026-03-30 09:00 Europe/Paris""#, "2026-03-30 09:00"),
            (r#"42"#, "a deadline"),
        ] {
            let error = serde_json::from_str::<Deadline>(json).unwrap_err();
            assert!(error.to_string().contains(why), "{json}: {error}");
        }
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
