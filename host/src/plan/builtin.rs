//! Planning a slot served by one of the host's builtin capabilities (Agent
//! Run, Project Command, Run Checkpoint): what review checks for it and the
//! pin the Plan records. The pin is the reviewed execution identity of the
//! builtin: whatever in it changes makes an admitted target refuse
//! `REVIEW_REQUIRED` until the next review.

use flow::json::Value;
use flow::package::Package;
use serde_json::json;

use super::{Diagnostic, Recipe, RecipeKind};
use crate::config::HostConfig;

/// The Plan pin of `slot` of the package at `path`, served by builtin
/// `name`, or why this host cannot serve it.
pub fn plan(
    name: &'static str,
    path: &str,
    slot: &str,
    _package: &Package,
    config: &HostConfig,
) -> Result<Value, Diagnostic> {
    match name {
        "project-command" | "project-command-credentialed" => {
            project_command(name, path, slot, config)
        }
        _ => Ok(json!({ "kind": "builtin", "name": name })),
    }
}

/// Project Command runs the installed Bun (seed 002 §8): its path and the
/// digest of its bytes are the reviewed identity of every command this
/// slot runs, so a changed Bun means `REVIEW_REQUIRED`, exactly as for a
/// Flow's own recipe. (The command policy itself is per Binding and lives
/// in the lock.)
fn project_command(
    name: &str,
    path: &str,
    slot: &str,
    config: &HostConfig,
) -> Result<Value, Diagnostic> {
    let unavailable = |message: String| Diagnostic {
        code: "UNAVAILABLE".into(),
        path: Some(format!("{path}/FLOW.md")),
        pointer: Some(format!("/uses/{slot}")),
        message,
    };
    let bun = config.runtime("bun").ok_or_else(|| {
        unavailable(
            "Project Command runs the installed Bun, and this host has none configured or installed"
                .into(),
        )
    })?;
    let bytes = std::fs::canonicalize(&bun)
        .and_then(std::fs::read)
        .map_err(|e| unavailable(format!("cannot read runtime {}: {e}", bun.display())))?;
    let runtime = Recipe {
        kind: RecipeKind::Bun,
        entrypoint: String::new(),
        runtime: Some(bun),
        runtime_digest: Some(crate::state::sha256_digest(&bytes)),
    };
    let mut pin = json!({ "kind": "builtin", "name": name, "bun": runtime.to_value() });
    if name == "project-command-credentialed" {
        // A credentialed command reads one commit of the project's
        // repository with this git (found in the fixed runtime
        // directories, never through PATH).
        let git = config.runtime("git").ok_or_else(|| {
            unavailable("a credentialed Project Command reads the project's repository with git, and this host has none installed".into())
        })?;
        pin["git"] = json!(git.to_string_lossy());
    }
    Ok(pin)
}
