//! Durations: `250ms`, `1.5s`, `30s`, `15m`, `72h`, `7d`.
//!
//! One parser serves both sides: [`Duration::parse_const`] is a `const fn`, so the `timeout`
//! literal of `#[process]` is checked while compiling, and [`str::parse`] uses the same code at
//! run time.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

const MS_PER_SECOND: u64 = 1_000;
const MS_PER_MINUTE: u64 = 60 * MS_PER_SECOND;
const MS_PER_HOUR: u64 = 60 * MS_PER_MINUTE;
const MS_PER_DAY: u64 = 24 * MS_PER_HOUR;

/// A span of time with millisecond precision, never negative.
///
/// Written as a number and a unit: `250ms`, `1.5s`, `30s`, `15m`, `72h`, `7d`. Build one with
/// [`millis`], [`seconds`], [`minutes`], [`hours`], [`days`], or parse one with
/// `"72h".parse::<Duration>()`. It serialises in the same notation.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration {
    ms: u64,
}

/// `n` milliseconds.
pub const fn millis(n: u64) -> Duration {
    Duration { ms: n }
}

/// `n` seconds, saturating at [`Duration::MAX`].
pub const fn seconds(n: u64) -> Duration {
    Duration::saturating(n, MS_PER_SECOND)
}

/// `n` minutes, saturating at [`Duration::MAX`].
pub const fn minutes(n: u64) -> Duration {
    Duration::saturating(n, MS_PER_MINUTE)
}

/// `n` hours, saturating at [`Duration::MAX`].
pub const fn hours(n: u64) -> Duration {
    Duration::saturating(n, MS_PER_HOUR)
}

/// `n` days, saturating at [`Duration::MAX`].
pub const fn days(n: u64) -> Duration {
    Duration::saturating(n, MS_PER_DAY)
}

impl Duration {
    /// No time at all.
    pub const ZERO: Duration = Duration { ms: 0 };

    /// The longest duration an [`Instant`](crate::Instant) can move by: `i64::MAX` milliseconds.
    pub const MAX: Duration = Duration {
        ms: i64::MAX as u64,
    };

    const fn saturating(n: u64, unit: u64) -> Duration {
        match n.checked_mul(unit) {
            Some(ms) if ms <= Duration::MAX.ms => Duration { ms },
            _ => Duration::MAX,
        }
    }

    /// The duration in milliseconds.
    pub const fn as_millis(self) -> u64 {
        self.ms
    }

    /// Parses `<number><unit>` in a `const` context; see [`DurationErrorKind`] for what is refused.
    ///
    /// The number is decimal with an optional fraction (`1.5s`); the result must be a whole
    /// number of milliseconds no larger than [`Duration::MAX`].
    pub const fn parse_const(input: &str) -> Result<Duration, DurationErrorKind> {
        let bytes = input.as_bytes();
        if bytes.is_empty() {
            return Err(DurationErrorKind::Empty);
        }
        if bytes[0] == b'-' {
            return Err(DurationErrorKind::Negative);
        }
        // Split into number and unit at the first byte that is neither a digit nor a dot.
        let mut split = 0;
        while split < bytes.len() && (bytes[split].is_ascii_digit() || bytes[split] == b'.') {
            split += 1;
        }
        if split == 0 {
            return Err(DurationErrorKind::MissingNumber);
        }
        if split == bytes.len() {
            return Err(DurationErrorKind::MissingUnit);
        }
        let unit = match unit_ms(bytes, split) {
            Some(unit) => unit,
            None => {
                // An exponent or a digit separator belongs to the number: `1e309s`, `1_000s`.
                let more = split + 1 < bytes.len() && bytes[split + 1].is_ascii_digit();
                if more && matches!(bytes[split], b'e' | b'E' | b'_' | b',') {
                    return Err(DurationErrorKind::InvalidNumber);
                }
                return Err(DurationErrorKind::UnknownUnit);
            }
        };
        // Trailing zeros of a fraction change nothing: leave them out.
        let mut end = split;
        let mut has_dot = false;
        let mut k = 0;
        while k < split {
            has_dot = has_dot || bytes[k] == b'.';
            k += 1;
        }
        if has_dot {
            while end > 1 && bytes[end - 1] == b'0' {
                end -= 1;
            }
        }
        // The number as a fraction `numerator / 10^scale`, in u128 so nothing overflows early.
        let mut numerator: u128 = 0;
        let mut scale: u32 = 0;
        let mut seen_dot = false;
        let mut seen_digit = false;
        let mut i = 0;
        while i < end {
            let b = bytes[i];
            if b == b'.' {
                if seen_dot {
                    return Err(DurationErrorKind::InvalidNumber);
                }
                seen_dot = true;
            } else {
                seen_digit = true;
                numerator = numerator * 10 + (b - b'0') as u128;
                if seen_dot {
                    scale += 1;
                }
                if scale > 18 {
                    // Eighteen decimals of even a day are far below a millisecond.
                    return Err(DurationErrorKind::SubMillisecond);
                }
                if numerator > u64::MAX as u128 * 1_000 {
                    return Err(DurationErrorKind::Overflow);
                }
            }
            i += 1;
        }
        if !seen_digit || bytes[split - 1] == b'.' || bytes[0] == b'.' {
            return Err(DurationErrorKind::InvalidNumber);
        }
        let divisor = 10u128.pow(scale);
        let total = numerator * unit as u128;
        if !total.is_multiple_of(divisor) {
            return Err(DurationErrorKind::SubMillisecond);
        }
        let ms = total / divisor;
        if ms > Duration::MAX.ms as u128 {
            return Err(DurationErrorKind::Overflow);
        }
        Ok(Duration { ms: ms as u64 })
    }

