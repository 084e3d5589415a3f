//! `jig config check FILE`: is this host configuration one jig would accept?
//!
//! It parses the file with the loader every command uses, then applies the
//! checks that need no execution: no file is opened but the configuration
//! itself (no key file, no secret file, no provider is loaded, no runtime is
//! started). The NixOS module runs it on the rendered host.toml at build
//! time, so a bad configuration fails the build instead of the service;
//! paths are therefore checked for form only, since secrets and credentials
//! exist only on the running machine.
//!
//! The Agent table is resolved without the caller's environment: the result
//! is a property of the file, the same on the build machine as on the host.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use jig_provider_api::ProviderKind;
use jig_provider_builtin::agent::endpoint;

use super::{CliError, Code};
use jig_engine::config::HostConfig;

#[derive(Subcommand, Debug)]
pub(super) enum ConfigAction {
    /// Validate a host configuration without running anything.
    Check {
        /// The host configuration file (TOML).
        file: PathBuf,
    },
}

pub(super) fn config(base: &Path, action: ConfigAction) -> Result<u8, CliError> {
    match action {
        ConfigAction::Check { file } => check(&base.join(file)),
    }
}

fn check(path: &Path) -> Result<u8, CliError> {
    let config =
        HostConfig::read(path).map_err(|e| CliError::new(Code::ConfigInvalid, e.to_string()))?;
    let findings = findings(&config);
    if !findings.is_empty() {
        return Err(CliError::new(
            Code::ConfigInvalid,
            format!(
                "host configuration {} is invalid: {}",
                path.display(),
                findings.join("; ")
            ),
        ));
    }
    outln!("configuration is valid");
    Ok(0)
}

/// Every problem of a parsed configuration, in table order.
fn findings(config: &HostConfig) -> Vec<String> {
    let mut out = Vec::new();
    let mut absolute = |what: String, path: Option<&PathBuf>| {
        if let Some(path) = path.filter(|p| !p.is_absolute()) {
            out.push(format!("{what} must be an absolute path, not {path:?}"));
        }
    };
    let runtimes = &config.runtimes;
    for (name, path) in [
        ("python", &runtimes.python),
        ("bun", &runtimes.bun),
        ("deno", &runtimes.deno),
        ("node", &runtimes.node),
    ] {
        absolute(format!("[runtimes] {name}"), path.as_ref());
    }
    absolute(
        "[containment] bwrap".into(),
        config.containment.bwrap.as_ref(),
    );
    absolute(
        "[containment] cgroup-parent".into(),
        config.containment.cgroup_parent.as_ref(),
    );
    // Relative secret paths are the loader's feature (resolved against the
    // configuration's directory), so only the names are checked here.
    if config.secrets.contains_key("") {
        out.push("[secrets] has an empty secret name".into());
    }

    let agent = &config.agent;
    let table_set = agent.api.is_some()
        || agent.base_url.is_some()
        || agent.model.is_some()
        || agent.api_key_file.is_some();
    if table_set {
        if let Err(e) = endpoint::resolve(&|_| None, &agent.table()) {
            out.push(e.to_string());
        }
    }

    let dependencies = &config.dependencies;
    for (key, url) in [
        ("npm-registry", &dependencies.npm_registry),
        ("python-index", &dependencies.python_index),
    ] {
        let Some(url) = url else { continue };
        let rest = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"));
        if rest.is_none_or(|r| r.is_empty() || r.starts_with('/')) {
            out.push(format!("[dependencies] {key} must be an http(s) URL"));
        }
    }

    for provider in &config.providers {
        out.extend(provider_findings(provider));
    }
    out
}

fn provider_findings(decl: &jig_provider_api::ProviderDecl) -> Vec<String> {
    let mut out = Vec::new();
    let at = format!("[[providers]] {:?}", decl.name);
    if decl.name.is_empty() {
        out.push("[[providers]] name is empty".into());
    }
    match (decl.kind, &decl.path) {
        (ProviderKind::Builtin, Some(_)) => {
            out.push(format!("{at}: a builtin provider has no path"));
        }
        (ProviderKind::Wasm | ProviderKind::Native, None) => {
            out.push(format!("{at}: path is required"));
        }
        _ => {}
    }
    match &decl.settings {
        serde_json::Value::Null => {}
        serde_json::Value::Object(_) => {
            if let Err(e) = flow::json::check(&decl.settings) {
                out.push(format!("{at}: settings are not JSON/1: {e}"));
            }
        }
        _ => out.push(format!("{at}: settings must be a table")),
    }
    if !decl.grants.is_empty() {
        if decl.kind != ProviderKind::Wasm {
            out.push(format!("{at}: grants apply to wasm providers only"));
        }
        if let Err(e) = decl.grants.check() {
            out.push(format!("{at}: {e}"));
        }
    }
    for name in decl.secrets.keys().filter(|n| n.is_empty()) {
        out.push(format!("{at}: secret name {name:?} is empty"));
    }
    out
}
