//! A contained `jig run` against the bare bubblewrap floor, measured in the
//! same run: `jig run` of an admitted `flow.bin` (the Rust SDK's
//! `greet` example, release), of the same component as `flow.wasm`, and of
//! a one-file `flow.py`; the floor is `bwrap --unshare-all --die-with-parent
//! --ro-bind /usr /usr … /bin/true`, and for `flow.py` also `python3 -c
//! "import jiggy.flow"` started by hand in jig's own envelope (the
//! `jig_sandbox` launch of the Python recipe, without the host around it).
//! Report the ratios of the medians: `jig_run_flow_bin / bwrap_floor`
//! (target ≤1.5), `jig_run_flow_wasm / bwrap_floor`, and
//! `jig_run_flow_py / python_import_sdk_contained` (target ≤1.3).
//!
//! With `JIG_BENCH_BASELINE=/path/to/jig` (another build, e.g. of the
//! commit before a change) the `baseline_*` benches run the same Runs with
//! that binary in the same run, so before and after are compared under one
//! machine load; without it they measure nothing.
//!
//! `jig_process_start` (`jig --version`) and `greet_contained` (the same
//! `flow.bin` in its envelope through `jig_sandbox`, no CLI) are the part
//! of `jig_run_flow_bin` the host's own work cannot remove: their sum over
//! `bwrap_floor` is the lowest ratio a `jig run` can reach here.
//!
//! Each `jig run` is a whole command: process start, plan and store reads,
//! the durable Run record before dispatch, the cgroup and bubblewrap
//! envelope, the Run/1 exchange, cleanup and the final record.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use jig_sandbox::{Launch, Sandbox};

fn main() {
    // Build and review everything before timing anything.
    report_binds(fixture());
    interleaved();
    divan::main();
}

/// A Run started with the given `jig`.
type RunWith<'a> = dyn Fn(&Path) + 'a;

