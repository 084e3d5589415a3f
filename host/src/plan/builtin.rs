//! Planning a slot served by one of the host's builtin capabilities (Agent
//! Run, Project Command, Run Checkpoint): what review checks for it and the
//! pin the Plan records. The pin is the reviewed execution identity of the
//! builtin: whatever in it changes makes an admitted target refuse
//! `REVIEW_REQUIRED` until the next review.

use flow::json::Value;
use flow::package::Package;
use jig_provider_builtin::agent::endpoint::{
    Endpoint, EndpointError, Identity, KeySource, Table, MAX_KEY_BYTES,
};
use serde_json::json;

use super::Diagnostic;
use crate::config::HostConfig;

/// The fixed guidance of an Agent-using target this host cannot serve. It
/// names variables and rules only: never a key, a key file's path or a
/// provider's answer.
const AGENT_GUIDANCE: &str = "configure an Agent endpoint for this host (OPENAI_API_KEY and OPENAI_MODEL, optionally OPENAI_BASE_URL and OPENAI_API; or OPENROUTER_API_KEY and OPENROUTER_MODEL; or the [agent] table of host.toml), check it with jig doctor, then review again";

/// The Plan pin of `slot` of the package at `path`, served by builtin
/// `name`, or why this host cannot serve it.
pub fn plan(
    name: &'static str,
    path: &str,
    slot: &str,
    _package: &Package,
    config: &HostConfig,
) -> Result<Value, Diagnostic> {
    if name != "agent-run" {
        return Ok(json!({ "kind": "builtin", "name": name }));
    }
    let unavailable = |why: String| Diagnostic {
        code: "PROJECT_AGENT_UNAVAILABLE".into(),
        path: Some(format!("{path}/FLOW.md")),
        pointer: Some(format!("/uses/{slot}")),
        message: format!("this host has no usable Agent endpoint ({why}); {AGENT_GUIDANCE}"),
    };
    let endpoint = config
        .agent
        .endpoint()
        .map_err(|e| unavailable(e.to_string()))?;
    check_key_file(&endpoint).map_err(unavailable)?;
    Ok(agent_pin(&endpoint.identity()))
}

/// The Agent Run pin: the non-secret identity (client, API, endpoint,
/// model), never the key or where it is kept.
fn agent_pin(identity: &Identity) -> Value {
    json!({
        "kind": "builtin",
        "name": "agent-run",
        "client": identity.client,
        "api": identity.api,
        "endpoint": identity.endpoint,
        "model": identity.model,
    })
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
            .map(|e| agent_pin(&e.identity()))
            .map_err(|e: EndpointError| format!("the Agent endpoint is no longer usable: {e}"))?;
        if &now != pin {
            return Err(
                "the Agent client, API, endpoint or model changed since review".to_string(),
            );
        }
    }
    Ok(())
}
