//! A Run through `jig serve` against the bare runtime doing the same
//! exchange, for `flow.ts` on Bun, `flow.py` on Python and a
//! native `flow.bin`, all measured in one run on the same machine:
//!
//! - **bare**: the runtime answering one `flow/run` frame on stdin with the
//!   bundled SDK beside it (`bun --no-install flow.ts`, `python3 flow.py`
//!   with the SDK on `PYTHONPATH`), and the bubblewrap floor
//!   (`bwrap --unshare-all --die-with-parent … /usr/bin/true`); and the
//!   runtime exchanges again inside a cgroup with the CPU ceiling of every
//!   contained Flow (half a CPU per 100 ms period, docs/src/containment.md), the
//!   floor a contained Run can reach (needs a writable `cpu` controller);
//! - **served**: submit-to-terminal of `POST /v1/projects/p/runs` over the
//!   daemon's Unix socket, one at a time (p50, p99), and a whole `jig run`
//!   of `flow.ts` in the project (it finds the daemon and submits to it),
//!   at two paces: each Run on a quiet daemon, as the bare exchanges run
//!   (the figures the targets are read from), and back to back, where each
//!   Run meets the previous one's next envelope being made ahead;
//!   every build measured serves at once and they are sampled in turn, so
//!   the machine's drift over the run falls on all of them alike;
//! - **throughput**: Runs/s of `flow.ts` and `flow.bin` with 1, 2, 4 and 8
//!   clients, beside the bound of this machine (cores divided by the bare
//!   exchange time), every build's figure measured right after the
//!   others' (so drift falls on all alike); first in an empty project,
//!   then again after the project holds `JIG_BENCH_SETTLED` settled Runs
//!   (default 10,000), measured in turn with a new daemon of the same build
//!   serving an empty project, with the daemon's peak and current memory.
//!
//! ```text
//! cargo bench -p jig --bench runtimes
//! JIG_BENCH_BINARIES=before=/path/to/old/jig,after=target/release/jig \
//!     cargo bench -p jig --bench runtimes
//! ```
//!
//! `JIG_BENCH_BINARIES` measures several builds of `jig` in the same run
//! (before and after a change; `name=path arg…` serves with those further
//! arguments, e.g. `cold=target/release/jig --envelopes-ahead 0`); without
//! it the bench measures the `jig` it was built with. Each build's section
//! says how many of its Runs started in an envelope made ahead. `JIG_BENCH_SAMPLES` (default 60) sets the sequential
//! samples behind each p50/p99, `JIG_BENCH_THROUGHPUT_RUNS` (default 160)
//! the Runs behind each throughput figure, and `JIG_BENCH_SETTLED=0` skips
//! the settled-project half. The bare exchanges also show their CPU time
//! (every thread): above half a CPU per 100 ms period, the contained
//! Flow's ceiling throttles it.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "support/greet.rs"]
mod greet;
use greet::workspace;

const INPUT: &str = "\"bench\"";
const EXPECTED: &str = "Hello, bench!";
const FLOW_TS: &str = "import { handle } from \"@jigging/flow\";\n\nawait handle(async (run) => {\n  const name = typeof run.input === \"string\" ? run.input : \"world\";\n  return { outcome: \"done\", output: { message: `Hello, ${name}!` } };\n});\n";
const PACKAGE_JSON: &str = "{\n  \"name\": \"hello\",\n  \"private\": true,\n  \"type\": \"module\",\n  \"dependencies\": {\n    \"@jigging/flow\": \"1.0.0\"\n  }\n}\n";
const FLOW_PY: &str = "from jiggy.flow import handle\n\nasync def run(ctx):\n    name = ctx.input if isinstance(ctx.input, str) else \"world\"\n    return {\"outcome\": \"done\", \"output\": {\"message\": f\"Hello, {name}!\"}}\n\nhandle(run)\n";
const JIG_TS: &str = "import { defineJig, discover } from \"@jigging/jig\";\n\nexport default defineJig({\n  flows: discover(\"./flows\"),\n  bindings: discover(\"./bindings\"),\n});\n";
const CLIENTS: [usize; 4] = [1, 2, 4, 8];
/// The pause before each build's (and each pace's) turn of served samples.
const BETWEEN_BUILDS: Duration = Duration::from_millis(250);
/// Runs each throughput figure is measured over (split among the
/// clients), unless `JIG_BENCH_THROUGHPUT_RUNS` says otherwise.
const THROUGHPUT_RUNS: usize = 160;

