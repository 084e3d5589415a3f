//! No-op Runs through PostgreSQL (docs/src/serving.md): a batch of
//! [`BATCH`] concurrent submissions (`curl`, waiting for each terminal)
//! to `jig serve --database` with 1, 2 and 4 `jig worker`s (one Run at a
//! time each), against the same batch to a local `jig serve` of the same
//! target with 4 active slots, measured in the same run. Report Runs/s =
//! BATCH / median and the ratios `workers_N / local_serve`.
//!
//! Run: `cargo bench --profile dev -p jig --bench queue`.
//! Measured 2026-12-01 (debug jig, shared 2-core machine, medians of 5
//! batches of 8), two runs:
//! - load ~12: local serve 2.02 s (4.0 Runs/s); 1 worker 2.95 s (2.7
//!   Runs/s, ratio 1.46); 2 workers 1.78 s (4.5, 0.88); 4 workers 1.27 s
//!   (6.3, 0.63).
//! - lighter load: local serve 0.88 s (9.1 Runs/s); 1 worker 1.79 s (4.5,
//!   2.03); 2 workers 0.92 s (8.7, 1.05); 4 workers 0.71 s (11.3, 0.80).
//! - load ~5.7, after file Runs, checkpoints and provider blobs: local
//!   serve 1.078 s (7.4 Runs/s); 1 worker 1.531 s (5.2, 1.42); 2 workers
//!   1.100 s (7.3, 1.02); 4 workers 0.698 s (11.5, 0.65).
//!
//! One worker runs one Run at a time, so 1 worker is slower than 4 local
//! slots; the database round trips (claim, dispatch, events, settle, the
//! server's follow) cost about one local slot's worth at 2 workers.
//!
//! PostgreSQL is Debian's (`.ci/setup`), started here as `nobody` on a
//! Unix socket in a temporary directory, fsync off.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Runs per measured batch.
const BATCH: usize = 8;

const ECHO_PY: &str = "from jiggy.flow import handle\nasync def run(context):\n    return {'outcome': 'done', 'output': context.input}\nhandle(run)\n";
const JIG_TS: &str = "import { defineJig, discover } from \"@jigging/jig\";\n\nexport default defineJig({\n  flows: discover(\"./flows\"),\n  bindings: discover(\"./bindings\"),\n});\n";

