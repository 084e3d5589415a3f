//! Operator grants (`grants` in a `[[providers]]` table): what a WASM
//! provider may reach beyond today's nothing-granted world. Every grant is
//! off by default, and the grants are part of the provider's reviewed
//! identity ([`Grants::digest`]).
//!
//! ```toml
//! [[providers]]
//! name = "tracker"
//! kind = "wasm"
//! path = "/srv/jig/tracker.wasm"
//! grants.http = { allow = ["https://api.example.com", "http://127.0.0.1:8080"] }
//! grants.directory = "/var/lib/jig/providers/tracker"
//! grants.limits = { memory = "64MiB", call-timeout = "5s", concurrency = 4 }
//! ```

use std::path::PathBuf;
use std::time::Duration;

use flow::duration::Unit;
use serde::{Deserialize, Serialize};

/// Default ceiling on each linear memory of one call's instance.
pub const DEFAULT_MEMORY_BYTES: u64 = 64 << 20;
/// The largest memory a grant may give one instance.
pub const MAX_MEMORY_BYTES: u64 = 1 << 30;
/// The smallest memory a grant may give (one WASM page).
pub const MIN_MEMORY_BYTES: u64 = 64 << 10;
/// Default number of calls of one provider that may run at the same time
/// (the process-wide instance pool is the other bound).
pub const DEFAULT_CONCURRENCY: u32 = 64;
/// The most concurrent calls a grant may allow (the pool's size).
pub const MAX_CONCURRENCY: u32 = 64;
/// The longest per-call deadline a grant may set.
pub const MAX_CALL_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);
/// The units a per-call deadline is written in: `"250ms"`, `"5s"`, `"2m"`.
pub const CALL_TIMEOUT_UNITS: [Unit; 3] = [Unit::Millis, Unit::Seconds, Unit::Minutes];
/// The most origins one HTTP allowlist may name.
pub const MAX_HTTP_ORIGINS: usize = 256;

/// The `grants` table of one provider declaration, as written.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Grants {
    /// Outbound HTTP through `wasi:http`, to the listed origins only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpGrant>,
    /// A private persistent directory, preopened at [`DATA_DIR_GUEST`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory: Option<PathBuf>,
    /// Memory, time and concurrency limits in place of the defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitsGrant>,
}

/// Where the granted directory appears inside the guest.
pub const DATA_DIR_GUEST: &str = "/data";

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct HttpGrant {
    /// Origins (`scheme://host[:port]`) the provider may send requests to.
    pub allow: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LimitsGrant {
    /// A size such as `"64MiB"` (units B, KiB, MiB, GiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// A duration such as `"5s"` (units ms, s, m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
}

/// One allowed origin: lower-case scheme and host, explicit port.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Origin {
    pub scheme: String,
    pub host: String,
    pub port: u16,
}

impl Origin {
    /// Parses `scheme://host[:port]` with an optional trailing `/`; the
    /// scheme is `http` or `https`, the port defaults to the scheme's.
    pub fn parse(text: &str) -> Result<Origin, String> {
        let bad = |why: &str| format!("{text:?} is not an http(s) origin: {why}");
        let (scheme, rest) = text.split_once("://").ok_or_else(|| bad("no scheme"))?;
        let scheme = scheme.to_ascii_lowercase();
        let default_port = match scheme.as_str() {
            "http" => 80,
            "https" => 443,
            _ => return Err(bad("the scheme is neither http nor https")),
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#', '@']) {
            return Err(bad("an origin has no path, query, fragment or user"));
        }
        let (host, port) = split_host_port(rest).ok_or_else(|| bad("bad host or port"))?;
        let port = match port {
            None => default_port,
            Some(p) => p.parse::<u16>().map_err(|_| bad("bad port"))?,
        };
        Origin::new(&scheme, host, port).ok_or_else(|| bad("bad host"))
    }

    /// An origin from a request's parts, or `None` when the host is not a
    /// plain DNS name or IP literal.
    pub fn new(scheme: &str, host: &str, port: u16) -> Option<Origin> {
        let host = host.to_ascii_lowercase();
        let plain = !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
        let ipv6 = host.starts_with('[')
            && host.ends_with(']')
            && host[1..host.len() - 1]
                .parse::<std::net::Ipv6Addr>()
                .is_ok();
        (plain || ipv6).then(|| Origin {
            scheme: scheme.to_ascii_lowercase(),
            host,
            port,
        })
    }
}

/// `host[:port]`, where an IPv6 host is bracketed.
fn split_host_port(text: &str) -> Option<(&str, Option<&str>)> {
    if text.starts_with('[') {
        let end = text.find(']')?;
        let (host, rest) = text.split_at(end + 1);
        return match rest {
            "" => Some((host, None)),
            _ => Some((host, Some(rest.strip_prefix(':')?))),
        };
    }
    match text.split_once(':') {
        None => Some((text, None)),
        Some((host, port)) => Some((host, Some(port))),
    }
}