    /// Adds two durations, or `None` past [`Duration::MAX`].
    pub const fn checked_add(self, other: Duration) -> Option<Duration> {
        match self.ms.checked_add(other.ms) {
            Some(ms) if ms <= Duration::MAX.ms => Some(Duration { ms }),
            _ => None,
        }
    }

    /// Multiplies by `n`, or `None` past [`Duration::MAX`].
    pub const fn checked_mul(self, n: u64) -> Option<Duration> {
        match self.ms.checked_mul(n) {
            Some(ms) if ms <= Duration::MAX.ms => Some(Duration { ms }),
            _ => None,
        }
    }
}

/// The unit's length in milliseconds, for the bytes from `start` to the end.
const fn unit_ms(bytes: &[u8], start: usize) -> Option<u64> {
    match bytes.len() - start {
        1 => match bytes[start] {
            b's' => Some(MS_PER_SECOND),
            b'm' => Some(MS_PER_MINUTE),
            b'h' => Some(MS_PER_HOUR),
            b'd' => Some(MS_PER_DAY),
            _ => None,
        },
        2 if bytes[start] == b'm' && bytes[start + 1] == b's' => Some(1),
        _ => None,
    }
}

/// Why a text is not a duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DurationErrorKind {
    /// The text is empty.
    Empty,
    /// The text starts with `-`: durations are never negative.
    Negative,
    /// The text does not start with a number (`h`, `hours`).
    MissingNumber,
    /// A number with no unit (`72`).
    MissingUnit,
    /// A unit other than `ms`, `s`, `m`, `h`, `d` (`1w`, `72 hours`).
    UnknownUnit,
    /// A malformed number (`1..5s`, `.5s`).
    InvalidNumber,
    /// A fraction of a millisecond (`1.0005s`).
    SubMillisecond,
    /// More than [`Duration::MAX`].
    Overflow,
}

impl DurationErrorKind {
    const fn reason(self) -> &'static str {
        match self {
            DurationErrorKind::Empty => "it is empty",
            DurationErrorKind::Negative => "a duration cannot be negative",
            DurationErrorKind::MissingNumber => "it does not start with a number",
            DurationErrorKind::MissingUnit => "the number has no unit",
            DurationErrorKind::UnknownUnit => "the unit is not one of ms, s, m, h, d",
            DurationErrorKind::InvalidNumber => {
                "the number is malformed (digits with one `.` at most, no exponent)"
            }
            DurationErrorKind::SubMillisecond => "it is not a whole number of milliseconds",
            DurationErrorKind::Overflow => "it is too long",
        }
    }
}

/// A text that is not a duration, with the text and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{input}` is not a duration: {}; write it like `250ms`, `1.5s`, `15m`, `72h` or `7d`", kind.reason())]
pub struct DurationError {
    /// The text that was refused.
    pub input: String,
    /// Why it was refused.
    pub kind: DurationErrorKind,
}

/// The duration in environment variable `name`, or `default` when it is unset. A value that is not a duration is an error naming the
/// variable and the value.
pub fn env_duration(name: &str, default: Duration) -> Result<Duration, DurationError> {
    match std::env::var(name) {
        Ok(value) => named_duration(name, Some(&value), default),
        Err(std::env::VarError::NotPresent) => Ok(default),
        // Set, but not text: a value, and not a duration.
        Err(std::env::VarError::NotUnicode(value)) => {
            named_duration(name, Some(&value.to_string_lossy()), default)
        }
    }
}

