//! Recurring moments, written as an RFC 5545 rule (the `RRULE` of calendars): the next
//! occurrence after a moment is a recurring deadline's next value, so it stays one field of the
//! state.

use jiff::civil::{Date, Weekday};

use super::{CalendarError, LocalTime, Zone};
use crate::Instant;

/// How far ahead an occurrence is looked for: past a leap year, so `BYMONTHDAY=29` in February
/// alone is found.
const HORIZON_DAYS: usize = 1_500;

/// How often a rule recurs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frequency {
    Daily,
    Weekly,
    Monthly,
}

/// A recurring time of day in a zone's calendar: `FREQ=DAILY;BYHOUR=9;BYMINUTE=0` (every day at
/// 09:00), `FREQ=WEEKLY;BYDAY=MO;BYHOUR=8` (Mondays at 08:00), `FREQ=MONTHLY;BYMONTHDAY=-1;
/// BYHOUR=17` (the last day of each month at 17:00). The subset taken: `FREQ` (`DAILY`, `WEEKLY`,
/// `MONTHLY`), `BYDAY` (days of the week: `MO`..`SU`), `BYMONTHDAY` (1 to 31, or -1 to -31 from
/// the month's end; a month without the day is skipped, as RFC 5545 says), `BYHOUR`, `BYMINUTE`
/// and `BYSECOND` (one value each, 0 unless given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recurrence {
    rule: String,
    frequency: Frequency,
    days: Vec<Weekday>,
    month_days: Vec<i8>,
    time: LocalTime,
}

impl Recurrence {
    /// The rule `rule` (with or without its `RRULE:` prefix), or why it does not read.
    pub fn parse(rule: &str) -> Result<Recurrence, CalendarError> {
        let refused = |why: String| {
            CalendarError::new(format!(
                "`{rule}` is not a recurrence: {why}; write it as an RFC 5545 rule, like \
                 `FREQ=WEEKLY;BYDAY=MO;BYHOUR=8;BYMINUTE=0`"
            ))
        };
        let body = rule.strip_prefix("RRULE:").unwrap_or(rule);
        let (mut frequency, mut days, mut month_days) = (None, Vec::new(), Vec::new());
        let (mut hour, mut minute, mut second) = (0_u8, 0_u8, 0_u8);
        for part in body.split(';').filter(|part| !part.is_empty()) {
            let Some((name, value)) = part.split_once('=') else {
                return Err(refused(format!("`{part}` is not `NAME=VALUE`")));
            };
            let number = |most: u8| -> Result<u8, CalendarError> {
                match value.parse::<u8>() {
                    Ok(n) if n <= most => Ok(n),
                    _ => Err(refused(format!("{name} takes 0 to {most}, not `{value}`"))),
                }
            };
            match name {
                "FREQ" => {
                    frequency = Some(match value {
                        "DAILY" => Frequency::Daily,
                        "WEEKLY" => Frequency::Weekly,
                        "MONTHLY" => Frequency::Monthly,
                        other => {
                            return Err(refused(format!(
                                "FREQ `{other}` is not taken (DAILY, WEEKLY or MONTHLY)"
                            )));
                        }
                    });
                }
                "BYDAY" => {
                    for day in value.split(',') {
                        days.push(weekday(day).ok_or_else(|| {
                            refused(format!("`{day}` is not a day of the week (MO to SU)"))
                        })?);
                    }
                }
                "BYMONTHDAY" => {
                    for day in value.split(',') {
                        match day.parse::<i8>() {
                            Ok(n) if n != 0 && (-31..=31).contains(&n) => month_days.push(n),
                            _ => {
                                return Err(refused(format!(
                                    "BYMONTHDAY takes 1 to 31 or -1 to -31, not `{day}`"
                                )));
                            }
                        }
                    }
                }
                "BYHOUR" => hour = number(23)?,
                "BYMINUTE" => minute = number(59)?,
                "BYSECOND" => second = number(59)?,
                "INTERVAL" if value == "1" => {}
                other => return Err(refused(format!("`{other}` is not taken"))),
            }
        }
        let Some(frequency) = frequency else {
            return Err(refused("it has no FREQ".to_owned()));
        };
        match frequency {
            Frequency::Weekly if days.is_empty() => {
                return Err(refused(
                    "a WEEKLY rule names its days (BYDAY=MO)".to_owned(),
                ));
            }
            Frequency::Monthly if month_days.is_empty() => {
                return Err(refused(
                    "a MONTHLY rule names its days (BYMONTHDAY=1, or -1 for the last)".to_owned(),
                ));
            }
            _ => {}
        }
        let time = LocalTime::parse(&format!("{hour:02}:{minute:02}:{second:02}"))?;
        Ok(Recurrence {
            rule: body.to_owned(),
            frequency,
            days,
            month_days,
            time,
        })
    }

    /// The rule as written, without its `RRULE:` prefix.
    pub fn rule(&self) -> &str {
        &self.rule
    }

    /// Whether the rule falls on `date`.
    fn falls_on(&self, date: Date) -> bool {
        let on_day = self.days.is_empty() || self.days.contains(&date.weekday());
        let on_month_day = self.month_days.is_empty()
            || self.month_days.iter().any(|&day| {
                let length = date.days_in_month();
                let wanted = if day > 0 { day } else { length + 1 + day };
                wanted == date.day()
            });
        match self.frequency {
            Frequency::Daily | Frequency::Weekly => on_day && on_month_day,
            Frequency::Monthly => on_month_day && on_day,
        }
    }

    /// The first occurrence after `after`, on `zone`'s calendar.
    pub fn next(&self, after: Instant, zone: &Zone) -> Result<Instant, CalendarError> {
        let mut date = zone.wall_clock(after)?.date();
        for _ in 0..HORIZON_DAYS {
            if self.falls_on(date) {
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

/// The weekday an RFC 5545 two-letter code names.
fn weekday(code: &str) -> Option<Weekday> {
    Some(match code {
        "MO" => Weekday::Monday,
        "TU" => Weekday::Tuesday,
        "WE" => Weekday::Wednesday,
        "TH" => Weekday::Thursday,
        "FR" => Weekday::Friday,
        "SA" => Weekday::Saturday,
        "SU" => Weekday::Sunday,
        _ => return None,
    })
}