/// With a baseline, also the same Runs interleaved round by round (this
/// build, the baseline, the floor), so a drift of the machine's speed
/// during the run falls on both alike: the medians of
/// `JIG_BENCH_ROUNDS` (default 30) rounds.
fn interleaved() {
    let Some(baseline) = baseline() else {
        return;
    };
    let rounds: usize = std::env::var("JIG_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(30);
    let fixture = fixture();
    let time = |f: &dyn Fn()| {
        let started = std::time::Instant::now();
        f();
        started.elapsed().as_secs_f64() * 1000.0
    };
    let cases: [(&str, &RunWith); 3] = [
        ("flow.bin", &|b| run_with(b, fixture, "bin")),
        ("flow.wasm", &|b| run_with(b, fixture, "wasm")),
        ("flow.bin after history", &|b| {
            run_at(b, fixture.history.path(), fixture, "bin")
        }),
    ];
    let (mut floor, mut start, mut contained) = (Vec::new(), Vec::new(), Vec::new());
    let mut samples = vec![(Vec::new(), Vec::new()); cases.len()];
    for round in 0..rounds {
        floor.push(time(&bwrap_floor));
        start.push(time(&jig_process_start));
        contained.push(time(&greet_contained));
        // Which build goes first alternates: a Run's network namespace is
        // torn down by the kernel after it ends, on the next one's time.
        for ((_, case), (this, base)) in cases.iter().zip(samples.iter_mut()) {
            if round % 2 == 0 {
                this.push(time(&|| case(jig_binary())));
                base.push(time(&|| case(baseline)));
            } else {
                base.push(time(&|| case(baseline)));
                this.push(time(&|| case(jig_binary())));
            }
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let floor = median(&mut floor);
    let (start, contained) = (median(&mut start), median(&mut contained));
    eprintln!(
        "interleaved medians of {rounds} rounds: bwrap floor {floor:.2} ms; jig start {start:.2} \
         ms + greet contained {contained:.2} ms = {:.2} ms ({:.2}x the floor, the least a \
         flow.bin Run can take)",
        start + contained,
        (start + contained) / floor
    );
    for ((name, _), (this, base)) in cases.iter().zip(samples.iter_mut()) {
        let (this, base) = (median(this), median(base));
        eprintln!(
            "  {name}: this build {this:.2} ms ({:.2}x the floor), baseline {base:.2} ms \
             ({:.2}x), this / baseline {:.3}",
            this / floor,
            base / floor,
            this / base
        );
    }
}

struct Fixture {
    project: tempfile::TempDir,
    /// The `flow.bin` Flow alone, in a project that already settled
    /// [`HISTORY`] Runs.
    history: tempfile::TempDir,
    cache_home: tempfile::TempDir,
    scratch: tempfile::TempDir,
    contained: Box<dyn Sandbox>,
    runtime: tokio::runtime::Runtime,
    floor: Vec<OsString>,
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `cargo build --release` of one guest into `target/guests` (a separate
/// target dir, so the outer cargo's lock is not involved).
fn build_guest(args: &[&str]) -> PathBuf {
    let target = workspace().join("target/guests");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(workspace())
        .args(["build", "--quiet", "--release", "-p", "flow-sdk"])
        .args(args)
        .arg("--target-dir")
        .arg(&target)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building {args:?} failed");
    target
}

const FLOW_MD: &str = "---\nname: greet\ndescription: Greets the name given as input.\n---\n";
const FLOW_PY: &str = "from jiggy.flow import handle\n\nasync def run(ctx):\n    return {\"outcome\": \"done\", \"output\": {\"message\": f\"Hello, {ctx.input}!\"}}\n\nhandle(run)\n";
const JIG_TS: &str = "import { defineJig, discover } from \"@jigging/jig\";\n\nexport default defineJig({\n  flows: discover(\"./flows\"),\n  bindings: discover(\"./bindings\"),\n});\n";

/// The bubblewrap floor: the same namespaces, `/usr` and the top-level
/// links or directories of this machine's layout, nothing else.
fn floor_arguments() -> Vec<OsString> {
    let mut args: Vec<OsString> = [
        "--unshare-all",
        "--die-with-parent",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    .map(Into::into)
    .to_vec();
    for top in ["/bin", "/lib", "/lib64"] {
        match std::fs::read_link(top) {
            Ok(target) => args.extend(["--symlink".into(), target.into(), top.into()]),
            Err(_) if Path::new(top).is_dir() => {
                args.extend(["--ro-bind".into(), top.into(), top.into()])
            }
            Err(_) => {}
        }
    }
    args.push("/bin/true".into());
    args
}

fn fixture() -> &'static Fixture {
    static CELL: OnceLock<Fixture> = OnceLock::new();
    CELL.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt;
        let native = build_guest(&["--example", "greet"]).join("release/examples/greet");
        let wasm = build_guest(&["--example", "greet", "--target", "wasm32-wasip1"])
            .join("wasm32-wasip1/release/examples/greet.wasm");
        let project = tempfile::tempdir().unwrap();
        let root = project.path();
        std::fs::write(root.join("jig.ts"), JIG_TS).unwrap();
        for (name, entry, source) in [
            ("bin", "flow.bin", Some(native)),
            ("wasm", "flow.wasm", Some(wasm)),
            ("py", "flow.py", None),
        ] {
            let dir = root.join("flows").join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("FLOW.md"), FLOW_MD.replace("greet", name)).unwrap();
            match source {
                Some(path) => std::fs::copy(path, dir.join(entry)).map(drop).unwrap(),
                None => std::fs::write(dir.join(entry), FLOW_PY).unwrap(),
            }
        }
        let history = tempfile::tempdir().unwrap();
        std::fs::write(history.path().join("jig.ts"), JIG_TS).unwrap();
        let bin = history.path().join("flows/bin");
        std::fs::create_dir_all(&bin).unwrap();
        for file in ["FLOW.md", "flow.bin"] {
            std::fs::copy(root.join("flows/bin").join(file), bin.join(file)).unwrap();
        }
        let cache_home = tempfile::tempdir().unwrap();
        std::fs::set_permissions(cache_home.path(), std::fs::Permissions::from_mode(0o700))
            .unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let contained = jig_sandbox::contained(&jig_sandbox::Containment::default())
            .expect("this machine supports the contained envelope");
        let fixture = Fixture {
            project,
            history,
            cache_home,
            scratch,
            contained: Box::new(contained),
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
            floor: floor_arguments(),
        };
        let review = jig(&fixture, &["review", "--yes"]);
        assert!(review.status.success(), "{review:?}");
        let review = jig_at(
            jig_binary(),
            fixture.history.path(),
            &fixture,
            &["review", "--yes"],
        );
        assert!(review.status.success(), "{review:?}");
        // The history: one settled record of this project, kept under
        // HISTORY names.
        run_at(jig_binary(), fixture.history.path(), &fixture, "bin");
        let runs = fixture.history.path().join(".jig/runs");
        let settled = std::fs::read_dir(&runs)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "json"))
            .expect("a settled record");
        let bytes = std::fs::read(settled).unwrap();
        for n in 0..HISTORY {
            std::fs::write(runs.join(format!("run-1-{n:09}.json")), &bytes).unwrap();
        }
        // Warm what a user's second Run finds: the verification and
        // compiled-module caches.
        for name in ["bin", "wasm", "py"] {
            run(&fixture, name);
            if let Some(baseline) = baseline() {
                run_with(baseline, &fixture, name);
            }
        }
        run_at(jig_binary(), fixture.history.path(), &fixture, "bin");
        if let Some(baseline) = baseline() {
            run_at(baseline, fixture.history.path(), &fixture, "bin");
        }
        fixture
    })
}

