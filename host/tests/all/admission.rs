//! Review and admission (seed 002 §6–§7, §10, §11 items 5–8): nothing runs
//! that was not approved, and no crash leaves mixed authority.

use std::path::Path;

use crate::support::*;

const HELLO_FLOW: &str = "from jiggy.flow import handle\n\nasync def run(ctx):\n    return {\"outcome\": \"done\", \"output\": \"Hello\"}\n\nhandle(run)\n";

fn hello_project() -> tempfile::TempDir {
    project(&[
        (
            "flows/hello/FLOW.md",
            "---\nname: hello\ndescription: Greets.\n---\n",
        ),
        ("flows/hello/flow.py", HELLO_FLOW),
    ])
}

fn greeting_of(dir: &Path) -> String {
    let run = run_jig(dir, &["run", "flow:flows/hello"]);
    assert_eq!(run.status, 0, "{run:?}");
    run.json()["output"].as_str().unwrap().to_string()
}

fn edit(dir: &Path, word: &str) {
    std::fs::write(
        dir.join("flows/hello/flow.py"),
        HELLO_FLOW.replace("Hello", word),
    )
    .unwrap();
}

fn pointer(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join(".jig/admission/current")).unwrap()
}

#[test]
fn every_crash_point_of_apply_leaves_old_or_new_complete_authority() {
    // (crash point, lock visible afterwards is new, admission is new)
    let points = [
        ("apply:before-lock", false, false),
        ("apply:lock-written", false, false),
        ("apply:after-lock", true, false),
        ("apply:pointer-written", true, false),
        ("apply:after-pointer", true, true),
    ];
    for (point, new_lock, new_admission) in points {
        let dir = hello_project();
        review(dir.path());
        let old_lock = std::fs::read(dir.path().join("jig.lock")).unwrap();
        edit(dir.path(), "Goodbye");
        let crashed = output(
            jig(dir.path())
                .args(["review", "--yes"])
                .env("JIG_TEST_CRASH_AT", point)
                .output()
                .unwrap(),
        );
        assert_ne!(
            crashed.status, 0,
            "{point}: the hook must stop the process: {crashed:?}"
        );
        let lock = std::fs::read(dir.path().join("jig.lock")).unwrap();
        assert_eq!(lock != old_lock, new_lock, "{point}: visible lock");
        let expected = if new_admission { "Goodbye" } else { "Hello" };
        assert_eq!(
            greeting_of(dir.path()),
            expected,
            "{point}: admitted generation"
        );
        // Reviewing again converges on the new complete state.
        review(dir.path());
        assert_eq!(
            greeting_of(dir.path()),
            "Goodbye",
            "{point}: after converging"
        );
    }
}

#[test]
fn the_old_generation_runs_until_the_edit_is_applied() {
    let dir = hello_project();
    review(dir.path());
    edit(dir.path(), "Changed");
    assert_eq!(greeting_of(dir.path()), "Hello");
    let refused = run_jig(dir.path(), &["review"]);
    assert_eq!(refused.status, 2, "{refused:?}");
    assert!(
        refused.stdout.contains("~ \"flows/hello\" sha256:"),
        "the change is shown: {refused:?}"
    );
    assert_eq!(
        greeting_of(dir.path()),
        "Hello",
        "a declined review grants nothing"
    );
    review(dir.path());
    assert_eq!(greeting_of(dir.path()), "Changed");
    // Deleting a member proposes removal; the old generation stays usable.
    std::fs::remove_dir_all(dir.path().join("flows/hello")).unwrap();
    assert_eq!(greeting_of(dir.path()), "Changed");
    let removal = run_jig(dir.path(), &["review"]);
    assert!(removal.stdout.contains("- \"flows/hello\""), "{removal:?}");
    assert!(
        removal.stdout.contains("- \"flow:flows/hello\""),
        "{removal:?}"
    );
}