/// The grants a loader applies, validated: [`Grants::check`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedGrants {
    /// `None`: no `wasi:http` at all.
    pub http: Option<Vec<Origin>>,
    pub directory: Option<PathBuf>,
    pub memory_bytes: u64,
    /// `None`: the Run's deadline only.
    pub call_timeout: Option<Duration>,
    pub concurrency: u32,
}

impl Grants {
    /// Are all grants off (today's nothing-granted world)?
    pub fn is_empty(&self) -> bool {
        self == &Grants::default()
    }

    /// Validates every grant; the message names the first bad one.
    pub fn check(&self) -> Result<CheckedGrants, String> {
        let http = match &self.http {
            None => None,
            Some(grant) => {
                if grant.allow.len() > MAX_HTTP_ORIGINS {
                    return Err(format!(
                        "grants.http.allow names more than {MAX_HTTP_ORIGINS} origins"
                    ));
                }
                let origins = grant
                    .allow
                    .iter()
                    .map(|o| Origin::parse(o).map_err(|e| format!("grants.http.allow: {e}")))
                    .collect::<Result<Vec<_>, _>>()?;
                Some(origins)
            }
        };
        if let Some(dir) = &self.directory {
            if !dir.is_absolute() {
                return Err(format!(
                    "grants.directory {:?} is not an absolute path",
                    dir.display()
                ));
            }
        }
        let limits = self.limits.clone().unwrap_or_default();
        let memory_bytes = match &limits.memory {
            None => DEFAULT_MEMORY_BYTES,
            Some(text) => {
                let bytes = flow::size::parse(text)
                    .ok_or_else(|| format!("grants.limits.memory {text:?} is not a size"))?;
                if !(MIN_MEMORY_BYTES..=MAX_MEMORY_BYTES).contains(&bytes) {
                    return Err(format!(
                        "grants.limits.memory {text:?} is outside {MIN_MEMORY_BYTES}..={MAX_MEMORY_BYTES} bytes"
                    ));
                }
                bytes
            }
        };
        let call_timeout = match &limits.call_timeout {
            None => None,
            Some(text) => {
                let timeout =
                    flow::duration::parse_in(text, &CALL_TIMEOUT_UNITS).ok_or_else(|| {
                        format!("grants.limits.call-timeout {text:?} is not a duration")
                    })?;
                if timeout > MAX_CALL_TIMEOUT {
                    return Err(format!(
                        "grants.limits.call-timeout {text:?} must be above zero and at most {}s",
                        MAX_CALL_TIMEOUT.as_secs()
                    ));
                }
                Some(timeout)
            }
        };
        let concurrency = limits.concurrency.unwrap_or(DEFAULT_CONCURRENCY);
        if !(1..=MAX_CONCURRENCY).contains(&concurrency) {
            return Err(format!(
                "grants.limits.concurrency {concurrency} is outside 1..={MAX_CONCURRENCY}"
            ));
        }
        Ok(CheckedGrants {
            http,
            directory: self.directory.clone(),
            memory_bytes,
            call_timeout,
            concurrency,
        })
    }

    /// The grants' identity for review: `None` when nothing is granted (a
    /// Plan made before grants existed stays the same), else the SHA-256 of
    /// their JSON text (struct fields in declaration order).
    pub fn digest(&self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let text = serde_json::to_string(self).expect("grants serialize");
        Some(crate::artifact_digest(text.as_bytes()))
    }

