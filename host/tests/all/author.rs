//! The author commands: package inspect/digest, contract digest, schema
//! check/validate (the author commands of docs/src/reference.md).

use crate::support::*;

fn shared_example(name: &str) -> std::path::PathBuf {
    workspace().join("flow/tests/data").join(name)
}

#[test]
fn contract_digests_match_the_published_values() {
    let dir = tempfile::tempdir().unwrap();
    for (file, digest) in [
        (
            "session-store.capability.json",
            "sha256:95717125236427f83f401e2f942bb4df46e95867ac34828d719cc9795e5b3e98",
        ),
        (
            "agent-run.capability.json",
            "sha256:b43fba88de62ef189f54004318e9639df58661bb04b3bf76ecfac70e3a5d098b",
        ),
        (
            "project-command.capability.json",
            "sha256:aed62fe17f01897545f82d7ee91f163a023721431433c8f4f6981b4367c85bcf",
        ),
        (
            "run-checkpoint.capability.json",
            "sha256:e7961d96842dc07bf2932f2979b2145301e4071093435e0e4e842a057896c201",
        ),
    ] {
        let path = shared_example(file);
        let run = run_jig(dir.path(), &["contract", "digest", path.to_str().unwrap()]);
        assert_eq!(run.status, 0, "{file}: {run:?}");
        assert_eq!(run.stdout, format!("{digest}\n"), "{file}");
    }
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, br#"{"flowCapabilityContract":1}"#).unwrap();
    let run = run_jig(dir.path(), &["contract", "digest", "broken.json"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(run.stderr.starts_with("CONTRACT_"), "{run:?}");
}

#[test]
fn package_inspect_and_digest_agree() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(
        &workspace().join("examples/triage/flows/intake"),
        &dir.path().join("intake"),
    );
    let inspect = run_jig(dir.path(), &["package", "inspect", "intake", "--json"]);
    assert_eq!(inspect.status, 0, "{inspect:?}");
    let value = inspect.json();
    assert_eq!(value["name"], "intake");
    assert_eq!(value["entrypoint"]["path"], "flow.py");
    assert_eq!(value["schemas"], serde_json::json!(["input.schema.json"]));
    assert_eq!(
        value["outcomes"]["rejected"],
        "The request was empty, so nothing was classified."
    );
    assert_eq!(value["files"], 3);
    let digest = run_jig(dir.path(), &["package", "digest", "intake"]);
    assert_eq!(digest.stdout.trim_end(), value["digest"].as_str().unwrap());

    std::fs::write(
        dir.path().join("intake/FLOW.md"),
        "---\nname: Intake\ndescription: x\n---\n",
    )
    .unwrap();
    let bad = run_jig(dir.path(), &["package", "digest", "intake"]);
    assert_eq!(bad.status, 1, "{bad:?}");
    assert!(bad.stderr.starts_with("METADATA_"), "{bad:?}");
}

#[test]
fn schema_check_and_validate_report_codes_and_work() {
    let dir = tempfile::tempdir().unwrap();
    write_files(
        dir.path(),
        &[
            ("s.json", "{\"$schema\":\"https://flow.jig.md/schemas/schema-1.json\",\"type\":\"object\",\"required\":[\"a\"]}"),
            ("ok.json", "{\"a\":1}"),
            ("bad.json", "{}"),
            ("pattern.json", "{\"$schema\":\"https://flow.jig.md/schemas/schema-1.json\",\"pattern\":\"x\"}"),
        ],
    );
    assert_eq!(
        run_jig(dir.path(), &["schema", "check", "s.json"]).stdout,
        "valid\n"
    );
    let ok = run_jig(
        dir.path(),
        &["schema", "validate", "s.json", "ok.json", "--json"],
    );
    assert_eq!(ok.status, 0, "{ok:?}");
    assert_eq!(ok.json()["valid"], true);
    assert!(ok.json()["workUnits"].as_u64().unwrap() > 0);
    let bad = run_jig(
        dir.path(),
        &["schema", "validate", "s.json", "bad.json", "--json"],
    );
    assert_eq!(bad.status, 1, "{bad:?}");
    assert_eq!(bad.json()["keyword"], "required");
    assert_eq!(bad.json()["schemaPointer"], "/required");
    let unsupported = run_jig(dir.path(), &["schema", "check", "pattern.json"]);
    assert_eq!(unsupported.status, 1, "{unsupported:?}");
    assert!(
        unsupported
            .stderr
            .starts_with("SCHEMA_KEYWORD_UNSUPPORTED: "),
        "{unsupported:?}"
    );
}

#[test]
fn schema_validate_reports_an_exhausted_work_meter_as_its_code() {
    // Each of 60,000 items costs a visit and twenty enum members: over the
    // 1,000,000-unit budget, so the meter runs out before any verdict.
    let dir = tempfile::tempdir().unwrap();
    let instance = format!("[{}]", vec!["0"; 60_000].join(","));
    write_files(
        dir.path(),
        &[
            ("s.json", "{\"$schema\":\"https://flow.jig.md/schemas/schema-1.json\",\"items\":{\"enum\":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19]}}"),
            ("big.json", &instance),
        ],
    );
    let human = run_jig(dir.path(), &["schema", "validate", "s.json", "big.json"]);
    assert_eq!(human.status, 1, "{human:?}");
    assert_eq!(human.stdout, "", "{human:?}");
    assert!(
        human
            .stderr
            .starts_with("SCHEMA_LIMIT_EXCEEDED: validation exceeds 1000000 work units"),
        "{human:?}"
    );
    let json = run_jig(
        dir.path(),
        &["schema", "validate", "s.json", "big.json", "--json"],
    );
    assert_eq!(json.status, 1, "{json:?}");
    assert_eq!(json.json()["valid"], false);
    assert_eq!(json.json()["code"], "SCHEMA_LIMIT_EXCEEDED");
}
