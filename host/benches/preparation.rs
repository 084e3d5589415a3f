//! Review's dependency preparation against Bun itself, in the same run: a
//! `flow.ts` package with a locked npm dependency (served by verdaccio on
//! 127.0.0.1, installed by .ci/setup) is reviewed with `jig review --yes`
//! (capture, planning, the contained frozen install, capture of the
//! prepared tree, store and admission), against `bun install
//! --frozen-lockfile` of the same manifest and lock with the same flags and
//! a fresh cache, and against the review of the same project without the
//! dependency (what review costs anyway). Read the ratios of the medians:
//! (review with dependency − review without) / bun install is the cost of
//! preparing inside the envelope relative to a bare install.
//!
//! Run: `cargo bench -p jig --bench preparation --profile dev` (debug jig;
//! the work measured is Bun's and the envelope's).
//!
//! Measured 2026-12-01 (debug jig, 2-core shared machine under load,
//! medians of 10): `bun install --frozen-lockfile` 40.0 ms, review without
//! the dependency 369.5 ms, review with it 680.7 ms; so preparation adds
//! ~311 ms, ~7.8x the bare install (a contained envelope start with its
//! cgroup, the prepared Package/1 digest and the durable store writes). A
//! second run (load ~9): 23.9 ms, 542.5 ms and 625.3 ms, so ~83 ms (~3.5x);
//! the review medians move by hundreds of ms with the machine's load.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

mod support;
use support::review;

fn main() {
    fixture();
    divan::main();
}

struct Fixture {
    _storage: tempfile::TempDir,
    registry: String,
    manifest: String,
    lock: String,
    _verdaccio: Verdaccio,
}

struct Verdaccio(std::process::Child);

impl Drop for Verdaccio {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn bun() -> PathBuf {
    ["/usr/bin/bun", "/usr/local/bin/bun", "/bin/bun"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("bun is installed (.ci/setup)")
}

fn fixture() -> &'static Fixture {
    static CELL: OnceLock<Fixture> = OnceLock::new();
    CELL.get_or_init(|| {
        let dir = std::env::var_os("JIG_VERDACCIO_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/opt/jig-verdaccio"));
        let storage = tempfile::tempdir().unwrap();
        let root = storage.path();
        std::fs::write(
            root.join("config.yaml"),
            format!(
                "storage: {0}/packages\nauth:\n  htpasswd:\n    file: {0}/htpasswd\n    max_users: -1\n\
                 uplinks: {{}}\npackages:\n  '**':\n    access: $anonymous\n    publish: $anonymous\n\
                 log: {{ type: stdout, format: pretty, level: error }}\n",
                root.display()
            ),
        )
        .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut command = Command::new(dir.join("node_modules/.bin/verdaccio"));
        // The fixture lives in a static, so it is never dropped: verdaccio
        // ends with this process (its main thread spawns it) instead.
        // SAFETY: prctl is async-signal-safe and allocates nothing.
        unsafe {
            use std::os::unix::process::CommandExt;
            command.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                    .map_err(std::io::Error::from)
            });
        }
        let child = command
            .arg("--config")
            .arg(root.join("config.yaml"))
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("verdaccio is installed (.ci/setup)");
        let verdaccio = Verdaccio(child);
        let registry = format!("http://127.0.0.1:{port}/");
        let ready = (0..600).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(100));
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        assert!(ready, "verdaccio did not start");
        std::thread::sleep(std::time::Duration::from_millis(500));
        let lib = root.join("greet-lib");
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::write(
            lib.join("package.json"),
            "{\"name\":\"greet-lib\",\"version\":\"1.0.0\",\"main\":\"index.js\"}",
        )
        .unwrap();
        std::fs::write(
            lib.join("index.js"),
            "exports.greet = (n) => `Hello, ${n}!`;\n",
        )
        .unwrap();
        let host = registry.trim_start_matches("http:");
        let published = Command::new("npm")
            .args(["publish", "--ignore-scripts", "--registry", &registry])
            .arg(format!("--{host}:_authToken=bench"))
            .env("npm_config_cache", root.join("npm-cache"))
            .current_dir(&lib)
            .output()
            .unwrap();
        assert!(published.status.success(), "npm publish failed");
        let manifest = "{\"name\":\"hello\",\"dependencies\":{\"greet-lib\":\"^1.0.0\"}}".to_string();
        let app = root.join("app");
        std::fs::create_dir_all(&app).unwrap();
        std::fs::write(app.join("package.json"), &manifest).unwrap();
        let locked = Command::new(bun())
            .args(["install", "--lockfile-only", "--config=/dev/null"])
            .arg(format!("--registry={registry}"))
            .env_clear()
            .env("HOME", &app)
            .current_dir(&app)
            .output()
            .unwrap();
        assert!(locked.status.success(), "bun could not lock");
        let lock = std::fs::read_to_string(app.join("bun.lock")).unwrap();
        Fixture {
            _storage: storage,
            registry,
            manifest,
            lock,
            _verdaccio: verdaccio,
        }
    })
}

const FLOW_TS: &str = "import { handle } from \"@jigging/flow\";\nimport { greet } from \"greet-lib\";\nawait handle(async (run) => ({ outcome: \"done\", output: greet(String(run.input)) }));\n";

/// A fresh project; `with_dependency` adds package.json and bun.lock.
fn project(with_dependency: bool) -> tempfile::TempDir {
    let f = fixture();
    let mut files = vec![("flow.ts", FLOW_TS)];
    if with_dependency {
        files.push(("package.json", &f.manifest));
        files.push(("bun.lock", &f.lock));
    }
    support::project(
        &files,
        &format!("[dependencies]\nnpm-registry = \"{}\"\n", f.registry),
    )
}

#[divan::bench(sample_count = 10)]
fn bun_install_frozen(bencher: divan::Bencher) {
    let f = fixture();
    bencher
        .with_inputs(|| {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("package.json"), &f.manifest).unwrap();
            std::fs::write(dir.path().join("bun.lock"), &f.lock).unwrap();
            dir
        })
        .bench_values(|dir| {
            let out = Command::new(bun())
                .args([
                    "install",
                    "--frozen-lockfile",
                    "--production",
                    "--ignore-scripts",
                    "--config=/dev/null",
                    "--linker=hoisted",
                    "--backend=copyfile",
                ])
                .arg(format!("--registry={}", f.registry))
                .arg(format!(
                    "--cache-dir={}",
                    dir.path().join(".cache").display()
                ))
                .env_clear()
                .env("HOME", dir.path())
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(out.status.success());
            dir
        });
}

#[divan::bench(sample_count = 10)]
fn review_without_dependency(bencher: divan::Bencher) {
    bencher.with_inputs(|| project(false)).bench_values(|dir| {
        review(dir.path());
        dir
    });
}

#[divan::bench(sample_count = 10)]
fn review_with_locked_dependency(bencher: divan::Bencher) {
    bencher.with_inputs(|| project(true)).bench_values(|dir| {
        review(dir.path());
        dir
    });
}