    /// The names of the grants that are set, for review text.
    pub fn names(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.http.is_some() {
            out.push("http");
        }
        if self.directory.is_some() {
            out.push("directory");
        }
        if self.limits.is_some() {
            out.push("limits");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants(value: serde_json::Value) -> Result<Grants, serde_json::Error> {
        serde_json::from_value(value)
    }

    #[test]
    fn nothing_granted_is_the_default_and_has_no_digest() {
        let g = grants(serde_json::json!({})).unwrap();
        assert!(g.is_empty());
        assert_eq!(g.digest(), None);
        let checked = g.check().unwrap();
        assert_eq!(checked.http, None);
        assert_eq!(checked.memory_bytes, DEFAULT_MEMORY_BYTES);
        assert_eq!(checked.concurrency, DEFAULT_CONCURRENCY);
        assert_eq!(checked.call_timeout, None);
    }

    #[test]
    fn unknown_keys_are_refused_at_every_level() {
        assert!(grants(serde_json::json!({"network": true})).is_err());
        assert!(grants(serde_json::json!({"http": {"allow": [], "deny": []}})).is_err());
        assert!(grants(serde_json::json!({"limits": {"call_timeout": "5s"}})).is_err());
        assert!(grants(serde_json::json!({"limits": {"call-timeout": "5s"}})).is_ok());
    }

    #[test]
    fn origins_parse_with_default_ports_and_refuse_paths() {
        assert_eq!(
            Origin::parse("https://API.example.com/").unwrap(),
            Origin {
                scheme: "https".into(),
                host: "api.example.com".into(),
                port: 443
            }
        );
        assert_eq!(Origin::parse("http://127.0.0.1:8080").unwrap().port, 8080);
        assert_eq!(Origin::parse("http://[::1]:9").unwrap().host, "[::1]");
        for bad in [
            "api.example.com",
            "ftp://example.com",
            "https://example.com/v1",
            "https://user@example.com",
            "https://example.com:99999",
            "https://",
            "https://exa mple.com",
        ] {
            assert!(Origin::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn call_timeouts_are_written_in_ms_s_or_m() {
        let timeout = |text: &str| {
            grants(serde_json::json!({"limits": {"call-timeout": text}}))
                .unwrap()
                .check()
                .map(|c| c.call_timeout.unwrap())
        };
        assert_eq!(timeout("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(timeout("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(timeout("2m"), Ok(Duration::from_secs(120)));
        for bad in ["5", "5h", "0s", "05s", "1.5s", ""] {
            assert_eq!(
                timeout(bad),
                Err(format!(
                    "grants.limits.call-timeout {bad:?} is not a duration"
                ))
            );
        }
        assert_eq!(
            timeout("1441m"),
            Err(
                "grants.limits.call-timeout \"1441m\" must be above zero and at most 86400s".into()
            )
        );
    }

    #[test]
    fn limits_at_their_bounds_pass_and_one_past_fail() {
        let with = |limits: serde_json::Value| grants(serde_json::json!({ "limits": limits }));
        assert!(with(serde_json::json!({"memory": "1GiB"}))
            .unwrap()
            .check()
            .is_ok());
        assert!(with(serde_json::json!({"memory": "1073741825"}))
            .unwrap()
            .check()
            .is_err());
        assert!(with(serde_json::json!({"memory": "64KiB"}))
            .unwrap()
            .check()
            .is_ok());
        assert!(with(serde_json::json!({"memory": "65535B"}))
            .unwrap()
            .check()
            .is_err());
        assert!(with(serde_json::json!({"concurrency": MAX_CONCURRENCY}))
            .unwrap()
            .check()
            .is_ok());
        assert!(
            with(serde_json::json!({"concurrency": MAX_CONCURRENCY + 1}))
                .unwrap()
                .check()
                .is_err()
        );
        assert!(with(serde_json::json!({"concurrency": 0}))
            .unwrap()
            .check()
            .is_err());
        assert!(with(serde_json::json!({"call-timeout": "1440m"}))
            .unwrap()
            .check()
            .is_ok());
        assert!(with(serde_json::json!({"call-timeout": "1441m"}))
            .unwrap()
            .check()
            .is_err());
        assert!(with(serde_json::json!({"call-timeout": "86400000ms"}))
            .unwrap()
            .check()
            .is_ok());
        assert!(with(serde_json::json!({"call-timeout": "86400001ms"}))
            .unwrap()
            .check()
            .is_err());
        assert!(with(serde_json::json!({"call-timeout": "0s"}))
            .unwrap()
            .check()
            .is_err());
    }

    #[test]
    fn the_origin_list_is_bounded() {
        let at: Vec<String> = (0..MAX_HTTP_ORIGINS)
            .map(|i| format!("http://h{i}.example"))
            .collect();
        let mut past = at.clone();
        past.push("http://one-more.example".into());
        for (list, ok) in [(at, true), (past, false)] {
            let g = Grants {
                http: Some(HttpGrant { allow: list }),
                ..Grants::default()
            };
            assert_eq!(g.check().is_ok(), ok);
        }
    }

    #[test]
    fn a_relative_directory_is_refused() {
        let g = grants(serde_json::json!({"directory": "state/kv"})).unwrap();
        assert!(g.check().unwrap_err().contains("absolute"));
        let g = grants(serde_json::json!({"directory": "/var/lib/jig/providers/kv"})).unwrap();
        assert!(g.check().is_ok());
    }

    #[test]
    fn any_changed_grant_changes_the_digest() {
        let a = grants(serde_json::json!({"http": {"allow": ["http://127.0.0.1:1"]}})).unwrap();
        let b = grants(serde_json::json!({"http": {"allow": ["http://127.0.0.1:2"]}})).unwrap();
        let c = grants(serde_json::json!({"http": {"allow": ["http://127.0.0.1:1"]}, "limits": {"concurrency": 2}})).unwrap();
        let digests = [a.digest(), b.digest(), c.digest()];
        assert!(digests.iter().all(Option::is_some));
        assert_ne!(digests[0], digests[1]);
        assert_ne!(digests[0], digests[2]);
        assert_eq!(a.digest(), a.clone().digest());
    }
}
