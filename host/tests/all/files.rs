//! Root file Runs: `--attach`, `--select` and `--out` as a user types
//! them, with the packet and stdout they get back (seed 002 §8).

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::support::*;
use serde_json::json;

/// A copy of examples/files, reviewed.
pub fn files_example() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&workspace().join("examples/files"), dir.path());
    review(dir.path());
    dir
}

/// A folder to attach: text, binary, empty file and an empty directory.
pub fn source_folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), &[("notes/a.txt", "one\ntwo\n")]);
    std::fs::write(dir.path().join("blob.bin"), [0u8, 159, 146, 150]).unwrap();
    std::fs::write(dir.path().join("empty"), b"").unwrap();
    std::fs::create_dir(dir.path().join("nothing-here")).unwrap();
    dir
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().mode() & 0o777
}

fn sha256(bytes: &[u8]) -> String {
    flow::digest::sha256_hex(bytes)
}

#[test]
fn a_file_run_publishes_the_packet_with_private_modes() {
    let project = files_example();
    let source = source_folder();
    let out_parent = tempfile::tempdir().unwrap();
    let out = out_parent.path().join("summary");
    let run = run_jig(
        project.path(),
        &[
            "run",
            "flow:flows/summarize",
            "--attach",
            &format!("source={}", path(source.path())),
            "--out",
            path(&out),
        ],
    );
    assert_eq!(run.status, 0, "{run:?}");
    let stdout = run.json();
    let keys: Vec<&str> = stdout
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "checkpoint",
            "delivery",
            "diagnostics",
            "input",
            "method",
            "outcome",
            "output",
            "runId",
            "status"
        ]
    );
    assert_eq!(stdout["checkpoint"], serde_json::Value::Null);
    assert_eq!(stdout["status"], "succeeded");
    assert_eq!(stdout["output"], json!({"files": 3, "bytes": 12}));
    assert_eq!(
        stdout["delivery"],
        json!({"status": "written", "destination": path(&out), "source": "final"})
    );
    assert_eq!(
        stdout["input"]["attachments"],
        json!({"source": [
            {"path": "blob.bin", "length": 4, "sha256": sha256(&[0, 159, 146, 150])},
            {"path": "empty", "length": 0, "sha256": sha256(b"")},
            {"path": "notes/a.txt", "length": 8, "sha256": sha256(b"one\ntwo\n")},
        ]})
    );
    assert_eq!(
        stdout["input"]["digest"],
        format!("sha256:{}", sha256(b"{}"))
    );

    // The packet: files/ (0700 dirs, 0600 files) and result.json, nothing else.
    let mut entries: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    entries.sort();
    assert_eq!(entries, ["files", "result.json"]);
    assert_eq!(mode(&out), 0o700);
    assert_eq!(mode(&out.join("files")), 0o700);
    assert_eq!(mode(&out.join("files/data")), 0o700);
    assert_eq!(mode(&out.join("files/summary.md")), 0o600);
    assert_eq!(mode(&out.join("files/data/index.json")), 0o600);
    assert_eq!(mode(&out.join("result.json")), 0o600);
    let summary = std::fs::read_to_string(out.join("files/summary.md")).unwrap();
    assert_eq!(
        summary,
        "# Summary of 3 files (12 bytes)\n\n- blob.bin: 4 bytes, 0 lines\n- empty: 0 bytes, 0 lines\n- notes/a.txt: 8 bytes, 2 lines\n"
    );
    let result: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("result.json")).unwrap()).unwrap();
    assert_eq!(result["runId"], stdout["runId"]);
    assert_eq!(result["target"], "flow:flows/summarize");
    assert_eq!(result["binding"], serde_json::Value::Null);
    assert_eq!(result["package"]["path"], "flows/summarize");
    assert_eq!(
        stdout["method"],
        json!({"target": "flow:flows/summarize", "package": result["package"], "binding": null})
    );
    let lock = std::fs::read_to_string(project.path().join("jig.lock")).unwrap();
    assert!(lock.contains(result["package"]["digest"].as_str().unwrap()));
    assert_eq!(result["execution"]["status"], "succeeded");
    assert_eq!(result["execution"]["output"], stdout["output"]);
    assert_eq!(result["input"], stdout["input"]);
    assert_eq!(result["delivery"]["status"], "written");
    assert_eq!(result["delivery"]["source"], "final");
    assert_eq!(
        result["delivery"]["files"],
        json!([
            {"path": "data/index.json", "length": std::fs::metadata(out.join("files/data/index.json")).unwrap().len(), "sha256": sha256(&std::fs::read(out.join("files/data/index.json")).unwrap())},
            {"path": "summary.md", "length": summary.len(), "sha256": sha256(summary.as_bytes())},
        ])
    );
    // No staging beside the destination; the live folder is untouched.
    assert_eq!(std::fs::read_dir(out_parent.path()).unwrap().count(), 1);
    assert!(source.path().join("nothing-here").is_dir());
}

