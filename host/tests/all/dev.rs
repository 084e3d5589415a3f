//! `jig dev`: the author's loop (issue 49). Review (with the diff), admit
//! with the consent given at start, run, and again after each save, until
//! Ctrl-C; a bad edit is reported and the loop goes on; never beside a
//! daemon, and never without consent.

use std::io::Read;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::serve::{served_project, Daemon};
use crate::support::*;

/// Wait until `out` (the loop's stdout so far, read from `pipe`) holds
/// `needle` `times` times.
fn until(pipe: &mut std::process::ChildStdout, out: &mut String, needle: &str, times: usize) {
    let started = Instant::now();
    let mut buffer = [0u8; 4096];
    while out.matches(needle).count() < times {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "waited for {times} x {needle:?}:\n{out}"
        );
        let n = pipe.read(&mut buffer).unwrap();
        assert!(n > 0, "jig dev ended early:\n{out}");
        out.push_str(&String::from_utf8_lossy(&buffer[..n]));
    }
}

#[test]
fn each_save_is_reviewed_admitted_and_run_until_ctrl_c() {
    let dir = tempfile::tempdir().unwrap();
    let init = run_jig(dir.path(), &["init", "--lang", "python", "p"]);
    assert_eq!(init.status, 0, "{init:?}");
    let project = dir.path().join("p");
    let mut child = jig(&project)
        .args(["dev", "flow:flows/hello", "--yes", "--input", "\"Ada\""])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdout.take().unwrap();
    let mut out = String::new();
    until(
        &mut pipe,
        &mut out,
        "\"output\":{\"message\":\"Hello, Ada!\"}",
        1,
    );
    assert!(
        out.starts_with("Packages:\n  + \"flows/hello\" sha256:"),
        "{out}"
    );
    assert!(out.contains("Files:\n  + \"flows/hello\"\n"), "{out}");

    // A save: its diff, its admission and the Run of the new bytes.
    let flow = project.join("flows/hello/flow.py");
    let text = std::fs::read_to_string(&flow).unwrap();
    std::fs::write(&flow, text.replace("Hello, ", "Hi, ")).unwrap();
    until(
        &mut pipe,
        &mut out,
        "\"output\":{\"message\":\"Hi, Ada!\"}",
        1,
    );
    assert!(
        out.contains("-    return {\"outcome\": \"done\", \"output\": {\"message\": f\"Hello, {name}!\"}}\n+    return {\"outcome\": \"done\", \"output\": {\"message\": f\"Hi, {name}!\"}}\n"),
        "{out}"
    );
    // A save that does not review: said, and the loop goes on.
    std::fs::write(&flow, "broken(\n").unwrap();
    std::thread::sleep(Duration::from_secs(2));
    std::fs::write(&flow, text.replace("Hello, ", "Hey, ")).unwrap();
    until(
        &mut pipe,
        &mut out,
        "\"output\":{\"message\":\"Hey, Ada!\"}",
        1,
    );

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(
        err.contains("INVALID_CANDIDATE: the project definition is invalid; PACKAGE_ENTRYPOINT_INVALID at \"flows/hello/flow.py\""),
        "{err}"
    );
    assert!(err.contains("jig dev: watching "), "{err}");
    // What it admitted stays admitted: jig run runs the last save.
    let run = run_jig(&project, &["run", "flow:flows/hello", "--input", "\"Bo\""]);
    assert_eq!(run.json()["output"]["message"], "Hey, Bo!", "{run:?}");
}

#[test]
fn dev_needs_consent_and_refuses_a_project_a_daemon_holds() {
    let dir = tempfile::tempdir().unwrap();
    let init = run_jig(dir.path(), &["init", "--lang", "python", "p"]);
    assert_eq!(init.status, 0, "{init:?}");
    let project = dir.path().join("p");
    // Redirected, nobody can be asked: --yes says it.
    let refused = run_jig(&project, &["dev", "flow:flows/hello"]);
    assert_eq!(refused.status, 2, "{refused:?}");
    assert_eq!(
        refused.stderr,
        "JIG_APPROVAL_REQUIRED: jig dev admits each saved change; rerun with --yes to consent for this session\n"
    );
    assert!(!project.join(".jig/admission/current").exists());
    // A bad target is refused before anything, as jig run refuses it.
    let bad = run_jig(&project, &["dev", "nonsense", "--yes"]);
    assert_eq!(bad.status, 1, "{bad:?}");
    assert!(
        bad.stderr.starts_with("JIG_RUN_TARGET_INVALID: "),
        "{bad:?}"
    );

    let outer = tempfile::tempdir().unwrap();
    let served = outer.path().join("p");
    served_project(&served);
    let mut daemon = Daemon::start(&served, &[]);
    let beside = run_jig(&served, &["dev", "flow:flows/echo", "--yes"]);
    assert_eq!(beside.status, 2, "{beside:?}");
    assert!(
        beside
            .stderr
            .starts_with("UNAVAILABLE: a jig serve holds this project"),
        "{beside:?}"
    );
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(daemon.wait().success());
}
