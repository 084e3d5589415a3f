//! Bun dependencies prepared at review (seed 002 §4): against a real npm
//! registry (verdaccio on 127.0.0.1) holding packages these tests publish,
//! `jig review` prepares the frozen production tree in the envelope and
//! `jig run` loads it with no install and no network.

use std::path::Path;

use crate::npm_registry::{registry, Proxy, Registry};
use crate::support::*;

/// A registry address where nothing listens: a review that reaches the
/// installer with it fails PACKAGE_BUN_PREPARATION_FAILED, so any other
/// code proves the refusal came before a fetch.
const DEAD_REGISTRY: &str = "http://127.0.0.1:9/";

/// Greets with `greet-lib`, reports its version, and tries the registry:
/// a Run has no network, so `reached` must be false.
fn flow_ts(port: u16) -> String {
    format!(
        "import {{ handle }} from \"@jigging/flow\";\nimport {{ greet, version }} from \"greet-lib\";\n\n\
         await handle(async (run) => {{\n  let reached = true;\n  try {{ await fetch(\"http://127.0.0.1:{port}/-/ping\"); }} catch {{ reached = false; }}\n  \
         return {{ outcome: \"done\", output: {{ message: greet(String(run.input)), version, reached }} }};\n}});\n"
    )
}

const FLOW_MD: &str = "---\nname: hello\ndescription: Greets with a dependency.\n---\n";

const GREET_1: &str = "{\"name\":\"hello\",\"dependencies\":{\"greet-lib\":\"^1.0.0\"}}";

/// A project whose `flows/hello` has `manifest`, optionally `lock`, and
/// the host configuration naming `registry_url`.
fn project_with(
    manifest: &str,
    lock: Option<&str>,
    registry_url: &str,
    port: u16,
) -> tempfile::TempDir {
    let flow = flow_ts(port);
    let dir = project(&[
        ("flows/hello/FLOW.md", FLOW_MD),
        ("flows/hello/flow.ts", &flow),
        ("flows/hello/package.json", manifest),
    ]);
    if let Some(lock) = lock {
        write_files(dir.path(), &[("flows/hello/bun.lock", lock)]);
    }
    configure(dir.path(), registry_url);
    dir
}

fn configure(dir: &Path, registry_url: &str) {
    write_files(
        dir,
        &[(
            ".test-config-home/jig/host.toml",
            &format!("[dependencies]\nnpm-registry = \"{registry_url}\"\n"),
        )],
    );
}

fn run_hello(dir: &Path) -> serde_json::Value {
    let run = run_jig(dir, &["run", "flow:flows/hello", "--input", "\"Ada\""]);
    assert_eq!(run.status, 0, "{run:?}");
    run.json()["output"].clone()
}

/// The refusal must name `code` at the package's manifest.
fn assert_refused(run: &Run, status: i32, code: &str) {
    assert_eq!(run.status, status, "{run:?}");
    let at = format!("{code} at \"flows/hello/package.json\"");
    assert!(run.stderr.contains(&at), "expected {at}: {run:?}");
}

fn locked(registry: &Registry, manifest: &str) -> tempfile::TempDir {
    let lock = registry.lock_for(manifest);
    project_with(manifest, Some(&lock), &registry.url, registry.port())
}

#[test]
fn a_locked_dependency_is_prepared_at_review_and_a_run_loads_it_without_network() {
    let registry = registry();
    let dir = locked(registry, GREET_1);
    let source = run_jig(dir.path(), &["package", "digest", "flows/hello"]);
    assert_eq!(source.status, 0, "{source:?}");
    // A development installation is never trusted: capture excludes it.
    write_files(
        dir.path(),
        &[(
            "flows/hello/node_modules/greet-lib/index.js",
            "exports.greet = () => \"development copy\"; exports.version = \"dev\";\n",
        )],
    );
    review(dir.path());
    let output = run_hello(dir.path());
    assert_eq!(
        output,
        serde_json::json!({ "message": "Hello, Ada!", "version": "1.0.0", "reached": false })
    );
    // jig.lock keeps naming the reviewed source package, not the prepared one.
    let lock: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("jig.lock")).unwrap()).unwrap();
    assert_eq!(
        lock["packages"]["flows/hello"]["digest"],
        source.stdout.trim(),
        "{lock}"
    );
}

#[test]
fn a_flow_outside_a_workspace_still_runs_from_its_package_root() {
    let registry = registry();
    let dir = locked(registry, GREET_1);
    write_files(
        dir.path(),
        &[
            (
                "flows/hello/flow.ts",
                "import { handle } from \"@jigging/flow\";\nimport { existsSync } from \"node:fs\";\nimport { greet } from \"greet-lib\";\nimport { sibling } from \"./lib.ts\";\n\nawait handle(async (run) => ({ outcome: \"done\", output: { message: greet(String(run.input)), sibling, root: existsSync(`${import.meta.dir}/FLOW.md`) && existsSync(`${import.meta.dir}/node_modules/greet-lib`), scratch: process.cwd() === run.scratch } }));\n",
            ),
            ("flows/hello/lib.ts", "export const sibling = \"beside the Flow\";\n"),
        ],
    );
    review(dir.path());
    assert_eq!(
        run_hello(dir.path()),
        serde_json::json!({ "message": "Hello, Ada!", "sibling": "beside the Flow", "root": true, "scratch": true })
    );
}

#[test]
fn an_npm_alias_to_the_configured_registry_is_accepted() {
    let registry = registry();
    let manifest = "{\"dependencies\":{\"greet-lib\":\"npm:greet-lib@^2.0.0\"}}";
    let dir = locked(registry, manifest);
    review(dir.path());
    assert_eq!(run_hello(dir.path())["message"], "Hi there, Ada!");
}