#[test]
fn select_captures_only_the_named_files() {
    let project = files_example();
    let source = source_folder();
    // Enumeration would refuse this; exact selection never lists it.
    std::os::unix::fs::symlink("/etc/passwd", source.path().join("link")).unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = run_jig(
        project.path(),
        &[
            "run",
            "flow:flows/summarize",
            "--attach",
            &format!("source={}", path(source.path())),
            "--select",
            "source=notes/a.txt",
            "--out",
            path(&out.path().join("o")),
        ],
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(run.json()["output"], json!({"files": 1, "bytes": 8}));
    let stdout = run.json();
    let paths: Vec<&str> = stdout["input"]["attachments"]["source"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["notes/a.txt"]);
}

/// Run summarize with extra arguments; the command must be refused before
/// dispatch with `code` (exit 1, nothing on stdout, no Run recorded).
fn refused(project: &Path, args: &[&str], code: &str) -> Run {
    let mut all = vec!["run", "flow:flows/summarize"];
    all.extend_from_slice(args);
    let run = run_jig(project, &all);
    assert_eq!(run.status, 1, "{args:?}: {run:?}");
    assert!(
        run.stderr.starts_with(&format!("{code}: ")),
        "{args:?}: {run:?}"
    );
    assert_eq!(run.stdout, "", "{args:?}");
    let runs = run_jig(project, &["runs"]);
    assert_eq!(
        runs.stdout, "",
        "{args:?}: a refused request records no Run"
    );
    run
}

#[test]
fn every_capture_rejection_has_its_code() {
    let project = files_example();
    let p = project.path();
    let out = tempfile::tempdir().unwrap();
    let out_arg = path(&out.path().join("o")).to_string();
    let attach = |dir: &Path| format!("source={}", path(dir));
    let files_invalid = |args: &[&str]| refused(p, args, "JIG_RUN_FILES_INVALID");

    let good = source_folder();
    // Mappings.
    files_invalid(&["--out", &out_arg]);
    files_invalid(&["--attach", &attach(good.path())]);
    files_invalid(&["--attach", "source", "--out", &out_arg]);
    files_invalid(&[
        "--attach",
        &attach(good.path()),
        "--attach",
        &attach(good.path()),
        "--out",
        &out_arg,
    ]);
    files_invalid(&[
        "--attach",
        &attach(good.path()),
        "--attach",
        &format!("other={}", path(good.path())),
        "--out",
        &out_arg,
    ]);
    files_invalid(&[
        "--attach",
        &attach(good.path()),
        "--attach",
        &format!("deliverables={}", path(good.path())),
        "--out",
        &out_arg,
    ]);
    files_invalid(&["--select", "source=empty", "--out", &out_arg]);
    for selector in [
        "source=../x",
        "source=/etc/passwd",
        "source=a//b",
        "source=missing",
    ] {
        files_invalid(&[
            "--attach",
            &attach(good.path()),
            "--select",
            selector,
            "--out",
            &out_arg,
        ]);
    }

    // Tree contents.
    let symlink = source_folder();
    std::os::unix::fs::symlink("/etc/passwd", symlink.path().join("l")).unwrap();
    let hardlink = source_folder();
    std::fs::hard_link(hardlink.path().join("empty"), hardlink.path().join("again")).unwrap();
    let fifo = source_folder();
    nix::unistd::mkfifo(&fifo.path().join("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let state = source_folder();
    write_files(state.path(), &[(".jig/owner.lock", "")]);
    let nfd = source_folder();
    std::fs::write(nfd.path().join("cafe\u{301}.txt"), b"").unwrap();
    let too_many = tempfile::tempdir().unwrap();
    for i in 0..65 {
        std::fs::write(too_many.path().join(format!("{i}")), b"").unwrap();
    }
    let link_root = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(good.path(), link_root.path().join("root")).unwrap();
    for (dir, why) in [
        (symlink.path(), "symbolic link"),
        (hardlink.path(), "hard links"),
        (fifo.path(), "FIFO"),
        (state.path(), "protected"),
        (nfd.path(), "NFC"),
        (too_many.path(), "more than 64 files"),
        (&link_root.path().join("root"), "symbolic link"),
        // The reference refuses /proc for its filesystem (as reference_texts.rs pins).
        (Path::new("/proc"), "ext4, XFS, Btrfs, or tmpfs"),
        (&project.path().join(".jig"), "protected"),
    ] {
        let run = files_invalid(&["--attach", &attach(dir), "--out", &out_arg]);
        assert!(run.stderr.contains(why), "{why}: {run:?}");
    }
    assert!(!out.path().join("o").exists());
}

#[test]
fn the_destination_is_checked_before_dispatch() {
    let project = files_example();
    let p = project.path();
    let source = source_folder();
    let attach = format!("source={}", path(source.path()));
    let out = tempfile::tempdir().unwrap();
    std::fs::create_dir(out.path().join("taken")).unwrap();
    refused(
        p,
        &[
            "--attach",
            &attach,
            "--out",
            path(&out.path().join("taken")),
        ],
        "JIG_OUTPUT_EXISTS",
    );
    refused(
        p,
        &[
            "--attach",
            &attach,
            "--out",
            path(&out.path().join("no/parent")),
        ],
        "JIG_OUTPUT_INVALID",
    );
    refused(
        p,
        &[
            "--attach",
            &attach,
            "--out",
            path(&source.path().join("inside")),
        ],
        "JIG_OUTPUT_INVALID",
    );
    refused(
        p,
        &["--attach", &attach, "--out", path(&p.join(".jig/packet"))],
        "JIG_OUTPUT_INVALID",
    );
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 1);
}

const PYTHON_FLOW_MD: &str = "---\nname: {name}\ndescription: A test Flow.\nattachments:\n  deliverables: read-write\n---\n\nTest.\n";

fn deliverables_project(name: &str, body: &str) -> tempfile::TempDir {
    let project = project(&[
        (
            &format!("flows/{name}/FLOW.md"),
            &PYTHON_FLOW_MD.replace("{name}", name),
        ),
        (&format!("flows/{name}/flow.py"), body),
    ]);
    review(project.path());
    project
}

#[test]
fn an_operational_failure_publishes_only_the_host_record() {
    let body = "import os\nfrom jiggy.flow import handle\n\nasync def run(context):\n    with open(os.path.join(context.attachments['deliverables']['path'], 'half.txt'), 'w') as f:\n        f.write('partial')\n    raise RuntimeError('broken on purpose')\n\nhandle(run)\n";
    let project = deliverables_project("fails", body);
    let out = tempfile::tempdir().unwrap();
    let dest = out.path().join("packet");
    let run = run_jig(
        project.path(),
        &["run", "flow:flows/fails", "--out", path(&dest)],
    );
    assert_eq!(run.status, 1, "{run:?}");
    let stdout = run.json();
    let keys: Vec<&str> = stdout
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "checkpoint",
            "code",
            "delivery",
            "details",
            "diagnostics",
            "input",
            "message",
            "method",
            "runId",
            "status"
        ]
    );
    assert_eq!(stdout["status"], "failed");
    // The raised error, as the SDK reports it (docs/src/troubleshooting.md).
    assert_eq!(stdout["message"], "RuntimeError: broken on purpose");
    assert_eq!(stdout["details"]["exception"]["type"], "RuntimeError");
    assert_eq!(stdout["delivery"]["status"], "written");
    assert_eq!(stdout["delivery"]["source"], "none");
    assert_eq!(
        std::fs::read_dir(dest.join("files")).unwrap().count(),
        0,
        "failed work is not delivered"
    );
    let result: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dest.join("result.json")).unwrap()).unwrap();
    assert_eq!(result["execution"]["status"], "failed");
    assert_eq!(result["execution"]["code"], stdout["code"]);
    assert_eq!(result["delivery"]["files"], json!([]));
}

