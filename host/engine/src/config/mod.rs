//! The host configuration: which runtimes, containment tools and capability
//! providers this machine offers. It is operator policy, never project input.
//!
//! Looked up in this order: `--config PATH`, `$JIG_CONFIG`,
//! `$XDG_CONFIG_HOME/jig/host.toml` (or `~/.config/jig/host.toml`). A missing
//! default file means "defaults"; a missing explicit file is an error.

use std::path::{Path, PathBuf};

use jig_provider_api::ProviderDecl;
use serde::Deserialize;

pub mod retention;

use retention::{Policy, Retention};

/// Directories searched for a runtime the configuration does not name. Ambient
/// `PATH` is never consulted, so a project cannot steer runtime selection.
pub const RUNTIME_DIRS: [&str; 4] = [
    "/usr/bin",
    "/bin",
    "/run/current-system/sw/bin",
    "/usr/local/bin",
];

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read host configuration {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("host configuration {path} is invalid: {message}")]
    Invalid { path: PathBuf, message: String },
}

impl ConfigError {
    pub fn code(&self) -> &'static str {
        "JIG_CONFIG_INVALID"
    }
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Runtimes {
    pub python: Option<PathBuf>,
    pub bun: Option<PathBuf>,
    pub deno: Option<PathBuf>,
    pub node: Option<PathBuf>,
}

/// `[containment]`: the envelope's own configuration, owned by the sandbox.
pub use jig_sandbox::{Containment, ContainmentMode};

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Agent {
    pub api: Option<String>,
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub api_key_file: Option<PathBuf>,
}

/// `[dependencies]`: where review's dependency preparation fetches from.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Dependencies {
    /// The one npm registry Bun is given (default: the public npm registry).
    /// Lock entries naming any other registry are rejected.
    pub npm_registry: Option<String>,
    /// The one PEP 503 simple index pip is given for Python preparation
    /// (default: PyPI's). A `pylock.toml` wheel on any other host is refused.
    pub python_index: Option<String>,
}

/// `[serve]`: all optional; `jig serve`'s flags override them.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Serve {
    /// The Unix socket (default `$XDG_RUNTIME_DIR/jig/jig.sock`, else
    /// `/run/jig/jig.sock`).
    pub socket: Option<PathBuf>,
    /// A TCP address to listen on as well; requires `token-file`.
    pub tcp: Option<String>,
    /// The file holding the bearer token TCP clients must present.
    pub token_file: Option<PathBuf>,
    /// Runs executing at once (default: the number of CPUs).
    pub max_active_runs: Option<usize>,
    /// Runs accepted and waiting for a slot (default 64).
    pub max_queued_runs: Option<usize>,
    /// For how many recently run targets the next Run's envelope is made
    /// ahead (default 8; 0 makes none).
    pub envelopes_ahead: Option<usize>,
    /// How long SIGTERM lets Runs finish before cancelling them ("30s").
    pub shutdown_grace: Option<String>,
    /// Serve the web console on the TCP listener too (requires `tcp`).
    pub console: Option<bool>,
    /// TCP connections served at once (default 256).
    pub max_connections: Option<usize>,
    /// How long a request's head may take, and an idle connection is kept
    /// ("10s").
    pub header_timeout: Option<String>,
    /// How long a request's body may take from its head ("60s").
    pub body_timeout: Option<String>,
    /// The TCP listener's certificate chain (PEM); with `tls-key`, TCP is
    /// served over TLS.
    pub tls_cert: Option<PathBuf>,
    /// The private key of `tls-cert`'s leaf (PEM).
    pub tls_key: Option<PathBuf>,
    /// Serve plain HTTP on a TCP address that is not loopback.
    pub insecure_plain_http: Option<bool>,
}

/// `[database]`: the PostgreSQL that `jig serve` enqueues Runs in and
/// `jig worker`s claim them from (docs/src/serving.md). The URL carries no password;
/// the password is read from `password-file`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Database {
    pub url: Option<String>,
    pub password_file: Option<PathBuf>,
    /// The CA certificates (PEM) the database's TLS certificate is checked
    /// against; absent, the system's roots.
    pub ca_file: Option<PathBuf>,
}

/// One `[[projects]]` entry: a LocalName and the project's absolute path.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ServedProject {
    pub name: String,
    pub path: PathBuf,
}

