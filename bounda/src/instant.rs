//! `Instant`: a UTC moment with millisecond precision, written in ISO 8601.

use std::fmt;
use std::ops::{Add, Sub};
use std::str::FromStr;

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::Duration;

/// The first moment an `Instant` holds: `0000-01-01T00:00:00.000Z`.
const MIN_MS: i64 = -62_167_219_200_000;
/// The last moment an `Instant` holds: `9999-12-31T23:59:59.999Z`.
const MAX_MS: i64 = 253_402_300_799_999;

/// A moment in UTC, to the millisecond, between the years 0000 and 9999.
///
/// Serialised as ISO 8601 with milliseconds and `Z`: `2026-01-01T00:00:00.000Z`. Parsing accepts
/// any RFC 3339 offset and normalises to UTC; finer precision is truncated to the millisecond so a
/// moment survives a round trip through storage unchanged. The range is what RFC 3339's four-digit
/// years can write, so every `Instant` reads back as it was written.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant {
    ms: i64,
}

impl Instant {
    /// Milliseconds since the Unix epoch, or `None` outside the years 0000 to 9999.
    pub const fn from_millis(ms: i64) -> Option<Instant> {
        if ms < MIN_MS || ms > MAX_MS {
            None
        } else {
            Some(Instant { ms })
        }
    }

    /// Milliseconds since the Unix epoch.
    pub const fn as_millis(self) -> i64 {
        self.ms
    }

    /// The moment as a chrono date-time.
    pub fn to_chrono(self) -> DateTime<Utc> {
        // Every `Instant` was built from a representable moment, so this cannot fail.
        Utc.timestamp_millis_opt(self.ms)
            .single()
            .unwrap_or(DateTime::<Utc>::MIN_UTC)
    }

    /// Parses RFC 3339 (`2026-01-01T00:00:00Z`, `2026-01-01T01:00:00+01:00`) into UTC.
    pub fn parse(input: &str) -> Result<Instant, InstantError> {
        // A four-digit year near 0000 or 9999 with an offset can land outside the range: clamp
        // it, as the range's two ends are moments no deadline means literally.
        DateTime::parse_from_rfc3339(input)
            .map(|moment| Instant::from(moment.with_timezone(&Utc)))
            .map_err(|source| InstantError {
                input: input.to_owned(),
                source,
            })
    }

    /// This moment moved forward by `duration`, or `None` past the last representable moment.
    pub fn checked_add(self, duration: Duration) -> Option<Instant> {
        let ms = i64::try_from(duration.as_millis()).ok()?;
        Instant::from_millis(self.ms.checked_add(ms)?)
    }

    /// This moment moved back by `duration`, or `None` before the first representable moment.
    pub fn checked_sub(self, duration: Duration) -> Option<Instant> {
        let ms = i64::try_from(duration.as_millis()).ok()?;
        Instant::from_millis(self.ms.checked_sub(ms)?)
    }

    /// The time from `earlier` to this moment, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        crate::millis(u64::try_from(self.ms.saturating_sub(earlier.ms)).unwrap_or(0))
    }

    /// The last moment an `Instant` can hold, `9999-12-31T23:59:59.999Z`; adding past it
    /// saturates here.
    pub const fn max_value() -> Instant {
        Instant { ms: MAX_MS }
    }

    /// The first moment an `Instant` can hold, `0000-01-01T00:00:00.000Z`.
    pub const fn min_value() -> Instant {
        Instant { ms: MIN_MS }
    }
}

impl From<DateTime<Utc>> for Instant {
    /// Truncates to the millisecond, and clamps to the years 0000 to 9999.
    fn from(moment: DateTime<Utc>) -> Instant {
        Instant {
            ms: moment.timestamp_millis().clamp(MIN_MS, MAX_MS),
        }
    }
}

impl From<Instant> for DateTime<Utc> {
    fn from(instant: Instant) -> DateTime<Utc> {
        instant.to_chrono()
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;

    /// Saturates at [`Instant::max_value`].
    fn add(self, duration: Duration) -> Instant {
        self.checked_add(duration)
            .unwrap_or_else(Instant::max_value)
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;

    /// Saturates at [`Instant::min_value`].
    fn sub(self, duration: Duration) -> Instant {
        self.checked_sub(duration)
            .unwrap_or_else(Instant::min_value)
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;

    /// The time between the two, zero when `earlier` is the later one.
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_since(earlier)
    }
}

/// A text that is not an RFC 3339 moment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{input}` is not a moment: {source}; write it like `2026-01-01T00:00:00Z`")]
pub struct InstantError {
    /// The text that was refused.
    pub input: String,
    source: chrono::ParseError,
}

impl FromStr for Instant {
    type Err = InstantError;

    fn from_str(input: &str) -> Result<Instant, InstantError> {
        Instant::parse(input)
    }
}

impl fmt::Display for Instant {
    /// `2026-01-01T00:00:00.000Z`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            &self
                .to_chrono()
                .to_rfc3339_opts(SecondsFormat::Millis, true),
        )
    }
}