#[test]
fn delivery_past_the_output_limit_fails_without_a_packet() {
    let body = "import os\nfrom jiggy.flow import handle\n\nasync def run(context):\n    root = context.attachments['deliverables']['path']\n    for i in range(context.input['files']):\n        with open(os.path.join(root, f'f{i}'), 'w') as f:\n            f.write('x')\n    return {'outcome': 'done', 'output': None}\n\nhandle(run)\n";
    let project = deliverables_project("many", body);
    let out = tempfile::tempdir().unwrap();
    let at = out.path().join("at-limit");
    let run = run_jig(
        project.path(),
        &[
            "run",
            "flow:flows/many",
            "--input",
            r#"{"files":64}"#,
            "--out",
            path(&at),
        ],
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(std::fs::read_dir(at.join("files")).unwrap().count(), 64);

    let past = out.path().join("past-limit");
    let run = run_jig(
        project.path(),
        &[
            "run",
            "flow:flows/many",
            "--input",
            r#"{"files":65}"#,
            "--out",
            path(&past),
        ],
    );
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stderr.starts_with("JIG_DELIVERY_FAILED: "), "{run:?}");
    let stdout = run.json();
    assert_eq!(
        stdout["status"], "succeeded",
        "the execution terminal stands"
    );
    assert_eq!(
        stdout["delivery"],
        json!({"status": "failed", "destination": path(&past), "code": "JIG_DELIVERY_FAILED"})
    );
    assert!(!past.exists());
    assert_eq!(
        std::fs::read_dir(out.path()).unwrap().count(),
        1,
        "no staging"
    );
}

