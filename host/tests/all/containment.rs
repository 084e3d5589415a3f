//! The execution envelope against hostile components (seed 002 §9, §11
//! items 13–14). Each attack runs as `flow.py` and as `flow.bin`; every
//! Run must end with the right code or the component's own report of what
//! it could not do, and leave no process, cgroup, mount or scratch behind.
//! Written for cgroup v1 and v2 alike: the checks find our groups the way
//! the host creates them (under the test process's own cgroup).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use jig_sandbox::KILL_GRACE;
use serde_json::{json, Value};

use crate::support::*;

const FLOW_MD: &str = "---\nname: hostile\ndescription: Tries to escape its envelope.\n---\n";
const HOSTILE_PY: &str = include_str!("../hostile/hostile.py");
const TARGETS: [&str; 2] = ["flow:flows/hostile-py", "flow:flows/hostile-bin"];
/// The per-Flow task ceiling the envelope must enforce.
const FLOW_TASKS: u64 = 64;
/// A sentinel in the host's environment that must never be visible inside.
const SENTINEL: &str = "JIG_CONTAINMENT_SENTINEL";
const SENTINEL_VALUE: &str = "host-secret-7f3a";

/// The hostile component built natively from host/tests/hostile/bin.
fn hostile_bin() -> PathBuf {
    static CELL: OnceLock<PathBuf> = OnceLock::new();
    CELL.get_or_init(|| {
        let target_dir = workspace().join("target").join("guests");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "--quiet", "--manifest-path"])
            .arg(workspace().join("host/tests/hostile/bin/Cargo.toml"))
            .arg("--target-dir")
            .arg(&target_dir)
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the hostile flow.bin failed");
        target_dir.join("debug/hostile")
    })
    .clone()
}

/// A reviewed project with the hostile Flow in both recipes, and a private
/// HOME holding a secret.
fn hostile_project() -> tempfile::TempDir {
    let dir = project(&[
        ("flows/hostile-py/FLOW.md", FLOW_MD),
        ("flows/hostile-py/flow.py", HOSTILE_PY),
        ("flows/hostile-bin/FLOW.md", FLOW_MD),
        ("home/secret.txt", "home secret\n"),
    ]);
    std::fs::copy(hostile_bin(), dir.path().join("flows/hostile-bin/flow.bin")).unwrap();
    use_the_test_cgroup_parent(dir.path());
    review(dir.path());
    dir
}

/// On cgroup v2 hosts where the test process's own cgroup cannot hand its
/// controllers to children (it holds the test runner), CI names an empty
/// delegated cgroup (path from the hierarchy root) here.
fn test_cgroup_parent() -> Option<String> {
    std::env::var("JIG_TEST_CGROUP_PARENT")
        .ok()
        .filter(|p| !p.is_empty())
}

struct Watched {
    run: Run,
    pid: u32,
    elapsed: Duration,
}

/// Run `jig` in `dir`, remembering its pid to find what it may leave.
fn watched(dir: &Path, args: &[&str]) -> Watched {
    let started = Instant::now();
    let child = jig(dir)
        .args(args)
        .env("HOME", dir.join("home"))
        .env(SENTINEL, SENTINEL_VALUE)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("jig starts");
    let pid = child.id();
    let run = output(child.wait_with_output().expect("jig ends"));
    Watched {
        run,
        pid,
        elapsed: started.elapsed(),
    }
}

fn attack(dir: &Path, target: &str, input: Value, extra: &[&str]) -> Watched {
    let input = input.to_string();
    let mut args = vec!["run", target, "--input", &input];
    args.extend_from_slice(extra);
    let w = watched(dir, &args);
    assert_nothing_left(dir, w.pid);
    w
}

fn succeeded(w: &Watched) -> Value {
    assert_eq!(w.run.status, 0, "{:?}", w.run);
    let json = w.run.json();
    assert_eq!(json["status"], "succeeded", "{:?}", w.run);
    json["output"].clone()
}

fn failed(w: &Watched) -> String {
    assert_eq!(w.run.status, 1, "{:?}", w.run);
    let json = w.run.json();
    assert_eq!(json["status"], "failed", "{:?}", w.run);
    json["code"].as_str().unwrap().to_string()
}

/// The `--timeout` of the attacks that must be ended by the deadline.
const ATTACK_DEADLINE: Duration = Duration::from_millis(3000);

/// Runs `attack_name` with `--timeout` ATTACK_DEADLINE; the Run must fail
/// DEADLINE_EXCEEDED.
fn attack_past_the_deadline(dir: &Path, target: &str, attack_name: &str) -> Watched {
    let timeout = format!("{}ms", ATTACK_DEADLINE.as_millis());
    let w = attack(
        dir,
        target,
        json!({ "attack": attack_name }),
        &["--timeout", &timeout],
    );
    assert_eq!(failed(&w), "DEADLINE_EXCEEDED", "{target}");
    w
}

