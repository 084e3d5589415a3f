//! `jig serve` against `jig run` of the same target, measured in the same
//! run: one Run of a one-file `flow.py` echo submitted over the
//! daemon's Unix socket (`POST …/runs`, waiting for the terminal) against a
//! whole `jig run` command of the same target in an identical project the
//! daemon does not hold. `jig_run_via_server` is the CLI client
//! (`jig run --server unix:…`): process start plus the socket round trip.
//!
//! Report the ratio of the medians `socket_submit / jig_run_local`, and the
//! figures `main` prints before the timed benches: p50 and p99
//! submit-to-terminal latency of sequential socket submissions, and Runs/s
//! with 8 concurrent clients (both against `jig run`'s median).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use http_body_util::BodyExt;

fn main() {
    let fixture = fixture();
    report(fixture);
    divan::main();
    // A static is never dropped: stop the daemon here.
    let mut daemon = fixture.daemon.lock().unwrap();
    let _ = daemon.kill();
    let _ = daemon.wait();
}

const FLOW_MD: &str = "---\nname: echo\ndescription: Answers its input.\n---\n";
const FLOW_PY: &str = "from jiggy.flow import handle\n\nasync def run(ctx):\n    return {\"outcome\": \"done\", \"output\": ctx.input}\n\nhandle(run)\n";
const JIG_TS: &str = "import { defineJig, discover } from \"@jigging/jig\";\n\nexport default defineJig({\n  flows: discover(\"./flows\"),\n  bindings: discover(\"./bindings\"),\n});\n";
/// Sequential socket submissions behind the p50/p99 figures.
const LATENCY_SAMPLES: usize = 100;
/// Concurrent clients, and Runs each submits, for the Runs/s figure.
const CLIENTS: usize = 8;
const RUNS_PER_CLIENT: usize = 8;

struct Fixture {
    _outer: tempfile::TempDir,
    /// An identical project to the one the daemon holds (`p`), not held.
    local: PathBuf,
    cache_home: tempfile::TempDir,
    socket: PathBuf,
    daemon: std::sync::Mutex<Child>,
    runtime: tokio::runtime::Runtime,
}

fn project(root: &Path) {
    std::fs::create_dir_all(root.join("flows/echo")).unwrap();
    std::fs::write(root.join("jig.ts"), JIG_TS).unwrap();
    std::fs::write(root.join("flows/echo/FLOW.md"), FLOW_MD).unwrap();
    std::fs::write(root.join("flows/echo/flow.py"), FLOW_PY).unwrap();
}

fn jig(fixture_dir: &Path, cache_home: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_jig"));
    command
        .current_dir(fixture_dir)
        .env_remove("JIG_CONFIG")
        .env_remove("JIG_VERIFICATION")
        .env_remove("JIG_SERVER")
        .env("XDG_CONFIG_HOME", fixture_dir.join(".config"))
        .env("XDG_CACHE_HOME", cache_home)
        .env("NO_COLOR", "1")
        .args(args)
        .stdin(Stdio::null());
    command
}

fn fixture() -> &'static Fixture {
    static CELL: OnceLock<Fixture> = OnceLock::new();
    CELL.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt;
        let outer = tempfile::tempdir().unwrap();
        let served = outer.path().join("p");
        let local = outer.path().join("q");
        let cache_home = tempfile::tempdir().unwrap();
        std::fs::set_permissions(cache_home.path(), std::fs::Permissions::from_mode(0o700))
            .unwrap();
        for root in [&served, &local] {
            project(root);
            let review = jig(root, cache_home.path(), &["review", "--yes"])
                .output()
                .unwrap();
            assert!(review.status.success(), "{review:?}");
        }
        let socket = outer.path().join("jig.sock");
        let daemon = jig(&served, cache_home.path(), &["serve", "--socket"])
            .arg(&socket)
            .args(["--max-active-runs", "2", "--max-queued-runs", "64"])
            .arg("-C")
            .arg(&served)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let fixture = Fixture {
            _outer: outer,
            local,
            cache_home,
            socket,
            daemon: std::sync::Mutex::new(daemon),
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
        };
        let started = Instant::now();
        while std::os::unix::net::UnixStream::connect(&fixture.socket).is_err() {
            assert!(started.elapsed() < Duration::from_secs(60), "no daemon");
            std::thread::sleep(Duration::from_millis(50));
        }
        // Warm the verification and compiled-module caches both ways.
        run_local(&fixture.local, fixture.cache_home.path());
        fixture.runtime.block_on(submit(&fixture.socket));
        fixture
    })
}

