//! Capability providers answering `capability/call` from a Flow: one WASM
//! component provider and one native library provider serving the same
//! example contract.

use std::path::Path;

use crate::support::*;

pub(crate) const FLOW_MD: &str = "---\nname: lookup\ndescription: Look a key up in the store capability.\nuses:\n  store:\n    contract: ./contracts/kv.capability.json\n---\n";

pub(crate) const FLOW_PY: &str = r#"from jiggy.flow import CapabilityError, handle


async def run(ctx):
    try:
        value = await ctx.call_capability(
            operation_id="get:1", slot="store", method="get", input={"key": ctx.input}
        )
        return {"outcome": "done", "output": {"value": value}}
    except CapabilityError as error:
        return {"outcome": "done", "output": {"error": error.error_name, "data": error.data}}


handle(run)
"#;

fn lookup_project(kind: &str, provider: &Path) -> tempfile::TempDir {
    let contract = std::fs::read_to_string(
        workspace().join("providers/examples/contracts/kv.capability.json"),
    )
    .unwrap();
    let dir = project(&[
        ("flows/lookup/FLOW.md", FLOW_MD),
        ("flows/lookup/flow.py", FLOW_PY),
        ("flows/lookup/contracts/kv.capability.json", &contract),
    ]);
    let config = format!(
        "[[providers]]\nname = \"kv\"\nkind = \"{kind}\"\npath = \"{}\"\nsettings = {{ entries = {{ Ada = \"Lovelace\" }} }}\n",
        provider.display()
    );
    write_files(dir.path(), &[(".test-config-home/jig/host.toml", &config)]);
    dir
}

fn check_lookup(dir: &Path) {
    let review = review(dir);
    assert!(review.stdout.contains("served by \"kv\""), "{review:?}");
    let found = run_jig(dir, &["run", "flow:flows/lookup", "--input", "\"Ada\""]);
    assert_eq!(found.status, 0, "{found:?}");
    assert_eq!(
        found.json()["output"],
        serde_json::json!({"value": "Lovelace"})
    );
    let missing = run_jig(dir, &["run", "flow:flows/lookup", "--input", "\"Bob\""]);
    assert_eq!(missing.status, 0, "{missing:?}");
    assert_eq!(
        missing.json()["output"],
        serde_json::json!({"error": "not-found", "data": {"key": "Bob"}})
    );
}

#[test]
fn a_wasm_component_provider_answers_a_flow() {
    let dir = lookup_project("wasm", &kv_provider_component());
    check_lookup(dir.path());
}

#[test]
fn a_native_provider_answers_a_flow() {
    let dir = lookup_project("native", &kv_provider_library());
    check_lookup(dir.path());
}

#[test]
fn without_a_provider_the_plan_is_unavailable() {
    let dir = lookup_project("native", &kv_provider_library());
    std::fs::remove_file(dir.path().join(".test-config-home/jig/host.toml")).unwrap();
    let run = run_jig(dir.path(), &["review", "--yes"]);
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stderr.starts_with("UNAVAILABLE: "), "{run:?}");
    assert!(
        run.stderr.contains(
            "PROJECT_CAPABILITY_UNAVAILABLE at \"flows/lookup/FLOW.md\" pointer \"/uses/store\""
        ),
        "{run:?}"
    );
}

#[test]
fn a_provider_file_changed_after_review_is_never_loaded() {
    let copies = tempfile::tempdir().unwrap();
    let library = copies.path().join("libkv.so");
    std::fs::copy(kv_provider_library(), &library).unwrap();
    let dir = lookup_project("native", &library);
    review(dir.path());
    // The operator's provider file changes after approval (still a valid
    // library: appended bytes do not stop it from loading).
    let mut bytes = std::fs::read(&library).unwrap();
    bytes.extend_from_slice(b"\0changed");
    std::fs::write(&library, bytes).unwrap();
    let run = run_jig(
        dir.path(),
        &["run", "flow:flows/lookup", "--input", "\"Ada\""],
    );
    assert_eq!(run.status, 1, "{run:?}");
    let terminal = run.json();
    assert_eq!(terminal["status"], "failed", "{run:?}");
    assert_eq!(terminal["code"], "UNAVAILABLE", "{run:?}");
    assert!(
        terminal["message"]
            .as_str()
            .unwrap()
            .contains("changed since review"),
        "{run:?}"
    );
}