impl fmt::Debug for Instant {
    /// The moment, as [`Display`](fmt::Display) writes it: a failed assertion shows when.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Serialize for Instant {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Instant {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Instant, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Instant::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// `at`, a deadline, as seen from `now`: `in 2h 5m`, `overdue 3m`, `now`.
#[cfg(any(feature = "cli", feature = "page"))]
pub(crate) fn until(at: Instant, now: Instant) -> String {
    from_now(at, now, "overdue ", "")
}

/// `at`, something that happened, as seen from `now`: `3m ago`, `in 2h 5m`, `now`.
#[cfg(any(feature = "cli", feature = "page"))]
pub(crate) fn ago(at: Instant, now: Instant) -> String {
    from_now(at, now, "", " ago")
}

/// `at` from `now` to the two largest units, a past one between `before` and `after`.
#[cfg(any(feature = "cli", feature = "page"))]
pub(crate) fn from_now(at: Instant, now: Instant, before: &str, after: &str) -> String {
    let ms = at.as_millis() - now.as_millis();
    let abs = ms.unsigned_abs();
    if abs < 1_000 {
        return "now".to_owned();
    }
    let units = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1_000, "s"),
    ];
    let mut parts = Vec::new();
    let mut rest = abs;
    for (unit, suffix) in units {
        if rest >= unit {
            parts.push(format!("{}{suffix}", rest / unit));
            rest %= unit;
        } else if !parts.is_empty() {
            // Two units next to each other: `2h 5m`, never `2h 5s`.
            break;
        }
        if parts.len() == 2 {
            break;
        }
    }
    let span = parts.join(" ");
    if ms > 0 {
        format!("in {span}")
    } else {
        format!("{before}{span}{after}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{hours, millis};

    fn at(text: &str) -> Instant {
        text.parse().unwrap()
    }

    // Issue 19: `{:?}` shows the moment, as an assertion's message needs it.
    #[test]
    fn debug_shows_the_moment() {
        let moment = at("2026-03-01T12:30:00Z");
        assert_eq!(format!("{moment:?}"), "2026-03-01T12:30:00.000Z");
        assert_eq!(
            format!("{:?}", Some(moment)),
            "Some(2026-03-01T12:30:00.000Z)"
        );
    }

    #[test]
    fn displays_iso_8601_with_milliseconds_in_utc() {
        assert_eq!(
            at("2026-01-01T00:00:00Z").to_string(),
            "2026-01-01T00:00:00.000Z"
        );
        assert_eq!(
            at("2026-01-01T00:00:00.5Z").to_string(),
            "2026-01-01T00:00:00.500Z"
        );
    }

    #[test]
    fn parsing_normalises_any_offset_to_utc() {
        assert_eq!(at("2026-01-01T01:00:00+01:00"), at("2026-01-01T00:00:00Z"));
        assert_eq!(
            at("2025-12-31T19:30:00-04:30"),
            at("2026-01-01T00:00:00.000Z")
        );
    }

    #[test]
    fn parsing_truncates_below_the_millisecond() {
        assert_eq!(
            at("2026-01-01T00:00:00.123456789Z"),
            at("2026-01-01T00:00:00.123Z")
        );
    }

    #[test]
    fn parsing_refuses_bad_input_naming_it() {
        for bad in [
            "",
            "2026-01-01",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-01-01T00:00:00",
        ] {
            let err = Instant::parse(bad).unwrap_err();
            assert_eq!(err.input, bad);
            assert!(
                err.to_string()
                    .starts_with(&format!("`{bad}` is not a moment")),
                "{err}"
            );
        }
    }

    #[test]
    fn serde_round_trips_and_refuses_non_moments() {
        let moment = at("2026-03-04T05:06:07.089Z");
        let json = serde_json::to_string(&moment).unwrap();
        assert_eq!(json, "\"2026-03-04T05:06:07.089Z\"");
        assert_eq!(serde_json::from_str::<Instant>(&json).unwrap(), moment);
        assert!(serde_json::from_str::<Instant>("\"soon\"").is_err());
        assert!(serde_json::from_str::<Instant>("12").is_err());
    }

    #[test]
    fn arithmetic_with_durations() {
        let start = at("2026-01-01T00:00:00Z");
        assert_eq!(start + hours(72), at("2026-01-04T00:00:00Z"));
        assert_eq!(at("2026-01-04T00:00:00Z") - start, hours(72));
        assert_eq!(start - at("2026-01-04T00:00:00Z"), millis(0));
        assert_eq!(
            start.checked_sub(millis(1)),
            Some(at("2025-12-31T23:59:59.999Z"))
        );
        assert_eq!(Instant::max_value() + hours(1), Instant::max_value());
        assert_eq!(Instant::max_value().checked_add(millis(1)), None);
        assert_eq!(Instant::min_value().checked_sub(millis(1)), None);
        assert_eq!(start + crate::Duration::MAX, Instant::max_value());
    }

    #[test]
    fn the_extremes_round_trip_through_text() {
        for moment in [Instant::min_value(), Instant::max_value()] {
            let text = moment.to_string();
            assert_eq!(Instant::parse(&text).unwrap(), moment, "{text}");
        }
        assert_eq!(Instant::max_value().to_string(), "9999-12-31T23:59:59.999Z");
        assert_eq!(Instant::min_value().to_string(), "0000-01-01T00:00:00.000Z");
        assert_eq!(Instant::from_millis(253_402_300_800_000), None);
    }
}