/// The writable attachment's tmpfs, as the host sizes it.
const OUTPUT_TMPFS_BYTES: usize = jig_sandbox::OUTPUT_TMPFS_BYTES as usize;

/// `jig run flow:flows/fill` asked to write `bytes` bytes into its writable
/// attachment, delivered to `out`.
fn run_fill(project: &Path, out: &Path, bytes: usize) -> Run {
    run_fill_with(project, out, &format!(r#"{{"bytes":{bytes}}}"#))
}

/// `flows/fill` with `input`, delivered to `out`.
fn run_fill_with(project: &Path, out: &Path, input: &str) -> Run {
    run_jig(
        project,
        &[
            "run",
            "flow:flows/fill",
            "--input",
            input,
            "--out",
            path(out),
        ],
    )
}

/// The writable attachment is bounded while the Run writes, not only at
/// delivery: 16 MiB fit and arrive byte for byte; one byte more is ENOSPC
/// inside the Run, which fails it with nothing published and no mount,
/// no private files left behind.
#[test]
fn the_writable_attachment_is_a_16_mib_tmpfs_during_the_run() {
    let body = "import os\nfrom jiggy.flow import handle\n\nasync def run(context):\n    n = context.input['bytes']\n    with open(os.path.join(context.attachments['deliverables']['path'], 'fill.bin'), 'wb') as f:\n        f.write(bytes([7]) * n)\n    return {'outcome': 'done', 'output': {'wrote': n}}\n\nhandle(run)\n";
    let project = deliverables_project("fill", body);
    let out = tempfile::tempdir().unwrap();
    let project_path = project.path().to_string_lossy().to_string();
    let no_mount_left = || {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(!mounts.contains(&project_path), "a mount remains");
        let work = project.path().join(".jig/work");
        let left = std::fs::read_dir(&work).map(|d| d.count()).unwrap_or(0);
        assert_eq!(left, 0, "private files remain");
    };

    let at = out.path().join("at-limit");
    let run = run_fill(project.path(), &at, OUTPUT_TMPFS_BYTES);
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(run.json()["output"], json!({"wrote": OUTPUT_TMPFS_BYTES}));
    let delivered = std::fs::read(at.join("files/fill.bin")).unwrap();
    assert_eq!(delivered.len(), OUTPUT_TMPFS_BYTES);
    assert_eq!(sha256(&delivered), sha256(&vec![7u8; OUTPUT_TMPFS_BYTES]));
    no_mount_left();

    let past = out.path().join("past-limit");
    let run = run_fill(project.path(), &past, OUTPUT_TMPFS_BYTES + 1);
    assert_eq!(run.status, 1, "{run:?}");
    let stdout = run.json();
    assert_eq!(stdout["status"], "failed");
    assert_eq!(stdout["code"], "EXECUTION_FAILED", "{run:?}");
    assert!(
        run.stdout.contains("No space left on device"),
        "ENOSPC inside the Run: {run:?}"
    );
    assert_eq!(stdout["delivery"]["source"], "none");
    assert_eq!(
        std::fs::read_dir(past.join("files")).unwrap().count(),
        0,
        "nothing of the failed Run is published"
    );
    no_mount_left();
}

/// `flow.wasm` gets the same bound: its writable attachment is a 16 MiB
/// tmpfs (held by a bubblewrap holder, preopened by descriptor), so the
/// host's own writes on the guest's behalf stop at ENOSPC too.
#[test]
fn a_wasm_flow_writable_attachment_is_the_same_16_mib_tmpfs() {
    let target_dir = workspace().join("target").join("guests");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = std::process::Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "--target",
            "wasm32-wasip1",
            "--manifest-path",
        ])
        .arg(workspace().join("host/tests/hostile/fill-wasm/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building fill.wasm failed");
    let project = project(&[(
        "flows/fill/FLOW.md",
        &PYTHON_FLOW_MD.replace("{name}", "fill"),
    )]);
    std::fs::copy(
        target_dir.join("wasm32-wasip1/debug/fill.wasm"),
        project.path().join("flows/fill/flow.wasm"),
    )
    .unwrap();
    review(project.path());
    let out = tempfile::tempdir().unwrap();

    let at = out.path().join("at-limit");
    let run = run_fill(project.path(), &at, OUTPUT_TMPFS_BYTES);
    assert_eq!(run.status, 0, "{run:?}");
    let delivered = std::fs::read(at.join("files/fill.bin")).unwrap();
    assert_eq!(sha256(&delivered), sha256(&vec![7u8; OUTPUT_TMPFS_BYTES]));

    let past = out.path().join("past-limit");
    let run = run_fill(project.path(), &past, OUTPUT_TMPFS_BYTES + 1);
    assert_eq!(run.status, 1, "{run:?}");
    assert_eq!(run.json()["code"], "EXECUTION_FAILED", "{run:?}");
    assert!(
        run.stdout.contains("No space left on device"),
        "ENOSPC inside the Run: {run:?}"
    );
    assert_eq!(std::fs::read_dir(past.join("files")).unwrap().count(), 0);
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(&*project.path().to_string_lossy()));

    // Its scratch is the same kind of tmpfs, of `[containment]
    // scratch-size`: 1 MiB fits, one byte more is ENOSPC inside the Run.
    write_files(
        project.path(),
        &[(
            ".test-config-home/jig/host.toml",
            "[containment]\nscratch-size = \"1MiB\"\n",
        )],
    );
    let fill_scratch = |bytes: usize, out: &Path| {
        run_fill_with(
            project.path(),
            out,
            &format!(r#"{{"bytes":{bytes},"scratch":true}}"#),
        )
    };
    let run = fill_scratch(1 << 20, &out.path().join("scratch-at-limit"));
    assert_eq!(run.status, 0, "{run:?}");
    let run = fill_scratch((1 << 20) + 1, &out.path().join("scratch-past-limit"));
    assert_eq!(run.status, 1, "{run:?}");
    assert!(
        run.stdout.contains("No space left on device"),
        "ENOSPC inside the Run: {run:?}"
    );
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(&*project.path().to_string_lossy()));
}

