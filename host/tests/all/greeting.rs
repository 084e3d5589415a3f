//! The greeting project from `jig init`, end to end.

use crate::support::*;

fn init_demo() -> (tempfile::TempDir, std::path::PathBuf) {
    init_with(&[])
}

/// `jig init <extra> demo` in a fresh directory.
fn init_with(extra: &[&str]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let args: Vec<&str> = ["init"]
        .iter()
        .chain(extra)
        .chain(&["demo"])
        .copied()
        .collect();
    let run = run_jig(dir.path(), &args);
    assert_eq!(run.status, 0, "{run:?}");
    let demo = dir.path().join("demo");
    (dir, demo)
}

/// `jig review --yes`, then the greeting greets Ada.
fn reviews_and_greets_ada(demo: &std::path::Path) {
    review(demo);
    let run = run_jig(demo, &["run", "flow:flows/hello", "--input", "\"Ada\""]);
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(
        run.json()["output"],
        serde_json::json!({"message": "Hello, Ada!"})
    );
}

#[test]
fn init_review_run_greets_ada() {
    let (_dir, demo) = init_demo();
    let review = review(&demo);
    assert!(
        review.stdout.contains("+ \"flows/hello\" sha256:"),
        "{review:?}"
    );
    assert!(
        review.stdout.contains("+ \"flow:flows/hello\""),
        "{review:?}"
    );
    assert!(review.stdout.ends_with("project is ready\n"), "{review:?}");

    let lock = std::fs::read_to_string(demo.join("jig.lock")).unwrap();
    let digest = lock
        .strip_prefix("{\"bindings\":{},\"packages\":{\"flows/hello\":{\"digest\":\"sha256:")
        .and_then(|rest| rest.strip_suffix("\",\"directRun\":true,\"uses\":{}}}}\n"))
        .unwrap_or_else(|| panic!("unexpected jig.lock: {lock:?}"));
    assert_eq!(digest.len(), 64);
    assert!(digest
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));

    let run = run_jig(&demo, &["run", "flow:flows/hello", "--input", "\"Ada\""]);
    assert_eq!(run.status, 0, "{run:?}");
    let terminal = run.json();
    assert_eq!(terminal["status"], "succeeded");
    assert_eq!(terminal["outcome"], "done");
    assert_eq!(
        terminal["output"],
        serde_json::json!({"message": "Hello, Ada!"})
    );
    assert_eq!(terminal["diagnostics"]["stderrTruncated"], false);

    let again = run_jig(&demo, &["review"]);
    assert_eq!(again.status, 0, "{again:?}");
    assert_eq!(again.stdout, "project is ready\n");
}

#[test]
fn the_default_greeting_is_flow_ts_with_the_bundled_sdk_revision_and_no_lock() {
    let (_dir, demo) = init_demo();
    assert!(demo.join("flows/hello/flow.ts").is_file());
    assert!(!demo.join("flows/hello/flow.py").exists());
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(demo.join("flows/hello/package.json")).unwrap())
            .unwrap();
    assert_eq!(
        manifest["dependencies"],
        serde_json::json!({ "@jigging/flow": jig_engine::plan::prepare::BUNDLED_SDK_VERSION })
    );
    // Satisfied by the bundled SDK: no lock, no resolution, no network.
    let review = review(&demo);
    assert!(
        !review.stderr.contains("Resolving dependencies"),
        "{review:?}"
    );
    assert!(!demo.join("flows/hello/bun.lock").exists());
    assert!(!demo.join("flows/hello/node_modules").exists());
}

#[test]
fn the_python_greeting_reviews_and_runs() {
    let (_dir, demo) = init_with(&["--lang", "python"]);
    assert!(demo.join("flows/hello/flow.py").is_file());
    assert!(!demo.join("flows/hello/package.json").exists());
    reviews_and_greets_ada(&demo);
}