/// `value` of variable `name` as a duration, `default` when absent.
fn named_duration(
    name: &str,
    value: Option<&str>,
    default: Duration,
) -> Result<Duration, DurationError> {
    match value {
        Some(text) => text.parse().map_err(|error: DurationError| DurationError {
            input: format!("{name}={}", error.input),
            kind: error.kind,
        }),
        None => Ok(default),
    }
}

impl FromStr for Duration {
    type Err = DurationError;

    fn from_str(input: &str) -> Result<Duration, DurationError> {
        Duration::parse_const(input).map_err(|kind| DurationError {
            input: input.to_owned(),
            kind,
        })
    }
}

impl fmt::Debug for Duration {
    /// The duration in its own notation (`36h`), as [`Display`](fmt::Display) writes it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Duration {
    /// The largest unit that divides the duration exactly: `72h`, `90m`, `1500ms`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let units = [
            (MS_PER_DAY, "d"),
            (MS_PER_HOUR, "h"),
            (MS_PER_MINUTE, "m"),
            (MS_PER_SECOND, "s"),
        ];
        for (unit, suffix) in units {
            if self.ms != 0 && self.ms.is_multiple_of(unit) {
                return write!(f, "{}{suffix}", self.ms / unit);
            }
        }
        write!(f, "{}ms", self.ms)
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    /// A string in the notation (`"72h"`), or a whole number of milliseconds.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw<'a> {
            Millis(u64),
            Text(std::borrow::Cow<'a, str>),
        }
        match Raw::deserialize(deserializer) {
            Ok(Raw::Millis(ms)) => Ok(millis(ms)),
            Ok(Raw::Text(text)) => text.parse().map_err(serde::de::Error::custom),
            Err(_) => Err(serde::de::Error::custom(
                "expected a duration: a string like \"72h\" or a number of milliseconds",
            )),
        }
    }
}

impl std::ops::Add for Duration {
    type Output = Duration;

    /// Saturates at [`Duration::MAX`].
    fn add(self, other: Duration) -> Duration {
        self.checked_add(other).unwrap_or(Duration::MAX)
    }
}

impl std::ops::Sub for Duration {
    type Output = Duration;

    /// Saturates at zero: durations are never negative.
    fn sub(self, other: Duration) -> Duration {
        Duration {
            ms: self.ms.saturating_sub(other.ms),
        }
    }
}