/// The `jig` to compare with, from `JIG_BENCH_BASELINE`.
fn baseline() -> Option<&'static Path> {
    static CELL: OnceLock<Option<PathBuf>> = OnceLock::new();
    CELL.get_or_init(|| {
        std::env::var_os("JIG_BENCH_BASELINE").map(|b| copied(Path::new(&b), "baseline-jig"))
    })
    .as_deref()
}

/// `binary` copied into this bench's own directory, where both builds are
/// run from. Both must be files written the same way: a binary the linker
/// just wrote starts measurably slower than a copy of the same bytes
/// (measured here: 1.10-1.17x for one and the same build), which would
/// otherwise count against whichever build was not copied.
fn copied(binary: &Path, name: &str) -> PathBuf {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    let dir = DIR.get_or_init(|| tempfile::tempdir().unwrap());
    let copy = dir.path().join(name);
    std::fs::copy(binary, &copy).expect("the jig binary copies");
    copy
}

/// How many settled Runs the history project holds.
const HISTORY: usize = 10_000;

fn jig_binary() -> &'static Path {
    static CELL: OnceLock<PathBuf> = OnceLock::new();
    CELL.get_or_init(|| copied(Path::new(env!("CARGO_BIN_EXE_jig")), "jig"))
}

fn jig(fixture: &Fixture, args: &[&str]) -> std::process::Output {
    jig_from(jig_binary(), fixture, args)
}

fn jig_from(binary: &Path, fixture: &Fixture, args: &[&str]) -> std::process::Output {
    jig_at(binary, fixture.project.path(), fixture, args)
}

fn jig_at(binary: &Path, project: &Path, fixture: &Fixture, args: &[&str]) -> std::process::Output {
    Command::new(binary)
        .current_dir(project)
        .env_remove("JIG_CONFIG")
        .env_remove("JIG_VERIFICATION")
        .env("XDG_CONFIG_HOME", fixture.project.path().join(".config"))
        .env("XDG_CACHE_HOME", fixture.cache_home.path())
        .env("NO_COLOR", "1")
        .args(args)
        .stderr(Stdio::null())
        .output()
        .expect("jig runs")
}

