//! How a duration is written in an option or a configuration file: a
//! positive integer, no leading zero, then a unit: `"250ms"`, `"90s"`,
//! `"10m"`, `"1h"`, `"30d"`.
//!
//! This is the grammar alone. Each option names the units it takes and
//! checks its own bounds, so one option's range never leaks into another's.

use std::time::Duration;

/// A unit a duration is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Millis,
    Seconds,
    Minutes,
    Hours,
    Days,
}

impl Unit {
    /// How the unit is spelled after the number.
    pub fn suffix(self) -> &'static str {
        match self {
            Unit::Millis => "ms",
            Unit::Seconds => "s",
            Unit::Minutes => "m",
            Unit::Hours => "h",
            Unit::Days => "d",
        }
    }

    fn millis(self) -> u64 {
        match self {
            Unit::Millis => 1,
            Unit::Seconds => 1_000,
            Unit::Minutes => 60_000,
            Unit::Hours => 3_600_000,
            Unit::Days => 86_400_000,
        }
    }
}

/// The units a deadline is written in: `ms`, `s`, `m` and `h`.
pub const UNITS: [Unit; 4] = [Unit::Millis, Unit::Seconds, Unit::Minutes, Unit::Hours];

/// `text` as `^[1-9][0-9]*<unit>$` with a unit of [`UNITS`].
pub fn parse(text: &str) -> Option<Duration> {
    parse_in(text, &UNITS)
}

/// `text` as `^[1-9][0-9]*<unit>$` with a unit of `units`, in whole
/// milliseconds. `None` when it is not, or when its milliseconds do not fit
/// in a `u64`.
pub fn parse_in(text: &str, units: &[Unit]) -> Option<Duration> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, suffix) = text.split_at(digits);
    if number.is_empty() || number.starts_with('0') {
        return None;
    }
    let unit = units.iter().find(|u| u.suffix() == suffix)?;
    let n: u64 = number.parse().ok()?;
    n.checked_mul(unit.millis()).map(Duration::from_millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_positive_integer_and_a_unit() {
        assert_eq!(parse("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse("10m"), Some(Duration::from_secs(600)));
        assert_eq!(parse("1h"), Some(Duration::from_secs(3600)));
        let days = [Unit::Seconds, Unit::Days];
        assert_eq!(
            parse_in("30d", &days),
            Some(Duration::from_secs(30 * 86400))
        );
        for bad in [
            "", "s", "0s", "01s", "10", "-1s", "+1s", "1.5s", " 1s", "1s ", "1 s", "1S", "1sec",
            "1d", "1w", "١s",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn only_the_units_asked_for() {
        assert_eq!(parse_in("1ms", &[Unit::Seconds]), None);
        assert_eq!(parse_in("1h", &[Unit::Millis, Unit::Seconds]), None);
        assert_eq!(parse_in("1s", &[]), None);
    }

    /// The bound of the grammar itself: milliseconds that fit in a `u64`.
    #[test]
    fn at_the_largest_millisecond_count_and_one_past() {
        assert_eq!(
            parse("18446744073709551615ms"),
            Some(Duration::from_millis(u64::MAX))
        );
        assert_eq!(parse("18446744073709551616ms"), None);
        let hours = u64::MAX / 3_600_000;
        assert_eq!(
            parse(&format!("{hours}h")),
            Some(Duration::from_millis(hours * 3_600_000))
        );
        assert_eq!(parse(&format!("{}h", hours + 1)), None);
        assert_eq!(parse("99999999999999999h"), None);
    }
}
