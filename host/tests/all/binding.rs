//! The example project: a Binding whose child slot runs another Flow.

use crate::support::*;

#[test]
fn triage_binding_runs_its_classifier_through_the_child_slot() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&workspace().join("examples/triage"), dir.path());
    let review = review(dir.path());
    assert!(
        review
            .stdout
            .contains("+ \"intake\" package \"flows/intake\""),
        "{review:?}"
    );
    assert!(
        review
            .stdout
            .contains("slot \"classifier\" -> \"flow:flows/code\""),
        "{review:?}"
    );

    let run = run_jig(
        dir.path(),
        &[
            "run",
            "binding:intake",
            "--input",
            "\"The app crashes when I log in\"",
        ],
    );
    assert_eq!(run.status, 0, "{run:?}");
    let output = &run.json()["output"];
    assert_eq!(output["label"], "bug");
    assert_eq!(output["route"], "maintainers");
    assert_eq!(
        output["classifier"],
        serde_json::json!({"outcome": "done", "output": {"label": "bug", "evidence": ["crashes"]}})
    );

    let rejected = run_jig(dir.path(), &["run", "binding:intake", "--input", "\"  \""]);
    assert_eq!(rejected.status, 0, "{rejected:?}");
    assert_eq!(rejected.json()["outcome"], "rejected");

    // The input schema is checked before any package code starts.
    let invalid = run_jig(dir.path(), &["run", "binding:intake", "--input", "42"]);
    assert_eq!(invalid.status, 1, "{invalid:?}");
    assert_eq!(invalid.json()["code"], "INVALID_INPUT");
}

#[test]
fn a_direct_flow_target_has_no_slots() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&workspace().join("examples/triage"), dir.path());
    review(dir.path());
    let run = run_jig(
        dir.path(),
        &["run", "flow:flows/intake", "--input", "\"The app crashes\""],
    );
    assert_eq!(run.status, 1, "{run:?}");
    let terminal = run.json();
    assert_eq!(terminal["code"], "UNAVAILABLE", "{run:?}");
}

#[test]
fn a_slot_naming_an_unknown_flow_rejects_the_candidate() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&workspace().join("examples/triage"), dir.path());
    let lock_before = std::fs::read(dir.path().join("jig.lock")).unwrap();
    write_files(
        dir.path(),
        &[(
            "bindings/intake.ts",
            "import { defineBinding } from \"@jigging/jig\";\nexport default defineBinding({ package: \"./flows/intake\", slots: { classifier: \"flow:flows/missing\" } });\n",
        )],
    );
    let run = run_jig(dir.path(), &["review", "--yes"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(run.stderr.starts_with("INVALID_CANDIDATE: "), "{run:?}");
    assert!(
        run.stderr.contains(
            "PROJECT_BINDING_SLOT_MISSING at \"bindings/intake.ts\" pointer \"/slots/classifier\""
        ),
        "{run:?}"
    );
    assert_eq!(
        std::fs::read(dir.path().join("jig.lock")).unwrap(),
        lock_before,
        "a rejected candidate leaves jig.lock alone"
    );
    assert!(
        !dir.path().join(".jig/admission/current").exists(),
        "nothing was admitted"
    );
}