fn run(fixture: &Fixture, name: &str) {
    run_with(jig_binary(), fixture, name)
}

fn run_with(binary: &Path, fixture: &Fixture, name: &str) {
    run_at(binary, fixture.project.path(), fixture, name)
}

fn run_at(binary: &Path, project: &Path, fixture: &Fixture, name: &str) {
    let target = format!("flow:flows/{name}");
    let out = jig_at(
        binary,
        project,
        fixture,
        &["run", &target, "--input", "\"bench\""],
    );
    assert!(out.status.success(), "{name}: {out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Hello, bench!"), "{name}: {stdout}");
}

#[divan::bench(sample_count = 40)]
fn bwrap_floor() {
    let status = Command::new("bwrap")
        .args(&fixture().floor)
        .stdin(Stdio::null())
        .status()
        .expect("bwrap runs");
    assert!(status.success());
}

#[divan::bench(sample_count = 40)]
fn jig_run_flow_bin() {
    run(fixture(), "bin");
}

/// The same Run in a project that settled [`HISTORY`] Runs before: a Run
/// costs what it costs in a fresh project (compare `jig_run_flow_bin`).
#[divan::bench(sample_count = 40)]
fn jig_run_flow_bin_after_history() {
    let fixture = fixture();
    run_at(jig_binary(), fixture.history.path(), fixture, "bin");
}

#[divan::bench(sample_count = 40)]
fn baseline_jig_run_flow_bin_after_history() {
    let fixture = fixture();
    if let Some(baseline) = baseline() {
        run_at(baseline, fixture.history.path(), fixture, "bin");
    }
}

#[divan::bench(sample_count = 40)]
fn jig_run_flow_wasm() {
    run(fixture(), "wasm");
}

#[divan::bench(sample_count = 20)]
fn jig_run_flow_py() {
    run(fixture(), "py");
}

#[divan::bench(sample_count = 40)]
fn baseline_jig_run_flow_bin() {
    if let Some(baseline) = baseline() {
        run_with(baseline, fixture(), "bin");
    }
}

#[divan::bench(sample_count = 40)]
fn baseline_jig_run_flow_wasm() {
    if let Some(baseline) = baseline() {
        run_with(baseline, fixture(), "wasm");
    }
}

#[divan::bench(sample_count = 20)]
fn baseline_jig_run_flow_py() {
    if let Some(baseline) = baseline() {
        run_with(baseline, fixture(), "py");
    }
}

/// What any `jig run` pays before its own work: `jig` starting and
/// exiting (`jig --version`), with the environment the Runs have.
#[divan::bench(sample_count = 40)]
fn jig_process_start() {
    let out = jig(fixture(), &["--version"]);
    assert!(out.status.success(), "{out:?}");
}

/// The `flow.bin` Run's envelope and component without the host around
/// them: the same `greet` started through `jig_sandbox` (its cgroup, and
/// bubblewrap with the arguments a Run gets, shown its proved closure),
/// one Run/1 exchange, exit and cleanup. With [`jig_process_start`] it is
/// the part of `jig_run_flow_bin` no work of the host's can remove.
#[divan::bench(sample_count = 40)]
fn greet_contained() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let fixture = fixture();
    let package = fixture.project.path().join("flows/bin");
    let program = package.join("flow.bin");
    let scratch = fixture.scratch.path();
    let view = {
        let bytes = std::fs::read(&program).unwrap();
        jig_sandbox::closure::native(&bytes, "bench", "flow.bin", &package)
            .expect("the closure of greet")
    };
    let launch = Launch {
        env: vec![("LANG".into(), "C.UTF-8".into())],
        view: Some(view),
        ..launch(fixture, program, package)
    };
    let frame = serde_json::json!({
        "jsonrpc": "2.0", "id": "host:1", "method": "flow/run", "params": {
            "protocol": "run/1", "input": "bench", "settings": {}, "attachments": {},
            "channels": {}, "scratch": scratch,
            "deadlineUnixMs": 4_102_444_800_000u64,
        }
    });
    fixture.runtime.block_on(async {
        let mut contained = fixture.contained.spawn(&launch).expect("spawns");
        let mut stdin = contained.child.stdin.take().unwrap();
        let stdout = contained.child.stdout.take().unwrap();
        stdin
            .write_all(format!("{frame}\n").as_bytes())
            .await
            .unwrap();
        let mut response = String::new();
        tokio::io::BufReader::new(stdout)
            .read_line(&mut response)
            .await
            .unwrap();
        drop(stdin);
        assert!(response.contains("Hello, bench!"), "{response}");
        let status = contained.child.wait().await.expect("waits");
        assert!(status.success());
        contained.cleanup().expect("cleans up");
    });
}

