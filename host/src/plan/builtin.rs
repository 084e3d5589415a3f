//! Planning a slot served by one of the host's builtin capabilities (Agent
//! Run, Project Command, Run Checkpoint): what review checks for it and the
//! pin the Plan records. The pin is the reviewed execution identity of the
//! builtin: whatever in it changes makes an admitted target refuse
//! `REVIEW_REQUIRED` until the next review.

use flow::json::Value;
use flow::package::{Access, Package};
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

/// The slots of `package` that use the Jig contract builtin `name` serves.
pub fn slots_using(package: &Package, name: &str) -> Vec<String> {
    package
        .metadata()
        .uses
        .keys()
        .filter(|slot| {
            package
                .contract(slot)
                .is_some_and(|c| crate::providers::builtin_contract(&c.id) == Some(name))
        })
        .cloned()
        .collect()
}

/// The structural rules of the Jig contracts a package uses, whoever
/// serves them (seed 002 §4, HOST-FACTS §3): Run Checkpoint is kept for a
/// root Run's writable attachment, so its package declares one, and one
/// slot holds the Run's single aggregate. A violation invalidates the
/// candidate.
pub fn check(path: &str, package: &Package) -> Vec<Diagnostic> {
    let slots = slots_using(package, "run-checkpoint");
    let at = |slot: &str, message: &str| Diagnostic {
        code: "METADATA_INVALID".into(),
        path: Some(format!("{path}/FLOW.md")),
        pointer: Some(format!("/uses/{slot}")),
        message: message.into(),
    };
    let mut found = Vec::new();
    let Some(first) = slots.first() else {
        return found;
    };
    if !package
        .metadata()
        .attachments
        .values()
        .any(|a| *a == Access::ReadWrite)
    {
        found.push(at(
            first,
            "Run Checkpoint needs a read-write attachment to deliver its files",
        ));
    }
    if let Some(second) = slots.get(1) {
        found.push(at(
            second,
            "a package holds at most one Run Checkpoint slot",
        ));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONTRACT: &str = include_str!("../../../flow/tests/data/run-checkpoint.capability.json");

    fn package(flow_md: &str) -> Package {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("FLOW.md"), flow_md).unwrap();
        std::fs::write(dir.path().join("flow.py"), "").unwrap();
        std::fs::create_dir(dir.path().join("contracts")).unwrap();
        std::fs::write(dir.path().join("contracts/cp.json"), CONTRACT).unwrap();
        Package::stage_dir_excluding(dir.path(), &|_| false).unwrap()
    }

    #[test]
    fn run_checkpoint_needs_a_writable_attachment_and_one_slot() {
        let ok = package("---\nname: p\ndescription: d\nuses:\n  progress:\n    contract: ./contracts/cp.json\nattachments:\n  out: read-write\n---\n");
        assert!(check("flows/p", &ok).is_empty());
        let bare = package("---\nname: p\ndescription: d\nuses:\n  progress:\n    contract: ./contracts/cp.json\nattachments:\n  src: read\n---\n");
        let found = check("flows/p", &bare);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].pointer.as_deref(), Some("/uses/progress"));
        let two = package("---\nname: p\ndescription: d\nuses:\n  a:\n    contract: ./contracts/cp.json\n  b:\n    contract: ./contracts/cp.json\nattachments:\n  out: read-write\n---\n");
        let found = check("flows/p", &two);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].pointer.as_deref(), Some("/uses/b"));
    }
}