fn main() {
    let samples = env_usize("JIG_BENCH_SAMPLES", 60);
    let settled = env_usize("JIG_BENCH_SETTLED", 10_000);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let greet = greet::build();
    let bare = Bare::new(&greet);
    println!(
        "# A Run through jig serve against the bare runtime ({cores} cores, {samples} samples)\n"
    );
    let bare_ts = bare.sample(samples, Bare::bun);
    let bare_py = bare.sample(samples, Bare::python);
    let floor = bare.sample(samples, Bare::bwrap);
    println!("| bare exchange | p50 | p99 | CPU per exchange |\n| --- | --- | --- | --- |");
    for (name, s) in [
        ("bun flow.ts", &bare_ts),
        ("python3 flow.py", &bare_py),
        ("bwrap … /usr/bin/true", &floor),
    ] {
        println!(
            "| {name} | {} | {} | {} |",
            ms(s.p50),
            ms(s.p99),
            s.cpu.map_or(String::new(), ms)
        );
    }
    // The same exchanges under the CPU ceiling every contained Flow gets
    // (half a CPU per 100 ms period): the floor a contained Run can reach.
    let ceiling = CpuCeiling::new();
    let (capped_ts, capped_py) = match &ceiling {
        Some(ceiling) => {
            let capped = Bare {
                ceiling: Some(ceiling.tasks.clone()),
                ..bare.clone()
            };
            (
                Some(capped.sample(samples, Bare::bun)),
                Some(capped.sample(samples, Bare::python)),
            )
        }
        None => (None, None),
    };
    match (&capped_ts, &capped_py) {
        (Some(ts), Some(py)) => {
            println!(
                "| bun flow.ts, 0.5 CPU | {} | {} | |",
                ms(ts.p50),
                ms(ts.p99)
            );
            println!(
                "| python3 flow.py, 0.5 CPU | {} | {} | |",
                ms(py.p50),
                ms(py.p99)
            );
        }
        _ => println!(
            "\n(no writable cgroup cpu controller here: the 0.5-CPU floor is not measured)"
        ),
    }
    // Every build serves at once, and the served Runs are sampled in turn
    // (one of each kind from each build, then again): a drift of the
    // machine over the run falls on every build alike.
    let builds: Vec<(String, PathBuf, Served)> = binaries()
        .into_iter()
        .map(|(name, jig, args)| {
            let served = Served::start(&jig, &greet, &args);
            (name, jig, served)
        })
        .collect();
    settle_disk();
    // Each sample takes both paces from every build in turn: a drift of
    // the machine falls on both and on every build alike.
    let mut times = vec![[(); 2].map(|()| [(); 4].map(|()| Vec::new())); builds.len()];
    for _ in 0..samples.max(1) {
        for ((_, _, served), times) in builds.iter().zip(&mut times) {
            for (pace, times) in Pace::BOTH.into_iter().zip(times.iter_mut()) {
                // What the previous build's daemon (or pace) set going is
                // over before these Runs start: daemons do not measure
                // each other.
                std::thread::sleep(BETWEEN_BUILDS);
                served_sequence(served, pace, times);
            }
        }
    }
    let bases = Bases {
        bare_ts: &bare_ts,
        bare_py: &bare_py,
        floor: &floor,
        capped_ts: capped_ts.as_ref(),
        capped_py: capped_py.as_ref(),
    };
    for ((name, jig, served), times) in builds.iter().zip(times) {
        println!("\n## {name}: {} {}\n", jig.display(), served.args.join(" "));
        if let Some(ahead) = served.started_ahead() {
            println!(
                "{ahead} of the daemon's {} Runs so far started in an envelope made ahead.\n",
                served.answered()
            );
        }
        for (pace, times) in Pace::BOTH.into_iter().zip(times) {
            println!("{}\n", pace.describe());
            print_served(times.map(stats), &bases);
        }
    }
    // Throughput, every build's figure for one (target, clients) measured
    // right after the others': drift falls on all builds alike.
    let served: Vec<&Served> = builds.iter().map(|(_, _, s)| s).collect();
    let empty = throughput(&served);
    println!("\n## Runs/s, empty project (bound: {cores} cores / bare exchange)\n");
    print_throughput(&builds, &empty, cores, &bare_ts, &floor);
    if settled == 0 {
        return;
    }
    // Each build's daemon is filled with settled Runs; beside it, a new
    // daemon of the same build serves an empty project, and the two are
    // measured in turn: the change is the settled Runs', not the
    // machine's drift since the empty figures above.
    println!("\n## {settled} settled Runs\n");
    let mut controls = Vec::new();
    for (name, jig, served) in &builds {
        let started = Instant::now();
        served.fill(settled);
        let filled = started.elapsed();
        println!(
            "- {name}: settled {} Runs in {:.1} s; the daemon's memory: peak {} MiB, now {} MiB.",
            served.settled(),
            filled.as_secs_f64(),
            served.memory_kib("VmHWM") / 1024,
            served.memory_kib("VmRSS") / 1024
        );
        controls.push(Served::start(jig, &greet, &served.args));
    }
    // The fill's writes reach the disk before the next figure.
    settle_disk();
    let both: Vec<&Served> = builds
        .iter()
        .zip(&controls)
        .flat_map(|((_, _, filled), control)| [filled, control])
        .collect();
    let rates = throughput(&both);
    println!("\nRuns/s with the settled Runs, against an empty project served by the same build and measured in turn (and against the empty figures above):\n");
    println!("| build | target | clients | settled | empty now | change | empty before | change |\n| --- | --- | --- | --- | --- | --- | --- | --- |");
    for (b, (name, _, _)) in builds.iter().enumerate() {
        for (row, (target, clients, full)) in rates[2 * b].iter().enumerate() {
            let control = rates[2 * b + 1][row].2;
            let before = empty[b][row].2;
            println!(
                "| {name} | {target} | {clients} | {full:.1} | {control:.1} | {:+.1}% | {before:.1} | {:+.1}% |",
                (full / control - 1.0) * 100.0,
                (full / before - 1.0) * 100.0
            );
        }
    }
    println!();
    for ((name, _, served), control) in builds.iter().zip(&controls) {
        println!(
            "- {name}: the daemon's memory after the throughput: peak {} MiB, now {} MiB (the empty project's: peak {} MiB).",
            served.memory_kib("VmHWM") / 1024,
            served.memory_kib("VmRSS") / 1024,
            control.memory_kib("VmHWM") / 1024
        );
    }
}

