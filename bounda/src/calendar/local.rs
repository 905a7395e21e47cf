//! A time of day on a wall clock, as people write it.

use std::fmt;
use std::str::FromStr;

use jiff::civil::Time;

use super::CalendarError;

/// A time of day (`09:00`, `17:30:15`), with no date or zone: what a zone's wall clock reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct LocalTime(Time);

/// Why a text is not a time of day: each says how to write one, so the same words serve a
/// refusal at run time and a compile error of [`time!`](crate::time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeRefusal {
    /// Not `HH:MM` or `HH:MM:SS`.
    Shape,
    /// A part is not two digits.
    Digits,
    /// An hour past 23.
    Hour,
    /// Minutes past 59.
    Minute,
    /// Seconds past 59.
    Second,
}

impl TimeRefusal {
    /// Why, and how to write a time of day instead.
    pub const fn message(self) -> &'static str {
        match self {
            TimeRefusal::Shape => {
                "a time of day is hours and minutes, and maybe seconds: write it as `HH:MM` on \
                 a 24-hour clock (`09:00`, `17:30`, `17:30:15`)"
            }
            TimeRefusal::Digits => {
                "its hours, minutes and seconds are two digits each: write it as `HH:MM` on a \
                 24-hour clock (`09:00`, `17:30`)"
            }
            TimeRefusal::Hour => {
                "its hour is past 23; write it as `HH:MM` on a 24-hour clock (`09:00`, \
                 `17:30`), midnight as `00:00`"
            }
            TimeRefusal::Minute => {
                "its minutes are past 59; write it as `HH:MM` (`09:00`, `17:30`)"
            }
            TimeRefusal::Second => "its seconds are past 59; write it as `HH:MM:SS` (`17:30:15`)",
        }
    }
}

impl LocalTime {
    /// `text` as `HH:MM` or `HH:MM:SS`, on a 24-hour clock.
    pub fn parse(text: &str) -> Result<LocalTime, CalendarError> {
        LocalTime::parse_const(text).map_err(|why| {
            CalendarError::new(format!("`{text}` is not a time of day: {}", why.message()))
        })
    }

    /// [`parse`](Self::parse) while compiling: what [`time!`](crate::time) checks a literal
    /// with.
    pub const fn parse_const(text: &str) -> Result<LocalTime, TimeRefusal> {
        let bytes = text.as_bytes();
        let seconds = match bytes.len() {
            5 => false,
            8 => true,
            _ => return Err(TimeRefusal::Shape),
        };
        if bytes[2] != b':' || (seconds && bytes[5] != b':') {
            return Err(TimeRefusal::Shape);
        }
        let (Some(hour), Some(minute)) = (two_digits(bytes, 0), two_digits(bytes, 3)) else {
            return Err(TimeRefusal::Digits);
        };
        let second = match seconds {
            false => 0,
            true => match two_digits(bytes, 6) {
                Some(second) => second,
                None => return Err(TimeRefusal::Digits),
            },
        };
        if hour > 23 {
            return Err(TimeRefusal::Hour);
        }
        if minute > 59 {
            return Err(TimeRefusal::Minute);
        }
        if second > 59 {
            return Err(TimeRefusal::Second);
        }
        Ok(LocalTime(Time::constant(hour, minute, second, 0)))
    }

    /// `hour:minute:second`, each already in range.
    pub(crate) const fn of(hour: i8, minute: i8, second: i8) -> LocalTime {
        LocalTime(Time::constant(hour, minute, second, 0))
    }

    /// The time of day.
    pub(crate) fn time(self) -> Time {
        self.0
    }
}

/// The two digits at `at` as a number.
const fn two_digits(bytes: &[u8], at: usize) -> Option<i8> {
    let (tens, ones) = (bytes[at], bytes[at + 1]);
    if !tens.is_ascii_digit() || !ones.is_ascii_digit() {
        return None;
    }
    Some(((tens - b'0') * 10 + (ones - b'0')) as i8)
}

impl FromStr for LocalTime {
    type Err = CalendarError;

    fn from_str(text: &str) -> Result<LocalTime, CalendarError> {
        LocalTime::parse(text)
    }
}

impl fmt::Display for LocalTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02}:{:02}", self.0.hour(), self.0.minute())?;
        match self.0.second() {
            0 => Ok(()),
            second => write!(f, ":{second:02}"),
        }
    }
}
