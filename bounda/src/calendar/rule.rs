//! The grammar of a recurring rule, the RFC 5545 subset bounda reads: one parser, `const`, so
//! a rule read at run time and a literal checked while compiling ([`rule!`](crate::rule)) are
//! read alike.

use jiff::civil::Date;

/// Why a rule does not read: each says how to write one, so the same words serve a refusal at
/// run time and a compile error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleRefusal {
    /// A part that is not `NAME=VALUE`.
    Part,
    /// A `FREQ` other than those taken.
    Frequency,
    /// A `BYDAY` that is not a day of the week.
    Day,
    /// A `BYMONTHDAY` out of the month.
    MonthDay,
    /// A `BYHOUR` that is not one hour of the day.
    Hour,
    /// A `BYMINUTE` that is not one minute.
    Minute,
    /// A `BYSECOND` that is not one second.
    Second,
    /// An `INTERVAL` other than 1.
    Interval,
    /// A part bounda does not read.
    Unknown,
    /// No `FREQ`.
    NoFrequency,
    /// A `WEEKLY` rule without its days.
    WeeklyWithoutDays,
    /// A `MONTHLY` rule without its days.
    MonthlyWithoutDays,
}

impl RuleRefusal {
    /// Why, and how to write the rule instead.
    pub const fn message(self) -> &'static str {
        match self {
            RuleRefusal::Part => {
                "each part of a rule is `NAME=VALUE`, the parts separated by `;`, like \
                 `FREQ=WEEKLY;BYDAY=MO;BYHOUR=8`"
            }
            RuleRefusal::Frequency => {
                "FREQ takes DAILY, WEEKLY or MONTHLY, like `FREQ=DAILY;BYHOUR=9`"
            }
            RuleRefusal::Day => {
                "BYDAY takes days of the week, MO to SU, separated by commas, like `BYDAY=MO,TH`"
            }
            RuleRefusal::MonthDay => {
                "BYMONTHDAY takes days 1 to 31, or -1 to -31 counted from the month's end, like \
                 `BYMONTHDAY=1` or `BYMONTHDAY=-1` for the last"
            }
            RuleRefusal::Hour => "BYHOUR takes one hour of the day, 0 to 23, like `BYHOUR=8`",
            RuleRefusal::Minute => "BYMINUTE takes one minute, 0 to 59, like `BYMINUTE=30`",
            RuleRefusal::Second => "BYSECOND takes one second, 0 to 59, like `BYSECOND=0`",
            RuleRefusal::Interval => {
                "only `INTERVAL=1` is taken: a rule recurs on every day, week or month it names"
            }
            RuleRefusal::Unknown => {
                "the parts taken are FREQ, BYDAY, BYMONTHDAY, BYHOUR, BYMINUTE, BYSECOND and \
                 INTERVAL=1, like `FREQ=WEEKLY;BYDAY=MO;BYHOUR=8`"
            }
            RuleRefusal::NoFrequency => {
                "a rule says how often it recurs: give it FREQ=DAILY, WEEKLY or MONTHLY, like \
                 `FREQ=DAILY;BYHOUR=9`"
            }
            RuleRefusal::WeeklyWithoutDays => {
                "a WEEKLY rule names its days, like `FREQ=WEEKLY;BYDAY=MO;BYHOUR=8`"
            }
            RuleRefusal::MonthlyWithoutDays => {
                "a MONTHLY rule names its days, like `FREQ=MONTHLY;BYMONTHDAY=-1;BYHOUR=17` for \
                 the last"
            }
        }
    }
}

/// A refused rule: why, and the part refused (byte offsets of the rule), if one was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleError {
    /// Why.
    pub why: RuleRefusal,
    /// The refused part, `start..end` in the rule as written.
    pub part: Option<(usize, usize)>,
}

/// How often a rule recurs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frequency {
    Daily,
    Weekly,
    Monthly,
}

/// What a parse has read so far.
struct Reading {
    frequency: Option<Frequency>,
    days: u8,
    month_days: u64,
    time: (i8, i8, i8),
}

