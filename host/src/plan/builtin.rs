//! Planning a slot served by one of the host's builtin capabilities (Agent
//! Run, Project Command, Run Checkpoint): what review checks for it and the
//! pin the Plan records. The pin is the reviewed execution identity of the
//! builtin: whatever in it changes makes an admitted target refuse
//! `REVIEW_REQUIRED` until the next review.

use flow::json::Value;
use flow::package::{Access, Package};
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