impl Agent {
    /// The table as the Agent Run policy reads it.
    pub fn table(&self) -> jig_provider_builtin::agent::endpoint::Table {
        jig_provider_builtin::agent::endpoint::Table {
            api: self.api.clone(),
            base_url: self.base_url.clone(),
            model: self.model.clone(),
            api_key_file: self.api_key_file.clone(),
        }
    }

    /// The Agent endpoint this host is configured for: this table and the
    /// process environment, by the rules of
    /// [`jig_provider_builtin::agent::endpoint`] (a non-empty table wins).
    pub fn endpoint(
        &self,
    ) -> Result<
        jig_provider_builtin::agent::endpoint::Endpoint,
        jig_provider_builtin::agent::values::EndpointError,
    > {
        agent_endpoint(&self.table())
    }
}

/// The Agent endpoint from `table` and the process environment.
pub fn agent_endpoint(
    table: &jig_provider_builtin::agent::endpoint::Table,
) -> Result<
    jig_provider_builtin::agent::endpoint::Endpoint,
    jig_provider_builtin::agent::values::EndpointError,
> {
    // A value that is not UTF-8 is present and fails validation.
    let env = |name: &str| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned());
    jig_provider_builtin::agent::endpoint::resolve(&env, table)
}

/// `[records]`: how the Runs' records are kept.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Records {
    /// `settle-reserve`: the space set aside on disk when a Run is
    /// recorded, so that a filesystem filled while it runs cannot keep its
    /// terminal from being written: a settled record up to this size is
    /// written whatever fills the disk. Absent:
    /// [`crate::state::DEFAULT_SETTLE_RESERVE_BYTES`].
    #[serde(default, deserialize_with = "settle_reserve")]
    pub settle_reserve: Option<u64>,
}

/// The range `[records] settle-reserve` takes: from a terminal with no
/// output to well past the largest a Run can have (a JSON/1 document is at
/// most 16 MiB).
pub(crate) const SETTLE_RESERVE_RANGE: std::ops::RangeInclusive<u64> = (64 << 10)..=(64 << 20);

impl Records {
    /// The space set aside for each Run recorded.
    pub fn settle_reserve_bytes(&self) -> u64 {
        self.settle_reserve
            .unwrap_or(crate::state::DEFAULT_SETTLE_RESERVE_BYTES)
    }
}

/// `settle-reserve` as written (`"256KiB"`), within [`SETTLE_RESERVE_RANGE`].
fn settle_reserve<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let text = <String as Deserialize>::deserialize(d)?;
    let bytes = flow::size::parse(&text).ok_or_else(|| {
        serde::de::Error::custom(format!(
            "settle-reserve {text:?} is not a size (a byte count with B, KiB, MiB or GiB)"
        ))
    })?;
    if !SETTLE_RESERVE_RANGE.contains(&bytes) {
        return Err(serde::de::Error::custom(format!(
            "settle-reserve {text:?} is outside 64KiB..=64MiB"
        )));
    }
    Ok(Some(bytes))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    #[serde(default)]
    pub runtimes: Runtimes,
    #[serde(default)]
    pub containment: Containment,
    #[serde(default)]
    pub agent: Agent,
    #[serde(default)]
    pub providers: Vec<ProviderDecl>,
    /// Effect secrets of credentialed Project Commands (seed 003): secret
    /// name → the file holding its value. Projects name secrets; only the
    /// operator maps them.
    #[serde(default)]
    pub secrets: std::collections::BTreeMap<String, PathBuf>,
    #[serde(default)]
    pub dependencies: Dependencies,
    /// `[serve]`: how `jig serve` listens and bounds its Runs.
    #[serde(default)]
    pub serve: Serve,
    /// `[database]`: Runs queued in PostgreSQL.
    #[serde(default)]
    pub database: Database,
    /// `[[projects]]`: the projects `jig serve` serves without `-C`.
    #[serde(default)]
    pub projects: Vec<ServedProject>,
    /// `[retention]`: absent, nothing is removed.
    #[serde(default)]
    pub retention: Option<Retention>,
    /// `[records]`: how a Run's record is kept.
    #[serde(default)]
    pub records: Records,
    /// Where the configuration came from, for diagnostics and for resolving
    /// relative provider paths.
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

impl HostConfig {
    /// Load the configuration following the documented lookup order.
    pub fn load(explicit: Option<&Path>) -> Result<HostConfig, ConfigError> {
        if let Some(path) = explicit {
            return Self::read(path);
        }
        if let Some(path) = std::env::var_os("JIG_CONFIG").filter(|p| !p.is_empty()) {
            return Self::read(Path::new(&path));
        }
        let default = default_path();
        match default {
            Some(path) if path.exists() => Self::read(&path),
            _ => Ok(HostConfig::default()),
        }
    }