#[test]
fn the_rust_greeting_builds_with_its_script_then_reviews_and_runs() {
    let sdk = workspace().join("sdk-rust");
    let (_dir, demo) = init_with(&["--lang", "rust", "--sdk", sdk.to_str().unwrap()]);
    // The crate lies outside the Flow package, against the named SDK.
    let manifest = std::fs::read_to_string(demo.join("src/hello/Cargo.toml")).unwrap();
    assert!(
        manifest.contains(&format!(
            "flow-sdk = {{ path = \"{}\" }}",
            sdk.canonicalize().unwrap().display()
        )),
        "{manifest}"
    );
    assert!(demo.join("src/hello/src/main.rs").is_file());
    assert!(!demo.join("flows/hello/flow.wasm").exists());
    assert!(!demo.join("flows/hello/package.json").exists());
    // Offline, in the shared guest target directory, as an author would.
    let target = workspace().join("target/guests");
    let built = std::process::Command::new(demo.join("build.sh"))
        .env("CARGO_NET_OFFLINE", "true")
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("build.sh runs");
    let built = output(built);
    assert_eq!(built.status, 0, "{built:?}");
    assert!(demo.join("flows/hello/flow.wasm").is_file());
    reviews_and_greets_ada(&demo);
}

#[test]
fn the_rust_greeting_says_to_build_first_and_needs_an_sdk() {
    let dir = tempfile::tempdir().unwrap();
    let sdk = workspace().join("sdk-rust");
    let made = run_jig(
        dir.path(),
        &[
            "init",
            "--lang",
            "rust",
            "--sdk",
            sdk.to_str().unwrap(),
            "demo",
        ],
    );
    assert_eq!(made.status, 0, "{made:?}");
    assert!(
        made.stdout.contains("next: cd ") && made.stdout.contains(" && ./build.sh && jig review"),
        "{made:?}"
    );
    // This test build has no SDK installed beside it (../share/jig/sdk-rust):
    // without --sdk it refuses as the guide says, and never writes the
    // path of the checkout it was built in (the build machine's).
    let refused = run_jig(dir.path(), &["init", "--lang", "rust", "found"]);
    assert_eq!(
        (refused.status, refused.stdout.as_str()),
        (2, ""),
        "{refused:?}"
    );
    assert_eq!(
        refused.stderr,
        "JIG_USAGE: --lang rust needs the Rust SDK, and none is installed with this jig; \
         pass --sdk PATH (the sdk-rust directory of a jig checkout)\n",
        "{refused:?}"
    );
    assert!(!dir.path().join("found").exists());
    // A directory that is not the Rust SDK, and --sdk without --lang rust.
    for args in [
        &["init", "--lang", "rust", "--sdk", ".", "other"][..],
        &["init", "--lang", "python", "--sdk", ".", "other"][..],
        &["init", "--sdk", ".", "other"][..],
    ] {
        let run = run_jig(dir.path(), args);
        assert_eq!(run.status, 2, "{args:?}: {run:?}");
        assert!(!dir.path().join("other").exists(), "{args:?}");
    }
}

#[test]
fn init_options_outside_the_surface_are_usage_errors_and_create_nothing() {
    for args in [
        &["init", "--lang", "cobol", "demo"][..],
        &["init", "--bare", "--lang", "python", "demo"][..],
        &["init", "--bare", "--lang", "rust", "demo"][..],
        &["init", "--lang"][..],
        &["init"][..],
    ] {
        let dir = tempfile::tempdir().unwrap();
        let run = run_jig(dir.path(), args);
        assert_eq!(run.status, 2, "{args:?}: {run:?}");
        assert!(!dir.path().join("demo").exists(), "{args:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("demo")).unwrap();
    for lang in ["typescript", "python"] {
        let run = run_jig(dir.path(), &["init", "--lang", lang, "demo"]);
        assert_eq!(run.status, 1, "{run:?}");
        assert!(
            run.stderr.starts_with("JIG_INIT_DESTINATION_EXISTS: "),
            "{run:?}"
        );
    }
}

#[test]
fn review_without_yes_on_a_pipe_admits_nothing() {
    let (_dir, demo) = init_demo();
    let run = run_jig(&demo, &["review"]);
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stderr.contains("JIG_APPROVAL_REQUIRED: "), "{run:?}");
    assert!(!demo.join("jig.lock").exists());
    let run = run_jig(&demo, &["run", "flow:flows/hello"]);
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stderr.starts_with("ADMISSION_MISSING: "), "{run:?}");
}