#[test]
fn a_nested_version_is_kept_beside_the_hoisted_one() {
    let registry = registry();
    let manifest = "{\"dependencies\":{\"greet-lib\":\"^2.0.0\",\"nested-lib\":\"1.0.0\"}}";
    let dir = locked(registry, manifest);
    write_files(
        dir.path(),
        &[(
            "flows/hello/flow.ts",
            "import { handle } from \"@jigging/flow\";\nimport { version } from \"greet-lib\";\nimport { inner } from \"nested-lib\";\n\nawait handle(async () => ({ outcome: \"done\", output: { top: version, inner } }));\n",
        )],
    );
    review(dir.path());
    assert_eq!(
        run_hello(dir.path()),
        serde_json::json!({ "top": "2.0.0", "inner": "1.0.0" })
    );
}

#[test]
fn lifecycle_scripts_never_run() {
    let registry = registry();
    // Trusted, so Bun would run its postinstall unless scripts are off.
    let manifest =
        "{\"dependencies\":{\"scripted-lib\":\"1.0.0\"},\"trustedDependencies\":[\"scripted-lib\"]}";
    let dir = locked(registry, manifest);
    write_files(
        dir.path(),
        &[(
            "flows/hello/flow.ts",
            "import { handle } from \"@jigging/flow\";\nimport { existsSync } from \"node:fs\";\nimport { ok } from \"scripted-lib\";\n\nawait handle(async () => ({ outcome: \"done\", output: { ok, ran: existsSync(`${import.meta.dir}/node_modules/scripted-lib/ran.js`) } }));\n",
        )],
    );
    review(dir.path());
    assert_eq!(
        run_hello(dir.path()),
        serde_json::json!({ "ok": true, "ran": false })
    );
}

#[test]
fn a_missing_lock_needs_the_resolution_flag_and_yes_never_implies_it() {
    let registry = registry();
    let dir = project_with(GREET_1, None, &registry.url, registry.port());
    let refused = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(&refused, 2, "PACKAGE_BUN_RESOLUTION_PERMISSION_REQUIRED");
    assert!(
        !refused.stderr.contains("Resolving dependencies"),
        "{refused:?}"
    );

    let allowed = run_jig(
        dir.path(),
        &["review", "--yes", "--allow-resolution-network"],
    );
    assert_eq!(allowed.status, 0, "{allowed:?}");
    assert!(
        allowed.stderr.contains(
            "Resolving dependencies for \"flows/hello\". Bun may contact dependency-selected public \
             or private-network services before graph validation; requests cannot be undone, and \
             unsupported dependencies may still fail. Applies only to this review; Runs gain no \
             network access. Loopback services reachable from the host may be contacted too. \
             The flag is not a network destination filter.\n"
        ),
        "{allowed:?}"
    );
    // The generated lock lives only in the retained execution package.
    assert!(!dir.path().join("flows/hello/bun.lock").exists());
    assert_eq!(run_hello(dir.path())["message"], "Hello, Ada!");

    // Exact reuse needs no new resolution and no flag: another Flow changes
    // the candidate, the prepared package is reused, nothing is resolved.
    write_files(
        dir.path(),
        &[
            ("flows/other/FLOW.md", "---\nname: other\ndescription: Plain.\n---\n"),
            ("flows/other/flow.ts", "import { handle } from \"@jigging/flow\";\nawait handle(async () => ({ outcome: \"done\", output: 1 }));\n"),
        ],
    );
    let reused = run_jig(dir.path(), &["review", "--yes"]);
    assert_eq!(reused.status, 0, "{reused:?}");
    assert!(
        !reused.stderr.contains("Resolving dependencies"),
        "{reused:?}"
    );
    assert_eq!(run_hello(dir.path())["message"], "Hello, Ada!");
}

#[test]
fn reuse_of_a_locked_preparation_installs_nothing() {
    let registry = registry();
    let proxy = Proxy::start(registry.port());
    let url = format!("http://127.0.0.1:{}/", proxy.port);
    let lock = registry.lock_at(&url, GREET_1);
    let dir = project_with(GREET_1, Some(&lock), &url, registry.port());
    review(dir.path());
    // From now on the configured registry address refuses every connection.
    drop(proxy);
    let again = review(dir.path());
    assert_eq!(again.stdout, "project is ready\n", "unchanged: {again:?}");
    // Another Flow changes the candidate; the admitted preparation is
    // reused exactly, so nothing is fetched.
    write_files(
        dir.path(),
        &[
            ("flows/other/FLOW.md", "---\nname: other\ndescription: Plain.\n---\n"),
            ("flows/other/flow.ts", "import { handle } from \"@jigging/flow\";\nawait handle(async () => ({ outcome: \"done\", output: 1 }));\n"),
        ],
    );
    let reused = review(dir.path());
    assert!(reused.stdout.contains("+ \"flows/other\""), "{reused:?}");
    assert_eq!(run_hello(dir.path())["message"], "Hello, Ada!");
    // A code-only edit invalidates reuse: the installer must run again, and
    // with the registry gone it fails.
    write_files(dir.path(), &[("flows/hello/notes.txt", "edited\n")]);
    let edited = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(&edited, 2, "PACKAGE_BUN_PREPARATION_FAILED");
}

#[test]
fn a_changed_dependency_changes_the_target_in_review() {
    let registry = registry();
    let dir = locked(registry, GREET_1);
    review(dir.path());
    assert_eq!(run_hello(dir.path())["message"], "Hello, Ada!");
    let manifest = "{\"name\":\"hello\",\"dependencies\":{\"greet-lib\":\"^2.0.0\"}}";
    write_files(
        dir.path(),
        &[
            ("flows/hello/package.json", manifest),
            ("flows/hello/bun.lock", &registry.lock_for(manifest)),
        ],
    );
    let changed = review(dir.path());
    assert!(changed.stdout.contains("~ \"flows/hello\""), "{changed:?}");
    assert!(
        changed.stdout.contains("~ \"flow:flows/hello\""),
        "{changed:?}"
    );
    assert_eq!(run_hello(dir.path())["message"], "Hi there, Ada!");
}