/// Write everything dirty to the disk and wait for it.
fn settle_disk() {
    nix::unistd::sync();
}

fn print_throughput(
    builds: &[(String, PathBuf, Served)],
    rows: &[Vec<(&str, usize, f64)>],
    cores: usize,
    ts: &Stats,
    bin: &Stats,
) {
    let names: Vec<&str> = builds.iter().map(|(n, _, _)| n.as_str()).collect();
    println!(
        "| target | clients | {} | bound |\n| --- | --- |{} --- |",
        names.join(" | "),
        " --- |".repeat(names.len())
    );
    for (row, (target, clients, _)) in rows[0].iter().enumerate() {
        let bare = if target.ends_with("ts") { ts } else { bin };
        let bound = cores as f64 / bare.p50.as_secs_f64();
        let rates: Vec<String> = rows.iter().map(|r| format!("{:.1}", r[row].2)).collect();
        println!(
            "| {target} | {clients} | {} | {bound:.1} |",
            rates.join(" | ")
        );
    }
}

/// Runs/s of `flow.ts` and `flow.bin` with each number of clients, for
/// every daemon of `served`: each (target, clients) figure of every daemon
/// is measured right after the others', a pause between turns.
fn throughput(served: &[&Served]) -> Vec<Vec<(&'static str, usize, f64)>> {
    let mut rows = vec![Vec::new(); served.len()];
    for target in ["flow:flows/ts", "flow:flows/bin"] {
        for clients in CLIENTS {
            for (daemon, rows) in served.iter().zip(&mut rows) {
                std::thread::sleep(BETWEEN_BUILDS);
                rows.push((target, clients, daemon.rate(target, clients)));
            }
        }
    }
    rows
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The builds of `jig` to measure, by name.
/// The builds to measure: (name, binary, further `jig serve` arguments).
/// `name=path arg…` serves with those arguments (e.g. `cold=target/release/jig
/// --envelopes-ahead 0`).
fn binaries() -> Vec<(String, PathBuf, Vec<String>)> {
    match std::env::var("JIG_BENCH_BINARIES") {
        Ok(list) if !list.is_empty() => list
            .split(',')
            .map(|item| {
                let (name, rest) = item.split_once('=').unwrap_or((item, item));
                let mut words = rest.split_whitespace();
                let path = PathBuf::from(words.next().unwrap_or(rest));
                (name.to_string(), path, words.map(str::to_string).collect())
            })
            .collect(),
        _ => vec![(
            "this build".to_string(),
            PathBuf::from(env!("CARGO_BIN_EXE_jig")),
            Vec::new(),
        )],
    }
}

struct Stats {
    p50: Duration,
    p99: Duration,
    /// CPU (user and system, every thread) of one exchange, on average:
    /// measured for the bare exchanges.
    cpu: Option<Duration>,
}

/// The CPU time of this process's waited-for children so far.
fn children_cpu() -> Duration {
    let mut usage = std::mem::MaybeUninit::<nix::libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given; it was zeroed.
    let usage = unsafe {
        nix::libc::getrusage(nix::libc::RUSAGE_CHILDREN, usage.as_mut_ptr());
        usage.assume_init()
    };
    let time = |t: nix::libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// How the served Runs of one sample follow each other.
#[derive(Clone, Copy)]
enum Pace {
    /// Each Run once the daemon is quiet, as every bare exchange runs on
    /// an otherwise idle machine: what the previous Run's answer set going
    /// (the next envelope of its target, made ahead) is over.
    Quiet,
    /// One right after another (flow.ts, flow.py, flow.bin, then `jig
    /// run`): each Run meets the previous one's next envelope being made,
    /// Python's warm-up the longest of them.
    BackToBack,
}

/// The pause before each Run of the quiet pace: well over the longest
/// envelope made ahead here, a Python runtime warming up at the
/// contained Flow's half CPU (the bare Python exchange is 56 to 73 ms of
/// CPU on the 2-core machine, so 110 to 150 ms and more of wall time).
const QUIET: Duration = Duration::from_millis(400);

impl Pace {
    const BOTH: [Pace; 2] = [Pace::Quiet, Pace::BackToBack];

    fn describe(self) -> &'static str {
        match self {
            Pace::Quiet => "Each Run on a quiet daemon (the previous Run's envelope made ahead is ready), as the bare exchanges run:",
            Pace::BackToBack => "Back to back (flow.ts, flow.py, flow.bin, jig run): each Run starts while the previous Run's next envelope is being made:",
        }
    }
}

/// One of each served Run, at `pace`: flow.ts, flow.py, flow.bin through
/// the socket, then `jig run` of flow.ts.
fn served_sequence(served: &Served, pace: Pace, times: &mut [Vec<Duration>; 4]) {
    let runs: [&dyn Fn(); 4] = [
        &|| served.submit("flow:flows/ts"),
        &|| served.submit("flow:flows/py"),
        &|| served.submit("flow:flows/bin"),
        &|| served.jig_run("flow:flows/ts"),
    ];
    for (run, times) in runs.into_iter().zip(times) {
        if matches!(pace, Pace::Quiet) {
            std::thread::sleep(QUIET);
        }
        let started = Instant::now();
        run();
        times.push(started.elapsed());
    }
}

/// What the served Runs are measured against, from the bare exchanges.
struct Bases<'a> {
    bare_ts: &'a Stats,
    bare_py: &'a Stats,
    floor: &'a Stats,
    capped_ts: Option<&'a Stats>,
    capped_py: Option<&'a Stats>,
}

