//! A time zone of the bundled IANA database, by name, and what a wall clock there reads.

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::{Disambiguation, TimeZone};

use super::{CalendarError, LocalTime, instant_of, timestamp_of};
use crate::Instant;

/// An IANA time zone (`Europe/Paris`, `America/New_York`, `UTC`) from the database bundled in
/// the build. It serialises as its name, and a name the database does not hold does not
/// deserialise: a command that carries a customer's zone is refused when it arrives, naming
/// the field, rather than failing when a deadline is set from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zone {
    /// Shared: a deadline set in the zone keeps it, and copies of a state copy it.
    name: std::sync::Arc<str>,
    tz: TimeZone,
}

impl Zone {
    /// The zone named `name`, or why the bundled database does not hold it.
    pub fn named(name: &str) -> Result<Zone, CalendarError> {
        let tz = jiff::tz::db().get(name).map_err(|_| {
            CalendarError::new(format!(
                "`{name}` is not a time zone of the IANA database: name one as \
                 `Area/City` (`Europe/Paris`, `America/New_York`) or `UTC`"
            ))
        })?;
        Ok(Zone {
            name: name.into(),
            tz,
        })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What a wall clock in this zone reads at `at`.
    pub fn wall_clock(&self, at: Instant) -> Result<DateTime, CalendarError> {
        Ok(self.tz.to_datetime(timestamp_of(at)?))
    }

    /// The instant a wall clock in this zone reads `date` at `time`: in the hour a change of
    /// offset skips, as if the clock had not changed yet; in the hour it repeats, the first.
    pub fn at(&self, date: Date, time: LocalTime) -> Result<Instant, CalendarError> {
        let civil = date.to_datetime(time.time());
        let timestamp = self
            .tz
            .to_ambiguous_timestamp(civil)
            .disambiguate(Disambiguation::Compatible)
            .map_err(|error| CalendarError::new(format!("{civil} in {}: {error}", self.name)))?;
        instant_of(timestamp)
    }

    /// The first instant after `after` at which a wall clock in this zone reads `time`: today's
    /// if it is still ahead there, else tomorrow's.
    pub fn next(&self, after: Instant, time: LocalTime) -> Result<Instant, CalendarError> {
        let today = self.wall_clock(after)?.date();
        let at = self.at(today, time)?;
        if at > after {
            return Ok(at);
        }
        let tomorrow = today
            .tomorrow()
            .map_err(|error| CalendarError::new(format!("after {today}: {error}")))?;
        self.at(tomorrow, time)
    }

    /// `time` on the day `days` days after the day `after` falls on here: `1` is the next day's.
    pub fn days_after(
        &self,
        after: Instant,
        days: u32,
        time: LocalTime,
    ) -> Result<Instant, CalendarError> {
        let today = self.wall_clock(after)?.date();
        let day = today
            .checked_add(jiff::Span::new().days(i64::from(days)))
            .map_err(|error| CalendarError::new(format!("{days} days after {today}: {error}")))?;
        self.at(day, time)
    }

    /// The last day of the month `after` falls in (this zone's), at `time`; the next month's
    /// when that has passed.
    pub fn end_of_month(&self, after: Instant, time: LocalTime) -> Result<Instant, CalendarError> {
        let today = self.wall_clock(after)?.date();
        let at = self.at(today.last_of_month(), time)?;
        if at > after {
            return Ok(at);
        }
        let next = today
            .first_of_month()
            .checked_add(jiff::Span::new().months(1))
            .map_err(|error| CalendarError::new(format!("after {today}: {error}")))?;
        self.at(next.last_of_month(), time)
    }

    /// The wall-clock reading at `at` here, with its offset and the zone:
    /// `2026-03-30T09:00:00+02:00[Europe/Paris]`.
    pub(crate) fn reading(&self, at: Instant) -> Result<String, CalendarError> {
        Ok(timestamp_of(at)?
            .to_zoned_datetime(self.tz.clone())
            .to_string())
    }

    /// `at` as a person reads it here, with the zone and the instant:
    /// `2026-03-30 09:00 Europe/Paris (07:00Z)`.
    pub fn describe(&self, at: Instant) -> String {
        let (Ok(local), Ok(utc)) = (self.wall_clock(at), Zone::utc_clock(at)) else {
            return format!("{at} ({})", self.name);
        };
        let (local_time, utc_time) = (short(local.time()), short(utc.time()));
        match local.date() == utc.date() {
            true => format!("{} {local_time} {} ({utc_time}Z)", local.date(), self.name),
            false => format!(
                "{} {local_time} {} ({} {utc_time}Z)",
                local.date(),
                self.name,
                utc.date()
            ),
        }
    }

    fn utc_clock(at: Instant) -> Result<DateTime, CalendarError> {
        Ok(TimeZone::UTC.to_datetime(timestamp_of(at)?))
    }
}

impl serde::Serialize for Zone {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.name)
    }
}

impl<'de> serde::Deserialize<'de> for Zone {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Zone, D::Error> {
        let name = String::deserialize(deserializer)?;
        Zone::named(&name).map_err(serde::de::Error::custom)
    }
}

/// `09:00`, or `09:00:30` when it has seconds.
fn short(time: Time) -> String {
    match time.second() {
        0 => format!("{:02}:{:02}", time.hour(), time.minute()),
        seconds => format!("{:02}:{:02}:{seconds:02}", time.hour(), time.minute()),
    }
}