impl Reading {
    /// Reads the part `bytes[start..end]`: why it is refused, if it is.
    const fn part(&mut self, bytes: &[u8], start: usize, end: usize) -> Option<RuleRefusal> {
        let eq = find(bytes, start, b'=', end);
        if eq == end {
            return Some(RuleRefusal::Part);
        }
        let value = (eq + 1, end);
        if same(bytes, start, eq, b"FREQ") {
            self.frequency = if same(bytes, value.0, value.1, b"DAILY") {
                Some(Frequency::Daily)
            } else if same(bytes, value.0, value.1, b"WEEKLY") {
                Some(Frequency::Weekly)
            } else if same(bytes, value.0, value.1, b"MONTHLY") {
                Some(Frequency::Monthly)
            } else {
                return Some(RuleRefusal::Frequency);
            };
        } else if same(bytes, start, eq, b"BYDAY") {
            match weekdays_of(bytes, value) {
                Some(days) => self.days |= days,
                None => return Some(RuleRefusal::Day),
            }
        } else if same(bytes, start, eq, b"BYMONTHDAY") {
            match month_days_of(bytes, value) {
                Some(days) => self.month_days |= days,
                None => return Some(RuleRefusal::MonthDay),
            }
        } else if same(bytes, start, eq, b"BYHOUR") {
            match number(bytes, value, 23) {
                Some(hour) => self.time.0 = hour,
                None => return Some(RuleRefusal::Hour),
            }
        } else if same(bytes, start, eq, b"BYMINUTE") {
            match number(bytes, value, 59) {
                Some(minute) => self.time.1 = minute,
                None => return Some(RuleRefusal::Minute),
            }
        } else if same(bytes, start, eq, b"BYSECOND") {
            match number(bytes, value, 59) {
                Some(second) => self.time.2 = second,
                None => return Some(RuleRefusal::Second),
            }
        } else if same(bytes, start, eq, b"INTERVAL") {
            if !same(bytes, value.0, value.1, b"1") {
                return Some(RuleRefusal::Interval);
            }
        } else {
            return Some(RuleRefusal::Unknown);
        }
        None
    }
}

/// A rule as read: the days it falls on and its time of day. Its frequency only decides what
/// it must name: a weekly rule its days of the week, a monthly one its days of the month.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleParts {
    /// Days of the week, bit 0 for Monday; none set for every day.
    days: u8,
    /// Days of the month: bit `d - 1` for day `d`, bit `30 + d` for day `-d`; none for every
    /// day.
    month_days: u64,
    /// The time of day: hour, minute, second.
    time: (i8, i8, i8),
}

impl RuleParts {
    /// `rule`, with or without its `RRULE:` prefix, or why it does not read.
    pub const fn parse(rule: &str) -> Result<RuleParts, RuleError> {
        let bytes = rule.as_bytes();
        let mut at = match starts_with(bytes, b"RRULE:") {
            true => 6,
            false => 0,
        };
        let mut read = Reading {
            frequency: None,
            days: 0,
            month_days: 0,
            time: (0, 0, 0),
        };
        while at < bytes.len() {
            let end = find(bytes, at, b';', bytes.len());
            if end > at
                && let Some(why) = read.part(bytes, at, end)
            {
                return Err(RuleError {
                    why,
                    part: Some((at, end)),
                });
            }
            at = end + 1;
        }
        let why = match read.frequency {
            None => RuleRefusal::NoFrequency,
            Some(Frequency::Weekly) if read.days == 0 => RuleRefusal::WeeklyWithoutDays,
            Some(Frequency::Monthly) if read.month_days == 0 => RuleRefusal::MonthlyWithoutDays,
            Some(_) => {
                return Ok(RuleParts {
                    days: read.days,
                    month_days: read.month_days,
                    time: read.time,
                });
            }
        };
        Err(RuleError { why, part: None })
    }

    /// Whether the rule falls on `date`: on one of its days of the week, if it names any, and
    /// one of its days of the month, if it names any.
    pub(crate) fn falls_on(&self, date: Date) -> bool {
        let weekday = date.weekday().to_monday_zero_offset();
        let on_day = self.days == 0 || self.days & (1 << weekday) != 0;
        let from_end = date.days_in_month() - date.day() + 1;
        let on_month_day = self.month_days == 0
            || self.month_days & (1 << (date.day() - 1)) != 0
            || self.month_days & (1 << (30 + from_end)) != 0;
        on_day && on_month_day
    }

    /// Its time of day.
    pub(crate) const fn time(&self) -> (i8, i8, i8) {
        self.time
    }
}

/// Whether `bytes` starts with `prefix`.
const fn starts_with(bytes: &[u8], prefix: &[u8]) -> bool {
    bytes.len() >= prefix.len() && same(bytes, 0, prefix.len(), prefix)
}