#[test]
fn out_without_a_writable_attachment_publishes_only_the_record() {
    let (_dir, demo) = {
        let dir = tempfile::tempdir().unwrap();
        let run = run_jig(dir.path(), &["init", "demo"]);
        assert_eq!(run.status, 0, "{run:?}");
        let demo = dir.path().join("demo");
        (dir, demo)
    };
    review(&demo);
    let out = tempfile::tempdir().unwrap();
    let dest = out.path().join("record");
    let run = run_jig(
        &demo,
        &[
            "run",
            "flow:flows/hello",
            "--input",
            "\"Ada\"",
            "--out",
            path(&dest),
        ],
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(run.json()["delivery"]["source"], "none");
    assert_eq!(run.json()["input"]["attachments"], json!({}));
    assert_eq!(std::fs::read_dir(dest.join("files")).unwrap().count(), 0);
    let result: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dest.join("result.json")).unwrap()).unwrap();
    assert_eq!(
        result["execution"]["output"],
        json!({"message": "Hello, Ada!"})
    );
}

#[test]
fn repeated_file_runs_leave_no_private_residue() {
    let project = files_example();
    let source = source_folder();
    let out = tempfile::tempdir().unwrap();
    for i in 0..3 {
        let run = run_jig(
            project.path(),
            &[
                "run",
                "flow:flows/summarize",
                "--attach",
                &format!("source={}", path(source.path())),
                "--out",
                path(&out.path().join(format!("o{i}"))),
            ],
        );
        assert_eq!(run.status, 0, "{run:?}");
    }
    let work = project.path().join(".jig/work");
    let left = std::fs::read_dir(&work).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0, "sealed attachments and scratch are removed");
}