/// What the component wrote to stderr, as the Run's diagnostics carry it.
fn component_stderr(run: &Run) -> String {
    run.json()["diagnostics"]["stderr"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The cgroup directories the host would use as parents: the test
/// process's own cgroup in each hierarchy (jig inherits it).
fn cgroup_bases() -> Vec<PathBuf> {
    let mut own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    if let Some(parent) = test_cgroup_parent() {
        own = format!("0::{parent}\n9:memory,pids,cpu,freezer:{parent}\n");
    }
    if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        let rel = own.lines().find_map(|l| l.strip_prefix("0::")).unwrap();
        return vec![Path::new("/sys/fs/cgroup").join(rel.trim_start_matches('/'))];
    }
    ["memory", "pids", "cpu", "freezer"]
        .into_iter()
        .filter_map(|c| {
            let rel = own.lines().find_map(|l| {
                let mut parts = l.splitn(3, ':');
                let _ = parts.next();
                let names = parts.next()?;
                let path = parts.next()?;
                names.split(',').any(|n| n == c).then_some(path)
            })?;
            let base = Path::new("/sys/fs/cgroup")
                .join(c)
                .join(rel.trim_start_matches('/'));
            base.is_dir().then_some(base)
        })
        .collect()
}

/// Processes whose command line mentions `needle`.
/// Wait (up to 20 s) until the envelope and the component of a Run in
/// the project at `needle` are running.
fn wait_for_component(needle: &str) {
    let until = Instant::now() + Duration::from_secs(20);
    while processes_mentioning(needle).len() < 2 {
        assert!(Instant::now() < until, "the component never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait (up to 5 s) until no process mentions `needle`: everything of
/// it died with `host`, which was killed.
fn wait_for_none_mentioning(needle: &str, host: &str) {
    let until = Instant::now() + Duration::from_secs(5);
    while !processes_mentioning(needle).is_empty() {
        assert!(
            Instant::now() < until,
            "outlived {host}: {:?}",
            processes_mentioning(needle)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait (up to 20 s) until a process under `host` (a pid) catches
/// SIGTERM: the component installed its handler (neither bubblewrap nor
/// the SDKs catch it).
fn wait_for_sigterm_handler(host: u32) {
    let until = Instant::now() + Duration::from_secs(20);
    while !descendants(host)
        .into_iter()
        .any(|pid| catches(pid, nix::libc::SIGTERM))
    {
        assert!(
            Instant::now() < until,
            "no process of the Run installed a SIGTERM handler"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn processes_mentioning(needle: &str) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if text.contains(needle) {
            found.push((pid, text));
        }
    }
    found
}

fn scratch_dirs(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(root) else {
        return found;
    };
    for entry in entries.flatten() {
        if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            if entry.file_name() == "scratch" {
                found.push(entry.path());
            }
            found.extend(scratch_dirs(&entry.path()));
        }
    }
    found
}

/// After a `jig` process (pid) ended: no process of this project, no cgroup
/// of that host, no mount of the project, no scratch directory.
fn assert_nothing_left(dir: &Path, pid: u32) {
    let needle = dir.to_string_lossy().into_owned();
    let processes = processes_mentioning(&needle);
    assert!(
        processes.is_empty(),
        "processes outlived the Run: {processes:?}"
    );
    let bases = cgroup_bases();
    assert!(!bases.is_empty(), "no cgroup hierarchy found");
    for base in bases {
        let group = base.join(format!("jig-{pid}"));
        assert!(!group.exists(), "cgroup {} remains", group.display());
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(&needle), "a mount of the project remains");
    let scratch = scratch_dirs(&dir.join(".jig"));
    assert!(scratch.is_empty(), "scratch remains: {scratch:?}");
}

/// A process on the host the component will try to reach.
struct Victim(std::process::Child);

impl Victim {
    fn start() -> Victim {
        Victim(
            Command::new("/bin/sleep")
                .arg("60")
                .env(SENTINEL, SENTINEL_VALUE)
                .spawn()
                .unwrap(),
        )
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
    fn state(&self) -> String {
        std::fs::read_to_string(format!("/proc/{}/stat", self.pid()))
            .unwrap()
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    }
}

impl Drop for Victim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_fork_bomb_stops_at_the_task_ceiling() {
    let dir = hostile_project();
    for target in TARGETS {
        let w = attack(dir.path(), target, json!({"attack": "fork-bomb"}), &[]);
        let out = succeeded(&w);
        let forked = out["forked"].as_u64().unwrap();
        assert!(forked > 0 && forked < FLOW_TASKS, "{target}: {out}");
        assert_eq!(out["failure"], "EAGAIN", "{target}: {out}");
    }
}

#[test]
fn memory_is_capped_at_256_mib() {
    let dir = hostile_project();
    for target in TARGETS {
        // Within the ceiling (runtime overhead included) the component lives.
        let w = attack(
            dir.path(),
            target,
            json!({"attack": "memory-hog", "mib": 160}),
            &[],
        );
        assert_eq!(succeeded(&w)["heldMiB"], 160, "{target}");
        // Past it the kernel ends the process.
        let w = attack(
            dir.path(),
            target,
            json!({"attack": "memory-hog", "mib": 320}),
            &[],
        );
        assert_eq!(failed(&w), "EXECUTION_FAILED", "{target}: {:?}", w.run);
    }
}

#[test]
fn a_cpu_spin_ends_at_the_wall_clock_deadline() {
    let dir = hostile_project();
    for target in TARGETS {
        let w = attack_past_the_deadline(dir.path(), target, "cpu-spin");
        assert!(
            w.elapsed < Duration::from_secs(8),
            "{target}: took {:?}",
            w.elapsed
        );
    }
}

#[test]
fn cpu_is_throttled_to_half_a_core() {
    const WALL_SECONDS: f64 = 2.0;
    let dir = hostile_project();
    for target in TARGETS {
        let w = attack(
            dir.path(),
            target,
            json!({"attack": "cpu-share", "seconds": WALL_SECONDS}),
            &[],
        );
        let cpu = succeeded(&w)["cpuSeconds"].as_f64().unwrap();
        // 0.5 CPU for 2 s of wall time is 1 s of CPU; an unthrottled spin
        // takes close to 2 s. Slack for the first period and start-up.
        assert!(cpu < WALL_SECONDS * 0.5 + 0.35, "{target}: {cpu} s of CPU");
    }
}

/// What the hostile component prints when SIGTERM reaches it.
const TERM_MARKER: &str = "hostile: got SIGTERM";

#[test]
fn at_the_deadline_the_tree_gets_sigterm_before_the_kill() {
    let dir = hostile_project();
    for target in TARGETS {
        let w = attack_past_the_deadline(dir.path(), target, "term-trap");
        let stderr = component_stderr(&w.run);
        assert!(stderr.contains("hostile: waiting"), "{target}: {stderr:?}");
        assert!(
            stderr.contains(TERM_MARKER),
            "{target}: the component never saw SIGTERM: {stderr:?}"
        );
    }
}

#[test]
fn an_interrupted_host_sends_sigterm_before_the_kill() {
    let dir = hostile_project();
    for target in TARGETS {
        let input = json!({"attack": "term-trap"}).to_string();
        let child = jig(dir.path())
            .args(["run", target, "--input", &input])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("jig starts");
        let pid = child.id();
        // Let the component start and install its handler, then interrupt
        // the host.
        wait_for_component(&dir.path().to_string_lossy());
        wait_for_sigterm_handler(pid);
        Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status()
            .unwrap();
        let run = output(child.wait_with_output().unwrap());
        assert_nothing_left(dir.path(), pid);
        assert_interrupted(&run);
        // Nothing on stdout: the cancelled terminal is in the Run's record.
        let stderr = newest_terminal(dir.path())["diagnostics"]["stderr"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            stderr.contains(TERM_MARKER),
            "{target}: the component never saw SIGTERM: {run:?}"
        );
    }
}

#[test]
fn a_component_that_ignores_sigterm_is_killed_after_the_grace() {
    let dir = hostile_project();
    for target in TARGETS {
        let w = attack_past_the_deadline(dir.path(), target, "term-ignore");
        // attack() asserts that no process of the project remains.
        assert!(
            w.elapsed >= ATTACK_DEADLINE + KILL_GRACE,
            "{target}: killed before the grace ended ({:?})",
            w.elapsed
        );
        assert!(
            w.elapsed < Duration::from_secs(8),
            "{target}: took {:?}",
            w.elapsed
        );
    }
}

#[test]
fn a_double_forked_daemon_does_not_outlive_the_run() {
    let dir = hostile_project();
    for target in TARGETS {
        // attack() asserts that no process of the project remains.
        let w = attack(dir.path(), target, json!({"attack": "daemon"}), &[]);
        assert_eq!(succeeded(&w)["daemonized"], true, "{target}");
    }
}

#[test]
fn there_is_no_network_but_loopback_and_no_name_service() {
    let dir = hostile_project();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    for target in TARGETS {
        let w = attack(
            dir.path(),
            target,
            json!({"attack": "network", "port": port, "name": "example.com"}),
            &[],
        );
        let out = succeeded(&w);
        assert_eq!(out["tcp"], "ECONNREFUSED", "{target}: {out}");
        assert!(
            out["dns"].as_str().unwrap().starts_with("failed"),
            "{target}: {out}"
        );
        assert!(
            listener.accept().is_err(),
            "{target}: the host listener was reached"
        );
    }
}

#[test]
fn host_secrets_source_state_and_processes_are_invisible() {
    let dir = hostile_project();
    let victim = Victim::start();
    let root = dir.path();
    let dot_jig: Vec<String> = std::fs::read_dir(root.join(".jig"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name() != "work")
        .map(|e| e.path().to_string_lossy().into_owned())
        .collect();
    assert!(!dot_jig.is_empty());
    let mut secret: Vec<String> = vec![
        "/etc/shadow".into(),
        "/etc/passwd".into(),
        "/root".into(),
        root.join("home/secret.txt").to_string_lossy().into(),
        root.join("home").to_string_lossy().into(),
        root.join("jig.ts").to_string_lossy().into(),
        root.join("flows/hostile-py/flow.py")
            .to_string_lossy()
            .into(),
        root.join("jig.lock").to_string_lossy().into(),
        format!("/proc/{}/environ", victim.pid()),
        format!("/proc/{}/environ", std::process::id()),
        "/sys/fs/cgroup".into(),
    ];
    secret.extend(dot_jig);
    let mut paths = secret.clone();
    paths.push("/proc/1/environ".into());
    for target in TARGETS {
        let w = attack(
            dir.path(),
            target,
            json!({"attack": "reads", "paths": paths}),
            &[],
        );
        let out = succeeded(&w);
        for path in &secret {
            assert_eq!(out[path]["ok"], false, "{target} read {path}: {out}");
        }
        // pid 1 inside is the envelope's own init, with an empty environment.
        let init = &out["/proc/1/environ"];
        if init["ok"] == true {
            assert!(
                !init["text"].as_str().unwrap().contains(SENTINEL),
                "{target}: {init}"
            );
        }
        assert!(!w.run.stdout.contains(SENTINEL_VALUE), "{target}");
    }
}

#[test]
fn descriptors_of_the_host_are_not_inherited() {
    use std::os::unix::process::CommandExt;
    let dir = hostile_project();
    let secret = dir.path().join("home/secret.txt");
    let input = json!({"attack": "fds"}).to_string();
    for target in TARGETS {
        let file = std::fs::File::open(&secret).unwrap();
        let mut command = jig(dir.path());
        command
            .args(["run", target, "--input", &input])
            .stdin(Stdio::null());
        let raw = std::os::fd::AsRawFd::as_raw_fd(&file);
        // SAFETY: dup2 onto a fixed number, leaving it open across exec.
        unsafe {
            command.pre_exec(move || {
                if nix::libc::dup2(raw, 9) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let run = output(command.output().unwrap());
        assert_eq!(run.status, 0, "{run:?}");
        let out = &run.json()["output"];
        let held: Vec<&str> = out
            .as_object()
            .unwrap()
            .values()
            .filter_map(Value::as_str)
            .collect();
        assert!(
            !held.iter().any(|t| t.contains("secret")),
            "{target} inherited {out}"
        );
        assert!(out.get("9").is_none(), "{target}: {out}");
    }
}

#[test]
fn writes_land_only_in_scratch() {
    let dir = hostile_project();
    let root = dir.path();
    let host_tmp = format!("/tmp/jig-escape-{}", std::process::id());
    // Refused outright: everything outside the writable grants is
    // read-only or absent.
    let refused: Vec<String> = vec![
        "/usr/escape.txt".into(),
        "/etc/escape.txt".into(),
        "/escape.txt".into(),
        root.join("home/escape.txt").to_string_lossy().into(),
    ];
    // Paths under /tmp (the test project lives there) fall into the
    // envelope's private /tmp: a write may succeed there, but it never
    // reaches the host and is discarded with the envelope.
    let mut outside = refused.clone();
    outside.push(root.join("escape.txt").to_string_lossy().into());
    outside.push(root.join(".jig/escape.txt").to_string_lossy().into());
    outside.push(host_tmp.clone());
    let mut paths = outside.clone();
    paths.push("in-scratch.txt".into());
    for target in TARGETS {
        let w = attack(
            dir.path(),
            target,
            json!({"attack": "writes", "paths": paths}),
            &[],
        );
        let out = succeeded(&w);
        assert_eq!(out["in-scratch.txt"]["ok"], true, "{target}: {out}");
        for path in &refused {
            assert_eq!(out[path]["ok"], false, "{target} wrote {path}: {out}");
        }
        for path in &outside {
            assert!(!Path::new(path).exists(), "{target}: {path} on the host");
        }
        // Beside its own entrypoint: the package is read-only.
        let beside: Vec<(&String, &Value)> = out
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| k.ends_with("/escape") && k.contains("/package/"))
            .collect();
        assert_eq!(beside.len(), 1, "{target}: {out}");
        assert_eq!(beside[0].1["ok"], false, "{target}: {out}");
    }
}

/// A Flow's scratch and its /tmp are each a tmpfs of `[containment]
/// scratch-size`: what fits is written, one write past it is ENOSPC inside
/// the Run, and the Run (and the next) goes on; nothing of it reaches the
/// host's disk.
#[test]
fn scratch_and_tmp_are_bounded_by_scratch_size() {
    let dir = hostile_project();
    let config = dir.path().join(".test-config-home/jig/host.toml");
    let mut text = std::fs::read_to_string(&config).unwrap_or_default();
    if !text.contains("[containment]") {
        text.push_str("[containment]\n");
    }
    text.push_str("scratch-size = \"2MiB\"\n");
    write_files(dir.path(), &[(".test-config-home/jig/host.toml", &text)]);
    let mib = 1 << 20;
    let files = json!({
        "fits.bin": mib,
        "past.bin": 3 * mib,
        "/tmp/fits.bin": mib,
        "/tmp/past.bin": 3 * mib,
    });
    let w = attack(
        dir.path(),
        "flow:flows/hostile-py",
        json!({"attack": "fill", "files": files}),
        &[],
    );
    let out = succeeded(&w);
    assert_eq!(out["fits.bin"]["ok"], true, "{out}");
    assert_eq!(out["/tmp/fits.bin"]["ok"], true, "{out}");
    assert_eq!(out["past.bin"]["error"], "ENOSPC", "{out}");
    assert_eq!(out["/tmp/past.bin"]["error"], "ENOSPC", "{out}");
    assert!(scratch_dirs(dir.path()).is_empty());
}

#[test]
fn the_host_cannot_be_traced() {
    let dir = hostile_project();
    let victim = Victim::start();
    for target in TARGETS {
        let w = attack(
            dir.path(),
            target,
            json!({"attack": "ptrace", "pids": [victim.pid(), std::process::id()]}),
            &[],
        );
        let out = succeeded(&w);
        for pid in [victim.pid(), std::process::id()] {
            assert_eq!(out[pid.to_string()], "ESRCH", "{target}: {out}");
        }
        assert_eq!(victim.state(), "S", "{target}: the victim was stopped");
    }
}

#[test]
fn a_hundred_runs_leave_nothing_behind() {
    const RUNS: usize = 100;
    let dir = hostile_project();
    for n in 0..RUNS {
        let target = TARGETS[n % TARGETS.len()];
        let w = attack(dir.path(), target, json!({"attack": "noop"}), &[]);
        assert_eq!(succeeded(&w)["ok"], true, "run {n} of {target}");
    }
}

/// A process root's cgroups are made while its package is verified. A
/// command that then launches nothing (a replay of the same key, a
/// refusal before the Run is recorded) removes them before it ends.
#[test]
fn cgroups_made_ahead_of_a_launch_that_never_comes_are_removed() {
    let dir = hostile_project();
    let input = json!({"attack": "noop"});
    for target in TARGETS {
        let key = format!("ahead-{target}");
        let first = attack(dir.path(), target, input.clone(), &["--key", &key]);
        assert_eq!(succeeded(&first)["ok"], true, "{target}");
        let replay = attack(dir.path(), target, input.clone(), &["--key", &key]);
        assert_eq!(replay.run.json()["runId"], first.run.json()["runId"]);
        let refused = attack(dir.path(), target, input.clone(), &["--attach", "x=home"]);
        assert_eq!(refused.run.status, 1, "{:?}", refused.run);
        assert!(
            refused.run.stderr.contains("JIG_RUN_FILES_INVALID"),
            "{:?}",
            refused.run
        );
    }
}

fn host_toml(dir: &Path, text: &str) {
    write_files(dir, &[(".test-config-home/jig/host.toml", text)]);
}

#[test]
fn without_containment_process_recipes_are_unavailable_unless_opted_out() {
    let dir = hostile_project();
    let root = dir.path();
    let doctor = run_jig(root, &["doctor"]);
    assert_eq!(doctor.status, 0, "{doctor:?}");
    assert!(
        doctor
            .stdout
            .contains("envelope in use: bubblewrap with cgroup v"),
        "{doctor:?}"
    );
    host_toml(root, "[containment]\nbwrap = \"/nonexistent/bwrap\"\n");
    let w = watched(
        root,
        &["run", TARGETS[0], "--input", "{\"attack\":\"noop\"}"],
    );
    assert_eq!(w.run.status, 2, "{:?}", w.run);
    assert!(w.run.stderr.starts_with("UNAVAILABLE: "), "{:?}", w.run);
    assert!(w.run.stderr.contains("/nonexistent/bwrap"), "{:?}", w.run);
    assert!(w.run.stderr.contains("mode = \"none\""), "{:?}", w.run);
    let doctor = run_jig(root, &["doctor"]);
    assert_eq!(doctor.status, 1, "{doctor:?}");
    assert!(
        doctor.stdout.contains("envelope in use: none"),
        "{doctor:?}"
    );
    // Doctor says what run does: no recipe runs, flow.wasm included.
    for recipe in ["flow.py", "flow.wasm", "flow.bin"] {
        assert!(
            doctor
                .stdout
                .contains(&format!("{recipe:<10} unavailable: no execution envelope")),
            "{recipe}: {doctor:?}"
        );
    }
    // An explicit JIG_BWRAP_PATH that fails its checks is never replaced.
    host_toml(root, "");
    let run = output(
        jig(root)
            .env("JIG_BWRAP_PATH", "bwrap")
            .args(["run", TARGETS[0], "--input", "{\"attack\":\"noop\"}"])
            .output()
            .unwrap(),
    );
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stderr.starts_with("UNAVAILABLE: "), "{run:?}");
    // The explicit opt-out runs uncontained, and doctor says so.
    host_toml(root, "[containment]\nmode = \"none\"\n");
    let w = attack(root, TARGETS[0], json!({"attack": "noop"}), &[]);
    assert_eq!(succeeded(&w)["ok"], true);
    let doctor = run_jig(root, &["doctor"]);
    assert!(
        doctor.stdout.contains("envelope in use: process-group"),
        "{doctor:?}"
    );
    host_toml(root, "[containment]\nmode = \"sometimes\"\n");
    let bad = run_jig(root, &["run", TARGETS[0]]);
    assert_eq!(bad.status, 1, "{bad:?}");
    assert!(bad.stderr.starts_with("JIG_CONFIG_INVALID: "), "{bad:?}");
    assert!(
        bad.stderr.contains("expected `contained` or `none`"),
        "{bad:?}"
    );
}

#[test]
fn a_killed_host_takes_its_envelope_along_and_the_next_host_sweeps_its_cgroup() {
    let dir = hostile_project();
    let root = dir.path();
    let input = json!({"attack": "cpu-spin"}).to_string();
    let mut child = jig(root)
        .args(["run", TARGETS[0], "--input", &input, "--timeout", "30s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let needle = root.to_string_lossy().into_owned();
    wait_for_component(&needle);
    let groups: Vec<PathBuf> = cgroup_bases()
        .into_iter()
        .map(|b| b.join(format!("jig-{pid}")))
        .collect();
    assert!(groups.iter().all(|g| g.is_dir()), "{groups:?}");
    child.kill().unwrap();
    child.wait().unwrap();
    // The envelope dies with its host (no process of the project remains).
    wait_for_none_mentioning(&needle, "the host");
    // The next host removes the dead host's groups before it runs anything.
    let w = attack(root, TARGETS[1], json!({"attack": "noop"}), &[]);
    assert_eq!(succeeded(&w)["ok"], true);
    for group in &groups {
        assert!(!group.exists(), "{} was not swept", group.display());
    }
}

/// A bubblewrap that only answers `--version` with `version`.
fn fake_bwrap(dir: &Path, version: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("fake-bwrap");
    std::fs::write(&path, format!("#!/bin/sh\necho 'bubblewrap {version}'\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn doctor_reports_the_bubblewrap_version_and_an_explicit_one_below_the_floor_is_refused() {
    let dir = hostile_project();
    let root = dir.path();
    let doctor = run_jig(root, &["doctor"]);
    assert_eq!(doctor.status, 0, "{doctor:?}");
    let line = doctor
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("bubblewrap: "))
        .unwrap_or_else(|| panic!("{doctor:?}"))
        .to_string();
    assert!(line.contains("bubblewrap 0."), "{line}");
    assert!(line.contains("jig needs >= 0.7.0"), "{line}");
    assert!(
        line.contains("note: the reference host asks for >= 0.12.0"),
        "{line}"
    );

    // Below the floor, explicitly selected: an error naming it, no fallback.
    let old = fake_bwrap(root, "0.6.1");
    let doctor = output(
        jig(root)
            .env("JIG_BWRAP_PATH", &old)
            .arg("doctor")
            .output()
            .unwrap(),
    );
    assert_eq!(doctor.status, 1, "{doctor:?}");
    assert!(
        doctor
            .stdout
            .contains("is bubblewrap 0.6.1, older than 0.7.0"),
        "{doctor:?}"
    );
    let run = output(
        jig(root)
            .env("JIG_BWRAP_PATH", &old)
            .args(["run", TARGETS[0], "--input", "{\"attack\":\"noop\"}"])
            .output()
            .unwrap(),
    );
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stderr.starts_with("UNAVAILABLE: "), "{run:?}");
    assert!(run.stderr.contains("older than 0.7.0"), "{run:?}");
}

/// A cgroup v2 host without delegated cpu/memory/pids, made real: `jig` is
/// started in a private mount namespace where a cgroup2 hierarchy (only
/// the controllers this kernel leaves free) covers /sys/fs/cgroup. Doctor
/// names v2 and the missing controllers; a process recipe is refused, not
/// run uncontained.
#[test]
fn a_cgroup_v2_host_without_the_controllers_is_reported_and_refused() {
    if !nix_is_root() {
        eprintln!("\n*** SKIPPED: mounting cgroup2 needs root; this test did not run ***\n");
        return;
    }
    let dir = hostile_project();
    let root = dir.path();
    let in_v2 = |args: &[&str]| {
        let mut command = Command::new("unshare");
        command
            .args(["-m", "--propagation", "private", "sh", "-c"])
            .arg("mount -t cgroup2 none /sys/fs/cgroup || exit 99; exec \"$@\"")
            .arg("sh")
            .arg(env!("CARGO_BIN_EXE_jig"))
            .args(args)
            .current_dir(root)
            .env_remove("JIG_CONFIG")
            .env("XDG_CONFIG_HOME", root.join(".test-config-home"))
            .env("NO_COLOR", "1");
        output(command.output().expect("unshare runs"))
    };
    let doctor = in_v2(&["doctor"]);
    if doctor.status == 99 {
        eprintln!("\n*** SKIPPED: mount -t cgroup2 is not permitted here: {doctor:?} ***\n");
        return;
    }
    let controllers =
        std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers").unwrap_or_default();
    let has_all = ["cpu", "memory", "pids"]
        .iter()
        .all(|c| controllers.split_whitespace().any(|a| a == *c));
    if has_all {
        eprintln!("\n*** SKIPPED: this host delegates cpu/memory/pids on v2 ***\n");
        return;
    }
    assert_eq!(doctor.status, 1, "{doctor:?}");
    assert!(
        doctor.stdout.contains("cgroup: v2, controllers:"),
        "{doctor:?}"
    );
    assert!(
        doctor
            .stdout
            .contains("are not delegated to /sys/fs/cgroup"),
        "{doctor:?}"
    );
    assert!(
        doctor.stdout.contains("envelope in use: none"),
        "{doctor:?}"
    );
    let run = in_v2(&["run", TARGETS[1], "--input", "{\"attack\":\"noop\"}"]);
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stderr.starts_with("UNAVAILABLE: "), "{run:?}");
    assert!(run.stderr.contains("cgroup v2 controllers"), "{run:?}");
    assert!(run.stdout.is_empty(), "nothing ran: {run:?}");
}

fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1).map(|e| e == "0"))
        .unwrap_or(false)
}

/// A Flow sees only its runtime's closure (seed 002 §9): no /usr tool
/// but its own runtime, no /usr/share, in both recipes.
#[test]
fn a_flow_sees_only_its_runtimes_closure() {
    let dir = hostile_project();
    let absent = [
        "/usr/bin/env",
        "/usr/bin/bwrap",
        "/usr/bin/sh",
        "/bin/sh",
        "/usr/share",
        "/usr/share/dict",
        "/usr/include",
        "/usr/local",
    ];
    for target in TARGETS {
        let w = attack(
            dir.path(),
            target,
            json!({"attack": "reads", "paths": absent}),
            &[],
        );
        let out = succeeded(&w);
        for path in absent {
            assert_eq!(out[path]["ok"], false, "{target} sees {path}: {out}");
        }
    }
    // What the Python Flow sees of /usr/bin is its runtime alone.
    let w = attack(
        dir.path(),
        TARGETS[0],
        json!({"attack": "reads", "paths": ["/usr/bin"]}),
        &[],
    );
    let out = succeeded(&w);
    let listed = out["/usr/bin"]["text"].as_str().unwrap_or("").to_string();
    for name in listed.split_whitespace() {
        assert!(name.starts_with("python3"), "/usr/bin shows {name}: {out}");
    }
}

const STDLIB_PY: &str = r#"
import importlib.util
from jiggy.flow import handle

async def run(ctx):
    import hashlib, json, ssl, zlib, decimal, ctypes
    found = {"json": json.dumps({"a": [1]}), "sha": hashlib.sha256(b"x").hexdigest()[:8]}
    found["ssl"] = ssl.OPENSSL_VERSION.split()[0]
    found["zlib"] = len(zlib.compress(b"jig" * 10))
    found["decimal"] = str(decimal.Decimal("1.1") + decimal.Decimal("2.2"))
    if importlib.util.find_spec("sqlite3") is not None:
        import sqlite3
        db = sqlite3.connect(":memory:")
        found["sqlite"] = db.execute("select 6 * 7").fetchone()[0]
    return {"outcome": "done", "output": found}

handle(run)
"#;

/// The standard library's C extensions load in the narrow view: their
/// libraries (libssl, libz, libffi, libsqlite3, ...) are in the closure.
#[test]
fn stdlib_modules_with_c_extensions_still_import() {
    let dir = project(&[
        ("flows/stdlib/FLOW.md", FLOW_MD),
        ("flows/stdlib/flow.py", STDLIB_PY),
    ]);
    review(dir.path());
    let run = run_jig(dir.path(), &["run", "flow:flows/stdlib", "--input", "{}"]);
    assert_eq!(run.status, 0, "{run:?}");
    let out = &run.json()["output"];
    assert_eq!(out["json"], "{\"a\": [1]}", "{out}");
    assert_eq!(out["sha"], "2d711642", "{out}");
    assert_eq!(out["ssl"], "OpenSSL", "{out}");
    assert_eq!(out["decimal"], "3.3", "{out}");
    if out.get("sqlite").is_some() {
        assert_eq!(out["sqlite"], 42, "{out}");
    }
}

/// The closure is proved once per runtime and kept: a second Run reads
/// the kept file and writes nothing; a corrupt one is proved again and
/// rewritten, and the Run still succeeds.
#[test]
fn the_runtime_closure_is_kept_and_reused() {
    let dir = hostile_project();
    let cache = tempfile::tempdir().unwrap();
    let views = cache
        .path()
        .join("jig/installation-verification")
        .join(jig_sandbox::closure::CACHE_SUBDIR);
    let input = json!({"attack": "noop"}).to_string();
    let run = || {
        let out = jig(dir.path())
            .args(["run", TARGETS[0], "--input", &input])
            .env("XDG_CACHE_HOME", cache.path())
            .output()
            .unwrap();
        let run = output(out);
        assert_eq!(run.status, 0, "{run:?}");
    };
    let kept = || -> Vec<(PathBuf, (u64, i64, i64))> {
        use std::os::unix::fs::MetadataExt;
        let mut files: Vec<_> = std::fs::read_dir(&views)
            .unwrap()
            .flatten()
            .map(|e| {
                let m = e.metadata().unwrap();
                (e.path(), (m.ino(), m.mtime(), m.mtime_nsec()))
            })
            .collect();
        files.sort();
        files
    };
    run();
    let first = kept();
    assert_eq!(first.len(), 1, "one kept view for python: {first:?}");
    run();
    assert_eq!(kept(), first, "the second Run rewrote the kept view");
    std::fs::write(&first[0].0, b"{not json").unwrap();
    run();
    let text = std::fs::read_to_string(&first[0].0).unwrap();
    let value: Value = serde_json::from_str(&text).expect("rewritten valid");
    assert!(value["files"].as_array().is_some_and(|f| !f.is_empty()));
}

/// A runtime whose closure cannot be proved (a `#!` wrapper script) fails
/// closed with a fixed code and reason, and the Flow never starts.
#[test]
fn an_unprovable_runtime_fails_closed() {
    let dir = hostile_project();
    let wrapper = dir.path().join("home/python3");
    std::fs::write(&wrapper, "#!/bin/sh\nexec /usr/bin/python3 \"$@\"\n").unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let mut config = format!("[runtimes]\npython = \"{}\"\n", wrapper.display());
    if let Some(parent) = test_cgroup_parent() {
        config.push_str(&format!("[containment]\ncgroup-parent = {parent:?}\n"));
    }
    host_toml(dir.path(), &config);
    review(dir.path());
    let w = attack(dir.path(), TARGETS[0], json!({"attack": "noop"}), &[]);
    assert_eq!(failed(&w), "UNAVAILABLE", "{:?}", w.run);
    let json = w.run.json();
    assert_eq!(
        json["details"]["reason"], "RUNTIME_VIEW_UNPROVABLE",
        "{json}"
    );
    assert_eq!(json["details"]["flowStarted"], false, "{json}");
    // Doctor says what run does.
    let doctor = run_jig(dir.path(), &["doctor"]);
    assert_eq!(doctor.status, 1, "{doctor:?}");
    let line = doctor
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("flow.py"))
        .unwrap_or_default();
    assert!(line.contains("unavailable: "), "{doctor:?}");
    assert!(line.contains("RUNTIME_VIEW_UNPROVABLE"), "{doctor:?}");
    assert!(line.contains("#! script"), "{doctor:?}");
}

const CARRIED_PY: &str = r#"
import ctypes, os
from jiggy.flow import handle

async def run(ctx):
    ctypes.CDLL(os.path.join(os.path.dirname(__file__), "carried.so"))
    return {"outcome": "done", "output": "loaded"}

handle(run)
"#;

/// An installed shared object (at most 2 MiB) that needs libstdc++, which
/// Python itself does not: a stand-in for a prepared wheel's extension.
fn a_library_needing_libstdcxx() -> Option<PathBuf> {
    let dir = format!("/usr/lib/{}-linux-gnu", std::env::consts::ARCH);
    let mut candidates: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains(".so."))
        .collect();
    candidates.sort();
    candidates.into_iter().find(|p| {
        let small = std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.len() < 2 << 20);
        small
            && std::fs::read(p).is_ok_and(|b| {
                b.starts_with(b"\x7fELF") && b.windows(15).any(|w| w == b"libstdc++.so.6\0")
            })
    })
}

/// ELF files a package carries bring their own libraries into the view.
#[test]
fn a_carried_extension_brings_its_libraries() {
    let Some(library) = a_library_needing_libstdcxx() else {
        eprintln!("\n*** SKIPPED: no installed library needs libstdc++ ***\n");
        return;
    };
    let dir = project(&[
        ("flows/carried/FLOW.md", FLOW_MD),
        ("flows/carried/flow.py", CARRIED_PY),
    ]);
    std::fs::copy(&library, dir.path().join("flows/carried/carried.so")).unwrap();
    review(dir.path());
    let run = run_jig(dir.path(), &["run", "flow:flows/carried", "--input", "{}"]);
    assert_eq!(run.status, 0, "{} carried: {run:?}", library.display());
    assert_eq!(run.json()["output"], "loaded", "{run:?}");
}

/// The name `jig serve -C DIR` gives the project in DIR (its basename as a
/// LocalName).
pub(crate) fn served_name(root: &Path) -> String {
    let base = root
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_ascii_lowercase();
    base.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

/// The work roots a daemon made ahead in the project at `root`.
pub(crate) fn ahead_roots(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root.join(".jig/work")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("ahead-"))
        .map(|e| e.path())
        .collect()
}

/// Processes of envelopes made ahead in the project at `root` that run
/// `program` (flow.py or flow.bin): (pid, the file it executes).
fn held_processes(root: &Path, program: &str) -> Vec<(u32, PathBuf)> {
    let needle = root.join(".jig/work/ahead-").to_string_lossy().into_owned();
    processes_mentioning(&needle)
        .into_iter()
        .filter(|(_, cmdline)| cmdline.contains(program))
        .filter_map(|(pid, _)| {
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
            Some((pid, exe))
        })
        .collect()
}

/// Wait (up to 20 s) until an envelope made ahead for `program` holds.
fn wait_for_held(root: &Path, program: &str) {
    let until = Instant::now() + Duration::from_secs(20);
    while held_processes(root, program).is_empty() {
        assert!(
            Instant::now() < until,
            "no envelope made ahead for {program}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `jig_runs_started_ahead_total` of a daemon.
pub(crate) fn started_ahead(daemon: &crate::serve::Daemon) -> u64 {
    let (status, text) = daemon.raw("GET", "/metrics", None, &[]);
    assert_eq!(status, 200, "{text}");
    text.lines()
        .find_map(|l| l.strip_prefix("jig_runs_started_ahead_total "))
        .unwrap_or_else(|| panic!("no jig_runs_started_ahead_total in {text}"))
        .trim()
        .parse()
        .unwrap()
}

/// `jig serve` makes the next Run's envelope ahead of it (after a Run of
/// the same target answered) and holds it before the program is executed:
/// nothing of the package runs and nothing is written before the Run. The
/// next Run starts in it, gets what a fresh envelope gives (its own output,
/// a private scratch), and after the daemon stops nothing is left: no
/// process, cgroup, mount, scratch or work root.
#[test]
fn a_served_run_starts_in_an_envelope_made_ahead_that_ran_nothing_before_it() {
    let dir = hostile_project();
    let root = dir.path();
    let runs = format!("/v1/projects/{}/runs", served_name(root));
    let mut daemon = crate::serve::Daemon::start(root, &[]);
    let pid = daemon.pid();
    let bwrap = std::fs::canonicalize(jig_sandbox::find_bwrap(None).unwrap().0).unwrap();
    let mut started = 0;
    let mut run_before: Vec<&str> = Vec::new();
    for (target, program) in TARGETS.iter().zip(["flow.py", "flow.bin"]) {
        let submit = |attack: Value| {
            let (status, terminal) = daemon.call(
                "POST",
                &runs,
                Some(json!({"target": target, "input": attack})),
            );
            assert_eq!(status, 200, "{terminal}");
            assert_eq!(terminal["status"], "succeeded", "{terminal}");
            terminal["output"].clone()
        };
        assert_eq!(submit(json!({"attack": "noop"}))["ok"], true, "{target}");
        // Made after the Run answered: wait for it, and for the next
        // envelope of each target run before (made after its last Run
        // answered), whose scratch is read below.
        wait_for_held(root, program);
        for earlier in &run_before {
            wait_for_held(root, earlier);
        }
        std::thread::sleep(Duration::from_millis(300));
        // flow.bin: only bubblewrap waits there, the program was never
        // executed; flow.py: the interpreter waits at the SDK's gate.
        let held = held_processes(root, program);
        let interpreter = |exe: &Path| {
            program == "flow.py"
                && exe
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("python3"))
        };
        assert!(
            held.iter()
                .all(|(_, exe)| *exe == bwrap || interpreter(exe)),
            "{target}: a program ran ahead of its Run: {held:?}"
        );
        for ahead in ahead_roots(root) {
            let scratch = ahead.join("0/scratch");
            let written: Vec<_> = std::fs::read_dir(&scratch).unwrap().flatten().collect();
            assert!(written.is_empty(), "{target}: {written:?}");
        }
        assert_eq!(started_ahead(&daemon), started, "{target}");
        // The next Run of it starts there, contained as ever: it writes
        // its scratch, and not beside its own program.
        let scratch_file = "written-in-scratch";
        let report = submit(json!({"attack": "writes", "paths": [scratch_file]}));
        let entries = report.as_object().unwrap();
        let (path, beside) = entries.iter().find(|(p, _)| p.ends_with("escape")).unwrap();
        assert_eq!(beside["ok"], false, "{target}: wrote {path}");
        assert_eq!(report[scratch_file]["ok"], true, "{target}: {report}");
        started += 1;
        assert_eq!(started_ahead(&daemon), started, "{target}");
        run_before.push(program);
    }
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(daemon.wait().success(), "{}", daemon.log());
    assert_nothing_left(root, pid);
    assert_eq!(ahead_roots(root), Vec::<PathBuf>::new());
}

/// Held envelopes die with a killed daemon, and the next daemon removes
/// their work roots before it serves; with `--envelopes-ahead 0` nothing
/// is made ahead.
#[test]
fn envelopes_made_ahead_die_with_a_killed_daemon_and_none_are_made_when_turned_off() {
    let dir = hostile_project();
    let root = dir.path();
    let runs = format!("/v1/projects/{}/runs", served_name(root));
    let noop = json!({"target": TARGETS[1], "input": {"attack": "noop"}});
    let mut daemon = crate::serve::Daemon::start(root, &[]);
    let (status, terminal) = daemon.call("POST", &runs, Some(noop.clone()));
    assert_eq!((status, &terminal["status"]), (200, &json!("succeeded")));
    wait_for_held(root, "flow.bin");
    let made = ahead_roots(root);
    assert_eq!(made.len(), 1, "{made:?}");
    daemon.signal(nix::sys::signal::Signal::SIGKILL);
    daemon.wait();
    wait_for_none_mentioning(&root.to_string_lossy(), "the daemon");
    let daemon = crate::serve::Daemon::start(root, &["--envelopes-ahead", "0"]);
    assert!(!made[0].exists(), "{} was not removed", made[0].display());
    for _ in 0..2 {
        let (status, terminal) = daemon.call("POST", &runs, Some(noop.clone()));
        assert_eq!((status, &terminal["status"]), (200, &json!("succeeded")));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(ahead_roots(root), Vec::<PathBuf>::new());
    assert_eq!(started_ahead(&daemon), 0);
}

/// `--envelopes-ahead 1`: one target keeps its next envelope; a Run of a
/// second target makes that one's and ends the first's (the oldest goes),
/// whose work root is removed.
#[test]
fn past_the_envelopes_ahead_bound_the_oldest_is_ended() {
    let dir = hostile_project();
    let root = dir.path();
    let runs = format!("/v1/projects/{}/runs", served_name(root));
    let daemon = crate::serve::Daemon::start(root, &["--envelopes-ahead", "1"]);
    let noop = |target: &str| {
        let body = json!({"target": target, "input": {"attack": "noop"}});
        let (status, terminal) = daemon.call("POST", &runs, Some(body));
        assert_eq!((status, &terminal["status"]), (200, &json!("succeeded")));
    };
    // At the bound: the first target's envelope is held.
    noop(TARGETS[0]);
    wait_for_held(root, "flow.py");
    let first = ahead_roots(root);
    assert_eq!(first.len(), 1, "{first:?}");
    // One past it: the second target's is made, the first's ends.
    noop(TARGETS[1]);
    wait_for_held(root, "flow.bin");
    let until = Instant::now() + Duration::from_secs(5);
    while !held_processes(root, "flow.py").is_empty() || first[0].exists() {
        assert!(Instant::now() < until, "the oldest envelope was kept");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(ahead_roots(root).len(), 1);
}

/// systemd's ProtectHostname= is a seccomp filter refusing sethostname() to
/// the unit and everything it starts, bubblewrap's `--hostname` among them.
/// Under it a contained Run cannot start, and its failure says why (the
/// filter, and that contained Runs cannot start under it), not only that
/// its program exited.
#[test]
fn under_a_filter_refusing_sethostname_a_run_fails_saying_why() {
    let dir = project(&[
        ("flows/hi/FLOW.md", "---\nname: hi\ndescription: Answers.\n---\n"),
        (
            "flows/hi/flow.py",
            "from jiggy.flow import handle\n\nasync def run(context):\n    return {\"outcome\": \"done\", \"output\": 1}\n\nhandle(run)\n",
        ),
    ]);
    use_the_test_cgroup_parent(dir.path());
    review(dir.path());
    let unfiltered = run_jig(dir.path(), &["run", "flow:flows/hi"]);
    assert_eq!(unfiltered.status, 0, "{unfiltered:?}");

    let mut command = jig(dir.path());
    command.args(["run", "flow:flows/hi"]);
    // SAFETY: the hook only makes raw prctl() calls on a filter held on
    // its own stack; it allocates nothing and takes no locks.
    unsafe {
        use std::os::unix::process::CommandExt;
        command.pre_exec(jig_sandbox::testing::refuse_sethostname);
    }
    let run = output(command.output().expect("jig runs"));
    assert_eq!(run.status, 1, "{run:?}");
    let terminal = run.json();
    assert_eq!(terminal["status"], "failed", "{run:?}");
    assert_eq!(terminal["code"], "EXECUTION_FAILED", "{run:?}");
    let message = terminal["message"].as_str().unwrap();
    for words in [
        "Can't set hostname",
        "seccomp filter",
        "ProtectHostname=",
        "contained Runs cannot start under it",
    ] {
        assert!(message.contains(words), "{words:?} not in {message}");
    }
}

/// Name CI's empty cgroup parent, when it gives one
/// ([`test_cgroup_parent`]), in the project's host configuration.
fn use_the_test_cgroup_parent(dir: &Path) {
    if let Some(parent) = test_cgroup_parent() {
        write_files(
            dir,
            &[(
                ".test-config-home/jig/host.toml",
                &format!("[containment]\ncgroup-parent = {parent:?}\n"),
            )],
        );
    }
}