/// An edited Flow still runs its admitted bytes, and `jig run` says so:
/// one line on stderr naming what changed and `jig review`, and
/// `sourceChanged` in the terminal. A file rewritten with the same bytes
/// is no change; a file added is one; so is an author module; a review
/// that admits the edit ends the notice, and so does undoing the edit.
#[test]
fn a_run_says_when_the_live_source_differs_from_what_it_runs() {
    let dir = hello_project();
    review(dir.path());
    let quiet = |dir: &Path| {
        let run = run_jig(dir, &["run", "flow:flows/hello"]);
        assert_eq!(run.status, 0, "{run:?}");
        assert!(!run.stderr.contains("changed since review"), "{run:?}");
        assert!(run.json().get("sourceChanged").is_none(), "{run:?}");
    };
    quiet(dir.path());
    // The same bytes written again: new times, same content.
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(dir.path().join("flows/hello/flow.py"), HELLO_FLOW).unwrap();
    quiet(dir.path());

    edit(dir.path(), "Changed");
    let run = run_jig(dir.path(), &["run", "flow:flows/hello"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(run.json()["output"], "Hello", "the admitted bytes run");
    assert_eq!(
        run.stderr,
        "note: flows/hello/flow.py changed since review; this Run runs the admitted version \
         (jig review admits the change)\n"
    );
    assert_eq!(
        run.json()["sourceChanged"],
        serde_json::json!(["flows/hello/flow.py"])
    );
    std::fs::write(dir.path().join("flows/hello/notes.txt"), "new").unwrap();
    std::fs::write(
        dir.path().join("jig.ts"),
        std::fs::read_to_string(dir.path().join("jig.ts")).unwrap() + "\n// edited\n",
    )
    .unwrap();
    let run = run_jig(dir.path(), &["run", "flow:flows/hello"]);
    assert_eq!(
        run.json()["sourceChanged"],
        serde_json::json!(["flows/hello/flow.py", "flows/hello/notes.txt", "jig.ts"]),
        "{run:?}"
    );
    review(dir.path());
    quiet(dir.path());
    assert_eq!(greeting_of(dir.path()), "Changed");
    // Edited, then undone: the admitted bytes again, found by digest.
    edit(dir.path(), "Again");
    let run = run_jig(dir.path(), &["run", "flow:flows/hello"]);
    assert!(run.stderr.contains("changed since review"), "{run:?}");
    edit(dir.path(), "Changed");
    quiet(dir.path());
    // A review that finds the project unchanged keeps its new times.
    review(dir.path());
    quiet(dir.path());
}

/// Review shows the bytes it admits: off a terminal only when asked
/// (`--diff`), so the reference's text is unchanged; each changed
/// package's files with sizes, a unified diff of each text file, a binary
/// by its digest; and a fresh clone says which packages match `jig.lock`.
#[test]
fn review_shows_the_files_and_the_diff_it_approves() {
    let dir = hello_project();
    let first = review(dir.path());
    assert!(!first.stdout.contains("Files:"), "{first:?}");
    edit(dir.path(), "Changed");
    std::fs::write(dir.path().join("flows/hello/logo.bin"), b"\x89P\0\x01").unwrap();
    let plain = run_jig(dir.path(), &["review"]);
    assert_eq!(plain.status, 2, "{plain:?}");
    assert!(!plain.stdout.contains("Files:"), "{plain:?}");
    let run = run_jig(dir.path(), &["review", "--diff", "--yes"]);
    assert_eq!(run.status, 0, "{run:?}");
    let files = &run.stdout[run.stdout.find("Files:\n").expect("a files section")..];
    let size = HELLO_FLOW.len();
    assert!(
        files.starts_with("Files:\n  ~ \"flows/hello\" was sha256:"),
        "{run:?}"
    );
    assert!(
        files.contains(&format!(
            "\n      ~ \"flow.py\" {size} -> {} bytes\n",
            size + "Changed".len() - "Hello".len()
        )),
        "{run:?}"
    );
    assert!(
        files.contains("\n      + \"logo.bin\" 4 bytes, not shown as text, sha256:"),
        "{run:?}"
    );
    assert!(
        files.contains(
            "--- a/flows/hello/flow.py\n+++ b/flows/hello/flow.py\n@@ -1,6 +1,6 @@\n from jiggy.flow import handle\n \n async def run(ctx):\n-    return {\"outcome\": \"done\", \"output\": \"Hello\"}\n+    return {\"outcome\": \"done\", \"output\": \"Changed\"}\n \n handle(run)\n"
        ),
        "{run:?}"
    );
    assert!(
        files.ends_with(" handle(run)\nproject is ready\n"),
        "{run:?}"
    );
    assert_eq!(greeting_of(dir.path()), "Changed");

    // A fresh clone: the sources and jig.lock, no .jig/.
    let clone = tempfile::tempdir().unwrap();
    for file in [
        "jig.ts",
        "jig.lock",
        "flows/hello/FLOW.md",
        "flows/hello/logo.bin",
    ] {
        let to = clone.path().join(file);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(dir.path().join(file), to).unwrap();
    }
    edit(clone.path(), "Changed");
    let run = run_jig(clone.path(), &["review", "--diff", "--yes"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert!(
        run.stdout.contains(
            "jig.lock:\n    \"flows/hello\" matches jig.lock\nFiles:\n  + \"flows/hello\"\n"
        ),
        "{run:?}"
    );
    // --diff shows a new package's text files whole.
    assert!(
        run.stdout
            .contains("--- /dev/null\n+++ b/flows/hello/FLOW.md\n"),
        "{run:?}"
    );
    let other = tempfile::tempdir().unwrap();
    for file in ["jig.ts", "jig.lock", "flows/hello/FLOW.md"] {
        let to = other.path().join(file);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(dir.path().join(file), to).unwrap();
    }
    edit(other.path(), "Other");
    let run = run_jig(other.path(), &["review", "--diff", "--yes"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("jig.lock:\n  ~ \"flows/hello\" differs from jig.lock (sha256:"),
        "{run:?}"
    );
}

#[test]
fn a_missing_or_drifted_lock_is_repaired_without_a_new_generation() {
    let dir = hello_project();
    review(dir.path());
    let lock = std::fs::read(dir.path().join("jig.lock")).unwrap();
    let admitted = pointer(dir.path());
    std::fs::remove_file(dir.path().join("jig.lock")).unwrap();
    let repaired = run_jig(dir.path(), &["review"]);
    assert_eq!(repaired.status, 0, "{repaired:?}");
    assert!(
        repaired.stdout.starts_with("jig.lock repaired"),
        "{repaired:?}"
    );
    assert_eq!(std::fs::read(dir.path().join("jig.lock")).unwrap(), lock);
    assert_eq!(pointer(dir.path()), admitted, "no new generation");
    std::fs::write(dir.path().join("jig.lock"), b"{}\n").unwrap();
    assert_eq!(run_jig(dir.path(), &["review"]).status, 0);
    assert_eq!(std::fs::read(dir.path().join("jig.lock")).unwrap(), lock);
    assert_eq!(pointer(dir.path()), admitted);
}

#[test]
fn formatting_only_edits_need_no_new_admission() {
    let dir = project(&[
        (
            "flows/hello/FLOW.md",
            "---\nname: hello\ndescription: Greets.\n---\n",
        ),
        ("flows/hello/flow.py", HELLO_FLOW),
    ]);
    review(dir.path());
    let spaced = JIG_TS.replace(
        "flows: discover(\"./flows\")",
        "flows:    discover( \"./flows\" )",
    );
    std::fs::write(dir.path().join("jig.ts"), spaced).unwrap();
    let again = run_jig(dir.path(), &["review"]);
    assert_eq!(again.status, 0, "{again:?}");
    assert_eq!(again.stdout, "project is ready\n");
}

#[test]
fn a_second_owner_is_told_the_project_is_busy() {
    let dir = project(&[
        ("flows/slow/FLOW.md", "---\nname: slow\ndescription: Sleeps.\n---\n"),
        (
            "flows/slow/flow.py",
            "import asyncio\nfrom jiggy.flow import handle\n\nasync def run(ctx):\n    await asyncio.sleep(3)\n    return {\"outcome\": \"done\", \"output\": None}\n\nhandle(run)\n",
        ),
    ]);
    review(dir.path());
    let mut first = jig(dir.path())
        .args(["run", "flow:flows/slow"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The Run holds the project from when it takes the owner lock until
    // its three-second Flow ended.
    crate::queue::wait_until(
        "the Run to take the owner lock",
        std::time::Duration::from_secs(30),
        || owner_lock_held(dir.path()),
    );
    let second = run_jig(dir.path(), &["review", "--yes"]);
    assert_eq!(second.status, 2, "{second:?}");
    assert!(second.stderr.starts_with("PROJECT_BUSY: "), "{second:?}");
    assert!(first.wait().unwrap().success());
}

#[test]
fn unsafe_or_invalid_state_is_refused_and_kept() {
    use std::os::unix::fs::PermissionsExt;
    let dir = hello_project();
    review(dir.path());
    let state = dir.path().join(".jig");
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o777)).unwrap();
    let unsafe_run = run_jig(dir.path(), &["run", "flow:flows/hello"]);
    assert_eq!(unsafe_run.status, 1, "{unsafe_run:?}");
    assert!(
        unsafe_run.stderr.starts_with("PROJECT_UNSAFE: "),
        "{unsafe_run:?}"
    );
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();

    std::fs::write(state.join("admission/current"), b"{\"generation\":\"one\"}").unwrap();
    let invalid = run_jig(dir.path(), &["run", "flow:flows/hello"]);
    assert_eq!(invalid.status, 1, "{invalid:?}");
    assert!(
        invalid.stderr.starts_with("PROJECT_STATE_INVALID: "),
        "{invalid:?}"
    );
    assert_eq!(
        std::fs::read(state.join("admission/current")).unwrap(),
        b"{\"generation\":\"one\"}",
        "failed acquisition preserves retained state"
    );
}

#[test]
fn invalid_package_metadata_rejects_the_whole_candidate() {
    let dir = project(&[
        (
            "flows/good/FLOW.md",
            "---\nname: good\ndescription: Fine.\n---\n",
        ),
        ("flows/good/flow.py", HELLO_FLOW),
        (
            "flows/bad/FLOW.md",
            "---\nname: bad\ndescription: Has an unknown field.\ncolour: blue\n---\n",
        ),
        ("flows/bad/flow.py", HELLO_FLOW),
    ]);
    let run = run_jig(dir.path(), &["review", "--yes"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(run.stderr.starts_with("INVALID_CANDIDATE: "), "{run:?}");
    assert!(run.stderr.contains("at \"flows/bad/FLOW.md\""), "{run:?}");
    assert!(!dir.path().join("jig.lock").exists());
    assert!(!dir.path().join(".jig/admission/current").exists());
}

/// Run `jig review` on a pseudo-terminal (util-linux `script`), answering `answer`.
fn review_on_a_terminal(dir: &Path, answer: &str) -> Run {
    use std::io::Write;
    let command = format!("{} review", env!("CARGO_BIN_EXE_jig"));
    let mut child = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .current_dir(dir)
        .env("XDG_CONFIG_HOME", dir.join(".test-config-home"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("script (util-linux) runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(answer.as_bytes())
        .unwrap();
    output(child.wait_with_output().unwrap())
}

#[test]
fn a_terminal_asks_and_only_yes_admits() {
    let declined = hello_project();
    let run = review_on_a_terminal(declined.path(), "n\n");
    assert_eq!(run.status, 1, "{run:?}");
    assert!(
        run.stdout
            .contains("Approve this exact revision for execution? [y/N] "),
        "{run:?}"
    );
    // On a terminal the failure leads with the explanation, then the code.
    assert!(
        run.stdout.contains("project changes were not admitted"),
        "{run:?}"
    );
    assert!(run.stdout.contains("code:"), "{run:?}");
    assert!(run.stdout.contains(" JIG_CHANGES_DECLINED"), "{run:?}");
    assert!(!declined.path().join("jig.lock").exists());

    let approved = hello_project();
    let run = review_on_a_terminal(approved.path(), "YES\n");
    assert_eq!(run.status, 0, "{run:?}");
    assert!(run.stdout.contains("project is ready"), "{run:?}");
    assert_eq!(greeting_of(approved.path()), "Hello");
}

#[test]
fn a_changed_runtime_requires_a_new_review_before_any_flow_code_starts() {
    let dir = hello_project();
    let runtime_dir = tempfile::tempdir().unwrap();
    let python = runtime_dir.path().join("python3");
    std::fs::copy(std::fs::canonicalize("/usr/bin/python3").unwrap(), &python).unwrap();
    write_files(
        dir.path(),
        &[(
            ".test-config-home/jig/host.toml",
            &format!("[runtimes]\npython = \"{}\"\n", python.display()),
        )],
    );
    review(dir.path());
    // The operator's runtime changes after approval.
    let mut bytes = std::fs::read(&python).unwrap();
    bytes.extend_from_slice(b"\0changed");
    std::fs::write(&python, bytes).unwrap();
    let run = run_jig(dir.path(), &["run", "flow:flows/hello"]);
    assert_eq!(run.status, 1, "{run:?}");
    let terminal = run.json();
    assert_eq!(terminal["code"], "REVIEW_REQUIRED", "{run:?}");
    assert_eq!(
        terminal["details"],
        serde_json::json!({"reason": "EXECUTION_ENVIRONMENT_CHANGED", "flowStarted": false})
    );
    assert_eq!(
        terminal["diagnostics"]["stderrBytes"], 0,
        "no Flow code ran"
    );
}