/// Run `jig` in a new user and mount namespace after mounting `mount`
/// (a shell command) there; capture must refuse what it mounted.
fn in_mount_namespace(project: &Path, mount: &str, args: &str) -> Run {
    let script = format!("{mount} && exec \"$0\" {args}");
    let mut command = std::process::Command::new("unshare");
    command
        .current_dir(project)
        .args(["-rm", "sh", "-c", &script, env!("CARGO_BIN_EXE_jig")])
        .env_remove("JIG_CONFIG")
        .env("XDG_CONFIG_HOME", project.join(".test-config-home"))
        .env("NO_COLOR", "1");
    output(command.output().expect("unshare runs"))
}

#[test]
fn nested_mounts_are_refused_whatever_their_device() {
    let project = files_example();
    let source = source_folder();
    let out = tempfile::tempdir().unwrap();
    let args = format!(
        "run flow:flows/summarize --attach source={} --out {}",
        path(source.path()),
        path(&out.path().join("o"))
    );
    // A tmpfs is another device.
    let tmpfs = in_mount_namespace(
        project.path(),
        &format!(
            "mount -t tmpfs none {}",
            path(&source.path().join("nothing-here"))
        ),
        &args,
    );
    assert_eq!(tmpfs.status, 1, "{tmpfs:?}");
    assert!(
        tmpfs.stderr.starts_with("JIG_RUN_FILES_INVALID: "),
        "{tmpfs:?}"
    );
    assert!(tmpfs.stderr.contains("nested mount"), "{tmpfs:?}");
    // A bind mount of the same filesystem keeps the device, not the mount.
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("f"), b"x").unwrap();
    let bind = in_mount_namespace(
        project.path(),
        &format!(
            "mount --bind {} {}",
            path(elsewhere.path()),
            path(&source.path().join("nothing-here"))
        ),
        &args,
    );
    assert_eq!(bind.status, 1, "{bind:?}");
    assert!(bind.stderr.contains("nested mount"), "{bind:?}");
    assert!(!out.path().join("o").exists());
}

