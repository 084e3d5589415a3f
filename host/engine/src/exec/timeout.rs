//! A root Run's timeout (seed 002 §9): its default, its largest value and
//! the `--timeout` grammar, for every door and for the SDK trees that must
//! outlive the longest Run.

use std::time::Duration;

/// Seed 002 §9: default and largest root deadline.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);
/// `--timeout`: a duration in `ms`, `s`, `m` or `h` ([`flow::duration`]),
/// at most [`MAX_TIMEOUT`].
pub fn parse_timeout(text: &str) -> Option<Duration> {
    flow::duration::parse(text).filter(|d| *d <= MAX_TIMEOUT)
}