/// The served Runs of one build at one pace, beside the bare exchanges.
fn print_served([ts, py, bin, run]: [Stats; 4], bases: &Bases) {
    let Bases {
        bare_ts,
        bare_py,
        floor,
        capped_ts,
        capped_py,
    } = *bases;
    // A contained Run is at least the envelope and the runtime: the bare
    // exchange plus the bubblewrap floor.
    println!("| served Run | p50 | p99 | p50 / bare | p50 / bare at 0.5 CPU | p50 / (bare + bwrap floor) |\n| --- | --- | --- | --- | --- | --- |");
    for (what, s, base, capped) in [
        ("flow.ts through jig serve", &ts, bare_ts, capped_ts),
        (
            "flow.ts, jig run (submits to the daemon)",
            &run,
            bare_ts,
            capped_ts,
        ),
        ("flow.py through jig serve", &py, bare_py, capped_py),
        ("flow.bin through jig serve", &bin, floor, None),
    ] {
        let enveloped = if std::ptr::eq(base, floor) {
            String::new()
        } else {
            format!("{:.2}×", ratio(s.p50, base.p50 + floor.p50))
        };
        println!(
            "| {what} | {} | {} | {:.2}× | {} | {enveloped} |",
            ms(s.p50),
            ms(s.p99),
            ratio(s.p50, base.p50),
            capped.map_or("".to_string(), |c| format!("{:.2}×", ratio(s.p50, c.p50)))
        );
    }
    println!();
}

