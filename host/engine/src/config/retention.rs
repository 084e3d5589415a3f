//! `[retention]`: the table the operator writes and the [`Policy`] it is
//! checked into. What a policy removes is `crate::state::retention`'s.

use std::time::Duration;

use flow::duration::Unit;
use serde::Deserialize;

/// How long a keyed Run is kept after it settled when `key-window` is not
/// set: a client retrying within a day gets its Run back.
pub(crate) const DEFAULT_KEY_WINDOW: Duration = Duration::from_secs(24 * 3600);
/// How often `jig serve` sweeps when `interval` is not set.
pub(crate) const DEFAULT_INTERVAL: Duration = Duration::from_secs(5 * 60);
/// The longest duration the table accepts (ten years).
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(3650 * 24 * 3600);
/// `[retention]`: what the operator lets go of settled Runs and delivered
/// packets (docs/src/runs.md, Retention). No table means nothing is ever removed; the rules
/// are [`Policy`]'s.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Retention {
    /// Settled Runs older than this go ("30d", "12h", "90m", "45s").
    pub max_age: Option<String>,
    /// Settled Runs kept per project, newest first.
    pub max_runs: Option<u64>,
    /// Delivered packets older than this go (default: `max-age`).
    pub packets_max_age: Option<String>,
    /// How long a keyed Run is kept after it settled, whatever the limits,
    /// so its key replays it (default 24h).
    pub key_window: Option<String>,
    /// How often `jig serve` sweeps (default 5m).
    pub interval: Option<String>,
}

/// `[retention]`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub max_age: Option<Duration>,
    pub max_runs: Option<usize>,
    pub packets_max_age: Option<Duration>,
    pub key_window: Duration,
    pub interval: Duration,
}

impl Policy {
    pub fn from_table(table: &Retention) -> Result<Policy, String> {
        let duration = |key: &str, text: &Option<String>| {
            text.as_deref()
                .map(|t| parse_duration(t).map_err(|e| format!("[retention] {key}: {e}")))
                .transpose()
        };
        let max_age = duration("max-age", &table.max_age)?;
        let packets_max_age = duration("packets-max-age", &table.packets_max_age)?.or(max_age);
        let max_runs = match table.max_runs {
            Some(0) => return Err("[retention] max-runs must be at least 1".into()),
            Some(n) => Some(usize::try_from(n).map_err(|_| "[retention] max-runs is too large")?),
            None => None,
        };
        if max_age.is_none() && max_runs.is_none() && packets_max_age.is_none() {
            return Err(
                "[retention] needs max-age, max-runs or packets-max-age (without the table nothing is removed)"
                    .into(),
            );
        }
        Ok(Policy {
            max_age,
            max_runs,
            packets_max_age,
            key_window: duration("key-window", &table.key_window)?.unwrap_or(DEFAULT_KEY_WINDOW),
            interval: duration("interval", &table.interval)?.unwrap_or(DEFAULT_INTERVAL),
        })
    }
}

/// The units a `[retention]` duration is written in: a Run's age is never
/// counted in milliseconds, and often in days.
pub(crate) const UNITS: [Unit; 4] = [Unit::Seconds, Unit::Minutes, Unit::Hours, Unit::Days];

/// A positive integer followed by `s`, `m`, `h` or `d` ([`flow::duration`]),
/// up to [`MAX_DURATION`].
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    flow::duration::parse_in(text, &UNITS)
        .filter(|d| *d <= MAX_DURATION)
        .ok_or_else(|| {
            format!(
                "{text:?} is not a duration: a positive integer followed by s, m, h or d, up to 3650d"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(table: &str) -> Result<Policy, String> {
        let table: Retention = toml::from_str(table).map_err(|e| e.to_string())?;
        Policy::from_table(&table)
    }

    #[test]
    fn durations_at_and_past_their_bounds() {
        assert_eq!(
            parse_duration("30d").unwrap(),
            Duration::from_secs(30 * 86400)
        );
        assert_eq!(
            parse_duration("12h").unwrap(),
            Duration::from_secs(12 * 3600)
        );
        assert_eq!(parse_duration("90m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("1s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_duration("3650d").unwrap(), MAX_DURATION);
        for bad in [
            "",
            "d",
            "0s",
            "01h",
            "3651d",
            "1.5h",
            "-1d",
            "1w",
            "1 d",
            "1ms",
            "99999999999999999999d",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_table_is_checked() {
        let p = policy("max-age = \"30d\"\nmax-runs = 100").unwrap();
        assert_eq!(p.max_age, Some(Duration::from_secs(30 * 86400)));
        assert_eq!(p.packets_max_age, p.max_age);
        assert_eq!(p.max_runs, Some(100));
        assert_eq!(p.key_window, DEFAULT_KEY_WINDOW);
        assert_eq!(p.interval, DEFAULT_INTERVAL);
        let p = policy(
            "max-runs = 1\npackets-max-age = \"1h\"\nkey-window = \"1s\"\ninterval = \"2s\"",
        )
        .unwrap();
        assert_eq!(p.max_age, None);
        assert_eq!(p.packets_max_age, Some(Duration::from_secs(3600)));
        assert!(policy("").unwrap_err().contains("needs"));
        assert!(policy("max-runs = 0").unwrap_err().contains("at least 1"));
        assert!(policy("max-age = \"30\"").unwrap_err().contains("max-age"));
        assert!(policy("max-ages = \"30d\"").is_err());
    }
}