#[test]
fn stale_and_invalid_locks_are_distinct_and_never_repaired() {
    let registry = registry();
    let lock = registry.lock_for(GREET_1);
    let stale_manifest = "{\"dependencies\":{\"greet-lib\":\"^1.0.0\",\"nested-lib\":\"1.0.0\"}}";
    let dir = project_with(stale_manifest, Some(&lock), &registry.url, registry.port());
    let stale = run_jig(
        dir.path(),
        &["review", "--yes", "--allow-resolution-network"],
    );
    assert_refused(&stale, 1, "PACKAGE_BUN_LOCK_STALE");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("flows/hello/bun.lock")).unwrap(),
        lock,
        "a stale lock is never repaired"
    );

    let changed_range = "{\"dependencies\":{\"greet-lib\":\"~1.0.0\"}}";
    let dir = project_with(changed_range, Some(&lock), &registry.url, registry.port());
    let stale = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(&stale, 1, "PACKAGE_BUN_LOCK_STALE");

    let dir = project_with(
        GREET_1,
        Some("{ not a lock"),
        &registry.url,
        registry.port(),
    );
    let invalid = run_jig(
        dir.path(),
        &["review", "--yes", "--allow-resolution-network"],
    );
    assert_refused(&invalid, 1, "PACKAGE_BUN_LOCK_INVALID");
    assert!(!invalid.stderr.contains("Resolving"), "{invalid:?}");

    let dir = project_with(GREET_1, None, DEAD_REGISTRY, 9);
    write_files(dir.path(), &[("flows/hello/bun.lockb", "\0binary")]);
    let binary = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(&binary, 1, "PACKAGE_BUN_LOCK_INVALID");
}

/// A lock whose one entry `x` is `entry`; the manifest depends on `x`.
fn lock_with(entry: &str) -> String {
    format!(
        "{{\n  \"lockfileVersion\": 1,\n  \"workspaces\": {{\n    \"\": {{\n      \"dependencies\": {{\n        \"x\": \"^1.0.0\",\n      }},\n    }},\n  }},\n  \"packages\": {{\n    \"x\": {entry},\n  }}\n}}\n"
    )
}

#[test]
fn each_unsupported_lock_source_is_refused_before_any_fetch() {
    let sri = "sha512-HkJug0nyDERXH0jzWc/dras4Dl2EanBAwtWYIy4qq60ZvP07FxUtAWXGwCH5haffGcuEGKeZBa1h0DArhz3irA==";
    let cases = [
        (
            "git",
            "[\"x@git+https://example.org/x.git#0123abc\", {}, \"0123abc\"]".to_string(),
        ),
        (
            "GitHub",
            "[\"x@github:owner/x#0123abc\", {}, \"owner-x-0123abc\"]".to_string(),
        ),
        (
            "tarball",
            "[\"x@https://example.org/x-1.0.0.tgz\", {}]".to_string(),
        ),
        ("file", "[\"x@file:../x\", {}]".to_string()),
        (
            "undeclared workspace",
            "[\"x@workspace:libs/x\"]".to_string(),
        ),
        (
            "custom-registry",
            format!(
                "[\"x@1.0.0\", \"https://elsewhere.example/x/-/x-1.0.0.tgz\", {{}}, \"{sri}\"]"
            ),
        ),
        ("non-integrity", "[\"x@1.0.0\", \"\", {}, \"\"]".to_string()),
        (
            "non-integrity",
            "[\"x@1.0.0\", \"\", {}, \"sha1-AAAA\"]".to_string(),
        ),
    ];
    for (kind, entry) in cases {
        let dir = project_with(
            "{\"dependencies\":{\"x\":\"^1.0.0\"}}",
            Some(&lock_with(&entry)),
            DEAD_REGISTRY,
            9,
        );
        let run = run_jig(dir.path(), &["review", "--yes", "--details"]);
        assert_refused(&run, 1, "PACKAGE_BUN_SOURCE_UNSUPPORTED");
        assert!(
            run.stderr.contains("pointer \"/packages/x\"")
                && run.stderr.contains(&format!("a {kind} entry")),
            "{kind}: {run:?}"
        );
    }
    // The same lock with a registry entry reaches the installer (and fails
    // there, the registry being dead): the refusals above came first.
    let dir = project_with(
        "{\"dependencies\":{\"x\":\"^1.0.0\"}}",
        Some(&lock_with(&format!("[\"x@1.0.0\", \"\", {{}}, \"{sri}\"]"))),
        DEAD_REGISTRY,
        9,
    );
    let run = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(&run, 2, "PACKAGE_BUN_PREPARATION_FAILED");
    // The reference's words (reference_texts.rs): fixed guidance, then where.
    assert_eq!(
        (run.stdout.as_str(), run.stderr.as_str()),
        (
            "",
            "UNAVAILABLE: locked dependencies could not be prepared; check registry access \
             and package availability; PACKAGE_BUN_PREPARATION_FAILED at \
             \"flows/hello/package.json\"\n"
        ),
        "{run:?}"
    );
    assert!(
        !run.stderr.contains("error:"),
        "no installer output: {run:?}"
    );
}

#[test]
fn unsupported_manifest_sources_and_fields_are_refused_before_resolution() {
    for (spec, pointer) in [
        ("github:owner/x", "/dependencies/x"),
        ("git+https://example.org/x.git", "/dependencies/x"),
        ("file:../x", "/dependencies/x"),
        ("https://example.org/x.tgz", "/dependencies/x"),
    ] {
        let manifest = format!("{{\"dependencies\":{{\"x\":\"{spec}\"}}}}");
        let dir = project_with(&manifest, None, DEAD_REGISTRY, 9);
        let run = run_jig(
            dir.path(),
            &["review", "--yes", "--allow-resolution-network"],
        );
        assert_refused(&run, 1, "PACKAGE_BUN_SOURCE_UNSUPPORTED");
        assert!(
            run.stderr.contains(&format!("pointer \"{pointer}\"")),
            "{run:?}"
        );
        assert!(!run.stderr.contains("Resolving"), "{run:?}");
    }
    // A workspace: requirement with no ancestor Bun workspace is an
    // undeclared workspace.
    let dir = project_with(
        "{\"dependencies\":{\"x\":\"workspace:*\"}}",
        None,
        DEAD_REGISTRY,
        9,
    );
    let run = run_jig(
        dir.path(),
        &["review", "--yes", "--allow-resolution-network"],
    );
    assert_refused(&run, 1, "PACKAGE_BUN_SOURCE_UNSUPPORTED");
    for field in [
        "workspaces",
        "overrides",
        "resolutions",
        "patchedDependencies",
    ] {
        let manifest = format!("{{\"dependencies\":{{\"x\":\"^1\"}},\"{field}\":{{}}}}");
        let dir = project_with(&manifest, None, DEAD_REGISTRY, 9);
        let run = run_jig(
            dir.path(),
            &["review", "--yes", "--allow-resolution-network"],
        );
        assert_refused(&run, 1, "PACKAGE_BUN_MANIFEST_UNSUPPORTED");
    }
}

