//! A time of day on a wall clock, as people write it.

use std::fmt;
use std::str::FromStr;

use jiff::civil::Time;

use super::CalendarError;

/// A time of day (`09:00`, `17:30:15`), with no date or zone: what a zone's wall clock reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct LocalTime(Time);

impl LocalTime {
    /// `text` as `HH:MM` or `HH:MM:SS`, on a 24-hour clock.
    pub fn parse(text: &str) -> Result<LocalTime, CalendarError> {
        let refused = |why: &str| {
            CalendarError::new(format!(
                "`{text}` is not a time of day: {why}; write it as `HH:MM` on a 24-hour clock \
                 (`09:00`, `17:30`)"
            ))
        };
        let parts: Vec<&str> = text.split(':').collect();
        let number = |part: &str, most: u8, what: &str| -> Result<i8, CalendarError> {
            let value: u8 = match part.len() {
                2 => part
                    .parse()
                    .map_err(|_| refused(&format!("its {what} is not a number")))?,
                _ => return Err(refused(&format!("its {what} is not two digits"))),
            };
            if value > most {
                return Err(refused(&format!("its {what} is past {most}")));
            }
            Ok(value as i8)
        };
        let (hour, minute, second) = match parts.as_slice() {
            [hour, minute] => (number(hour, 23, "hour")?, number(minute, 59, "minute")?, 0),
            [hour, minute, second] => (
                number(hour, 23, "hour")?,
                number(minute, 59, "minute")?,
                number(second, 59, "second")?,
            ),
            _ => return Err(refused("it is not hours and minutes")),
        };
        Time::new(hour, minute, second, 0)
            .map(LocalTime)
            .map_err(|error| refused(&error.to_string()))
    }

    /// The time of day.
    pub(crate) fn time(self) -> Time {
        self.0
    }
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
