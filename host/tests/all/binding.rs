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
    let terminal = invalid.json();
    assert_eq!(terminal["code"], "INVALID_INPUT");
    // In words, with the pointers kept in the details.
    assert!(
        terminal["message"]
            .as_str()
            .unwrap()
            .ends_with(": expected string, got 42"),
        "{terminal}"
    );
    assert_eq!(terminal["details"]["message"], "expected string, got 42");
    assert_eq!(terminal["details"]["schemaPointer"], "/type");
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

/// Seed 002 §5: every way to break a Binding rejects the whole candidate,
/// with the Binding file and the pointer of the offending member.
#[test]
fn each_broken_binding_is_rejected_with_its_location() {
    const PY: &str = "from jiggy.flow import handle\n\nasync def run(ctx):\n    return {\"outcome\": \"done\", \"output\": None}\n\nhandle(run)\n";
    let base: Vec<(&str, &str)> = vec![
        ("flows/review/FLOW.md", "---\nname: review\ndescription: Reviews.\n---\n"),
        ("flows/review/flow.py", PY),
        ("flows/research/FLOW.md", "---\nname: research\ndescription: Researches.\n---\n"),
        ("flows/research/flow.py", PY),
        ("flows/notes/FLOW.md", "---\nname: notes\ndescription: Instructions only.\n---\n"),
        ("flows/files/FLOW.md", "---\nname: files\ndescription: Needs files.\nattachments:\n  source: read\n---\n"),
        ("flows/files/flow.py", PY),
        (
            "flows/tuned/FLOW.md",
            "---\nname: tuned\ndescription: Has settings.\n---\n",
        ),
        ("flows/tuned/flow.py", PY),
        (
            "flows/tuned/settings.schema.json",
            "{\"$schema\":\"https://flow.jig.md/schemas/schema-1.json\",\"type\":\"object\",\"properties\":{\"strict\":{\"type\":\"boolean\"},\"tone\":{\"enum\":[\"warm\",\"curt\"]}},\"additionalProperties\":false}",
        ),
        (
            "bindings/critic.ts",
            "import { defineBinding } from \"@jigging/jig\";\nexport default defineBinding({ package: \"./flows/research\", slots: { inner: \"flow:flows/review\" } });\n",
        ),
    ];
    let binding = |body: &str| {
        format!("import {{ defineBinding }} from \"@jigging/jig\";\nexport default defineBinding({body});\n")
    };
    // Settings refused say, in words, which setting was wrong and how
    // (`--details` explains each diagnostic after the reference's line).
    let cases: Vec<(&str, String, &str, &str, &str)> = vec![
        (
            "settings without a schema",
            binding("{ package: \"./flows/review\", settings: { strict: true } }"),
            "PROJECT_BINDING_SETTINGS_INVALID",
            "/settings",
            "only {} is valid: unexpected setting \"strict\"",
        ),
        (
            "settings against the schema",
            binding("{ package: \"./flows/tuned\", settings: { strict: \"yes\" } }"),
            "PROJECT_BINDING_SETTINGS_INVALID",
            "/settings",
            "settings.schema.json: /strict: expected boolean, got \"yes\" (schema /properties/strict/type)",
        ),
        (
            "a setting not among the allowed",
            binding("{ package: \"./flows/tuned\", settings: { tone: \"loud\" } }"),
            "PROJECT_BINDING_SETTINGS_INVALID",
            "/settings",
            "/tone: \"loud\" is not one of \"warm\", \"curt\" (schema /properties/tone/enum)",
        ),
        (
            "own package",
            binding("{ package: \"./flows/review\", slots: { me: \"flow:flows/review\" } }"),
            "PROJECT_BINDING_SLOT_MISSING",
            "/slots/me",
            "",
        ),
        (
            "non-leaf binding",
            binding("{ package: \"./flows/review\", slots: { critique: \"binding:critic\" } }"),
            "PROJECT_BINDING_SLOT_MISSING",
            "/slots/critique",
            "",
        ),
        (
            "instructions-only target",
            binding("{ package: \"./flows/review\", slots: { read: \"flow:flows/notes\" } }"),
            "PROJECT_BINDING_SLOT_MISSING",
            "/slots/read",
            "",
        ),
        (
            "attachment-bearing target",
            binding("{ package: \"./flows/review\", slots: { files: \"flow:flows/files\" } }"),
            "PROJECT_BINDING_SLOT_MISSING",
            "/slots/files",
            "",
        ),
    ];
    for (name, source, code, pointer, words) in cases {
        let mut files = base.clone();
        files.push(("bindings/reviewer.ts", &source));
        let dir = project(&files);
        let run = run_jig(dir.path(), &["review", "--yes", "--details"]);
        assert_eq!(run.status, 1, "{name}: {run:?}");
        assert!(
            run.stderr.starts_with("INVALID_CANDIDATE: "),
            "{name}: {run:?}"
        );
        let location = format!("{code} at \"bindings/reviewer.ts\" pointer \"{pointer}\"");
        assert!(
            run.stderr.contains(&location),
            "{name}: want {location}: {run:?}"
        );
        assert!(run.stderr.contains(words), "{name}: want {words}: {run:?}");
        assert!(!dir.path().join("jig.lock").exists(), "{name}");
    }
}
