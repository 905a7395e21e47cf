//! Recurring moments, written as an RFC 5545 rule (the `RRULE` of calendars): the next
//! occurrence after a moment is a recurring deadline's next value, so it stays one field of the
//! state.

use super::rule::RuleParts;
use super::{CalendarError, LocalTime, Zone};
use crate::Instant;

/// How far ahead an occurrence is looked for: past a leap year, so `BYMONTHDAY=29` in February
/// alone is found.
const HORIZON_DAYS: usize = 1_500;

/// A recurring time of day in a zone's calendar: `FREQ=DAILY;BYHOUR=9;BYMINUTE=0` (every day at
/// 09:00), `FREQ=WEEKLY;BYDAY=MO;BYHOUR=8` (Mondays at 08:00), `FREQ=MONTHLY;BYMONTHDAY=-1;
/// BYHOUR=17` (the last day of each month at 17:00). The subset taken: `FREQ` (`DAILY`, `WEEKLY`,
/// `MONTHLY`), `BYDAY` (days of the week: `MO`..`SU`), `BYMONTHDAY` (1 to 31, or -1 to -31 from
/// the month's end; a month without the day is skipped, as RFC 5545 says), `BYHOUR`, `BYMINUTE`
/// and `BYSECOND` (one value each, 0 unless given). A literal rule is checked while compiling
/// with [`rule!`](crate::rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recurrence {
    /// Shared: a recurring deadline keeps it, and copies of a state copy it.
    rule: std::sync::Arc<str>,
    parts: RuleParts,
    time: LocalTime,
}

impl Recurrence {
    /// The rule `rule` (with or without its `RRULE:` prefix), or why it does not read.
    pub fn parse(rule: &str) -> Result<Recurrence, CalendarError> {
        RuleParts::parse(rule)
            .map(|parts| Recurrence::of_parts(rule, parts))
            .map_err(|error| {
                let part = error
                    .part
                    .and_then(|(start, end)| rule.get(start..end))
                    .map_or_else(String::new, |part| format!("`{part}`: "));
                CalendarError::new(format!(
                    "`{rule}` is not a recurrence: {part}{}",
                    error.why.message()
                ))
            })
    }

    /// The rule `rule` already read as `parts`: what [`rule!`](crate::rule) builds after
    /// checking the literal while compiling.
    pub fn of_parts(rule: &str, parts: RuleParts) -> Recurrence {
        let (hour, minute, second) = parts.time();
        Recurrence {
            rule: rule.strip_prefix("RRULE:").unwrap_or(rule).into(),
            parts,
            time: LocalTime::of(hour, minute, second),
        }
    }

    /// The rule as written, without its `RRULE:` prefix.
    pub fn rule(&self) -> &str {
        &self.rule
    }

    /// The first occurrence after `after`, on `zone`'s calendar.
    pub fn next(&self, after: Instant, zone: &Zone) -> Result<Instant, CalendarError> {
        let mut date = zone.wall_clock(after)?.date();
        for _ in 0..HORIZON_DAYS {
            if self.parts.falls_on(date) {
                let at = zone.at(date, self.time)?;
                if at > after {
                    return Ok(at);
                }
            }
            date = date
                .tomorrow()
                .map_err(|error| CalendarError::new(format!("after {date}: {error}")))?;
        }
        Err(CalendarError::new(format!(
            "`{}` has no occurrence within {HORIZON_DAYS} days of {after}",
            self.rule
        )))
    }

    /// How many occurrences fall after `from` and at or before `to`: those a deadline missed
    /// when it runs late at `to`, the one it runs for included. Counted up to `most`.
    pub fn between(
        &self,
        from: Instant,
        to: Instant,
        zone: &Zone,
        most: u32,
    ) -> Result<u32, CalendarError> {
        let (mut count, mut moment) = (0, from);
        while count < most {
            let next = self.next(moment, zone)?;
            if next > to {
                break;
            }
            count += 1;
            moment = next;
        }
        Ok(count)
    }
}