fn sample(n: usize, mut once: impl FnMut()) -> Stats {
    let times: Vec<Duration> = (0..n.max(1))
        .map(|_| {
            let started = Instant::now();
            once();
            started.elapsed()
        })
        .collect();
    stats(times)
}

fn stats(mut times: Vec<Duration>) -> Stats {
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    Stats {
        p50: at(0.5),
        p99: at(0.99),
        cpu: None,
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

/// A cgroup with the contained Flow's CPU ceiling (cgroup v1 `cpu`, or v2
/// with `cpu` delegated to the root), removed on drop.
struct CpuCeiling {
    dir: PathBuf,
    /// The file a process writes its pid to, to enter.
    tasks: PathBuf,
}

impl CpuCeiling {
    fn new() -> Option<CpuCeiling> {
        let name = format!("jig-bench-{}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/cpu");
        if v1.join("cpu.cfs_quota_us").exists() {
            let dir = v1.join(&name);
            std::fs::create_dir(&dir).ok()?;
            let set = std::fs::write(dir.join("cpu.cfs_period_us"), "100000")
                .and_then(|()| std::fs::write(dir.join("cpu.cfs_quota_us"), "50000"));
            let ceiling = CpuCeiling {
                tasks: dir.join("tasks"),
                dir,
            };
            return set.is_ok().then_some(ceiling);
        }
        let v2 = Path::new("/sys/fs/cgroup");
        let delegated = std::fs::read_to_string(v2.join("cgroup.subtree_control")).ok()?;
        if !delegated.split_whitespace().any(|c| c == "cpu") {
            return None;
        }
        let dir = v2.join(&name);
        std::fs::create_dir(&dir).ok()?;
        let ceiling = CpuCeiling {
            tasks: dir.join("cgroup.procs"),
            dir: dir.clone(),
        };
        std::fs::write(dir.join("cpu.max"), "50000 100000")
            .ok()
            .map(|()| ceiling)
    }
}

impl Drop for CpuCeiling {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// The bare runtimes, each with its SDK beside it, in a scratch directory.
#[derive(Clone)]
struct Bare {
    dir: std::sync::Arc<tempfile::TempDir>,
    greet: PathBuf,
    /// Run each exchange inside this cgroup (its tasks file).
    ceiling: Option<PathBuf>,
}

impl Bare {
    fn new(greet: &Path) -> Bare {
        let dir = tempfile::tempdir().unwrap();
        let js = dir.path().join("node_modules/@jigging/flow");
        std::fs::create_dir_all(&js).unwrap();
        for entry in std::fs::read_dir(workspace().join("host/typescript/flow")).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), js.join(entry.file_name())).unwrap();
        }
        // Python's SDK as a Run gets it: compiled once (by the warm-up
        // exchange, into this copy), imported from bytecode after.
        let python = dir.path().join("python/jiggy");
        copy_tree(&workspace().join("host/python/jiggy"), &python);
        std::fs::write(dir.path().join("flow.ts"), FLOW_TS).unwrap();
        std::fs::write(dir.path().join("flow.py"), FLOW_PY).unwrap();
        std::fs::create_dir_all(dir.path().join("scratch")).unwrap();
        Bare {
            dir: std::sync::Arc::new(dir),
            greet: greet.to_path_buf(),
            ceiling: None,
        }
    }

    fn sample(&self, n: usize, run: fn(&Bare)) -> Stats {
        run(self);
        let before = children_cpu();
        let mut stats = sample(n, || run(self));
        stats.cpu = Some((children_cpu() - before) / n.max(1) as u32);
        stats
    }

    fn bun(&self) {
        let mut command = Command::new(runtime("bun"));
        command.args(["--no-install", "flow.ts"]);
        self.exchange(command);
    }

    fn python(&self) {
        let mut command = Command::new(runtime("python3"));
        // Without `site`: the envelope shows the standard library alone, so
        // a Run never pays for this machine's site-packages (`.pth` hooks
        // such as certifi's cost ~45 ms here). Bytecode is written (by the
        // warm-up exchange) whatever the caller's environment says, as a
        // Run imports the SDK compiled.
        command
            .args(["-S", "flow.py"])
            .env_remove("PYTHONDONTWRITEBYTECODE")
            .env("PYTHONPATH", self.dir.path().join("python"));
        self.exchange(command);
    }

    /// The envelope alone: bubblewrap's namespaces around `true`.
    fn bwrap(&self) {
        let status = Command::new("bwrap")
            .args(["--unshare-all", "--die-with-parent", "--new-session"])
            .args(["--ro-bind", "/usr", "/usr"])
            .args([
                "--symlink",
                "usr/lib",
                "/lib",
                "--symlink",
                "usr/lib64",
                "/lib64",
            ])
            .args([
                "--symlink",
                "usr/bin",
                "/bin",
                "--proc",
                "/proc",
                "--dev",
                "/dev",
            ])
            .args(["--", "/usr/bin/true"])
            .stdin(Stdio::null())
            .status()
            .expect("bwrap runs");
        assert!(status.success());
        let _ = &self.greet;
    }

    /// Write one `flow/run` frame, read the one response frame, close
    /// stdin, wait for the exit.
    fn exchange(&self, mut command: Command) {
        if let Some(tasks) = &self.ceiling {
            use std::os::fd::AsRawFd;
            use std::os::unix::process::CommandExt;
            let file = std::fs::OpenOptions::new().write(true).open(tasks).unwrap();
            let fd = file.as_raw_fd();
            // SAFETY: one write(2) on a descriptor the parent holds open.
            unsafe {
                command.pre_exec(
                    move || match nix::libc::write(fd, b"0".as_ptr().cast(), 1) {
                        1 => Ok(()),
                        _ => Err(std::io::Error::last_os_error()),
                    },
                );
            }
            self.spawn_exchange(command);
            drop(file);
            return;
        }
        self.spawn_exchange(command);
    }

    fn spawn_exchange(&self, mut command: Command) {
        let child = command
            .current_dir(self.dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the runtime starts");
        greet::exchange(child, &self.dir.path().join("scratch"), EXPECTED);
    }
}

/// The interpreter jig runs for `name`: the first in its runtime
/// directories, so the bare exchange never goes through a version
/// manager's shim on `PATH` (a shell script, tens of milliseconds).
fn runtime(name: &str) -> PathBuf {
    jig_engine::config::RUNTIME_DIRS
        .iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| PathBuf::from(name))
}