    pub fn read(path: &Path) -> Result<HostConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut config = Self::parse(&text).map_err(|message| ConfigError::Invalid {
            path: path.to_path_buf(),
            message,
        })?;
        let base = path.parent().unwrap_or(Path::new("/"));
        for provider in &mut config.providers {
            if let Some(p) = &provider.path {
                if p.is_relative() {
                    provider.path = Some(base.join(p));
                }
            }
            for secret in provider.secrets.values_mut() {
                if secret.is_relative() {
                    *secret = base.join(&*secret);
                }
            }
        }
        for secret in config.secrets.values_mut() {
            if secret.is_relative() {
                *secret = base.join(&*secret);
            }
        }
        config.source = Some(path.to_path_buf());
        Ok(config)
    }

    pub fn parse(text: &str) -> Result<HostConfig, String> {
        let config: HostConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut names = std::collections::BTreeSet::new();
        for provider in &config.providers {
            if !names.insert(provider.name.clone()) {
                return Err(format!("provider name {:?} appears twice", provider.name));
            }
        }
        let mut projects = std::collections::BTreeSet::new();
        for project in &config.projects {
            if !flow::wire::is_local_name(&project.name) {
                return Err(format!(
                    "project name {:?} is not a LocalName",
                    project.name
                ));
            }
            if !project.path.is_absolute() {
                return Err(format!(
                    "project {} has a relative path; [[projects]] paths are absolute",
                    project.name
                ));
            }
            if !projects.insert(project.name.clone()) {
                return Err(format!("project name {:?} appears twice", project.name));
            }
        }
        if config.serve.tcp.is_some() && config.serve.token_file.is_none() {
            return Err("[serve] tcp requires token-file".into());
        }
        if config.serve.console == Some(true) && config.serve.tcp.is_none() {
            return Err("[serve] console requires tcp".into());
        }
        if config.serve.tls_cert.is_some() != config.serve.tls_key.is_some() {
            return Err("[serve] tls-cert and tls-key go together".into());
        }
        if config.serve.tls_cert.is_some() && config.serve.tcp.is_none() {
            return Err(
                "[serve] tls-cert and tls-key serve the TCP listener: they require tcp".into(),
            );
        }
        config.retention_policy()?;
        Ok(config)
    }

    /// The retention the operator declared, `None` without a `[retention]`
    /// table; `Err` says what is wrong with the table.
    pub fn retention_policy(&self) -> Result<Option<Policy>, String> {
        self.retention.as_ref().map(Policy::from_table).transpose()
    }

    /// The interpreter for a runtime: the configured absolute path, else the
    /// first executable found in [`RUNTIME_DIRS`].
    pub fn runtime(&self, name: &str) -> Option<PathBuf> {
        let configured = match name {
            "python3" => &self.runtimes.python,
            "bun" => &self.runtimes.bun,
            "deno" => &self.runtimes.deno,
            "node" => &self.runtimes.node,
            _ => &None,
        };
        if let Some(path) = configured {
            return jig_verify::is_executable(path).then(|| path.clone());
        }
        RUNTIME_DIRS
            .iter()
            .map(|dir| Path::new(dir).join(name))
            .find(|candidate| jig_verify::is_executable(candidate))
    }
}