#[test]
fn a_package_local_npmrc_is_refused() {
    let registry = registry();
    let lock = registry.lock_for(GREET_1);
    let dir = project_with(GREET_1, Some(&lock), &registry.url, registry.port());
    write_files(
        dir.path(),
        &[("flows/hello/.npmrc", "registry=http://127.0.0.1:9/\n")],
    );
    let run = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(&run, 1, "PACKAGE_BUN_CONFIG_UNSUPPORTED");
}

#[test]
fn the_bundled_sdk_alone_needs_no_lock_and_no_network() {
    let dir = project_with(
        "{\"dependencies\":{\"@jigging/flow\":\"1.0.0\"}}",
        None,
        DEAD_REGISTRY,
        9,
    );
    write_files(
        dir.path(),
        &[(
            "flows/hello/flow.ts",
            "import { handle } from \"@jigging/flow\";\nawait handle(async (run) => ({ outcome: \"done\", output: { message: `Hello, ${run.input}!` } }));\n",
        )],
    );
    review(dir.path());
    assert_eq!(run_hello(dir.path())["message"], "Hello, Ada!");

    // Beside a registry dependency, the bundled SDK is still not fetched.
    let registry = registry();
    let manifest = "{\"dependencies\":{\"@jigging/flow\":\"1.0.0\",\"greet-lib\":\"^1.0.0\"}}";
    let lock = registry.lock_for(GREET_1);
    let dir = project_with(manifest, Some(&lock), &registry.url, registry.port());
    review(dir.path());
    assert_eq!(run_hello(dir.path())["message"], "Hello, Ada!");

    // Another revision of it is not this jig's SDK.
    let dir = project_with(
        "{\"dependencies\":{\"@jigging/flow\":\"^2.0.0\"}}",
        None,
        DEAD_REGISTRY,
        9,
    );
    let run = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(&run, 1, "PACKAGE_BUN_SOURCE_UNSUPPORTED");
}

/// The reference's examples name the SDK from their Bun workspace
/// (`workspace:*`): with no workspace member of that name, each workspace
/// form is the bundled SDK, said in the review text, with no workspace
/// capture, no lock and no network.
#[test]
fn the_bundled_sdk_named_from_a_workspace_is_the_bundled_sdk() {
    const GREET_SDK: &str = "import { handle } from \"@jigging/flow\";\nawait handle(async (run) => ({ outcome: \"done\", output: { message: `Hello, ${run.input}!` } }));\n";
    for spec in jig_engine::plan::prepare::BUNDLED_SDK_WORKSPACE_SPECS {
        let dir = project_with(
            &format!("{{\"dependencies\":{{\"@jigging/flow\":\"{spec}\"}}}}"),
            None,
            DEAD_REGISTRY,
            9,
        );
        write_files(dir.path(), &[("flows/hello/flow.ts", GREET_SDK)]);
        let reviewed = review(dir.path());
        assert!(
            reviewed.stdout.contains(&format!(
                "Notes:\n  \"flows/hello/package.json\" names @jigging/flow \"{spec}\": the bundled SDK 1.0.0 is used\n"
            )),
            "{spec}: {reviewed:?}"
        );
        assert!(
            reviewed.stdout.ends_with("project is ready\n"),
            "{reviewed:?}"
        );
        assert!(!reviewed.stderr.contains("Resolving"), "{reviewed:?}");
        assert_eq!(run_hello(dir.path())["message"], "Hello, Ada!");
    }

    // Beside a registry dependency it is still the bundled SDK: the
    // package is prepared standalone (there is no workspace above it).
    let registry = registry();
    let lock = registry.lock_for(GREET_1);
    let dir = project_with(
        "{\"name\":\"hello\",\"dependencies\":{\"@jigging/flow\":\"workspace:*\",\"greet-lib\":\"^1.0.0\"}}",
        Some(&lock),
        &registry.url,
        registry.port(),
    );
    let reviewed = review(dir.path());
    assert!(
        reviewed.stdout.contains("  \"flows/hello/package.json\" names @jigging/flow \"workspace:*\": the bundled SDK 1.0.0 is used\n"),
        "{reviewed:?}"
    );
    assert_eq!(run_hello(dir.path())["message"], "Hello, Ada!");

    // Any other revision, range or tag is not this jig's SDK.
    for spec in ["workspace:2.0.0", "workspace:^1.0.0", "^1.0.0", "latest"] {
        let dir = project_with(
            &format!("{{\"dependencies\":{{\"@jigging/flow\":\"{spec}\"}}}}"),
            None,
            DEAD_REGISTRY,
            9,
        );
        let run = run_jig(dir.path(), &["review", "--yes"]);
        assert_refused(&run, 1, "PACKAGE_BUN_SOURCE_UNSUPPORTED");
        assert!(
            run.stderr
                .contains("pointer \"/dependencies/@jigging~1flow\""),
            "{spec}: {run:?}"
        );
    }
}