/// Copy the regular files below `from` to `to` (no bytecode caches).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "__pycache__" {
            continue;
        }
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &to.join(&name));
        } else {
            std::fs::copy(entry.path(), to.join(&name)).unwrap();
        }
    }
}

/// A project with the three Flows, reviewed, served by one build of `jig`.
struct Served {
    jig: PathBuf,
    dir: tempfile::TempDir,
    cache: tempfile::TempDir,
    socket: PathBuf,
    daemon: Child,
    /// Further `jig serve` arguments.
    args: Vec<String>,
}

impl Served {
    fn start(jig: &Path, greet: &Path, args: &[String]) -> Served {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("p");
        let flows = root.join("flows");
        for (name, files) in [
            (
                "ts",
                vec![("flow.ts", FLOW_TS), ("package.json", PACKAGE_JSON)],
            ),
            ("py", vec![("flow.py", FLOW_PY)]),
            ("bin", vec![]),
        ] {
            let flow = flows.join(name);
            std::fs::create_dir_all(&flow).unwrap();
            std::fs::write(
                flow.join("FLOW.md"),
                format!("---\nname: {name}\ndescription: Greets the name given.\n---\n"),
            )
            .unwrap();
            for (file, text) in files {
                std::fs::write(flow.join(file), text).unwrap();
            }
        }
        std::fs::copy(greet, flows.join("bin/flow.bin")).unwrap();
        std::fs::write(root.join("jig.ts"), JIG_TS).unwrap();
        let cache = tempfile::tempdir().unwrap();
        std::fs::set_permissions(cache.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let mut served = Served {
            jig: jig.to_path_buf(),
            socket: dir.path().join("jig.sock"),
            dir,
            cache,
            daemon: Command::new("true").spawn().unwrap(),
            args: args.to_vec(),
        };
        let review = served.jig(&["review", "--yes"]).output().unwrap();
        assert!(review.status.success(), "{review:?}");
        let _ = served.daemon.wait();
        served.daemon = served
            .jig(&["serve", "--socket"])
            .arg(&served.socket)
            .args(["--max-queued-runs", "256"])
            .args(args)
            .arg("-C")
            .arg(served.root())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while std::os::unix::net::UnixStream::connect(&served.socket).is_err() {
            assert!(started.elapsed() < Duration::from_secs(60), "no daemon");
            std::thread::sleep(Duration::from_millis(20));
        }
        // Warm every cache the daemon keeps (verification, runtime views).
        for target in ["flow:flows/ts", "flow:flows/py", "flow:flows/bin"] {
            for _ in 0..3 {
                served.submit(target);
            }
        }
        served
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("p")
    }

    fn jig(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.jig);
        command
            .current_dir(self.root())
            .env_remove("JIG_CONFIG")
            .env_remove("JIG_VERIFICATION")
            .env_remove("JIG_SERVER")
            .env("XDG_CONFIG_HOME", self.dir.path().join(".config"))
            .env("XDG_CACHE_HOME", self.cache.path())
            .env("NO_COLOR", "1")
            .args(args)
            .stdin(Stdio::null());
        command
    }

