//! What a civil deadline keeps beside its instant: the zone it was written in, the wall-clock
//! reading it resolved from, and the rule it recurs by.

use std::cmp::Ordering;
use std::hash::{Hash, Hasher};

use jiff::fmt::temporal::{DateTimeParser, TimeZoneAnnotationKind};
use jiff::tz::OffsetConflict;

use super::{CalendarError, Recurrence, Zone, instant_of};
use crate::Instant;

/// Reads a stored wall-clock reading with the zone rules of this build: the offset written
/// beside it where those rules still allow it, else the reading resolved afresh (the hour a
/// change skips read with the offset before it, the hour it repeats the first).
const READ_AFRESH: DateTimeParser =
    DateTimeParser::new().offset_conflict(OffsetConflict::PreferOffset);

/// The civil side of a deadline set in a zone: the zone, the wall-clock reading with its offset
/// as the zone rules read it when it was set (`2026-03-30T09:00:00+02:00[Europe/Paris]`), and
/// the recurrence whose occurrence it is, if any.
///
/// The deadline fires at its instant. A newer zone database that changes a zone's rules does
/// not move a stored deadline: it keeps its instant until a handler sets the field again, and
/// [`resolved`](Self::resolved) says where the new rules would put it.
#[derive(Debug, Clone)]
pub struct Civil {
    zone: Zone,
    local: String,
    rule: Option<Recurrence>,
}

impl Civil {
    /// The civil side of `at` in `zone`, an occurrence of `rule` if given.
    pub(crate) fn of(
        at: Instant,
        zone: &Zone,
        rule: Option<&Recurrence>,
    ) -> Result<Civil, CalendarError> {
        Ok(Civil {
            zone: zone.clone(),
            local: zone.reading(at)?,
            rule: rule.cloned(),
        })
    }

    /// A civil deadline as stored: its wall-clock reading, whose offset makes it the instant it
    /// fires at and whose annotation names its zone, then, for a recurring one, a space and its
    /// rule. The instant, and the civil side.
    pub(crate) fn read(stored: &str) -> Result<(Instant, Civil), CalendarError> {
        let (local, rule) = match stored.split_once(' ') {
            Some((local, rule)) => (local.to_owned(), Some(rule)),
            None => (stored.to_owned(), None),
        };
        let refused = |why: &str| {
            CalendarError::new(format!(
                "`{local}` is not a wall-clock reading with its offset and zone, like \
                 `2026-03-30T09:00:00+02:00[Europe/Paris]`: {why}"
            ))
        };
        // Read without the zone database: its zone is looked up once, by name, below.
        let pieces = READ_AFRESH
            .parse_pieces(&local)
            .map_err(|error| refused(&error.to_string()))?;
        let (Some(time), Some(offset)) = (pieces.time(), pieces.offset()) else {
            return Err(refused("it has no time of day or no offset"));
        };
        let at = offset
            .to_numeric_offset()
            .to_timestamp(pieces.date().to_datetime(time))
            .map_err(|error| refused(&error.to_string()))
            .and_then(instant_of)?;
        let zone = match pieces
            .time_zone_annotation()
            .map(|annotation| annotation.kind())
        {
            Some(TimeZoneAnnotationKind::Named(name)) => Zone::named(name.as_str())?,
            _ => return Err(refused("it names no zone")),
        };
        let civil = Civil {
            zone,
            rule: rule.map(Recurrence::parse).transpose()?,
            local,
        };
        Ok((at, civil))
    }

    /// The zone it was set in.
    pub fn zone(&self) -> &Zone {
        &self.zone
    }

    /// The wall-clock reading it was set at, with the offset and zone:
    /// `2026-03-30T09:00:00+02:00[Europe/Paris]`.
    pub fn local(&self) -> &str {
        &self.local
    }

    /// The rule it is an occurrence of, for a recurring deadline.
    pub fn rule(&self) -> Option<&Recurrence> {
        self.rule.as_ref()
    }

    /// The instant the zone rules of this build give its wall-clock reading: its own instant,
    /// unless the zone's rules changed since it was set.
    pub fn resolved(&self) -> Result<Instant, CalendarError> {
        let zoned = READ_AFRESH
            .parse_zoned_datetime(&self.local)
            .map_err(|error| CalendarError::new(format!("`{}`: {error}", self.local)))?;
        instant_of(zoned.timestamp())
    }

    fn key(&self) -> (&str, &str, Option<&str>) {
        (
            self.zone.name(),
            &self.local,
            self.rule.as_ref().map(Recurrence::rule),
        )
    }
}

impl PartialEq for Civil {
    fn eq(&self, other: &Civil) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Civil {}

impl PartialOrd for Civil {
    fn partial_cmp(&self, other: &Civil) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Civil {
    fn cmp(&self, other: &Civil) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl Hash for Civil {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}