/// `count` filler files under `flows/hello/pad/`.
fn pad(dir: &Path, count: usize) {
    let pad = dir.join("flows/hello/pad");
    std::fs::create_dir_all(&pad).unwrap();
    for i in 0..count {
        std::fs::write(pad.join(format!("{i}.txt")), "").unwrap();
    }
}

/// The files `flows/hello` has besides the padding: FLOW.md, flow.ts,
/// package.json, bun.lock.
const HELLO_FILES: usize = 4;

#[test]
fn the_file_limits_before_and_after_installation() {
    const LIMIT: usize = jig_engine::plan::prepare::MAX_SOURCE_FILES;
    let registry = registry();
    let lock = registry.lock_for(GREET_1);
    // Before installation, at the limit: the installer is reached (and the
    // dead registry fails it); one past: refused before any fetch.
    let dead_lock = lock.replace(&registry.url, DEAD_REGISTRY);
    let dir = project_with(GREET_1, Some(&dead_lock), DEAD_REGISTRY, 9);
    pad(dir.path(), LIMIT - HELLO_FILES);
    let at = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(&at, 2, "PACKAGE_BUN_PREPARATION_FAILED");
    pad(dir.path(), LIMIT - HELLO_FILES + 1);
    let past = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(&past, 1, "PACKAGE_BUN_LIMIT_EXCEEDED");

    // After installation greet-lib adds two files (index.js, package.json).
    const INSTALLED: usize = 2;
    assert_eq!(jig_engine::plan::prepare::MAX_PREPARED_FILES, LIMIT);
    let dir = project_with(GREET_1, Some(&lock), &registry.url, registry.port());
    pad(dir.path(), LIMIT - HELLO_FILES - INSTALLED);
    review(dir.path());
    pad(dir.path(), LIMIT - HELLO_FILES - INSTALLED + 1);
    let past = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(&past, 1, "PACKAGE_BUN_LIMIT_EXCEEDED");
}

#[test]
fn the_manifest_and_lock_size_limits() {
    use jig_engine::plan::prepare::{MAX_LOCK_BYTES, MAX_MANIFEST_BYTES};
    let padded = |limit: usize, head: &str, tail: &str| {
        let mut text = head.to_string();
        text.push_str(&" ".repeat(limit - head.len() - tail.len()));
        text.push_str(tail);
        text
    };
    let head = "{\"dependencies\":{\"greet-lib\":\"^1.0.0\"}";
    // At the manifest limit the installer is reached; one past is refused.
    let manifest = padded(MAX_MANIFEST_BYTES, head, "}");
    let sri = "sha512-AAAA";
    let lock = lock_with(&format!("[\"x@1.0.0\", \"\", {{}}, \"{sri}\"]"))
        .replace("\"x\"", "\"greet-lib\"");
    let dir = project_with(&manifest, Some(&lock), DEAD_REGISTRY, 9);
    let at = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(&at, 2, "PACKAGE_BUN_PREPARATION_FAILED");
    let manifest = padded(MAX_MANIFEST_BYTES + 1, head, "}");
    write_files(dir.path(), &[("flows/hello/package.json", &manifest)]);
    let past = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(&past, 1, "PACKAGE_BUN_LIMIT_EXCEEDED");

    let lock_at = padded(MAX_LOCK_BYTES, lock.trim_end(), "");
    let dir = project_with(&format!("{head}}}"), Some(&lock_at), DEAD_REGISTRY, 9);
    let at = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(&at, 2, "PACKAGE_BUN_PREPARATION_FAILED");
    let lock_past = padded(MAX_LOCK_BYTES + 1, lock.trim_end(), "");
    write_files(dir.path(), &[("flows/hello/bun.lock", &lock_past)]);
    let past = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(&past, 1, "PACKAGE_BUN_LIMIT_EXCEEDED");
}

#[test]
fn one_review_prepares_at_most_sixteen_packages() {
    const LIMIT: usize = jig_engine::plan::prepare::MAX_PREPARATIONS;
    let registry = registry();
    let lock = registry.lock_for(GREET_1);
    let flow = flow_ts(registry.port());
    let dir = project(&[]);
    configure(dir.path(), &registry.url);
    let add = |i: usize| {
        let base = format!("flows/f{i:02}");
        write_files(
            dir.path(),
            &[
                (
                    &format!("{base}/FLOW.md"),
                    &format!("---\nname: f{i:02}\ndescription: Greets.\n---\n"),
                ),
                (&format!("{base}/flow.ts"), &flow),
                (&format!("{base}/package.json"), GREET_1),
                (&format!("{base}/bun.lock"), &lock),
            ],
        );
    };
    for i in 0..LIMIT {
        add(i);
    }
    review(dir.path());
    // Reused preparations count none: sixteen more new ones are allowed,
    // the seventeenth new one is not.
    for i in LIMIT..=2 * LIMIT {
        add(i);
    }
    let past = run_jig(dir.path(), &["review", "--yes"]);
    assert_eq!(past.status, 1, "{past:?}");
    assert!(
        past.stderr
            .contains("PACKAGE_BUN_LIMIT_EXCEEDED at \"flows/f32/package.json\""),
        "{past:?}"
    );
}

#[test]
fn missing_or_corrupt_prepared_bytes_fail_closed_and_are_never_fetched_again() {
    let registry = registry();
    let dir = locked(registry, GREET_1);
    review(dir.path());
    // The retained copy of the installed greet-lib, changed behind jig's back.
    let blobs = dir.path().join(".jig/store/blobs");
    let installed = std::fs::read_dir(&blobs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            std::fs::read(p)
                .unwrap()
                .starts_with(b"exports.greet = (name) => `Hello")
        })
        .expect("the installed dependency is retained");
    std::fs::write(&installed, "exports.greet = () => \"tampered\";\n").unwrap();
    let run = run_jig(
        dir.path(),
        &["run", "flow:flows/hello", "--input", "\"Ada\""],
    );
    assert_ne!(run.status, 0, "{run:?}");
    assert!(!run.stdout.contains("tampered"), "{run:?}");
    // Review of the unchanged source reuses that preparation, finds it
    // corrupt and stops: no silent second fetch.
    let again = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(&again, 1, "PROJECT_STATE_INVALID");
    std::fs::remove_file(&installed).unwrap();
    let again = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(&again, 1, "PROJECT_STATE_INVALID");
}