/// Whether `bytes[start..end]` is `word`.
const fn same(bytes: &[u8], start: usize, end: usize, word: &[u8]) -> bool {
    if end - start != word.len() {
        return false;
    }
    let mut i = 0;
    while i < word.len() {
        if bytes[start + i] != word[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The first `byte` in `bytes[start..end]`, or `end`.
const fn find(bytes: &[u8], start: usize, byte: u8, end: usize) -> usize {
    let mut at = start;
    while at < end && bytes[at] != byte {
        at += 1;
    }
    at
}

/// `bytes[start..end]` as a number of one or two digits, at most `most`.
const fn number(bytes: &[u8], (start, end): (usize, usize), most: i8) -> Option<i8> {
    let length = end - start;
    if length == 0 || length > 2 {
        return None;
    }
    let mut value = 0_i8;
    let mut at = start;
    while at < end {
        if !bytes[at].is_ascii_digit() {
            return None;
        }
        value = value * 10 + (bytes[at] - b'0') as i8;
        at += 1;
    }
    match value <= most {
        true => Some(value),
        false => None,
    }
}

/// The weekdays of a `BYDAY` list, bit 0 for Monday.
const fn weekdays_of(bytes: &[u8], (start, end): (usize, usize)) -> Option<u8> {
    const CODES: [&[u8]; 7] = [b"MO", b"TU", b"WE", b"TH", b"FR", b"SA", b"SU"];
    let (mut days, mut at) = (0_u8, start);
    while at <= end {
        let stop = find(bytes, at, b',', end);
        let mut day = 0;
        while day < 7 && !same(bytes, at, stop, CODES[day]) {
            day += 1;
        }
        if day == 7 {
            return None;
        }
        days |= 1 << day;
        at = stop + 1;
    }
    Some(days)
}

/// The days of a `BYMONTHDAY` list: bit `d - 1` for `d`, bit `30 + d` for `-d`.
const fn month_days_of(bytes: &[u8], (start, end): (usize, usize)) -> Option<u64> {
    let (mut days, mut at) = (0_u64, start);
    while at <= end {
        let stop = find(bytes, at, b',', end);
        let negative = at < stop && bytes[at] == b'-';
        let digits = if negative { at + 1 } else { at };
        let day = match number(bytes, (digits, stop), 31) {
            Some(day) if day > 0 => day as u32,
            _ => return None,
        };
        days |= match negative {
            false => 1 << (day - 1),
            true => 1 << (30 + day),
        };
        at = stop + 1;
    }
    Some(days)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_names_the_part_refused() {
        fn refused(rule: &str) -> (RuleRefusal, Option<&str>) {
            let error = RuleParts::parse(rule).unwrap_err();
            (error.why, error.part.map(|(start, end)| &rule[start..end]))
        }
        assert_eq!(
            refused("FREQ=HOURLY"),
            (RuleRefusal::Frequency, Some("FREQ=HOURLY"))
        );
        assert_eq!(
            refused("FREQ=WEEKLY;BYDAY=MO,XX"),
            (RuleRefusal::Day, Some("BYDAY=MO,XX"))
        );
        assert_eq!(
            refused("FREQ=MONTHLY;BYMONTHDAY=0"),
            (RuleRefusal::MonthDay, Some("BYMONTHDAY=0"))
        );
        assert_eq!(
            refused("FREQ=MONTHLY;BYMONTHDAY=-32"),
            (RuleRefusal::MonthDay, Some("BYMONTHDAY=-32"))
        );
        assert_eq!(
            refused("FREQ=DAILY;BYHOUR=24"),
            (RuleRefusal::Hour, Some("BYHOUR=24"))
        );
        assert_eq!(
            refused("FREQ=DAILY;BYHOUR=8,9"),
            (RuleRefusal::Hour, Some("BYHOUR=8,9"))
        );
        assert_eq!(
            refused("FREQ=DAILY;INTERVAL=2"),
            (RuleRefusal::Interval, Some("INTERVAL=2"))
        );
        assert_eq!(
            refused("FREQ=DAILY;COUNT=3"),
            (RuleRefusal::Unknown, Some("COUNT=3"))
        );
        assert_eq!(refused("FREQ"), (RuleRefusal::Part, Some("FREQ")));
        assert_eq!(refused("BYHOUR=9"), (RuleRefusal::NoFrequency, None));
        assert_eq!(
            refused("FREQ=WEEKLY"),
            (RuleRefusal::WeeklyWithoutDays, None)
        );
        assert_eq!(
            refused("FREQ=MONTHLY"),
            (RuleRefusal::MonthlyWithoutDays, None)
        );
        assert_eq!(
            refused("FREQ=DAILY;BYDAY="),
            (RuleRefusal::Day, Some("BYDAY="))
        );
    }

    #[test]
    fn a_rule_falls_on_its_days_of_the_week_and_of_the_month() {
        let parse = |rule| RuleParts::parse(rule).unwrap();
        let date = |text: &str| text.parse::<Date>().unwrap();
        let mondays = parse("RRULE:FREQ=WEEKLY;BYDAY=MO;BYHOUR=8");
        assert!(mondays.falls_on(date("2026-03-30")));
        assert!(!mondays.falls_on(date("2026-03-31")));
        assert_eq!(mondays.time(), (8, 0, 0));
        let last = parse("FREQ=MONTHLY;BYMONTHDAY=-1");
        assert!(last.falls_on(date("2026-02-28")));
        assert!(!last.falls_on(date("2026-03-30")));
        let first_and_fifteenth = parse("FREQ=MONTHLY;BYMONTHDAY=1,15;BYHOUR=9;BYMINUTE=30");
        assert!(first_and_fifteenth.falls_on(date("2026-03-15")));
        assert!(!first_and_fifteenth.falls_on(date("2026-03-16")));
        assert!(parse("FREQ=DAILY").falls_on(date("2026-03-16")));
    }
}