fn default_path() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_CONFIG_HOME").filter(|p| !p.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".config"),
    };
    Some(base.join("jig").join("host.toml"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_shape() {
        let config = HostConfig::parse(
            r#"
[runtimes]
python = "/usr/bin/python3"

[containment]
bwrap = "/usr/bin/bwrap"

[agent]
api = "responses"
base-url = "https://api.example.org/v1"
model = "some-model"
api-key-file = "/run/credentials/jig/agent-key"

[[providers]]
name = "kv"
kind = "wasm"
path = "/nix/store/x-kv/kv.wasm"
settings = { namespace = "demo" }
secrets = { token = "/run/credentials/jig/kv-token" }
"#,
        )
        .unwrap();
        assert_eq!(
            config.runtimes.python.as_deref(),
            Some(Path::new("/usr/bin/python3"))
        );
        assert_eq!(config.providers.len(), 1);
        assert_eq!(config.providers[0].name, "kv");
        assert_eq!(config.agent.model.as_deref(), Some("some-model"));
    }

    #[test]
    fn rejects_unknown_tables_and_duplicate_providers() {
        assert!(HostConfig::parse("[runtime]\npython='/x'\n").is_err());
        let twice = "[[providers]]\nname='a'\nkind='native'\npath='/a.so'\n[[providers]]\nname='a'\nkind='native'\npath='/b.so'\n";
        assert!(HostConfig::parse(twice).unwrap_err().contains("twice"));
    }

    #[test]
    fn serve_and_projects_tables() {
        let config = HostConfig::parse(
            r#"
[serve]
socket = "/run/jig/jig.sock"
max-active-runs = 4
max-queued-runs = 10
shutdown-grace = "5s"

[[projects]]
name = "site"
path = "/var/lib/jig/projects/site"
"#,
        )
        .unwrap();
        assert_eq!(config.serve.max_active_runs, Some(4));
        assert_eq!(config.projects[0].name, "site");
        assert!(HostConfig::parse("[serve]\nsockets='/x'\n").is_err());
        assert!(HostConfig::parse("[serve]\ntcp='127.0.0.1:1'\n").is_err());
        assert!(HostConfig::parse("[serve]\nconsole=true\n").is_err());
        assert!(
            HostConfig::parse("[serve]\ntcp='127.0.0.1:1'\ntoken-file='/t'\nconsole=true\n")
                .is_ok_and(|c| c.serve.console == Some(true))
        );
        let tcp = "[serve]\ntcp='0.0.0.0:1'\ntoken-file='/t'\n";
        let tls =
            HostConfig::parse(&format!("{tcp}tls-cert='/c.pem'\ntls-key='/k.pem'\n")).unwrap();
        assert_eq!(tls.serve.tls_key.as_deref(), Some(Path::new("/k.pem")));
        let half = HostConfig::parse(&format!("{tcp}tls-cert='/c.pem'\n")).unwrap_err();
        assert!(half.contains("tls-cert and tls-key go together"), "{half}");
        assert!(HostConfig::parse("[serve]\ntls-cert='/c'\ntls-key='/k'\n").is_err());
        let plain = HostConfig::parse(&format!("{tcp}insecure-plain-http=true\n")).unwrap();
        assert_eq!(plain.serve.insecure_plain_http, Some(true));
        assert!(HostConfig::parse("[[projects]]\nname='a'\npath='rel'\n").is_err());
        assert!(HostConfig::parse("[[projects]]\nname='../a'\npath='/a'\n").is_err());
        let twice = "[[projects]]\nname='a'\npath='/a'\n[[projects]]\nname='a'\npath='/b'\n";
        assert!(HostConfig::parse(twice).unwrap_err().contains("twice"));
    }

    #[test]
    fn the_retention_table() {
        assert!(HostConfig::parse("")
            .unwrap()
            .retention_policy()
            .unwrap()
            .is_none());
        let config =
            HostConfig::parse("[retention]\nmax-age = \"30d\"\nmax-runs = 1000\n").unwrap();
        let policy = config.retention_policy().unwrap().unwrap();
        assert_eq!(policy.max_runs, Some(1000));
        let refused = HostConfig::parse("[retention]\nmax-age = \"30 days\"\n").unwrap_err();
        assert!(refused.contains("[retention] max-age"), "{refused}");
        assert!(HostConfig::parse("[retention]\nkeep = 1\n").is_err());
    }

    /// `[records] settle-reserve` takes [`SETTLE_RESERVE_RANGE`]: each
    /// end, and one byte past it is refused with the range.
    #[test]
    fn the_settle_reserve_is_bounded_at_each_end() {
        let reserve = |text: &str| {
            HostConfig::parse(&format!("[records]\nsettle-reserve = {text:?}\n"))
                .map(|c| c.records.settle_reserve_bytes())
        };
        assert_eq!(reserve("64KiB"), Ok(64 << 10));
        assert_eq!(reserve("64MiB"), Ok(64 << 20));
        assert_eq!(reserve("17MiB"), Ok(17 << 20));
        for past in ["65535B", "67108865B"] {
            let refused = reserve(past).unwrap_err();
            assert!(refused.contains("outside 64KiB..=64MiB"), "{refused}");
        }
        assert!(reserve("lots").unwrap_err().contains("is not a size"));
        let absent = HostConfig::parse("").unwrap();
        assert_eq!(
            absent.records.settle_reserve_bytes(),
            crate::state::DEFAULT_SETTLE_RESERVE_BYTES
        );
    }
}