/// A Bun workspace above the Jig project `app/`: libraries `wlib` and
/// `wlib2` (a cycle), an unselected member, and the Flow member.
fn workspace(registry: &Registry) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_files(
        dir.path(),
        &[
            ("package.json", "{\"name\":\"ws-root\",\"private\":true,\"workspaces\":[\"libs/*\",\"app/flows/*\"]}"),
            (
                "libs/wlib/package.json",
                "{\"name\":\"wlib\",\"version\":\"0.1.0\",\"main\":\"index.js\",\"files\":[\"index.js\"],\"dependencies\":{\"greet-lib\":\"1.0.0\",\"wlib2\":\"workspace:*\"}}",
            ),
            (
                "libs/wlib/index.js",
                "let hits = 0;\nexports.bump = () => ++hits;\nexports.file = __filename;\nexports.inner = require(\"greet-lib\").version;\nexports.peer = () => require(\"wlib2\");\n",
            ),
            ("libs/wlib/notes.txt", "not selected by files\n"),
            (
                "libs/wlib2/package.json",
                "{\"name\":\"wlib2\",\"version\":\"0.1.0\",\"main\":\"index.js\",\"dependencies\":{\"wlib\":\"workspace:*\"}}",
            ),
            ("libs/wlib2/index.js", "exports.back = () => require(\"wlib\");\n"),
            ("libs/unused/package.json", "{\"name\":\"unused\",\"version\":\"0.1.0\"}"),
            ("libs/unused/index.js", "throw new Error(\"never selected\");\n"),
            ("app/jig.ts", JIG_TS),
            ("app/flows/hello/FLOW.md", FLOW_MD),
            (
                "app/flows/hello/package.json",
                "{\"name\":\"hello\",\"dependencies\":{\"greet-lib\":\"^2.0.0\",\"wlib\":\"workspace:*\"}}",
            ),
            (
                "app/flows/hello/flow.ts",
                "import { handle } from \"@jigging/flow\";\nimport { existsSync, lstatSync, readFileSync, realpathSync } from \"node:fs\";\nimport { resolve } from \"node:path\";\nimport { version } from \"greet-lib\";\nimport wlib from \"wlib\";\nimport wlib2 from \"../../../libs/wlib2/index.js\";\nimport { sibling } from \"./lib.ts\";\n\nconst root = resolve(import.meta.dir, \"../../..\");\nconst linked = `${root}/node_modules/wlib`;\nawait handle(async (run) => ({ outcome: \"done\", output: { top: version, inner: wlib.inner, same: wlib.peer().back() === wlib, file: wlib.peer().back().file === wlib.file, count: (wlib.bump(), wlib.peer().back().bump()), link: lstatSync(linked).isSymbolicLink(), real: realpathSync(linked).slice(root.length), notes: existsSync(`${root}/libs/wlib/notes.txt`), unused: existsSync(`${root}/node_modules/unused`), member: import.meta.dir.slice(root.length), relative: wlib2 === wlib.peer(), sibling, url: readFileSync(new URL(\"./FLOW.md\", import.meta.url), \"utf8\") === readFileSync(`${import.meta.dir}/FLOW.md`, \"utf8\"), scratch: process.cwd() === run.scratch && !process.cwd().startsWith(root) } }));\n",
            ),
            (
                "app/flows/hello/lib.ts",
                "export const sibling = \"beside the Flow\";\n",
            ),
        ],
    );
    registry.lock_in(&registry.url, dir.path());
    configure(&dir.path().join("app"), &registry.url);
    dir
}

#[test]
fn a_workspace_flow_is_prepared_with_its_libraries_and_nested_versions() {
    let registry = registry();
    let dir = workspace(registry);
    let app = dir.path().join("app");
    review(&app);
    assert_eq!(
        run_hello(&app),
        serde_json::json!({
            "top": "2.0.0", "inner": "1.0.0", "same": true, "file": true, "count": 2,
            "link": true, "real": "/libs/wlib", "notes": false, "unused": false,
            // From its retained member path: relative imports (a sibling,
            // a selected member's file) and import.meta resolve as in the
            // workspace, one module per file, and the cwd is scratch.
            "member": "/app/flows/hello", "relative": true, "sibling": "beside the Flow",
            "url": true, "scratch": true,
        })
    );
    // Unchanged inputs reuse the preparation; a library edit is a change.
    let again = review(&app);
    assert_eq!(again.stdout, "project is ready\n", "unchanged: {again:?}");
    write_files(
        dir.path(),
        &[(
            "libs/wlib/index.js",
            "let hits = 0;\nexports.bump = () => ++hits;\nexports.inner = \"edited\";\nexports.peer = () => require(\"wlib2\");\n",
        )],
    );
    let edited = review(&app);
    assert!(
        edited.stdout.contains("~ \"flow:flows/hello\""),
        "{edited:?}"
    );
    assert_eq!(run_hello(&app)["inner"], "edited");
}

/// In a workspace with no member named `@jigging/flow`, the Flow's
/// `workspace:*` SDK is the bundled one while its libraries are captured.
#[test]
fn a_workspace_flow_naming_the_sdk_from_its_workspace_gets_the_bundled_sdk() {
    let registry = registry();
    let dir = workspace(registry);
    // Added after the lock was made: Bun's lock never names the bundled SDK.
    write_files(
        dir.path(),
        &[(
            "app/flows/hello/package.json",
            "{\"name\":\"hello\",\"dependencies\":{\"@jigging/flow\":\"workspace:*\",\"greet-lib\":\"^2.0.0\",\"wlib\":\"workspace:*\"}}",
        )],
    );
    let app = dir.path().join("app");
    let reviewed = review(&app);
    assert!(
        reviewed.stdout.contains("  \"flows/hello/package.json\" names @jigging/flow \"workspace:*\": the bundled SDK 1.0.0 is used\n"),
        "{reviewed:?}"
    );
    let output = run_hello(&app);
    assert_eq!(output["top"], "2.0.0", "{output}");
    assert_eq!(output["inner"], "1.0.0", "{output}");
}