/// One Run over the socket, waiting for its terminal.
async fn submit(socket: &Path) {
    let stream = tokio::net::UnixStream::connect(socket).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let request = hyper::Request::post("/v1/projects/p/runs")
        .header(hyper::header::HOST, "localhost")
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(http_body_util::Full::new(axum::body::Bytes::from_static(
            br#"{"target":"flow:flows/echo","input":"bench"}"#,
        )))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert!(
        body.windows(11).any(|w| w == b"\"succeeded\""),
        "{}",
        String::from_utf8_lossy(&body)
    );
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

/// The latency and throughput figures, printed once before the timed benches.
fn report(fixture: &Fixture) {
    let local: Vec<Duration> = (0..10)
        .map(|_| {
            let started = Instant::now();
            run_local(&fixture.local, fixture.cache_home.path());
            started.elapsed()
        })
        .collect();
    let mut local = local;
    local.sort();
    let local_p50 = percentile(&local, 0.5);
    let mut latencies: Vec<Duration> = (0..LATENCY_SAMPLES)
        .map(|_| {
            let started = Instant::now();
            fixture.runtime.block_on(submit(&fixture.socket));
            started.elapsed()
        })
        .collect();
    latencies.sort();
    let started = Instant::now();
    let threads: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let socket = fixture.socket.clone();
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                for _ in 0..RUNS_PER_CLIENT {
                    runtime.block_on(submit(&socket));
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let elapsed = started.elapsed();
    let runs = (CLIENTS * RUNS_PER_CLIENT) as f64;
    eprintln!(
        "serve: socket submit-to-terminal p50 {:?} p99 {:?} ({LATENCY_SAMPLES} sequential); \
         jig run p50 {local_p50:?}; ratio p50 socket/jig run {:.3}",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        percentile(&latencies, 0.5).as_secs_f64() / local_p50.as_secs_f64(),
    );
    eprintln!(
        "serve: {:.2} Runs/s through the socket with {CLIENTS} clients ({runs} Runs in {elapsed:?}); \
         jig run sequentially {:.2} Runs/s",
        runs / elapsed.as_secs_f64(),
        1.0 / local_p50.as_secs_f64(),
    );
}

/// A whole `jig run` in the project the daemon does not hold.
fn run_local(local: &Path, cache_home: &Path) {
    let out = jig(
        local,
        cache_home,
        &["run", "flow:flows/echo", "--input", "\"bench\""],
    )
    .stderr(Stdio::null())
    .output()
    .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[divan::bench(sample_count = 20)]
fn jig_run_local() {
    let fixture = fixture();
    run_local(&fixture.local, fixture.cache_home.path());
}

#[divan::bench(sample_count = 20)]
fn jig_run_via_server() {
    let fixture = fixture();
    let server = format!("unix:{}", fixture.socket.display());
    let out = jig(
        &fixture.local,
        fixture.cache_home.path(),
        &[
            "run",
            "--server",
            &server,
            "flow:flows/echo",
            "--input",
            "\"bench\"",
        ],
    )
    .stderr(Stdio::null())
    .output()
    .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[divan::bench(sample_count = 20)]
fn socket_submit() {
    let fixture = fixture();
    fixture.runtime.block_on(submit(&fixture.socket));
}
