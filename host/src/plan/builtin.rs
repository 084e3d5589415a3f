//! Planning a slot served by one of the host's builtin capabilities (Agent
//! Run, Project Command, Run Checkpoint): what review checks for it and the
//! pin the Plan records. The pin is the reviewed execution identity of the
//! builtin: whatever in it changes makes an admitted target refuse
//! `REVIEW_REQUIRED` until the next review.

use flow::json::Value;
use flow::package::Package;
use serde_json::json;

use super::Diagnostic;
use crate::config::HostConfig;

/// The Plan pin of `slot` of the package at `path`, served by builtin
/// `name`, or why this host cannot serve it.
pub fn plan(
    name: &'static str,
    _path: &str,
    _slot: &str,
    _package: &Package,
    _config: &HostConfig,
) -> Result<Value, Diagnostic> {
    Ok(json!({ "kind": "builtin", "name": name }))
}