#[test]
fn read_attachments_are_sealed_copies_not_the_live_folder() {
    let body = "import os\nfrom jiggy.flow import handle\n\nasync def run(context):\n    source = context.attachments['source']\n    try:\n        with open(os.path.join(source['path'], 'new.txt'), 'w') as f:\n            f.write('x')\n        refused = False\n    except OSError:\n        refused = True\n    with open(os.path.join(source['path'], 'notes', 'a.txt')) as f:\n        text = f.read()\n    return {'outcome': 'done', 'output': {'path': source['path'], 'access': source['access'], 'refused': refused, 'text': text}}\n\nhandle(run)\n";
    let project = project(&[
        (
            "flows/probe/FLOW.md",
            "---\nname: probe\ndescription: Try to change a read attachment.\nattachments:\n  source: read\n---\n\nProbe.\n",
        ),
        ("flows/probe/flow.py", body),
    ]);
    review(project.path());
    let source = source_folder();
    let run = run_jig(
        project.path(),
        &[
            "run",
            "flow:flows/probe",
            "--attach",
            &format!("source={}", path(source.path())),
        ],
    );
    assert_eq!(run.status, 0, "{run:?}");
    let output = &run.json()["output"];
    assert_eq!(output["refused"], true, "{run:?}");
    assert_eq!(output["access"], "read");
    assert_eq!(output["text"], "one\ntwo\n");
    let seen = output["path"].as_str().unwrap();
    assert!(!seen.starts_with(path(source.path())), "{seen}");
    assert!(!source.path().join("new.txt").exists());
}