impl From<Duration> for std::time::Duration {
    fn from(duration: Duration) -> std::time::Duration {
        std::time::Duration::from_millis(duration.ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 19: `{:?}` shows the duration in its notation.
    #[test]
    fn debug_shows_the_duration() {
        assert_eq!(format!("{:?}", hours(36)), "36h");
        assert_eq!(format!("{:?}", millis(1500)), "1500ms");
    }

    fn parse(input: &str) -> Result<Duration, DurationErrorKind> {
        input.parse::<Duration>().map_err(|e| e.kind)
    }

    #[test]
    fn parses_every_unit() {
        assert_eq!(parse("250ms"), Ok(millis(250)));
        assert_eq!(parse("30s"), Ok(seconds(30)));
        assert_eq!(parse("15m"), Ok(minutes(15)));
        assert_eq!(parse("72h"), Ok(hours(72)));
        assert_eq!(parse("7d"), Ok(days(7)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn parses_fractions_to_whole_milliseconds() {
        assert_eq!(parse("1.5s"), Ok(millis(1_500)));
        assert_eq!(parse("0.5h"), Ok(minutes(30)));
        assert_eq!(parse("1.250s"), Ok(millis(1_250)));
        assert_eq!(parse("1.0005s"), Err(DurationErrorKind::SubMillisecond));
        assert_eq!(parse("0.5ms"), Err(DurationErrorKind::SubMillisecond));
        assert_eq!(
            parse("1.0000000000000000000000s"),
            Ok(seconds(1)),
            "zeros change nothing"
        );
        assert_eq!(parse("2.50h"), Ok(minutes(150)));
        assert_eq!(
            parse("0.0000000000000000001s"),
            Err(DurationErrorKind::SubMillisecond)
        );
        assert_eq!(parse("5.0s"), Ok(seconds(5)));
    }

    #[test]
    fn refuses_bad_input_with_a_reason() {
        assert_eq!(parse(""), Err(DurationErrorKind::Empty));
        assert_eq!(parse("72"), Err(DurationErrorKind::MissingUnit));
        assert_eq!(parse("-5s"), Err(DurationErrorKind::Negative));
        assert_eq!(parse("1w"), Err(DurationErrorKind::UnknownUnit));
        // Issue 43: a number written another way is no unit.
        assert_eq!(parse("1e309s"), Err(DurationErrorKind::InvalidNumber));
        assert_eq!(parse("1_000s"), Err(DurationErrorKind::InvalidNumber));
        assert_eq!(parse("1h30m"), Err(DurationErrorKind::UnknownUnit));
        assert_eq!(parse("72 hours"), Err(DurationErrorKind::UnknownUnit));
        assert_eq!(parse("72hours"), Err(DurationErrorKind::UnknownUnit));
        assert_eq!(parse("h"), Err(DurationErrorKind::MissingNumber));
        assert_eq!(parse(" 5s"), Err(DurationErrorKind::MissingNumber));
        assert_eq!(parse("1..5s"), Err(DurationErrorKind::InvalidNumber));
        assert_eq!(parse(".5s"), Err(DurationErrorKind::InvalidNumber));
        assert_eq!(parse("5.s"), Err(DurationErrorKind::InvalidNumber));
        assert_eq!(parse("5S"), Err(DurationErrorKind::UnknownUnit));
    }

    #[test]
    fn refuses_overflow() {
        assert_eq!(
            parse("99999999999999999999d"),
            Err(DurationErrorKind::Overflow)
        );
        assert_eq!(parse("106751991168d"), Err(DurationErrorKind::Overflow));
        assert_eq!(parse("106751991167d"), Ok(days(106_751_991_167)));
        assert_eq!(parse("9223372036854775807ms"), Ok(Duration::MAX));
        assert_eq!(
            parse("9223372036854775808ms"),
            Err(DurationErrorKind::Overflow)
        );
    }

    #[test]
    fn error_names_the_input_and_the_fix() {
        let err = "1w".parse::<Duration>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "`1w` is not a duration: the unit is not one of ms, s, m, h, d; \
             write it like `250ms`, `1.5s`, `15m`, `72h` or `7d`"
        );
    }

    #[test]
    fn displays_in_the_largest_exact_unit_and_round_trips() {
        for (text, duration) in [
            ("3d", hours(72)),
            ("25h", hours(25)),
            ("90m", minutes(90)),
            ("1500ms", millis(1_500)),
            ("7d", days(7)),
            ("0ms", Duration::ZERO),
        ] {
            assert_eq!(duration.to_string(), text);
            assert_eq!(text.parse::<Duration>(), Ok(duration));
        }
    }

    #[test]
    fn serde_uses_the_notation() {
        let json = serde_json::to_string(&hours(36)).unwrap();
        assert_eq!(json, "\"36h\"");
        assert_eq!(
            serde_json::from_str::<Duration>("\"1.5s\"").unwrap(),
            millis(1_500)
        );
        let err = serde_json::from_str::<Duration>("\"72\"").unwrap_err();
        assert!(err.to_string().contains("`72` is not a duration"), "{err}");
        // spec 211: a number is milliseconds.
        assert_eq!(
            serde_json::from_str::<Duration>("250").unwrap(),
            millis(250)
        );
        assert!(serde_json::from_str::<Duration>("-5").is_err());
        assert!(serde_json::from_str::<Duration>("true").is_err());
    }

    #[test]
    fn env_durations_default_when_unset_and_name_the_variable_when_bad() {
        assert_eq!(
            env_duration("BOUNDA_TEST_UNSET_DURATION", minutes(1)),
            Ok(minutes(1))
        );
        assert_eq!(
            named_duration("DELAY", Some("2s"), minutes(1)),
            Ok(seconds(2))
        );
        let err = named_duration("DELAY", Some("60 seconds"), minutes(1)).unwrap_err();
        assert_eq!(err.kind, DurationErrorKind::UnknownUnit);
        assert!(
            err.to_string()
                .starts_with("`DELAY=60 seconds` is not a duration"),
            "{err}"
        );
    }

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(minutes(4) - millis(1), millis(239_999));
        assert_eq!(seconds(1) - seconds(2), Duration::ZERO);
        assert_eq!(hours(1) + minutes(30), minutes(90));
        assert_eq!(Duration::MAX + millis(1), Duration::MAX);
    }

    #[test]
    fn constructors_saturate() {
        assert_eq!(days(u64::MAX), Duration::MAX);
        assert_eq!(hours(24).checked_mul(3), Some(hours(72)));
        assert_eq!(Duration::MAX.checked_add(millis(1)), None);
    }
}