    /// One Run over the socket, waiting for its terminal.
    fn submit(&self, target: &str) {
        let body = format!("{{\"target\":\"{target}\",\"input\":{INPUT}}}");
        let mut stream = std::os::unix::net::UnixStream::connect(&self.socket).unwrap();
        write!(
            stream,
            "POST /v1/projects/p/runs HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        assert!(
            response.starts_with("HTTP/1.1 200") && response.contains(EXPECTED),
            "{response}"
        );
    }

    /// The daemon's `/metrics` text.
    fn metrics(&self) -> String {
        let mut stream = std::os::unix::net::UnixStream::connect(&self.socket).unwrap();
        write!(
            stream,
            "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response
    }

    /// One counter of `/metrics` (summed over its labels).
    fn counter(&self, name: &str) -> Option<u64> {
        let text = self.metrics();
        let values: Vec<u64> = text
            .lines()
            .filter(|l| l.starts_with(name) && !l.starts_with('#'))
            .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
            .collect();
        (!values.is_empty()).then(|| values.iter().sum())
    }

    /// How many Runs started in an envelope made ahead (`None`: a build
    /// that does not make them).
    fn started_ahead(&self) -> Option<u64> {
        self.counter("jig_runs_started_ahead_total")
    }

    /// How many Runs the daemon has settled.
    fn answered(&self) -> u64 {
        self.counter("jig_runs_total").unwrap_or(0)
    }

    /// A whole `jig run` in the served project.
    fn jig_run(&self, target: &str) {
        let out = self
            .jig(&["run", target, "--input", INPUT])
            .stderr(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains(EXPECTED));
    }

    /// Runs/s of `THROUGHPUT_RUNS` Runs split among `clients` threads.
    fn rate(&self, target: &str, clients: usize) -> f64 {
        let each = env_usize("JIG_BENCH_THROUGHPUT_RUNS", THROUGHPUT_RUNS).div_ceil(clients);
        let started = Instant::now();
        std::thread::scope(|scope| {
            for _ in 0..clients {
                scope.spawn(|| {
                    for _ in 0..each {
                        self.submit(target);
                    }
                });
            }
        });
        (each * clients) as f64 / started.elapsed().as_secs_f64()
    }

    /// Settle `flow.bin` Runs with 4 clients until the project holds `n`.
    fn fill(&self, n: usize) {
        let missing = n.saturating_sub(self.settled());
        let clients = 4;
        let each = missing.div_ceil(clients);
        std::thread::scope(|scope| {
            for _ in 0..clients {
                scope.spawn(|| {
                    for _ in 0..each {
                        self.submit("flow:flows/bin");
                    }
                });
            }
        });
    }

    /// Settled Run records in the project.
    fn settled(&self) -> usize {
        std::fs::read_dir(self.root().join(".jig/runs"))
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
                    .count()
            })
            .unwrap_or(0)
    }

    /// A `/proc/<daemon>/status` figure in KiB.
    fn memory_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.daemon.id())).unwrap();
        status
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{field}:")))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // SIGTERM: the daemon drains and releases its cgroups.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.daemon.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.daemon.wait();
    }
}