#[test]
fn a_moved_workspace_member_is_a_changed_target() {
    let registry = registry();
    let dir = workspace(registry);
    review(&dir.path().join("app"));
    // The same Flow, libraries and lock bytes, one level deeper in the
    // workspace: only the member path differs.
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::rename(dir.path().join("app"), dir.path().join("sub/app")).unwrap();
    let root = std::fs::read_to_string(dir.path().join("package.json")).unwrap();
    std::fs::write(
        dir.path().join("package.json"),
        root.replace("\"app/flows/*\"", "\"sub/app/flows/*\""),
    )
    .unwrap();
    registry.lock_in(&registry.url, dir.path());
    let app = dir.path().join("sub/app");
    let moved = review(&app);
    assert!(moved.stdout.contains("~ \"flow:flows/hello\""), "{moved:?}");
    let layout =
        std::fs::read_to_string(retained_layout_with(&app, "sub/app/flows/hello")).unwrap();
    assert!(
        layout.ends_with("\"member\":\"sub/app/flows/hello\"}"),
        "{layout}"
    );
    // Run from the new member path, the Flow's `../../../libs/wlib2` import
    // no longer resolves, exactly as in the moved workspace itself.
    let run = run_jig(&app, &["run", "flow:flows/hello", "--input", "\"Ada\""]);
    assert_eq!(run.status, 1, "{run:?}");
    assert_eq!(run.json()["code"], "EXECUTION_FAILED", "{run:?}");
}

/// The retained layout of the `workspace` fixture: the installer's aliases
/// to the two selected libraries at the workspace root's node_modules, and
/// the Flow's member path; the Flow's own and the unselected member's
/// links are omitted.
const WORKSPACE_LAYOUT: &str = "{\"aliases\":[{\"path\":\"node_modules/.jig-workspace/node_modules/wlib\",\"target\":\"../libs/wlib\"},{\"path\":\"node_modules/.jig-workspace/node_modules/wlib2\",\"target\":\"../libs/wlib2\"}],\"member\":\"app/flows/hello\"}";