#[test]
fn source_edits_grant_nothing_until_review() {
    let (_dir, demo) = init_demo();
    review(&demo);
    let flow = demo.join("flows/hello/flow.ts");
    let source = std::fs::read_to_string(&flow)
        .unwrap()
        .replace("Hello", "Goodbye");
    std::fs::write(&flow, source).unwrap();
    let run = run_jig(&demo, &["run", "flow:flows/hello", "--input", "\"Ada\""]);
    assert_eq!(
        run.json()["output"]["message"],
        "Hello, Ada!",
        "the admitted bytes run, not the edit"
    );
    review(&demo);
    let run = run_jig(&demo, &["run", "flow:flows/hello", "--input", "\"Ada\""]);
    assert_eq!(run.json()["output"]["message"], "Goodbye, Ada!");
}

#[test]
fn unknown_targets_are_named_with_the_admitted_ones() {
    let (_dir, demo) = init_demo();
    review(&demo);
    let run = run_jig(&demo, &["run", "flow:flows/nope"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(
        run.stderr.starts_with("JIG_RUN_TARGET_INVALID: "),
        "{run:?}"
    );
    assert!(run.stderr.contains("flow:flows/hello"), "{run:?}");
}

#[test]
fn same_key_same_content_returns_the_same_run() {
    let (_dir, demo) = init_demo();
    review(&demo);
    let first = run_jig(
        &demo,
        &[
            "run",
            "flow:flows/hello",
            "--input",
            "\"Ada\"",
            "--key",
            "k1",
        ],
    );
    let second = run_jig(
        &demo,
        &[
            "run",
            "flow:flows/hello",
            "--input",
            "\"Ada\"",
            "--key",
            "k1",
        ],
    );
    assert_eq!(first.status, 0, "{first:?}");
    assert_eq!(first.json()["runId"], second.json()["runId"]);
    let conflict = run_jig(
        &demo,
        &[
            "run",
            "flow:flows/hello",
            "--input",
            "\"Bob\"",
            "--key",
            "k1",
        ],
    );
    assert_eq!(conflict.status, 1, "{conflict:?}");
    assert!(
        conflict.stderr.starts_with("SUBMISSION_CONFLICT: "),
        "{conflict:?}"
    );
    let list = run_jig(&demo, &["runs"]);
    assert_eq!(list.stdout.lines().count(), 1, "{list:?}");
}

#[test]
fn a_package_local_jiggy_takes_precedence_over_the_bundled_sdk() {
    let dir = project(&[
        ("flows/own/FLOW.md", "---\nname: own\ndescription: Brings its own SDK.\n---\n"),
        ("flows/own/flow.py", "from jiggy.flow import handle\n\nhandle(None)\n"),
        ("flows/own/jiggy/__init__.py", ""),
        (
            "flows/own/jiggy/flow.py",
            "import json, sys\n\ndef handle(_):\n    req = json.loads(sys.stdin.readline())\n    sys.stdout.write(json.dumps({'jsonrpc': '2.0', 'id': req['id'], 'result': {'outcome': 'done', 'output': 'package-local'}}) + '\\n')\n    sys.stdout.flush()\n",
        ),
    ]);
    review(dir.path());
    let run = run_jig(dir.path(), &["run", "flow:flows/own"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(run.json()["output"], "package-local");
}

#[test]
fn review_details_show_current_and_proposed_policy() {
    let (_dir, demo) = init_demo();
    review(&demo);
    std::fs::write(demo.join("flows/hello/notes.md"), "more\n").unwrap();
    let run = run_jig(&demo, &["review", "--details"]);
    assert_eq!(run.status, 2, "{run:?}");
    let text = &run.stdout;
    let current = text
        .find("Current policy:\n")
        .expect("current policy shown");
    let proposed = text
        .find("Proposed policy:\n")
        .expect("proposed policy shown");
    assert!(current < proposed);
    assert!(
        text.starts_with("Packages:\n  ~ \"flows/hello\" sha256:"),
        "{run:?}"
    );
    // Each policy is indented JSON, not one escaped string.
    assert!(
        text[current..].contains("\n      \"flows/hello\": {\n"),
        "{run:?}"
    );
    // And the files of the changed package follow.
    assert!(
        text[proposed..].contains("Files:\n  ~ \"flows/hello\" was sha256:"),
        "{run:?}"
    );
    assert!(text.contains("      + \"notes.md\" 5 bytes\n"), "{run:?}");
}