/// Wait (bounded) until the Flow of the one Run in `project` runs: its
/// envelope names the project's work and store. By then the Run is
/// recorded, its checks are done and an interruption cancels it.
fn wait_for_the_flow(project: &Path) {
    let started = std::time::Instant::now();
    while processes_mentioning(path(project)).is_empty() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "the Flow never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn an_interrupted_run_publishes_nothing() {
    let project = files_example();
    let source = source_folder();
    let out = tempfile::tempdir().unwrap();
    let dest = out.path().join("packet");
    let child = jig(project.path())
        .args(["run", "flow:flows/summarize", "--attach"])
        .arg(format!("source={}", path(source.path())))
        .args(["--input", r#"{"sleepSeconds":20}"#, "--out", path(&dest)])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_the_flow(project.path());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let run = output(child.wait_with_output().unwrap());
    assert_interrupted(&run);
    assert_eq!(
        newest_terminal(project.path())["delivery"]["status"],
        "failed"
    );
    assert!(!dest.exists());
    assert_eq!(
        std::fs::read_dir(out.path()).unwrap().count(),
        0,
        "no staging"
    );
}

#[test]
fn a_destination_that_appears_during_the_run_is_left_alone() {
    let project = files_example();
    let source = source_folder();
    let out = tempfile::tempdir().unwrap();
    let dest = out.path().join("packet");
    let child = jig(project.path())
        .args(["run", "flow:flows/summarize", "--attach"])
        .arg(format!("source={}", path(source.path())))
        .args(["--input", r#"{"sleepSeconds":3}"#, "--out", path(&dest)])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // After the Run's checks (an --out already there is refused before
    // it starts), while its Flow sleeps.
    wait_for_the_flow(project.path());
    write_files(&dest, &[("mine.txt", "the operator's")]);
    let run = output(child.wait_with_output().unwrap());
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stderr.starts_with("JIG_DELIVERY_FAILED: "), "{run:?}");
    let stdout = run.json();
    assert_eq!(stdout["status"], "succeeded");
    assert_eq!(
        stdout["delivery"],
        json!({"status": "failed", "destination": path(&dest), "code": "JIG_OUTPUT_EXISTS"})
    );
    let names: Vec<_> = std::fs::read_dir(&dest)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, [std::ffi::OsString::from("mine.txt")]);
    assert_eq!(
        std::fs::read_dir(out.path()).unwrap().count(),
        1,
        "no staging"
    );
}

/// `jig run` under `script`, so stdout and stderr are a terminal.
fn on_a_terminal(project: &Path, args: &str, no_color: bool) -> String {
    let mut command = std::process::Command::new("script");
    command
        .current_dir(project)
        .stdin(std::process::Stdio::null())
        .args([
            "-qec",
            &format!("{} {args}", env!("CARGO_BIN_EXE_jig")),
            "/dev/null",
        ])
        .env_remove("JIG_CONFIG")
        .env_remove("NO_COLOR")
        .env("TERM", "xterm")
        .env("XDG_CONFIG_HOME", project.join(".test-config-home"));
    if no_color {
        command.env("NO_COLOR", "1");
    }
    let run = output(command.output().expect("script runs"));
    assert_eq!(run.status, 0, "{run:?}");
    run.stdout
}

#[test]
fn elapsed_status_shows_only_on_a_terminal_after_a_second() {
    let project = files_example();
    let source = source_folder();
    let out = tempfile::tempdir().unwrap();
    let args = |leaf: &str| {
        format!(
            "run flow:flows/summarize --attach source={} --out {} --input '{{\"sleepSeconds\":2}}'",
            path(source.path()),
            path(&out.path().join(leaf))
        )
    };
    let animated = on_a_terminal(project.path(), &args("animated"), false);
    assert!(
        animated.contains("\r\u{1b}[2K") && animated.contains(" flow:flows/summarize · 1."),
        "the live line is drawn in place: {animated:?}"
    );
    assert!(animated.contains("succeeded · outcome"), "{animated:?}");
    assert!(
        animated.contains(&format!(
            " {} (files: final)",
            path(&out.path().join("animated"))
        )),
        "{animated:?}"
    );
    assert!(
        animated.contains("outcome done · delivery written (final) · cleanup complete · "),
        "the final line: {animated:?}"
    );
    let plain = on_a_terminal(project.path(), &args("plain"), true);
    assert!(
        plain.contains("flow:flows/summarize · 1.") && plain.contains(" · running\r\n"),
        "{plain:?}"
    );
    assert!(!plain.contains('\u{1b}'), "{plain:?}");
    // A quick Run shows no live line; a pipe never shows it.
    let quick = format!(
        "run flow:flows/summarize --attach source={} --out {}",
        path(source.path()),
        path(&out.path().join("quick"))
    );
    let transcript = on_a_terminal(project.path(), &quick, true);
    let (result, final_line) = transcript
        .split_once("✓ execution")
        .unwrap_or_else(|| panic!("{transcript:?}"));
    assert_eq!(
        result,
        format!(
            "✓ succeeded · outcome done\r\n{{\r\n  \"bytes\": 12,\r\n  \"files\": 3\r\n}}\r\npacket: {} (files: final)\r\n",
            path(&out.path().join("quick"))
        )
    );
    assert!(
        final_line.starts_with(
            " succeeded · outcome done · delivery written (final) · cleanup complete · "
        ) && final_line.ends_with("\r\n"),
        "{final_line:?}"
    );
    let piped = run_jig(
        project.path(),
        &[
            "run",
            "flow:flows/summarize",
            "--attach",
            &format!("source={}", path(source.path())),
            "--input",
            r#"{"sleepSeconds":2}"#,
            "--out",
            path(&out.path().join("piped")),
        ],
    );
    assert_eq!(piped.status, 0, "{piped:?}");
    assert_eq!(piped.stderr, "");
}

#[test]
fn a_wasm_flow_gets_its_attachments_as_preopened_directories() {
    let wasm = cargo_build(&[
        "-p",
        "flow-sdk",
        "--example",
        "list_files",
        "--target",
        "wasm32-wasip1",
    ])
    .join("wasm32-wasip1/debug/examples/list_files.wasm");
    let project = project(&[(
        "flows/list/FLOW.md",
        "---\nname: list\ndescription: List the attached files.\nattachments:\n  source: read\n  deliverables: read-write\n---\n\nList.\n",
    )]);
    std::fs::copy(&wasm, project.path().join("flows/list/flow.wasm")).unwrap();
    review(project.path());
    let source = source_folder();
    let out = tempfile::tempdir().unwrap();
    let dest = out.path().join("packet");
    let run = run_jig(
        project.path(),
        &[
            "run",
            "flow:flows/list",
            "--attach",
            &format!("source={}", path(source.path())),
            "--out",
            path(&dest),
        ],
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(
        run.json()["output"],
        json!({"files": 3, "sourceWriteRefused": true})
    );
    assert_eq!(
        std::fs::read_to_string(dest.join("files/listing.txt")).unwrap(),
        "blob.bin 4\nempty 0\nnotes/a.txt 8\n"
    );
    assert!(!source.path().join("new.txt").exists());
}