/// A launch of `program` from `package` in the bench's scratch.
fn launch(fixture: &Fixture, program: PathBuf, package: PathBuf) -> Launch {
    Launch {
        // A Flow's scratch and /tmp, bounded tmpfs as the engine makes them.
        scratch_bytes: Some(jig_sandbox::DEFAULT_SCRATCH_BYTES),
        ..Launch::new(program, package, fixture.scratch.path().to_path_buf())
    }
}

/// The Python recipe's runtime view (kept after the first proof).
fn python_view() -> std::sync::Arc<jig_sandbox::closure::View> {
    let python = Path::new("/usr/bin/python3");
    jig_sandbox::closure::runtime(python, "bench", jig_sandbox::closure::Stdlib::Python)
        .expect("the closure of /usr/bin/python3")
}

/// How many mounts and links bubblewrap is asked for: the envelope's
/// cost in binds, with the host's /usr and with the runtime view.
fn report_binds(fixture: &Fixture) {
    let Ok(bwrap) = jig_sandbox::contained(&jig_sandbox::Containment::default()) else {
        return;
    };
    let mut launch = launch(
        fixture,
        PathBuf::from("/usr/bin/python3"),
        fixture.project.path().join("flows/py"),
    );
    let count = |launch: &Launch| {
        let binds = [
            "--ro-bind",
            "--ro-bind-try",
            "--bind",
            "--dev-bind",
            "--symlink",
            "--tmpfs",
            "--proc",
        ];
        bwrap
            .arguments(launch)
            .iter()
            .filter(|a| binds.iter().any(|b| a.as_os_str() == *b))
            .count()
    };
    let host = count(&launch);
    launch.view = Some(python_view());
    let view = count(&launch);
    eprintln!(
        "bubblewrap mount operations for flow.py: with /usr {host}, with the runtime view {view}"
    );
}

/// `python3 -c "import jiggy.flow"` in the Python recipe's envelope, with
/// the bundled SDK from this repository on PYTHONPATH, as the recipe has it.
#[divan::bench(sample_count = 20)]
fn python_import_sdk_contained() {
    let fixture = fixture();
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    let launch = Launch {
        args: vec!["-c".into(), "import jiggy.flow".into()],
        env: vec![
            ("LANG".into(), "C.UTF-8".into()),
            ("PYTHONPATH".into(), sdk.to_string_lossy().into_owned()),
            ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
        ],
        read_only: vec![sdk],
        // The same proved closure the Python recipe is shown.
        view: Some(python_view()),
        ..launch(
            fixture,
            PathBuf::from("/usr/bin/python3"),
            fixture.project.path().join("flows/py"),
        )
    };
    fixture.runtime.block_on(async {
        let mut contained = fixture.contained.spawn(&launch).expect("spawns");
        drop(contained.child.stdin.take());
        let status = contained.child.wait().await.expect("waits");
        assert!(status.success());
        contained.cleanup().expect("cleans up");
    });
}
