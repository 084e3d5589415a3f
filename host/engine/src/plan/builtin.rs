//! Planning a slot served by one of the host's builtin capabilities (Agent
//! Run, Project Command, Run Checkpoint): what review checks for it and the
//! pin the Plan records. The pin is the reviewed execution identity of the
//! builtin: whatever in it changes makes an admitted target refuse
//! `REVIEW_REQUIRED` until the next review.

use flow::json::Value;
use flow::package::{Access, Package};
use jig_provider_builtin::agent::acp;
use jig_provider_builtin::agent::endpoint::{Endpoint, Identity, Table};
use jig_provider_builtin::agent::values::{EndpointError, KeySource, MAX_KEY_BYTES};
use serde_json::json;

use super::{Diagnostic, Recipe, RecipeKind};
use crate::config::HostConfig;

/// The fixed guidance of an Agent-using target this host cannot serve. It
/// names variables and rules only: never a key, a key file's path or a
/// provider's answer.
/// The diagnostic of an Agent-using target this host cannot serve.
pub(crate) const AGENT_UNAVAILABLE: &str = "PROJECT_AGENT_UNAVAILABLE";

pub(crate) const AGENT_GUIDANCE: &str = "this host has no usable Agent endpoint; configure an Agent endpoint for this host (OPENAI_API_KEY and OPENAI_MODEL, optionally OPENAI_BASE_URL and OPENAI_API; or OPENROUTER_API_KEY and OPENROUTER_MODEL; or the [agent] table of host.toml; or a native ACP client with JIG_AGENT_CLIENT=codex|claude|pi and its credentials), check it with jig doctor, then review again";

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
        "agent-run" => agent_run(path, config),
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
    // Under this command's installation verification policy (seed 002 §9).
    let digest = jig_verify::current()
        .digest(&bun)
        .map_err(|e| unavailable(format!("cannot read runtime {}: {e}", bun.display())))?;
    let runtime = Recipe {
        kind: RecipeKind::Bun,
        entrypoint: String::new(),
        runtime: Some(bun),
        runtime_digest: Some(digest),
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

/// Agent Run: the host's Agent endpoint must be usable; its non-secret
/// identity is the pin.
fn agent_run(path: &str, config: &HostConfig) -> Result<Value, Diagnostic> {
    let diagnostic = |message: String| Diagnostic {
        code: AGENT_UNAVAILABLE.into(),
        // The reference names the Flow's FLOW.md, without a pointer.
        path: Some(format!("{path}/FLOW.md")),
        pointer: None,
        message,
    };
    let unavailable = |why: String| diagnostic(format!("{why}; {AGENT_GUIDANCE}"));
    let endpoint = config
        .agent
        .endpoint()
        .map_err(|e| unavailable(e.to_string()))?;
    check_key_file(&endpoint).map_err(unavailable)?;
    if let Some(native) = &endpoint.native {
        // The ACP session runs in jig's separately built worker program.
        jig_verify::installed(acp::WORKER_PROGRAM).map_err(|why| {
            diagnostic(format!(
                "the {} ACP client needs jig's ACP Agent worker, and {why}; check it with jig doctor, then review again",
                native.client.as_str()
            ))
        })?;
    }
    agent_pin(&endpoint).map_err(unavailable)
}

/// The Agent Run pin: the non-secret identity (client, API, endpoint,
/// model), never the key or where it is kept. A native ACP client's
/// endpoint is its executable's path, and the digests of that executable
/// and of jig's ACP Agent worker (under this command's installation
/// verification policy) are pinned too.
fn agent_pin(endpoint: &Endpoint) -> Result<Value, String> {
    let identity: Identity = endpoint.identity();
    let mut pin = json!({
        "kind": "builtin",
        "name": "agent-run",
        "client": identity.client,
        "api": identity.api,
        "endpoint": identity.endpoint,
        "model": identity.model,
    });
    if let Some(native) = &endpoint.native {
        let digest = jig_verify::current().digest(&native.program).map_err(|e| {
            format!(
                "cannot read the {} ACP executable: {e}",
                native.client.as_str()
            )
        })?;
        pin["digest"] = json!(digest);
        let worker = jig_verify::installed(acp::WORKER_PROGRAM).map_err(|e| e.to_string())?;
        let worker = jig_verify::current()
            .digest(&worker)
            .map_err(|e| format!("cannot read {}: {e}", acp::WORKER_PROGRAM))?;
        pin["worker"] = json!(worker);
    }
    Ok(pin)
}

/// The key file must exist as a regular file of 1 to [`MAX_KEY_BYTES`]
/// (plus a final newline) bytes. Only its metadata is read here: its
/// content is read by the Agent worker alone.
fn check_key_file(endpoint: &Endpoint) -> Result<(), String> {
    let KeySource::File(path) = &endpoint.key else {
        return Ok(());
    };
    let invalid = "[agent] api-key-file is not a readable regular file of 1 to 16384 bytes";
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() && m.len() >= 1 && m.len() <= MAX_KEY_BYTES as u64 + 2 => Ok(()),
        _ => Err(invalid.to_string()),
    }
}

/// Does this host still serve every builtin pin of `providers` (a
/// package's `execution.providers`) as reviewed? `Err` says what changed;
/// the caller refuses `REVIEW_REQUIRED` before any Flow code starts.
pub fn verify(providers: &Value, agent: &Table) -> Result<(), String> {
    for pin in providers.as_object().into_iter().flat_map(|m| m.values()) {
        if crate::providers::builtin_pin(pin) != Some("agent-run") {
            continue;
        }
        let now = crate::config::agent_endpoint(agent)
            .map_err(|e: EndpointError| format!("the Agent endpoint is no longer usable: {e}"))
            .and_then(|e| agent_pin(&e))?;
        if &now != pin {
            return Err(
                "the Agent client, API, endpoint, executable, ACP worker or model changed since review"
                    .to_string(),
            );
        }
    }
    Ok(())
}

/// The slots of `package` that use the Jig contract builtin `name` serves.
pub(crate) fn slots_using(package: &Package, name: &str) -> Vec<String> {
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
/// serves them (seed 002 §4; docs/src/runs.md, Checkpoints): Run Checkpoint is kept for a
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

    const CONTRACT: &str =
        include_str!("../../../../flow/tests/data/run-checkpoint.capability.json");

    fn package(flow_md: &str) -> Package {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("FLOW.md"), flow_md).unwrap();
        std::fs::write(dir.path().join("flow.py"), "").unwrap();
        std::fs::create_dir(dir.path().join("contracts")).unwrap();
        std::fs::write(dir.path().join("contracts/cp.json"), CONTRACT).unwrap();
        Package::stage_dir_excluding(dir.path(), &|_| false).unwrap()
    }

    /// Review (jig-project) and the builtin reading an admitted command
    /// entry bound its `tail` alike: every tail review admits is one the
    /// builtin reads, and no more than the contract's text carries.
    #[test]
    fn review_bounds_a_command_tail_as_the_builtin_does() {
        assert_eq!(
            jig_project::MAX_COMMAND_TAIL,
            jig_provider_builtin::command::MAX_TAIL
        );
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
