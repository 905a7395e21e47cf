//! Business days: a week's working days and the holidays the app supplies.

use std::collections::BTreeSet;

use jiff::civil::{Date, Weekday};

use super::{CalendarError, LocalTime, Zone};
use crate::Instant;

/// Which days count as business days: every day but the weekend's and the holidays given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusinessDays {
    weekend: Vec<Weekday>,
    holidays: BTreeSet<Date>,
}

impl Default for BusinessDays {
    /// Monday to Friday, no holiday.
    fn default() -> BusinessDays {
        BusinessDays {
            weekend: vec![Weekday::Saturday, Weekday::Sunday],
            holidays: BTreeSet::new(),
        }
    }
}

impl BusinessDays {
    /// Monday to Friday, no holiday.
    pub fn new() -> BusinessDays {
        BusinessDays::default()
    }

    /// With `days` as the weekend instead of Saturday and Sunday.
    pub fn weekend(mut self, days: &[Weekday]) -> BusinessDays {
        self.weekend = days.to_vec();
        self
    }

    /// With `date` (`2026-12-25`) a holiday.
    pub fn holiday(mut self, date: &str) -> Result<BusinessDays, CalendarError> {
        let day: Date = date.parse().map_err(|_| {
            CalendarError::new(format!(
                "`{date}` is not a date: write a holiday as `YYYY-MM-DD`"
            ))
        })?;
        self.holidays.insert(day);
        Ok(self)
    }

    /// Whether `date` is a business day.
    pub fn is_business_day(&self, date: Date) -> bool {
        !self.weekend.contains(&date.weekday()) && !self.holidays.contains(&date)
    }

    /// The moment `days` business days after `after`'s day in `zone`, at `time` there: three
    /// business days after a Friday is Wednesday.
    pub fn after(
        &self,
        after: Instant,
        days: u32,
        time: LocalTime,
        zone: &Zone,
    ) -> Result<Instant, CalendarError> {
        if self.weekend.len() >= 7 {
            return Err(CalendarError::new(
                "every day of the week is the weekend: no day is a business day",
            ));
        }
        let mut date = zone.wall_clock(after)?.date();
        let mut left = days;
        while left > 0 {
            date = date
                .tomorrow()
                .map_err(|error| CalendarError::new(format!("after {date}: {error}")))?;
            if self.is_business_day(date) {
                left -= 1;
            }
        }
        zone.at(date, time)
    }
}