struct Fixture {
    _outer: tempfile::TempDir,
    project: PathBuf,
    pg: tempfile::TempDir,
    local: PathBuf,
    queued: PathBuf,
    daemons: Mutex<Vec<Child>>,
    workers: Mutex<Vec<Child>>,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Fixture {
    /// End the daemons, the workers and PostgreSQL (the fixture is a
    /// static, never dropped after a full run: `main` calls this).
    fn stop(&self) {
        let mut daemons = self.daemons.lock().unwrap();
        let mut workers = self.workers.lock().unwrap();
        for child in daemons.iter_mut().chain(workers.iter_mut()) {
            let _ = child.kill();
            let _ = child.wait();
        }
        daemons.clear();
        workers.clear();
        let _ = as_nobody(&pg_bin("pg_ctl"), self.pg.path())
            .arg("-D")
            .arg(self.pg.path().join("data"))
            .args(["-m", "immediate", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(self.pg.path());
        let _ = std::fs::remove_dir_all(self._outer.path());
    }
}

fn pg_bin(name: &str) -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL is installed (.ci/setup)")
        .flatten()
        .map(|e| e.path())
        .collect();
    versions.sort();
    versions.pop().unwrap().join("bin").join(name)
}

fn as_nobody(program: &Path, dir: &Path) -> Command {
    let mut command = Command::new("setpriv");
    command
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(program)
        .current_dir(dir)
        .env("LC_ALL", "C");
    command
}

fn jig(project: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_jig"));
    command
        .current_dir(project)
        .env_remove("JIG_CONFIG")
        .env("XDG_CONFIG_HOME", project.join(".test-config-home"))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command
}

fn url(pg: &Path) -> String {
    format!("postgresql:///postgres?host={}&user=jig", pg.display())
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt;
        let outer = tempfile::tempdir().unwrap();
        // One project copy per daemon (each holds its project exclusively),
        // both named `p` and reviewed alike: the same target.
        let reviewed = |side: &str| {
            let project = outer.path().join(side).join("p");
            for (path, content) in [
                ("jig.ts", JIG_TS),
                (
                    "flows/echo/FLOW.md",
                    "---\nname: echo\ndescription: Echoes its input.\n---\n",
                ),
                ("flows/echo/flow.py", ECHO_PY),
            ] {
                let target = project.join(path);
                std::fs::create_dir_all(target.parent().unwrap()).unwrap();
                std::fs::write(target, content).unwrap();
            }
            let status = jig(&project).args(["review", "--yes"]).status().unwrap();
            assert!(status.success(), "review");
            project
        };
        let local_project = reviewed("local");
        let project = reviewed("queued");
        let pg = tempfile::tempdir().unwrap();
        std::fs::set_permissions(pg.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        Command::new("chown")
            .args(["65534:65534"])
            .arg(pg.path())
            .status()
            .unwrap();
        let data = pg.path().join("data");
        let out = as_nobody(&pg_bin("initdb"), pg.path())
            .args(["-A", "trust", "-U", "jig", "--no-sync", "-D"])
            .arg(&data)
            .output()
            .unwrap();
        assert!(out.status.success(), "initdb");
        let conf = format!(
            "listen_addresses = ''\nunix_socket_directories = '{}'\nfsync = off\nsynchronous_commit = off\n",
            pg.path().display()
        );
        let mut text = std::fs::read_to_string(data.join("postgresql.conf")).unwrap();
        text.push_str(&conf);
        std::fs::write(data.join("postgresql.conf"), text).unwrap();
        let out = as_nobody(&pg_bin("pg_ctl"), pg.path())
            .args(["-w", "-D"])
            .arg(&data)
            .arg("-l")
            .arg(pg.path().join("log"))
            .arg("start")
            .output()
            .unwrap();
        assert!(out.status.success(), "pg_ctl start");
        let local = outer.path().join("local.sock");
        let queued = outer.path().join("queued.sock");
        let serve = |project: &Path, socket: &Path, extra: &[&str]| {
            jig(project)
                .args(["-C", project.to_str().unwrap(), "serve", "--socket"])
                .arg(socket)
                .args(["--max-active-runs", "4"])
                .args(extra)
                .spawn()
                .unwrap()
        };
        let daemons = vec![
            serve(&local_project, &local, &[]),
            serve(&project, &queued, &["--database", &url(pg.path())]),
        ];
        let fixture = Fixture {
            _outer: outer,
            project,
            pg,
            local,
            queued,
            daemons: Mutex::new(daemons),
            workers: Mutex::new(Vec::new()),
        };
        let started = Instant::now();
        while !(fixture.local.exists() && fixture.queued.exists()) {
            assert!(started.elapsed() < Duration::from_secs(60), "serve came up");
            std::thread::sleep(Duration::from_millis(50));
        }
        // Warm both paths (and the workers' caches) before timing.
        fixture.workers(4);
        batch(&fixture.local);
        batch(&fixture.queued);
        fixture
    })
}

impl Fixture {
    /// Exactly `n` workers running.
    fn workers(&self, n: usize) {
        let mut workers = self.workers.lock().unwrap();
        while workers.len() > n {
            let mut child = workers.pop().unwrap();
            let _ = child.kill();
            let _ = child.wait();
        }
        while workers.len() < n {
            let cache = self.project.join(format!(".cache-{}", workers.len()));
            workers.push(
                jig(&self.project)
                    .args(["worker", "--database", &url(self.pg.path()), "--cache"])
                    .arg(cache)
                    .spawn()
                    .unwrap(),
            );
        }
    }
}

/// [`BATCH`] concurrent waiting submissions; each must succeed.
fn batch(socket: &Path) {
    let children: Vec<Child> = (0..BATCH)
        .map(|i| {
            Command::new("curl")
                .args(["-sS", "--unix-socket"])
                .arg(socket)
                .args(["-H", "content-type: application/json", "-d"])
                .arg(format!("{{\"target\":\"flow:flows/echo\",\"input\":{i}}}"))
                .arg("http://jig/v1/projects/p/runs")
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("\"succeeded\""), "{text}");
    }
}

fn main() {
    fixture();
    divan::main();
    fixture().stop();
}

#[divan::bench(sample_count = 5, sample_size = 1)]
fn local_serve(bencher: divan::Bencher) {
    let f = fixture();
    bencher.bench(|| batch(&f.local));
}

#[divan::bench(args = [1, 2, 4], sample_count = 5, sample_size = 1)]
fn workers(bencher: divan::Bencher, n: usize) {
    let f = fixture();
    f.workers(n);
    std::thread::sleep(Duration::from_millis(500));
    bencher.bench(|| batch(&f.queued));
}
