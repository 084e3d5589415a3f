//! Durable Run records: idempotent replay, conflicts before dispatch,
//! coordinator loss, and `jig runs` (seed 002 §11 items 9–12, 14).

use std::path::Path;

use crate::files::{files_example, source_folder};
use crate::support::*;

fn summarize(project: &Path, source: &Path, out: &Path, extra: &[&str]) -> Run {
    let mut args = vec![
        "run".to_string(),
        "flow:flows/summarize".into(),
        "--attach".into(),
        format!("source={}", source.display()),
        "--out".into(),
        out.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_jig(project, &args)
}

fn run_ids(project: &Path) -> Vec<String> {
    let runs = run_jig(project, &["runs"]);
    assert_eq!(runs.status, 0, "{runs:?}");
    runs.stdout
        .lines()
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect()
}

#[test]
fn item_09_only_admitted_targets_run_and_input_is_validated_first() {
    let project = files_example();
    let run = run_jig(project.path(), &["run", "flows/summarize"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(
        run.stderr.starts_with("JIG_RUN_TARGET_INVALID: "),
        "{run:?}"
    );
    let run = run_jig(project.path(), &["run", "flow:flows/other"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(
        run.stderr.contains("admitted: flow:flows/summarize"),
        "the error names the admitted targets: {run:?}"
    );
    let run = run_jig(
        project.path(),
        &["run", "flow:flows/summarize", "--input", "{"],
    );
    assert_eq!(run.status, 1, "{run:?}");
    assert!(run.stderr.starts_with("JIG_RUN_INPUT_INVALID: "), "{run:?}");
    assert!(run_ids(project.path()).is_empty());
}

#[test]
fn item_10_same_key_and_files_replay_one_run_changed_files_conflict() {
    let project = files_example();
    let source = source_folder();
    let out = tempfile::tempdir().unwrap();
    let dest = out.path().join("packet");
    let first = summarize(project.path(), source.path(), &dest, &["--key", "k1"]);
    assert_eq!(first.status, 0, "{first:?}");
    let published = std::fs::read(dest.join("result.json")).unwrap();

    // Same key, same command: the same Run, printed again, not executed.
    let again = summarize(project.path(), source.path(), &dest, &["--key", "k1"]);
    assert_eq!(again.status, 0, "{again:?}");
    assert_eq!(again.stdout, first.stdout);
    assert_eq!(run_ids(project.path()).len(), 1);
    assert_eq!(std::fs::read(dest.join("result.json")).unwrap(), published);

    // Same key, one file changed: a conflict before dispatch.
    std::fs::write(source.path().join("empty"), b"now full").unwrap();
    let changed = summarize(project.path(), source.path(), &dest, &["--key", "k1"]);
    assert_eq!(changed.status, 1, "{changed:?}");
    assert!(
        changed.stderr.starts_with("SUBMISSION_CONFLICT: "),
        "{changed:?}"
    );
    assert_eq!(changed.stdout, "");

    // Same key and files, another destination: also different content.
    let other = summarize(
        project.path(),
        source.path(),
        &out.path().join("other"),
        &["--key", "k1"],
    );
    assert_eq!(other.status, 1, "{other:?}");
    assert!(
        other.stderr.starts_with("SUBMISSION_CONFLICT: "),
        "{other:?}"
    );
    assert_eq!(run_ids(project.path()).len(), 1);

    // Without a key the same command is a new submission.
    let fresh = summarize(
        project.path(),
        source.path(),
        &out.path().join("fresh"),
        &[],
    );
    assert_eq!(fresh.status, 0, "{fresh:?}");
    assert_eq!(run_ids(project.path()).len(), 2);
}

#[test]
fn item_11_a_killed_coordinator_is_lost_and_never_replayed() {
    let project = files_example();
    let source = source_folder();
    let out = tempfile::tempdir().unwrap();
    let dest = out.path().join("packet");
    let mut command = jig(project.path());
    command
        .args(["run", "flow:flows/summarize", "--attach"])
        .arg(format!("source={}", source.path().display()))
        .args([
            "--input",
            r#"{"sleepSeconds":20}"#,
            "--timeout",
            "60s",
            "--key",
            "k",
        ])
        .arg("--out")
        .arg(&dest)
        .env("JIG_TEST_ABORT_AFTER_DISPATCH", "1500");
    let started = std::time::Instant::now();
    let killed = output(command.output().unwrap());
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    assert_eq!(killed.status, -1, "ended by a signal: {killed:?}");
    assert_eq!(killed.stdout, "");
    assert!(!dest.exists(), "no packet from a lost coordinator");
    // 14: the Flow's processes die with their coordinator.
    let marker = project.path().to_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !processes_mentioning(&marker).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "left running: {:?}",
            processes_mentioning(&marker)
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }

    // 12: the dead coordinator's project ownership is released; the next
    // command fences the pending Run as lost.
    let runs = run_jig(project.path(), &["runs"]);
    assert_eq!(runs.status, 0, "{runs:?}");
    let line = runs.stdout.lines().next().unwrap().to_string();
    let fields: Vec<&str> = line.split('\t').collect();
    assert_eq!(
        &fields[1..],
        ["lost", "flow:flows/summarize", "COORDINATOR_LOST"]
    );
    let work = project.path().join(".jig/work");
    assert_eq!(
        std::fs::read_dir(&work).map(|d| d.count()).unwrap_or(0),
        0,
        "the lost Run's private work is removed"
    );
    let show = run_jig(project.path(), &["runs", "show", fields[0]]);
    assert_eq!(show.status, 0, "{show:?}");
    let record = show.json();
    assert_eq!(
        record["terminal"],
        serde_json::json!({
            "status": "lost",
            "code": "COORDINATOR_LOST",
            "message": record["terminal"]["message"],
        })
    );
    assert!(record["attachments"]["source"].is_array());
    assert_eq!(record["output"], dest.to_str().unwrap());

    // The same key returns the lost Run; nothing runs again.
    let again = summarize(
        project.path(),
        source.path(),
        &dest,
        &[
            "--input",
            r#"{"sleepSeconds":20}"#,
            "--timeout",
            "60s",
            "--key",
            "k",
        ],
    );
    assert_eq!(again.status, 2, "{again:?}");
    let terminal = again.json();
    assert_eq!(terminal["status"], "lost");
    assert_eq!(terminal["code"], "COORDINATOR_LOST");
    assert!(!dest.exists());
    assert_eq!(run_ids(project.path()).len(), 1);
}

#[test]
fn runs_lists_newest_first_and_shows_one_record() {
    let project = files_example();
    let source = source_folder();
    let out = tempfile::tempdir().unwrap();
    let first = summarize(project.path(), source.path(), &out.path().join("a"), &[]);
    let second = summarize(project.path(), source.path(), &out.path().join("b"), &[]);
    let ids = run_ids(project.path());
    assert_eq!(
        ids,
        [
            second.json()["runId"].as_str().unwrap(),
            first.json()["runId"].as_str().unwrap()
        ]
    );
    let show = run_jig(project.path(), &["runs", "show", &ids[1]]);
    assert_eq!(show.status, 0, "{show:?}");
    let record = show.json();
    assert_eq!(record["target"], "flow:flows/summarize");
    assert_eq!(record["inputDigest"], first.json()["input"]["digest"]);
    assert_eq!(record["attachments"], first.json()["input"]["attachments"]);
    assert_eq!(record["terminal"], first.json());
    let missing = run_jig(project.path(), &["runs", "show", "run-0-none"]);
    assert_eq!(missing.status, 1, "{missing:?}");
    assert!(missing.stderr.starts_with("RUN_NOT_FOUND: "), "{missing:?}");
}

#[test]
fn item_15_binding_children_get_empty_attachments_and_no_history_of_their_own() {
    let parent = "from jiggy.flow import handle\n\nasync def run(context):\n    child = await context.run_child_flow(operation_id='probe:1', slot='probe', input=None)\n    return {'outcome': 'done', 'output': {'parent': sorted(context.attachments), 'child': child['output']}}\n\nhandle(run)\n";
    let child = "from jiggy.flow import handle\n\nasync def run(context):\n    return {'outcome': 'done', 'output': sorted(context.attachments)}\n\nhandle(run)\n";
    let project = project(&[
        (
            "flows/parent/FLOW.md",
            "---\nname: parent\ndescription: Ask the probe slot what it was given.\nattachments:\n  source: read\n---\n\nParent.\n",
        ),
        ("flows/parent/flow.py", parent),
        (
            "flows/child/FLOW.md",
            "---\nname: child\ndescription: Report the attachments this Run has.\n---\n\nChild.\n",
        ),
        ("flows/child/flow.py", child),
        (
            "bindings/parent.ts",
            "import { defineBinding } from \"@jigging/jig\";\n\nexport default defineBinding({\n  package: \"./flows/parent\",\n  slots: { probe: \"flow:./flows/child\" },\n});\n",
        ),
    ]);
    review(project.path());
    let source = source_folder();
    let run = run_jig(
        project.path(),
        &[
            "run",
            "binding:parent",
            "--attach",
            &format!("source={}", source.path().display()),
        ],
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(
        run.json()["output"],
        serde_json::json!({"parent": ["source"], "child": []})
    );
    assert_eq!(
        run_ids(project.path()).len(),
        1,
        "the child has no Run of its own"
    );
}

#[test]
fn item_12_a_live_run_owns_the_project_until_it_settles() {
    let project = files_example();
    let source = source_folder();
    let out = tempfile::tempdir().unwrap();
    let first = jig(project.path())
        .args(["run", "flow:flows/summarize", "--attach"])
        .arg(format!("source={}", source.path().display()))
        .args(["--input", r#"{"sleepSeconds":2}"#, "--out"])
        .arg(out.path().join("first"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Live from when it takes the owner lock until its two-second Flow ended.
    crate::queue::wait_until(
        "the first Run to take the owner lock",
        std::time::Duration::from_secs(30),
        || owner_lock_held(project.path()),
    );
    // New work is refused while the Run is live; it is not fenced.
    let second = summarize(
        project.path(),
        source.path(),
        &out.path().join("second"),
        &[],
    );
    assert_eq!(second.status, 2, "{second:?}");
    assert!(second.stderr.starts_with("PROJECT_BUSY: "), "{second:?}");
    let listing = run_jig(project.path(), &["runs"]);
    assert_eq!(listing.status, 2, "{listing:?}");
    assert!(!out.path().join("second").exists());

    let first = output(first.wait_with_output().unwrap());
    assert_eq!(first.status, 0, "{first:?}");
    // Ownership is released with the settled terminal: the Run is not lost.
    let runs = run_jig(project.path(), &["runs"]);
    assert_eq!(runs.status, 0, "{runs:?}");
    assert_eq!(runs.stdout.lines().count(), 1);
    assert!(runs.stdout.contains("\tsucceeded\t"), "{runs:?}");
}

/// A `flow.py` that leaves `started` in its scratch the moment it runs,
/// then takes its time (so a host that dies meanwhile leaves the mark).
const MARKS_START_PY: &str = "import time\nfrom jiggy.flow import handle\n\nopen('started', 'w').close()\ntime.sleep(3)\n\nasync def run(ctx):\n    return {\"outcome\": \"done\", \"output\": \"ran\"}\n\nhandle(run)\n";

/// The record is made durable while the Run is prepared; a coordinator
/// that dies before it is durable started nothing, recorded nothing, and
/// the next command removes the work it had begun.
#[test]
fn a_run_whose_record_never_became_durable_never_started() {
    let dir = project(&[
        (
            "flows/marks/FLOW.md",
            "---\nname: marks\ndescription: Marks its start.\n---\n",
        ),
        ("flows/marks/flow.py", MARKS_START_PY),
    ]);
    review(dir.path());
    let work = dir.path().join(".jig/work");
    for point in ["run-record", "run-record-written"] {
        let crashed = output(
            jig(dir.path())
                .args(["run", "flow:flows/marks", "--input", "null"])
                // A slow record: the rest of the Run is prepared long
                // before it would be durable, and must wait for it.
                .env("JIG_TEST_PAUSE_AT", "run-record:1500")
                .env("JIG_TEST_CRASH_AT", point)
                .output()
                .unwrap(),
        );
        assert_ne!(crashed.status, 0, "{point}: {crashed:?}");
        let started: Vec<_> = walk(&work)
            .into_iter()
            .filter(|p| p.ends_with("started"))
            .collect();
        assert!(started.is_empty(), "{point}: the Flow started: {started:?}");
        assert!(run_ids(dir.path()).is_empty(), "{point}: nothing recorded");
        assert!(walk(&work).is_empty(), "{point}: its work was removed");
    }
    let ran = run_jig(dir.path(), &["run", "flow:flows/marks", "--input", "null"]);
    assert_eq!(ran.status, 0, "{ran:?}");
    assert_eq!(run_ids(dir.path()).len(), 1);
}

/// Every path below `dir` (none when it is absent).
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path.clone());
            }
            found.push(path);
        }
    }
    found
}

/// A reviewed project whose `flows/hello` answers `"ran"`.
fn hello_project() -> tempfile::TempDir {
    let dir = project(&[
        (
            "flows/hello/FLOW.md",
            "---\nname: hello\ndescription: A test Flow.\n---\n",
        ),
        (
            "flows/hello/flow.py",
            "from jiggy.flow import handle\n\nasync def run(ctx):\n    return {'outcome': 'done', 'output': 'ran'}\n\nhandle(run)\n",
        ),
    ]);
    review(dir.path());
    dir
}

/// A host whose records cannot be written (here: `.jig/runs` on a full
/// 64 KiB tmpfs, mounted in a private user and mount namespace) refuses
/// the Run with the one code for it, exit 2, naming no host path, and
/// nothing of it runs or stays.
#[test]
fn a_full_disk_refuses_the_run_with_one_code_naming_no_path() {
    let dir = hello_project();
    let runs = dir.path().join(".jig/runs");
    let script = format!(
        "mount -t tmpfs -o size=64k tmpfs {runs} && \
         (head -c 1048576 /dev/zero > {runs}/filler 2>/dev/null || true) && \
         exec \"$0\" run flow:flows/hello --input null",
        runs = runs.display()
    );
    let run = in_namespace(dir.path(), &script);
    assert_eq!(run.status, 2, "{run:?}");
    assert!(
        run.stderr.starts_with("JIG_STORAGE_UNAVAILABLE: "),
        "{run:?}"
    );
    assert!(
        !run.stderr.contains(&*dir.path().to_string_lossy()),
        "a host path in {run:?}"
    );
    assert!(run.stdout.is_empty(), "{run:?}");
    // Outside the namespace, nothing was recorded.
    assert_eq!(std::fs::read_dir(&runs).unwrap().count(), 0);
}

/// `script` run by `sh` in a private user and mount namespace, with `$0`
/// the `jig` binary and the environment `jig(dir)` gives it.
fn in_namespace(dir: &Path, script: &str) -> Run {
    let jig = jig(dir);
    output(
        std::process::Command::new("unshare")
            .args(["--user", "--map-root-user", "--mount", "sh", "-c", script])
            .arg(jig.get_program())
            .current_dir(dir)
            .envs(jig.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .output()
            .expect("unshare runs"),
    )
}

/// A reviewed project of `flows/fill` ([`FILLS_THE_DISK`]) without
/// containment (and with `config` added to its host configuration), its
/// `.jig/` moved aside: `then` runs after `.jig/` is an 8 MiB tmpfs
/// holding a copy of it, in [`in_namespace`].
fn on_a_small_disk(config: &str, then: &str) -> (tempfile::TempDir, Run) {
    let host_toml = format!("[containment]\nmode = \"none\"\n{config}");
    let dir = project(&[
        (
            "flows/fill/FLOW.md",
            "---\nname: fill\ndescription: A test Flow.\n---\n",
        ),
        ("flows/fill/flow.py", FILLS_THE_DISK),
        (".test-config-home/jig/host.toml", &host_toml),
    ]);
    review(dir.path());
    let state = dir.path().join(".jig");
    let on_disk = dir.path().join(".jig-on-disk");
    std::fs::rename(&state, &on_disk).unwrap();
    std::fs::create_dir(&state).unwrap();
    let script = format!(
        "mount -t tmpfs -o size=8m tmpfs {state} && cp -a {on_disk}/. {state}/ && {then}",
        state = state.display(),
        on_disk = on_disk.display()
    );
    let run = in_namespace(dir.path(), &script);
    (dir, run)
}

/// Fills the filesystem of the `.jig/` above its scratch as a neighbour
/// would (possible only without containment), then succeeds with `filled`
/// (input `null`) or as many `x` as its input says.
const FILLS_THE_DISK: &str = "import os\nfrom jiggy.flow import handle\n\nasync def run(ctx):\n    state = ctx.scratch\n    while os.path.basename(state) != '.jig':\n        state = os.path.dirname(state)\n    try:\n        with open(os.path.join(state, 'filler'), 'wb') as f:\n            while True:\n                f.write(b'\\0' * 65536)\n                f.flush()\n    except OSError:\n        pass\n    output = 'filled' if ctx.input is None else 'x' * ctx.input\n    return {'outcome': 'done', 'output': output}\n\nhandle(run)\n";

/// A Run during which its host's disk fills up (here `.jig/` on an 8 MiB
/// tmpfs in a private user and mount namespace, filled by the Flow itself
/// under `[containment] mode = "none"`, as a neighbour would) still ends
/// settled with its own terminal: the space its settlement needs was set
/// aside when it was recorded. The next submission on the full disk is
/// refused with the one code, nothing recorded.
#[test]
fn a_run_that_fills_the_disk_is_still_settled_and_the_next_is_refused() {
    let (_dir, run) = on_a_small_disk(
        "",
        "\"$0\" run flow:flows/fill --input null --json; echo \"first=$?\"; \
         \"$0\" run flow:flows/fill --input null --json; echo \"second=$?\"; \
         cat .jig/runs/run-*.json; echo; ls .jig/runs .jig/runs/pending",
    );
    let lines: Vec<&str> = run.stdout.lines().collect();
    let terminal: serde_json::Value = serde_json::from_str(lines[0]).expect("a terminal");
    assert_eq!(terminal["status"], "succeeded", "{run:?}");
    assert_eq!(lines[1], "first=0", "{run:?}");
    assert_eq!(lines[2], "second=2", "{run:?}");
    assert!(run.stderr.contains("JIG_STORAGE_UNAVAILABLE: "), "{run:?}");
    // The one record there is, settled with the terminal shown.
    let record: serde_json::Value = serde_json::from_str(lines[3]).expect("the record");
    assert_eq!(record["terminal"]["status"], "succeeded", "{run:?}");
    assert_eq!(record["id"], terminal["runId"], "{run:?}");
    assert!(!run.stdout.contains(".reserve"), "{run:?}");
}

/// A terminal larger than the space set aside for it, on a full disk:
/// `jig run` still shows it, then says it could not be settled
/// (`JIG_STORAGE_UNAVAILABLE`, exit 2); its record stays pending.
#[test]
fn a_terminal_larger_than_its_reserve_is_shown_then_reported() {
    let (dir, run) = on_a_small_disk("", "exec \"$0\" run flow:flows/fill --input 300000 --json");
    assert_eq!(run.status, 2, "{}", run.stderr);
    let terminal = run.json();
    assert_eq!(terminal["status"], "succeeded", "{}", run.stderr);
    assert_eq!(terminal["output"].as_str().map(str::len), Some(300000));
    assert!(
        run.stderr.starts_with("JIG_STORAGE_UNAVAILABLE: "),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains(&*dir.path().to_string_lossy()),
        "{}",
        run.stderr
    );
}

/// `[records] settle-reserve` sets aside more: the same 300 KB terminal,
/// on the same full disk, is settled (exit 0) in a 1 MiB reserve.
#[test]
fn a_larger_settle_reserve_keeps_a_larger_terminal() {
    let (_dir, run) = on_a_small_disk(
        "[records]\nsettle-reserve = \"1MiB\"\n",
        "\"$0\" run flow:flows/fill --input 300000 --json; echo \"status=$?\"; \
         cat .jig/runs/run-*.json; echo; ls .jig/runs/pending",
    );
    let lines: Vec<&str> = run.stdout.lines().collect();
    let terminal: serde_json::Value = serde_json::from_str(lines[0]).expect("a terminal");
    assert_eq!(terminal["status"], "succeeded", "{}", run.stderr);
    assert_eq!(lines[1], "status=0", "{}", run.stderr);
    let record: serde_json::Value = serde_json::from_str(lines[2]).expect("the record");
    assert_eq!(record["terminal"]["status"], "succeeded");
    assert_eq!(
        record["terminal"]["output"].as_str().map(str::len),
        Some(300000)
    );
    assert_eq!(lines.len(), 3, "nothing pending: {lines:?}");
}

/// One corrupt record does not hide the others: `jig runs` lists the
/// rest, names the file to look at (exit 2), and `jig run` still runs.
#[test]
fn a_corrupt_record_is_named_and_the_others_are_listed() {
    let dir = hello_project();
    let ran = run_jig(dir.path(), &["run", "flow:flows/hello", "--input", "null"]);
    assert_eq!(ran.status, 0, "{ran:?}");
    let runs = dir.path().join(".jig/runs");
    std::fs::write(runs.join("run-0-corrupt.json"), b"{\"id\":").unwrap();
    std::fs::write(runs.join("pending/run-1-corrupt.json"), b"not JSON").unwrap();
    let listed = run_jig(dir.path(), &["runs"]);
    assert_eq!(listed.status, 2, "{listed:?}");
    assert_eq!(listed.stdout.lines().count(), 1, "{listed:?}");
    assert!(listed.stdout.contains("succeeded"), "{listed:?}");
    for file in [
        ".jig/runs/run-0-corrupt.json",
        ".jig/runs/pending/run-1-corrupt.json",
    ] {
        assert!(
            listed.stderr.contains(&format!("look at {file}")),
            "{listed:?}"
        );
    }
    let again = run_jig(dir.path(), &["run", "flow:flows/hello", "--input", "null"]);
    assert_eq!(again.status, 0, "{again:?}");
}
