//! Operator grants of a WASM provider through the real `jig` binary: part of
//! the provider's reviewed identity, and checked by `jig config check`.

use std::path::Path;

use crate::providers::{FLOW_MD, FLOW_PY};
use crate::support::*;

fn host_toml(provider: &Path, grants: &str) -> String {
    format!(
        "[[providers]]\nname = \"kv\"\nkind = \"wasm\"\npath = \"{}\"\nsettings = {{ entries = {{ Ada = \"Lovelace\" }} }}\n{grants}",
        provider.display()
    )
}

fn lookup_project(grants: &str) -> tempfile::TempDir {
    let contract = std::fs::read_to_string(
        workspace().join("providers/examples/contracts/kv.capability.json"),
    )
    .unwrap();
    let dir = project(&[
        ("flows/lookup/FLOW.md", FLOW_MD),
        ("flows/lookup/flow.py", FLOW_PY),
        ("flows/lookup/contracts/kv.capability.json", &contract),
    ]);
    set_grants(dir.path(), grants);
    dir
}

fn set_grants(dir: &Path, grants: &str) {
    let config = host_toml(&kv_provider_component(), grants);
    write_files(dir, &[(".test-config-home/jig/host.toml", &config)]);
}

fn lookup(dir: &Path) -> Run {
    run_jig(dir, &["run", "flow:flows/lookup", "--input", "\"Ada\""])
}

#[test]
fn a_changed_grant_is_a_changed_target_and_an_unreviewed_one_stops_the_run() {
    let dir = lookup_project("grants.limits = { concurrency = 2 }\n");
    let first = review(dir.path());
    assert!(
        first
            .stdout
            .contains("\"flows/lookup#store\" served by \"kv\" (wasm) grants limits"),
        "{first:?}"
    );
    let ran = lookup(dir.path());
    assert_eq!(ran.status, 0, "{ran:?}");
    assert_eq!(
        ran.json()["output"],
        serde_json::json!({"value": "Lovelace"})
    );

    // The operator changes a grant after approval: the Run does not start.
    set_grants(dir.path(), "grants.limits = { concurrency = 3 }\n");
    let refused = lookup(dir.path());
    assert_eq!(refused.status, 1, "{refused:?}");
    let terminal = refused.json();
    assert_eq!(terminal["code"], "REVIEW_REQUIRED", "{refused:?}");
    assert_eq!(
        terminal["details"],
        serde_json::json!({"reason": "EXECUTION_ENVIRONMENT_CHANGED", "flowStarted": false})
    );

    // Review shows the target as changed; once approved, it runs again.
    let changed = review(dir.path());
    assert!(
        changed.stdout.contains("~ \"flow:flows/lookup\""),
        "{changed:?}"
    );
    assert_eq!(lookup(dir.path()).status, 0);

    // Taking every grant away is a change too.
    set_grants(dir.path(), "");
    assert_eq!(lookup(dir.path()).json()["code"], "REVIEW_REQUIRED");
    let removed = review(dir.path());
    assert!(
        removed.stdout.contains("~ \"flow:flows/lookup\""),
        "{removed:?}"
    );
    assert!(!removed.stdout.contains("grants"), "{removed:?}");
    assert_eq!(lookup(dir.path()).status, 0);
}

fn check(grants: &str) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let text = host_toml(Path::new("/srv/jig/kv.wasm"), grants);
    std::fs::write(dir.path().join("host.toml"), text).unwrap();
    run_jig(dir.path(), &["config", "check", "host.toml"])
}

#[test]
fn config_check_accepts_good_grants_and_refuses_bad_ones() {
    let good = check(concat!(
        "grants.http = { allow = [\"https://api.example.com\", \"http://127.0.0.1:8080\"] }\n",
        "grants.directory = \"/var/lib/jig/providers/kv\"\n",
        "grants.limits = { memory = \"64MiB\", call-timeout = \"5s\", concurrency = 4 }\n",
    ));
    assert_eq!(good.status, 0, "{good:?}");
    assert_eq!(good.stdout, "configuration is valid\n", "{good:?}");

    for (grants, naming) in [
        ("grants.directory = \"state/kv\"\n", "not an absolute path"),
        (
            "grants.http = { allow = [\"api.example.com\"] }\n",
            "not an http(s) origin",
        ),
        (
            "grants.http = { allow = [\"https://api.example.com/v1\"] }\n",
            "not an http(s) origin",
        ),
        ("grants.network = true\n", "network"),
        (
            "grants.limits = { call_timeout = \"5s\" }\n",
            "call_timeout",
        ),
        ("grants.limits = { memory = \"64 megs\" }\n", "not a size"),
        ("grants.limits = { concurrency = 65 }\n", "concurrency"),
    ] {
        let run = check(grants);
        assert_eq!(run.status, 1, "{grants}: {run:?}");
        assert!(
            run.stderr.starts_with("JIG_CONFIG_INVALID: "),
            "{grants}: {run:?}"
        );
        assert!(run.stderr.contains(naming), "{grants}: {run:?}");
    }
}

#[test]
fn config_check_refuses_grants_on_a_native_provider() {
    let dir = tempfile::tempdir().unwrap();
    let text = "[[providers]]\nname = \"kv\"\nkind = \"native\"\npath = \"/srv/jig/libkv.so\"\ngrants.limits = { concurrency = 2 }\n";
    std::fs::write(dir.path().join("host.toml"), text).unwrap();
    let run = run_jig(dir.path(), &["config", "check", "host.toml"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(run.stderr.starts_with("JIG_CONFIG_INVALID: "), "{run:?}");
    assert!(run.stderr.contains("wasm providers only"), "{run:?}");
}