/// The retained layout whose member path is `member`.
fn retained_layout_with(app: &Path, member: &str) -> std::path::PathBuf {
    let tail = format!("\"member\":\"{member}\"}}");
    std::fs::read_dir(app.join(".jig/store/blobs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| std::fs::read(p).unwrap().ends_with(tail.as_bytes()))
        .expect("the layout is retained in the store")
}

fn retained_layout(app: &Path) -> std::path::PathBuf {
    std::fs::read_dir(app.join(".jig/store/blobs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| std::fs::read(p).unwrap().starts_with(b"{\"aliases\":"))
        .expect("the layout is retained in the store")
}

#[test]
fn workspace_aliases_are_retained_layout_and_a_corrupt_layout_fails_closed() {
    let registry = registry();
    let dir = workspace(registry);
    let app = dir.path().join("app");
    review(&app);
    let layout = retained_layout(&app);
    assert_eq!(std::fs::read_to_string(&layout).unwrap(), WORKSPACE_LAYOUT);
    // The layout is not a file record of the prepared package.
    let plan = std::fs::read_dir(app.join(".jig/store/packages"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .find(|m| m.contains("node_modules/.jig-workspace/libs/wlib/index.js"))
        .expect("the prepared package is retained");
    assert!(!plan.contains("node_modules/wlib/"), "{plan}");
    assert_eq!(run_hello(&app)["count"], 2);
    // The layout changed behind jig's back (to an alias through an alias): the Run
    // and the reuse at review both fail closed; nothing is fetched again.
    std::fs::write(&layout, WORKSPACE_LAYOUT.replace("../libs/wlib2", "wlib")).unwrap();
    let run = run_jig(&app, &["run", "flow:flows/hello", "--input", "\"Ada\""]);
    assert_ne!(run.status, 0, "{run:?}");
    assert!(
        run.stdout.contains("\"code\":\"PROJECT_STATE_INVALID\""),
        "{run:?}"
    );
    let again = run_jig(&app, &["review", "--yes"]);
    assert_refused(&again, 1, "PROJECT_STATE_INVALID");
    std::fs::remove_file(&layout).unwrap();
    let run = run_jig(&app, &["run", "flow:flows/hello", "--input", "\"Ada\""]);
    assert!(
        run.stdout.contains("\"code\":\"PROJECT_STATE_INVALID\""),
        "{run:?}"
    );
}

/// The file records of the prepared package retained for the `workspace`
/// fixture's newest preparation holding `marker`.
fn prepared_file_count(app: &Path, marker: &str) -> usize {
    std::fs::read_dir(app.join(".jig/store/packages"))
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .map(|m| serde_json::from_slice::<serde_json::Value>(&m).unwrap())
        .find(|m| m["files"].get(marker).is_some())
        .expect("the prepared package is retained")["files"]
        .as_object()
        .unwrap()
        .len()
}

#[test]
fn files_and_aliases_share_4096_records() {
    const RECORDS: usize = 4096;
    let registry = registry();
    let dir = workspace(registry);
    let app = dir.path().join("app");
    review(&app);
    let base = prepared_file_count(&app, "node_modules/.jig-workspace/libs/wlib2/index.js");
    let aliases = WORKSPACE_LAYOUT.matches("\"path\"").count();
    // wlib2 selects every file: pad it to exactly 4096 records in all.
    let pad = RECORDS - aliases - base;
    let padding: Vec<(String, String)> = (0..pad)
        .map(|i| (format!("libs/wlib2/pad/{i}.txt"), String::new()))
        .collect();
    let refs: Vec<(&str, &str)> = padding
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    write_files(dir.path(), &refs);
    review(&app);
    assert_eq!(
        prepared_file_count(
            &app,
            &format!("node_modules/.jig-workspace/libs/wlib2/pad/{}.txt", pad - 1)
        ) + aliases,
        RECORDS
    );
    assert_eq!(run_hello(&app)["count"], 2);
    // One record past it.
    write_files(dir.path(), &[("libs/wlib2/pad/past.txt", "")]);
    let past = run_jig(&app, &["review", "--yes", "--details"]);
    assert_refused(&past, 1, "PACKAGE_BUN_LIMIT_EXCEEDED");
    assert!(past.stderr.contains("file and alias records"), "{past:?}");
}

#[test]
fn workspace_requirements_never_fall_back_to_a_registry() {
    let registry = registry();
    let dir = workspace(registry);
    let app = dir.path().join("app");
    write_files(
        dir.path(),
        &[(
            "app/flows/hello/package.json",
            "{\"name\":\"hello\",\"dependencies\":{\"greet-lib\":\"workspace:*\"}}",
        )],
    );
    let run = run_jig(&app, &["review", "--yes"]);
    assert_refused(&run, 1, "PACKAGE_BUN_SOURCE_UNSUPPORTED");
    // A member lock is not supported: members use the root lock.
    let dir = workspace(registry);
    let app = dir.path().join("app");
    write_files(dir.path(), &[("libs/wlib2/bun.lock", "{}")]);
    let run = run_jig(&app, &["review", "--yes"]);
    assert_refused(&run, 1, "PACKAGE_BUN_MANIFEST_UNSUPPORTED");
}

#[test]
fn dependencies_are_not_run_without_bun() {
    // Deno would run the package without its dependencies: refused.
    let dir = project_with(GREET_1, None, DEAD_REGISTRY, 9);
    let deno = ["/usr/bin/deno", "/usr/local/bin/deno", "/bin/deno"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("deno is installed (.ci/setup)");
    write_files(
        dir.path(),
        &[(
            ".test-config-home/jig/host.toml",
            &format!("[runtimes]\nbun = \"/nonexistent/bun\"\ndeno = \"{deno}\"\n"),
        )],
    );
    let run = run_jig(dir.path(), &["review", "--yes"]);
    assert_refused(&run, 2, "PACKAGE_BUN_PREPARATION_FAILED");
}

/// A registry that accepts connections and never answers.
struct Stall {
    port: u16,
    _thread: std::thread::JoinHandle<()>,
}

fn stall() -> Stall {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let thread = std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    Stall {
        port,
        _thread: thread,
    }
}

#[test]
fn an_installer_past_its_deadline_is_ended_and_the_review_fails() {
    let registry = registry();
    let stalled = stall();
    let url = format!("http://127.0.0.1:{}/", stalled.port);
    let lock = registry.lock_for(GREET_1).replace(&registry.url, &url);
    let dir = project_with(GREET_1, Some(&lock), &url, stalled.port);
    let run = run_jig(dir.path(), &["review", "--yes", "--details"]);
    assert_refused(&run, 2, "PACKAGE_BUN_PREPARATION_FAILED");
    assert!(run.stderr.contains("within 60 s"), "{run:?}");
    assert!(!dir.path().join("jig.lock").exists(), "nothing admitted");
}

/// `jig lock` (issue 49): the author's one way to make a package's
/// bun.lock although `@jigging/flow` is on no registry. It resolves from
/// the configured registry in the envelope, leaves the bundled SDK out,
/// replaces a stale lock, and review then prepares from it with no flag;
/// a package without dependencies has nothing to lock.
#[test]
fn jig_lock_writes_the_lock_review_then_prepares_from_without_the_flag() {
    let registry = registry();
    let manifest = "{\"name\":\"hello\",\"dependencies\":{\"@jigging/flow\":\"1.0.0\",\"greet-lib\":\"^1.0.0\"}}";
    let dir = project_with(manifest, None, &registry.url, registry.port());
    // A stale lock (for another manifest) is replaced, not kept.
    write_files(
        dir.path(),
        &[("flows/hello/bun.lock", "{\"stale\": true}\n")],
    );
    let locked = run_jig(dir.path(), &["lock", "flows/hello"]);
    assert_eq!(locked.status, 0, "{locked:?}");
    assert_eq!(
        locked.stdout,
        "wrote flows/hello/bun.lock; commit it, then jig review\n"
    );
    assert!(
        locked
            .stderr
            .starts_with("Resolving dependencies for flows/hello from http://127.0.0.1:"),
        "{locked:?}"
    );
    let lock = std::fs::read_to_string(dir.path().join("flows/hello/bun.lock")).unwrap();
    assert!(lock.contains("\"greet-lib\""), "{lock}");
    assert!(
        !lock.contains("@jigging/flow@"),
        "the bundled SDK is never resolved: {lock}"
    );
    // Review prepares from the committed lock: no resolution, no flag.
    let reviewed = run_jig(dir.path(), &["review", "--yes"]);
    assert_eq!(reviewed.status, 0, "{reviewed:?}");
    assert!(
        !reviewed.stderr.contains("Resolving dependencies"),
        "{reviewed:?}"
    );
    assert_eq!(run_hello(dir.path())["message"], "Hello, Ada!");

    let plain = project_with(
        "{\"name\":\"hello\",\"dependencies\":{\"@jigging/flow\":\"1.0.0\"}}",
        None,
        &registry.url,
        registry.port(),
    );
    let nothing = run_jig(plain.path(), &["lock", "flows/hello"]);
    assert_eq!(nothing.status, 0, "{nothing:?}");
    assert_eq!(
        nothing.stdout,
        "flows/hello has no runtime dependencies besides the bundled SDK: nothing to lock\n"
    );
    assert!(!plain.path().join("flows/hello/bun.lock").exists());
    let refused = run_jig(plain.path(), &["lock", "flows"]);
    assert_eq!(refused.status, 2, "{refused:?}");
    assert!(
        refused
            .stderr
            .starts_with("JIG_USAGE: flows has no package.json"),
        "{refused:?}"
    );
}
