//! `jig serve` through the real daemon and a real HTTP client (`curl
//! --unix-socket`): submission, records, events, cancellation, keys,
//! bounds, bad input, concurrency, SIGTERM and SIGKILL.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::*;

/// A bearer token as long as `jig serve` requires (32 bytes and more).
const TOKEN: &str = "s3cret-token-0123456789abcdefghij";

const ECHO_PY: &str = "from jiggy.flow import handle\n\
async def run(context):\n    return {'outcome': 'done', 'output': context.input}\n\
handle(run)\n";

/// Sleeps `input` seconds, then answers.
const SLEEP_PY: &str = "import asyncio\nfrom jiggy.flow import handle\n\
async def run(context):\n    await asyncio.sleep(context.input)\n    return {'outcome': 'done', 'output': 'slept'}\n\
handle(run)\n";

/// Sends three items on `events`, then waits to be cancelled.
const TICKER_PY: &str = "import asyncio\nfrom jiggy.flow import handle\n\
async def run(context):\n    events = context.channels['events']\n    \
for i in range(3):\n        await events.send({'i': i})\n    \
await asyncio.sleep(120)\n    return {'outcome': 'done', 'output': 'late'}\n\
handle(run)\n";

/// Sends two items on `events`, then answers.
const TELL_PY: &str = "from jiggy.flow import handle\n\
async def run(context):\n    events = context.channels['events']\n    \
for i in range(2):\n        await events.send({'i': i})\n    \
return {'outcome': 'done', 'output': 'told'}\n\
handle(run)\n";

/// Copies every file of `source` into `deliverables`, reversed, and
/// answers with their sorted paths; fails when its input is `"fail"`
/// (the queue tests run it through the database too).
pub(crate) const COPY_PY: &str = "import os\nfrom jiggy.flow import handle\n\
async def run(context):\n    if context.input == 'fail':\n        raise RuntimeError('asked to fail')\n    \
src = context.attachments['source']['path']\n    \
out = context.attachments['deliverables']['path']\n    seen = []\n    \
for top, dirs, files in os.walk(src):\n        for name in files:\n            \
rel = os.path.relpath(os.path.join(top, name), src)\n            \
os.makedirs(os.path.join(out, os.path.dirname(rel)), exist_ok=True)\n            \
with open(os.path.join(top, name), 'rb') as f:\n                data = f.read()\n            \
with open(os.path.join(out, rel), 'wb') as f:\n                f.write(data[::-1])\n            \
seen.append(rel)\n    return {'outcome': 'done', 'output': sorted(seen)}\n\
handle(run)\n";

const COPY_ATTACHMENTS: &str = "attachments:\n  source: read\n  deliverables: read-write\n";

fn flow_md(name: &str, extra: &str) -> String {
    format!("---\nname: {name}\ndescription: A served test Flow.\n{extra}---\n")
}

/// A reviewed project with `flows/echo`, `flows/sleep` and `flows/ticker`
/// in `root`.
pub(crate) fn served_project(root: &Path) {
    write_files(
        root,
        &[
            ("jig.ts", JIG_TS),
            ("flows/echo/FLOW.md", &flow_md("echo", "")),
            ("flows/echo/flow.py", ECHO_PY),
            ("flows/sleep/FLOW.md", &flow_md("sleep", "")),
            ("flows/sleep/flow.py", SLEEP_PY),
            (
                "flows/ticker/FLOW.md",
                &flow_md("ticker", "channels:\n  events:\n    direction: send\n"),
            ),
            ("flows/ticker/flow.py", TICKER_PY),
            (
                "flows/tell/FLOW.md",
                &flow_md("tell", "channels:\n  events:\n    direction: send\n"),
            ),
            ("flows/tell/flow.py", TELL_PY),
            ("flows/copy/FLOW.md", &flow_md("copy", COPY_ATTACHMENTS)),
            ("flows/copy/flow.py", COPY_PY),
        ],
    );
    review(root);
}

pub(crate) struct Daemon {
    child: Option<Child>,
    socket: PathBuf,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Daemon {
    pub(crate) fn start(project: &Path, extra: &[&str]) -> Daemon {
        Daemon::start_by(|socket| {
            let mut command = jig(project);
            command
                .args(["-C", project.to_str().unwrap(), "serve", "--socket"])
                .arg(socket)
                .args(extra);
            command
        })
    }

    /// The daemon `command` (given the socket path) starts, once it answers.
    fn start_by(command: impl FnOnce(&Path) -> Command) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("jig.sock");
        let log = dir.path().join("serve.log");
        let child = command(&socket)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let daemon = Daemon {
            child: Some(child),
            socket,
            log,
            _dir: dir,
        };
        let started = Instant::now();
        loop {
            if daemon.socket.exists() && daemon.call("GET", "/v1/health", None).0 == 200 {
                return daemon;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the daemon did not come up: {}",
                daemon.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(crate) fn socket(&self) -> &Path {
        &self.socket
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn curl(&self) -> Command {
        let mut curl = Command::new("curl");
        curl.args(["-sS", "--unix-socket"]).arg(&self.socket);
        curl
    }

    /// One request: (HTTP status, body).
    pub(crate) fn raw(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        headers: &[&str],
    ) -> (u16, String) {
        let mut curl = self.curl();
        curl.args(["-X", method, "-w", "\n%{http_code}"]);
        for h in headers {
            curl.args(["-H", h]);
        }
        let typed = headers
            .iter()
            .any(|h| h.to_ascii_lowercase().starts_with("content-type:"));
        if body.is_some() {
            if !typed {
                curl.args(["-H", "content-type: application/json"]);
            }
            curl.args(["--data-binary", "@-"]);
        }
        let mut child = curl
            .arg(format!("http://jig{path}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        if let Some(body) = body {
            let _ = stdin.write_all(body);
        }
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
        (status.trim().parse().unwrap_or(0), body.to_string())
    }

    pub(crate) fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let bytes = body.map(|b| b.to_string().into_bytes());
        let (status, text) = self.raw(method, path, bytes.as_deref(), &[]);
        let value = serde_json::from_str(text.trim()).unwrap_or(Value::String(text));
        (status, value)
    }

    pub(crate) fn submit(&self, body: Value) -> (u16, Value) {
        self.call("POST", "/v1/projects/p/runs", Some(body))
    }

    /// `runs` Runs of `flows/echo` (inputs 0..runs) from `clients`
    /// concurrent clients, each waited for: their terminals.
    pub(crate) fn echo_concurrently(&self, clients: usize, runs: usize) -> Vec<Value> {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..clients)
                .map(|client| {
                    s.spawn(move || {
                        (client..runs)
                            .step_by(clients)
                            .map(|n| {
                                let (status, t) =
                                    self.submit(json!({"target": "flow:flows/echo", "input": n}));
                                assert_eq!(status, 200, "{t}");
                                t
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        })
    }

    pub(crate) fn runs(&self) -> Vec<Value> {
        let (status, list) = self.call("GET", "/v1/projects/p/runs?limit=1000", None);
        assert_eq!(status, 200, "{list}");
        list["runs"].as_array().unwrap().clone()
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    pub(crate) fn signal(&mut self, signal: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(self.child.as_ref().unwrap().id() as i32);
        nix::sys::signal::kill(pid, signal).unwrap();
    }

    pub(crate) fn wait(&mut self) -> std::process::ExitStatus {
        self.child.take().unwrap().wait().unwrap()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The served project is named by its directory's basename; tests name it
/// `p` by serving a directory called `p`.
fn served() -> (tempfile::TempDir, PathBuf) {
    let outer = tempfile::tempdir().unwrap();
    let path = outer.path().join("p");
    served_project(&path);
    (outer, path)
}

fn start(extra: &[&str]) -> (tempfile::TempDir, PathBuf, Daemon) {
    let (outer, path) = served();
    let daemon = Daemon::start(&path, extra);
    (outer, path, daemon)
}

/// Read NDJSON lines from a streaming `curl -N` until `stop` holds.
fn read_until(reader: &mut impl BufRead, lines: &mut Vec<Value>, stop: impl Fn(&[Value]) -> bool) {
    while !stop(lines) {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 {
            return;
        }
        lines.push(serde_json::from_str(line.trim()).unwrap());
    }
}

#[test]
fn submit_read_list_events_health_and_metrics() {
    let (_outer, _path, daemon) = start(&[]);
    let (status, terminal) = daemon.submit(json!({"target": "flow:flows/echo", "input": "Ada"}));
    assert_eq!(status, 200, "{terminal} {}", daemon.log());
    assert_eq!(terminal["status"], "succeeded");
    assert_eq!(terminal["output"], "Ada");
    let id = terminal["runId"].as_str().unwrap().to_string();

    let (status, record) = daemon.call("GET", &format!("/v1/projects/p/runs/{id}"), None);
    assert_eq!(status, 200);
    assert_eq!(record["id"], id.as_str());
    assert_eq!(record["target"], "flow:flows/echo");
    assert_eq!(record["terminal"], terminal);

    let runs = daemon.runs();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["id"], id.as_str());

    let (status, events) = daemon.raw(
        "GET",
        &format!("/v1/projects/p/runs/{id}/events"),
        None,
        &[],
    );
    assert_eq!(status, 200);
    let lines: Vec<Value> = events
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "status");
    assert_eq!(lines[0]["status"], "queued");
    assert_eq!(lines[1]["status"], "running");
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "terminal");
    assert_eq!(last["result"], terminal);

    let (status, sse) = daemon.raw(
        "GET",
        &format!("/v1/projects/p/runs/{id}/events"),
        None,
        &["accept: text/event-stream"],
    );
    assert_eq!(status, 200);
    assert!(sse.starts_with("data: {"), "{sse}");
    assert!(sse.contains("data: {\"result\":"), "{sse}");

    let (status, health) = daemon.call("GET", "/v1/health", None);
    assert_eq!(status, 200);
    assert_eq!(health, json!({"status": "ok", "projects": ["p"]}));

    let (status, metrics) = daemon.raw("GET", "/metrics", None, &[]);
    assert_eq!(status, 200);
    assert!(
        metrics.contains("jig_runs_total{status=\"succeeded\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("jig_active_runs 0"), "{metrics}");
    assert!(metrics.contains("jig_queued_runs 0"), "{metrics}");
    assert!(
        metrics.contains("jig_run_duration_seconds_count 1"),
        "{metrics}"
    );
}

#[test]
fn the_same_key_replays_one_run_and_changed_content_conflicts() {
    let (_outer, _path, daemon) = start(&[]);
    let body = json!({"target": "flow:flows/echo", "input": 1, "key": "k1"});
    let (status, first) = daemon.submit(body.clone());
    assert_eq!(status, 200, "{first}");
    let (status, again) = daemon.submit(body);
    assert_eq!(status, 200);
    assert_eq!(again, first, "the same Run, not a second execution");
    let (status, conflict) =
        daemon.submit(json!({"target": "flow:flows/echo", "input": 2, "key": "k1"}));
    assert_eq!(status, 409);
    assert_eq!(conflict["code"], "SUBMISSION_CONFLICT");
    assert_eq!(daemon.runs().len(), 1);
    // Concurrent submissions with one new key make one Run.
    let ids: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    let (status, t) = daemon
                        .submit(json!({"target": "flow:flows/echo", "input": 3, "key": "k2"}));
                    assert_eq!(status, 200, "{t}");
                    t["runId"].as_str().unwrap().to_string()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(ids.iter().all(|id| id == &ids[0]), "{ids:?}");
    assert_eq!(daemon.runs().len(), 2);
}

#[test]
fn bad_requests_are_refused_with_their_codes_and_record_nothing() {
    let (_outer, _path, daemon) = start(&[]);
    let post = |path: &str, body: &[u8]| {
        let (status, text) = daemon.raw("POST", path, Some(body), &[]);
        let value: Value = serde_json::from_str(text.trim()).unwrap_or_else(|_| panic!("{text}"));
        (status, value["code"].as_str().unwrap_or("").to_string())
    };
    let runs = "/v1/projects/p/runs";
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (runs, b"{".to_vec(), 400, "INVALID_REQUEST"),
        (
            runs,
            b"{\"target\":\"flow:flows/echo\",\"input\":1,\"input\":2}".to_vec(),
            400,
            "INVALID_REQUEST",
        ),
        (
            runs,
            b"{\"target\":\"flow:flows/echo\",\"extra\":1}".to_vec(),
            400,
            "INVALID_REQUEST",
        ),
        (
            runs,
            b"{\"target\":\"flow:flows/nope\"}".to_vec(),
            404,
            "JIG_RUN_TARGET_INVALID",
        ),
        (
            runs,
            b"{\"target\":\"flow:../p/flows/echo\"}".to_vec(),
            404,
            "JIG_RUN_TARGET_INVALID",
        ),
        (
            runs,
            b"{\"target\":\"flows/echo\"}".to_vec(),
            400,
            "JIG_RUN_TARGET_INVALID",
        ),
        (
            runs,
            b"{\"target\":\"flow:flows/echo\",\"timeout\":\"0s\"}".to_vec(),
            400,
            "JIG_RUN_TIMEOUT_INVALID",
        ),
        (
            runs,
            b"{\"target\":\"flow:flows/echo\",\"receive\":[\"nope\"]}".to_vec(),
            400,
            "JIG_USAGE",
        ),
        (
            runs,
            b"{\"target\":\"flow:flows/echo\",\"key\":\"\"}".to_vec(),
            400,
            "INVALID_REQUEST",
        ),
        (
            "/v1/projects/other/runs",
            b"{\"target\":\"flow:flows/echo\"}".to_vec(),
            404,
            "PROJECT_NOT_FOUND",
        ),
        (
            "/v1/projects/..%2fp/runs",
            b"{\"target\":\"flow:flows/echo\"}".to_vec(),
            404,
            "PROJECT_NOT_FOUND",
        ),
    ];
    for (path, body, status, code) in cases {
        assert_eq!(
            post(path, &body),
            (status, code.to_string()),
            "{path} {}",
            String::from_utf8_lossy(&body)
        );
    }
    // The body limit is the JSON/1 document limit: at it, still parsed
    // (and refused for its content); one past it, 413.
    let limit = jig_server::serve::MAX_BODY_BYTES;
    let mut at = b"{\"target\":\"flow:flows/echo\",\"input\":\"".to_vec();
    at.resize(limit - 2, b'a');
    at.extend_from_slice(b"\"}");
    assert_eq!(at.len(), limit);
    let (status, code) = post(runs, &at);
    assert_ne!(status, 413, "{code}");
    let mut past = at.clone();
    past.insert(past.len() - 2, b'a');
    assert_eq!(post(runs, &past), (413, "INVALID_REQUEST".to_string()));
    for path in [
        "/v1/projects/p/runs/..%2f..%2fjig.ts",
        "/v1/projects/p/runs/nope",
        "/v1/projects/p/runs/nope/events",
    ] {
        let (status, body) = daemon.call("GET", path, None);
        assert_eq!(
            (status, body["code"].as_str()),
            (404, Some("RUN_NOT_FOUND")),
            "{path}"
        );
    }
    // Only the at-limit body ran (a valid Run with a large input).
    assert!(daemon.runs().len() <= 1);
    let (status, body) = daemon.call("GET", "/v1/nothing", None);
    assert_eq!((status, body["code"].as_str()), (404, Some("NOT_FOUND")));
}

#[test]
fn a_stream_carries_channel_items_and_a_cancel_ends_the_run() {
    let (_outer, _path, daemon) = start(&[]);
    let (status, accepted) = daemon.call(
        "POST",
        "/v1/projects/p/runs?wait=false",
        Some(json!({"target": "flow:flows/ticker", "receive": ["events"], "timeout": "5m"})),
    );
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["runId"].as_str().unwrap().to_string();
    let mut stream = daemon
        .curl()
        .args(["-N", &format!("http://jig/v1/projects/p/runs/{id}/events")])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(stream.stdout.take().unwrap());
    let mut lines = Vec::new();
    read_until(&mut reader, &mut lines, |l| {
        l.iter().filter(|v| v["type"] == "data").count() == 3
    });
    let (status, cancelling) =
        daemon.call("POST", &format!("/v1/projects/p/runs/{id}/cancel"), None);
    assert_eq!(status, 202, "{cancelling}");
    read_until(&mut reader, &mut lines, |l| {
        l.last().is_some_and(|v| v["type"] == "terminal")
    });
    stream.wait().unwrap();
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        ["status", "status", "begin", "data", "data", "data", "end", "terminal"],
        "{lines:?}"
    );
    let values: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "data")
        .map(|l| &l["value"])
        .collect();
    assert_eq!(
        values,
        [&json!({"i": 0}), &json!({"i": 1}), &json!({"i": 2})]
    );
    let terminal = &lines.last().unwrap()["result"];
    assert_ne!(terminal["status"], "succeeded", "{terminal}");
    let (_, record) = daemon.call("GET", &format!("/v1/projects/p/runs/{id}"), None);
    assert_eq!(&record["terminal"], terminal);
    // Cancelling a settled Run changes nothing.
    let (status, again) = daemon.call("POST", &format!("/v1/projects/p/runs/{id}/cancel"), None);
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["status"], record["terminal"]["status"]);
}

#[test]
fn past_the_active_and_queue_bounds_is_resource_exhausted_before_recording() {
    let (_outer, _path, daemon) = start(&["--max-active-runs", "1", "--max-queued-runs", "1"]);
    let slow = json!({"target": "flow:flows/sleep", "input": 60, "timeout": "5m"});
    let submit_async =
        |body: Value| daemon.call("POST", "/v1/projects/p/runs?wait=false", Some(body));
    let (first, a) = submit_async(slow.clone());
    let (second, b) = submit_async(slow.clone());
    assert_eq!((first, second), (202, 202), "{a} {b}");
    let (status, refused) = submit_async(slow.clone());
    assert_eq!(status, 429, "{refused}");
    assert_eq!(refused["code"], "RESOURCE_EXHAUSTED");
    assert_eq!(daemon.runs().len(), 2, "the refused Run was never recorded");
    // The first Run takes its slot (and leaves the queued gauge) in its
    // own task, after its submission was answered.
    let started = Instant::now();
    loop {
        let (_, metrics) = daemon.raw("GET", "/metrics", None, &[]);
        if metrics.contains("jig_active_runs 1") && metrics.contains("jig_queued_runs 1") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "not one Run active and one queued: {metrics}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for run in [&a, &b] {
        let id = run["runId"].as_str().unwrap();
        daemon.call("POST", &format!("/v1/projects/p/runs/{id}/cancel"), None);
    }
}

#[test]
fn two_hundred_runs_from_sixteen_clients_each_reach_exactly_one_terminal() {
    const CLIENTS: usize = 16;
    const RUNS: usize = 200;
    let (_outer, _path, daemon) = start(&[]);
    let terminals: Vec<Value> = daemon.echo_concurrently(CLIENTS, RUNS);
    assert_eq!(terminals.len(), RUNS);
    let mut inputs: Vec<u64> = terminals
        .iter()
        .map(|t| {
            assert_eq!(t["status"], "succeeded", "{t}");
            t["output"].as_u64().unwrap()
        })
        .collect();
    inputs.sort();
    assert_eq!(inputs, (0..RUNS as u64).collect::<Vec<_>>());
    let records = daemon.runs();
    assert_eq!(records.len(), RUNS);
    for record in &records {
        assert_eq!(record["terminal"]["status"], "succeeded", "{record}");
        assert_eq!(
            record["terminal"]["output"],
            record_input(&terminals, record)
        );
    }
    let (_, metrics) = daemon.raw("GET", "/metrics", None, &[]);
    assert!(
        metrics.contains(&format!("jig_runs_total{{status=\"succeeded\"}} {RUNS}")),
        "{metrics}"
    );
}

/// The output the client saw for this record's Run.
fn record_input(terminals: &[Value], record: &Value) -> Value {
    terminals
        .iter()
        .find(|t| t["runId"] == record["id"])
        .map(|t| t["output"].clone())
        .expect("every record was answered to a client")
}

#[test]
fn sigterm_stops_admission_lets_runs_finish_within_the_grace_then_cancels() {
    let (_outer, path, mut daemon) = start(&["--shutdown-grace", "3s"]);
    let submit_async = |body: Value| {
        let (status, v) = daemon.call("POST", "/v1/projects/p/runs?wait=false", Some(body));
        assert_eq!(status, 202, "{v}");
        v["runId"].as_str().unwrap().to_string()
    };
    let quick = submit_async(json!({"target": "flow:flows/sleep", "input": 1}));
    let slow = submit_async(json!({"target": "flow:flows/sleep", "input": 120, "timeout": "5m"}));
    // Both are running before the signal.
    let started = Instant::now();
    loop {
        let (_, metrics) = daemon.raw("GET", "/metrics", None, &[]);
        if metrics.contains("jig_active_runs 2") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{metrics}");
        std::thread::sleep(Duration::from_millis(100));
    }
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    // Admission stops when the daemon handles the signal: wait until it
    // says it is draining.
    let started = Instant::now();
    loop {
        let (status, health) = daemon.call("GET", "/v1/health", None);
        if health["status"] == "draining" {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the daemon is not draining: {status} {health} {}",
            daemon.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, closed) = daemon.submit(json!({"target": "flow:flows/echo"}));
    assert_eq!(
        (status, closed["code"].as_str()),
        (503, Some("PROJECT_CLOSED")),
        "{closed}"
    );
    let exit = daemon.wait();
    assert!(exit.success(), "{exit:?} {}", daemon.log());
    assert!(!daemon.socket.exists(), "the socket is removed");
    let show = |id: &str| run_jig(&path, &["runs", "show", id]).json();
    assert_eq!(show(&quick)["terminal"]["status"], "succeeded");
    let slow = show(&slow);
    assert_eq!(slow["terminal"]["status"], "failed", "{slow}");
    assert_ne!(slow["terminal"]["code"], "COORDINATOR_LOST", "{slow}");
    let work = std::fs::read_dir(path.join(".jig/work"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(work, 0, "the Runs' private files are cleaned");
}

#[test]
fn after_sigkill_nothing_runs_and_the_next_start_fences_the_run_lost() {
    let (_outer, path, mut daemon) = start(&[]);
    let (status, v) = daemon.call(
        "POST",
        "/v1/projects/p/runs?wait=false",
        Some(json!({"target": "flow:flows/sleep", "input": 120, "timeout": "5m"})),
    );
    assert_eq!(status, 202, "{v}");
    let id = v["runId"].as_str().unwrap().to_string();
    let started = Instant::now();
    loop {
        let (_, metrics) = daemon.raw("GET", "/metrics", None, &[]);
        if metrics.contains("jig_active_runs 1") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{metrics}");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    daemon.signal(nix::sys::signal::Signal::SIGKILL);
    daemon.wait();
    let work = path.join(".jig/work").display().to_string();
    let started = Instant::now();
    while !processes_mentioning(&work).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "processes outlived the daemon: {:?}",
            processes_mentioning(&work)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let restarted = Daemon::start(&path, &[]);
    let (status, record) = restarted.call("GET", &format!("/v1/projects/p/runs/{id}"), None);
    assert_eq!(status, 200);
    assert_eq!(record["terminal"]["status"], "lost", "{record}");
    assert_eq!(record["terminal"]["code"], "COORDINATOR_LOST");
    assert!(
        restarted.log().contains("COORDINATOR_LOST"),
        "{}",
        restarted.log()
    );
}

#[test]
fn the_openapi_document_names_exactly_the_served_routes() {
    let document: Value = serde_json::from_str(jig_server::serve::OPENAPI).unwrap();
    let mut documented: Vec<String> = Vec::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for method in ["get", "post", "put", "delete", "patch"] {
            if item.get(method).is_some() {
                documented.push(format!("{} {path}", method.to_uppercase()));
            }
        }
    }
    documented.sort();
    let mut served: Vec<String> = jig_server::serve::ROUTES
        .iter()
        .map(|(m, p)| format!("{m} {p}"))
        .collect();
    served.sort();
    assert_eq!(documented, served);

    // Real answers carry the documented status and required members.
    let (_outer, _path, daemon) = start(&[]);
    let schema_of = |path: &str, method: &str, status: u16| -> Value {
        let mut response = document["paths"][path][method]["responses"][status.to_string()].clone();
        if let Some(r) = response.get("$ref").and_then(Value::as_str) {
            response = document.pointer(&r[1..]).unwrap().clone();
        }
        let mut schema = response["content"]["application/json"]["schema"].clone();
        if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
            schema = document.pointer(&r[1..]).unwrap().clone();
        }
        assert!(schema.is_object(), "{method} {path} documents no {status}");
        schema
    };
    let check = |path: &str, method: &str, status: u16, body: &Value| {
        let schema = schema_of(path, method, status);
        for required in schema["required"].as_array().into_iter().flatten() {
            let name = required.as_str().unwrap();
            assert!(
                body.get(name).is_some(),
                "{method} {path} {status}: {name} missing in {body}"
            );
        }
    };
    let runs = "/v1/projects/{project}/runs";
    let (status, body) = daemon.call("GET", "/v1/health", None);
    check("/v1/health", "get", status, &body);
    let (status, body) = daemon.call("GET", "/v1/openapi.json", None);
    check("/v1/openapi.json", "get", status, &body);
    let (status, body) = daemon.submit(json!({"target": "flow:flows/echo"}));
    check(runs, "post", status, &body);
    let id = body["runId"].as_str().unwrap().to_string();
    let (status, body) = daemon.submit(json!({"target": "flow:flows/nope"}));
    check(runs, "post", status, &body);
    let (status, body) = daemon.call(
        "POST",
        "/v1/projects/p/runs?wait=false",
        Some(json!({"target": "flow:flows/echo"})),
    );
    check(runs, "post", status, &body);
    let (status, body) = daemon.call("GET", "/v1/projects/p/runs", None);
    check(runs, "get", status, &body);
    let (status, body) = daemon.call("GET", &format!("/v1/projects/p/runs/{id}"), None);
    check("/v1/projects/{project}/runs/{id}", "get", status, &body);
    let (status, body) = daemon.call("POST", &format!("/v1/projects/p/runs/{id}/cancel"), None);
    check(
        "/v1/projects/{project}/runs/{id}/cancel",
        "post",
        status,
        &body,
    );
    let (status, body) = daemon.call("GET", "/v1/projects/p/runs/nope", None);
    check("/v1/projects/{project}/runs/{id}", "get", status, &body);
    let (status, _) = daemon.raw(
        "GET",
        &format!("/v1/projects/p/runs/{id}/events"),
        None,
        &[],
    );
    assert_eq!(status, 200);
    let (status, _) = daemon.raw("GET", "/metrics", None, &[]);
    assert_eq!(status, 200);
}

#[test]
fn tcp_requires_the_bearer_token_from_the_file() {
    let (outer, path) = served();
    let token = outer.path().join("token");
    write_token(&token, TOKEN);
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let daemon = Daemon::start(
        &path,
        &["--tcp", &address, "--token-file", token.to_str().unwrap()],
    );
    let tcp = |headers: &[&str]| {
        let mut curl = Command::new("curl");
        curl.args(["-sS", "-w", "\n%{http_code}"]);
        for h in headers {
            curl.args(["-H", h]);
        }
        let out = curl
            .arg(format!("http://{address}/v1/projects/p/runs"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, status) = text.rsplit_once('\n').unwrap();
        let body: Value = serde_json::from_str(body.trim()).unwrap_or(Value::Null);
        (status.parse::<u16>().unwrap(), body)
    };
    let (status, body) = tcp(&[]);
    assert_eq!(
        (status, body["code"].as_str()),
        (401, Some("UNAUTHENTICATED"))
    );
    let (status, body) = tcp(&[&format!("authorization: Bearer {}X", &TOKEN[1..])]);
    assert_eq!(
        (status, body["code"].as_str()),
        (401, Some("UNAUTHENTICATED"))
    );
    let (status, body) = tcp(&[&format!("authorization: Bearer {TOKEN}")]);
    assert_eq!(status, 200, "{body}");
    assert!(body["runs"].is_array());
    // The Unix socket needs no token.
    assert_eq!(daemon.call("GET", "/v1/health", None).0, 200);
    // --tcp without a token file is a usage error.
    let run = run_jig(
        &path,
        &["-C", path.to_str().unwrap(), "serve", "--tcp", &address],
    );
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stderr.starts_with("JIG_USAGE: "), "{run:?}");
}

/// A terminal or record with what differs between two Runs of the same
/// request (the Run id, times, pid, measured diagnostics) blanked.
fn comparable(text: &str) -> Value {
    fn blank(value: &mut Value) {
        if let Value::Object(map) = value {
            for (name, item) in map.iter_mut() {
                match name.as_str() {
                    "runId" | "id" | "pid" | "submittedAtUnixMs" | "settledAtUnixMs"
                    | "diagnostics" => *item = Value::Null,
                    _ => blank(item),
                }
            }
        }
    }
    let mut lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| Value::String(l.to_string())))
        .collect();
    lines.iter_mut().for_each(blank);
    Value::Array(lines)
}

/// `jig run`'s user-visible result: exit status, stdout (comparable),
/// stderr.
fn seen(run: &Run) -> (i32, Value, String) {
    (run.status, comparable(&run.stdout), run.stderr.clone())
}

#[test]
fn jig_run_through_the_daemon_shows_what_a_local_run_shows() {
    let (_outer, path) = served();
    let dir = path.to_str().unwrap();
    let cases: &[&[&str]] = &[
        &["run", "flow:flows/echo", "--input", "\"Ada\"", "--json"],
        &["run", "flow:flows/echo", "--input", "{\"n\": [1, 2]}"],
        &["run", "flow:flows/tell", "--receive", "events"],
        &[
            "run",
            "flow:flows/sleep",
            "--input",
            "30",
            "--timeout",
            "1s",
        ],
        &["run", "flow:flows/none"],
        &["run", "flows/echo"],
        &["run", "flow:flows/echo", "--timeout", "soon"],
        &["run", "flow:flows/echo", "--receive", "nope"],
    ];
    let local: Vec<Run> = cases.iter().map(|args| run_jig(&path, args)).collect();
    assert_eq!(local[0].status, 0, "{:?}", local[0]);
    assert_eq!(local[2].stdout.lines().count(), 5, "{:?}", local[2]);
    assert_ne!(local[3].status, 0, "{:?}", local[3]);
    // A file Run, and file Runs refused, through each door: the same
    // output but for the destination each door names (its own --out).
    let source = source_folder(path.parent().unwrap());
    let attach = format!("source={}", source.display());
    let writable = format!("deliverables={}", source.display());
    let file_cases: &[&[&str]] = &[
        &["run", "flow:flows/copy", "--attach", &attach, "--out"],
        &["run", "flow:flows/copy", "--attach", &attach],
        &["run", "flow:flows/copy"],
        &["run", "flow:flows/copy", "--attach", &writable, "--out"],
        // A failed file Run publishes the bare record.
        &[
            "run",
            "flow:flows/copy",
            "--input",
            "\"fail\"",
            "--attach",
            &attach,
            "--out",
        ],
    ];
    let outs = path.parent().unwrap().join("outs");
    std::fs::create_dir(&outs).unwrap();
    let mut n = 0;
    let mut with_out = |args: &[&str]| -> Vec<String> {
        n += 1;
        let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        if args.last().map(String::as_str) == Some("--out") {
            args.push(outs.join(format!("o{n}")).to_str().unwrap().to_string());
        }
        args
    };
    let file_seen = |run: &Run| {
        let mut terminal = comparable(&run.stdout);
        if let Some(delivery) = terminal.pointer_mut("/0/delivery") {
            assert!(delivery["destination"]
                .as_str()
                .unwrap()
                .contains("/outs/o"));
            delivery["destination"] = Value::Null;
        }
        (run.status, terminal, run.stderr.clone())
    };
    let file_local: Vec<Run> = file_cases
        .iter()
        .map(|args| run_jig(&path, &refs(&with_out(args))))
        .collect();
    assert_eq!(file_local[0].status, 0, "{:?}", file_local[0]);
    assert_eq!(file_local[4].status, 1, "{:?}", file_local[4]);
    assert_eq!(
        file_local[4].json()["delivery"]["source"],
        "none",
        "{:?}",
        file_local[4]
    );
    let daemon = Daemon::start(&path, &[]);
    let server = format!("unix:{}", daemon.socket.display());
    for (args, local) in cases.iter().zip(&local) {
        let named = run_jig(
            &path,
            &[&args[..1], &["--server", &server], &args[1..]].concat(),
        );
        assert_eq!(seen(&named), seen(local), "--server {args:?}: {named:?}");
        let env = output(
            jig(&path)
                .env("JIG_SERVER", &server)
                .args(*args)
                .output()
                .unwrap(),
        );
        assert_eq!(seen(&env), seen(local), "JIG_SERVER {args:?}: {env:?}");
        // A plain `jig run` in the held project finds the daemon's socket.
        let found = run_jig(&path, &[&["-C", dir][..], args].concat());
        assert_eq!(seen(&found), seen(local), "found {args:?}: {found:?}");
    }
    // The Runs went to the daemon: it recorded them.
    for (args, local) in file_cases.iter().zip(&file_local) {
        let mut named = with_out(args);
        named.splice(1..1, ["--server".to_string(), server.clone()]);
        let named = run_jig(&path, &refs(&named));
        assert_eq!(
            file_seen(&named),
            file_seen(local),
            "--server {args:?}: {named:?}"
        );
        let env = output(
            jig(&path)
                .env("JIG_SERVER", &server)
                .args(with_out(args))
                .output()
                .unwrap(),
        );
        assert_eq!(
            file_seen(&env),
            file_seen(local),
            "JIG_SERVER {args:?}: {env:?}"
        );
    }
    let (packets, bare): (Vec<_>, Vec<_>) = std::fs::read_dir(&outs)
        .unwrap()
        .map(|e| tree(&e.unwrap().path().join("files")))
        .partition(|files| !files.is_empty());
    assert_eq!((packets.len(), bare.len()), (3, 3), "one of each a door");
    assert_eq!(packets[0]["b.txt"], b"eeb");
    assert!(packets.iter().all(|p| *p == packets[0]));
    // The same key replays one Run through either door.
    // Recorded: the one file Run of each door; its refusals, nowhere.
    let successes = cases.len() - 4;
    assert_eq!(
        daemon.runs().len(),
        successes * 3 + 4 + 6,
        "{}",
        daemon.log()
    );
    let keyed = ["run", "flow:flows/echo", "--input", "1", "--key", "k1"];
    let first = run_jig(
        &path,
        &[&keyed[..1], &["--server", &server], &keyed[1..]].concat(),
    );
    let again = run_jig(&path, &keyed);
    assert_eq!(first.status, 0, "{first:?}");
    assert_eq!(first.stdout, again.stdout);
    let other = run_jig(
        &path,
        &["run", "flow:flows/echo", "--input", "2", "--key", "k1"],
    );
    assert_eq!(other.status, 1, "{other:?}");
    assert!(
        other.stderr.starts_with("SUBMISSION_CONFLICT: "),
        "{other:?}"
    );
    let id = first.json()["runId"].as_str().unwrap().to_string();
    let listed = run_jig(&path, &["runs", "--server", &server]);
    let shown = run_jig(&path, &["runs", "show", &id]);
    let missing = run_jig(&path, &["runs", "show", "no-such-run"]);
    assert_eq!(listed.status, 0, "{listed:?}");
    assert_eq!(shown.status, 0, "{shown:?}");
    let filter = [
        "--status",
        "succeeded",
        "--target",
        "flow:flows/echo",
        "--limit",
        "1",
    ];
    let filtered = run_jig(
        &path,
        &[&["runs", "--server", &server][..], &filter].concat(),
    );
    assert_eq!(filtered.status, 0, "{filtered:?}");
    assert_eq!(filtered.stdout.lines().count(), 1, "{filtered:?}");
    drop(daemon);
    // Killed: its socket entry is stale and ignored; the project is local
    // again, and shows the same records byte for byte.
    assert_eq!(run_jig(&path, &["runs"]).stdout, listed.stdout);
    assert_eq!(run_jig(&path, &["runs", "show", &id]).stdout, shown.stdout);
    assert_eq!(
        run_jig(&path, &[&["runs"][..], &filter].concat()).stdout,
        filtered.stdout
    );
    let missing_local = run_jig(&path, &["runs", "show", "no-such-run"]);
    assert_eq!(
        (missing.status, &missing.stderr),
        (missing_local.status, &missing_local.stderr)
    );
    let after = run_jig(&path, &["run", "flow:flows/echo", "--json"]);
    assert_eq!(after.status, 0, "{after:?}");
}

#[test]
fn a_daemon_names_its_socket_in_the_project_and_removes_it_on_exit() {
    let (_outer, path, mut daemon) = start(&[]);
    let entry_path = path.join(".jig/served.json");
    let entry: Value = serde_json::from_slice(&std::fs::read(&entry_path).unwrap()).unwrap();
    assert_eq!(entry["project"], "p");
    assert_eq!(
        entry["socket"].as_str().map(PathBuf::from),
        Some(daemon.socket.clone())
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&entry_path).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "{mode:o}");
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(daemon.wait().success(), "{}", daemon.log());
    assert!(!entry_path.exists());
}

/// The lifecycle lines of Run `id` in a daemon's log: its JSON lines
/// whose `run` span carries that id.
pub(crate) fn lifecycle(log: &str, id: &str) -> Vec<Value> {
    log.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["span"]["name"] == "run" && line["span"]["run_id"] == id)
        .collect()
}

/// Its stderr not a terminal (a file, as under systemd), `jig serve` logs
/// each Run's lifecycle as JSON lines in a span with the Run's id; its own
/// lines keep their words. `JIG_LOG=warn` leaves the lifecycle out.
#[test]
fn a_runs_lifecycle_is_logged_as_json_lines_carrying_its_id() {
    let (_outer, path, daemon) = start(&[]);
    let (status, terminal) = daemon.submit(json!({"target": "flow:flows/echo", "input": "Ada"}));
    assert_eq!(status, 200, "{terminal} {}", daemon.log());
    let id = terminal["runId"].as_str().unwrap();
    let started = Instant::now();
    while lifecycle(&daemon.log(), id).len() < 3 && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = daemon.log();
    let lines = lifecycle(&log, id);
    let messages: Vec<&str> = lines.iter().filter_map(|l| l["message"].as_str()).collect();
    assert_eq!(messages, ["accepted", "dispatched", "settled"], "{log}");
    for line in &lines {
        assert_eq!(line["level"], "INFO", "{line}");
        assert_eq!(line["span"]["project"], "p", "{line}");
    }
    assert_eq!(lines[0]["run_target"], "flow:flows/echo", "{log}");
    assert_eq!(lines[0]["queued"], false, "{log}");
    assert_eq!(lines[2]["status"], "succeeded", "{log}");
    assert_eq!(lines[2]["outcome"], "done", "{log}");
    assert!(
        log.starts_with("jig serve: listening on "),
        "the daemon's own line keeps its words: {log}"
    );
    drop(daemon);

    let quiet = Daemon::start_by(|socket| {
        let mut command = jig(&path);
        command
            .env("JIG_LOG", "warn")
            .args(["-C", path.to_str().unwrap(), "serve", "--socket"])
            .arg(socket);
        command
    });
    let (status, terminal) = quiet.submit(json!({"target": "flow:flows/echo", "input": "Bob"}));
    assert_eq!(status, 200, "{terminal} {}", quiet.log());
    let id = terminal["runId"].as_str().unwrap();
    assert_eq!(lifecycle(&quiet.log(), id), Vec::<Value>::new());
}

#[test]
fn server_urls_and_tokens_are_checked_before_anything_is_sent() {
    let (outer, path) = served();
    let bad = |args: &[&str]| {
        let run = run_jig(&path, args);
        (
            run.status,
            run.stderr.split(':').next().unwrap_or("").to_string(),
        )
    };
    let usage = (2, "JIG_USAGE".to_string());
    assert_eq!(
        bad(&["run", "flow:flows/echo", "--server", "ftp://x"]),
        usage
    );
    assert_eq!(bad(&["runs", "--server", "unix:"]), usage);
    // http:// needs a token file.
    assert_eq!(
        bad(&["run", "--server", "http://127.0.0.1:1", "flow:flows/echo"]),
        usage
    );
    let token = outer.path().join("token");
    write_token(&token, TOKEN);
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let _daemon = Daemon::start(
        &path,
        &["--tcp", &address, "--token-file", token.to_str().unwrap()],
    );
    let url = format!("http://{address}");
    let ran = run_jig(
        &path,
        &[
            "run",
            "--server",
            &url,
            "--token-file",
            token.to_str().unwrap(),
            "flow:flows/echo",
            "--input",
            "7",
            "--json",
        ],
    );
    assert_eq!(ran.status, 0, "{ran:?}");
    assert_eq!(ran.json()["output"], 7);
    let wrong = outer.path().join("wrong");
    std::fs::write(&wrong, "nope\n").unwrap();
    let refused = output(
        jig(&path)
            .env("JIG_SERVER", &url)
            .env("JIG_SERVER_TOKEN_FILE", &wrong)
            .args(["runs"])
            .output()
            .unwrap(),
    );
    assert_eq!(refused.status, 2, "{refused:?}");
    assert!(
        refused.stderr.starts_with("UNAUTHENTICATED: "),
        "{refused:?}"
    );
}

#[test]
fn review_advances_the_generation_while_the_daemon_serves() {
    let (_outer, path, daemon) = start(&[]);
    let (status, first) = daemon.submit(json!({"target": "flow:flows/echo", "input": "v1"}));
    assert_eq!(status, 200, "{first}");
    let (status, slow) = daemon.call(
        "POST",
        "/v1/projects/p/runs?wait=false",
        Some(json!({"target": "flow:flows/sleep", "input": 3})),
    );
    assert_eq!(status, 202, "{slow}");
    let slow = slow["runId"].as_str().unwrap().to_string();
    // The first Run left the next echo Run's envelope made ahead...
    let until = Instant::now() + Duration::from_secs(20);
    while crate::containment::ahead_roots(&path).is_empty() {
        assert!(Instant::now() < until, "no envelope made ahead");
        std::thread::sleep(Duration::from_millis(20));
    }
    let changed = ECHO_PY.replace("'output': context.input", "'output': ['v2', context.input]");
    std::fs::write(path.join("flows/echo/flow.py"), changed).unwrap();
    let reviewed = run_jig(&path, &["review", "--yes"]);
    assert_eq!(reviewed.status, 0, "{reviewed:?}");
    assert!(
        reviewed.stdout.ends_with("project is ready\n"),
        "{reviewed:?}"
    );
    // New Runs take the new generation without a restart...
    let (status, second) = daemon.submit(json!({"target": "flow:flows/echo", "input": "x"}));
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["output"], json!(["v2", "x"]), "{second}");
    // ...which, made for the old generation, was not the one it started in.
    assert_eq!(crate::containment::started_ahead(&daemon), 0);
    let record = |id: &str| {
        daemon
            .call("GET", &format!("/v1/projects/p/runs/{id}"), None)
            .1
    };
    let first = record(first["runId"].as_str().unwrap());
    let second = record(second["runId"].as_str().unwrap());
    assert_eq!(
        second["generation"].as_u64(),
        first["generation"].as_u64().map(|g| g + 1),
        "{first} {second}"
    );
    // ...and the Run in flight keeps the generation it started with.
    let (_, events) = daemon.raw(
        "GET",
        &format!("/v1/projects/p/runs/{slow}/events"),
        None,
        &[],
    );
    assert!(events.contains("\"terminal\""), "{events}");
    let slow = record(&slow);
    assert_eq!(slow["terminal"]["status"], "succeeded", "{slow}");
    assert_eq!(slow["generation"], first["generation"], "{slow}");
    // A review with nothing changed converges beside the daemon too.
    let again = run_jig(&path, &["review", "--yes"]);
    assert_eq!(again.stdout, "project is ready\n", "{again:?}");
}

fn refs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// A folder a file Run reads: nested text, binary and empty files.
fn source_folder(root: &Path) -> PathBuf {
    let source = root.join("source");
    write_files(&source, &[("notes/a.txt", "one\ntwo\n"), ("b.txt", "bee")]);
    std::fs::write(source.join("blob.bin"), [0u8, 159, 146, 150]).unwrap();
    std::fs::write(source.join("empty"), b"").unwrap();
    source
}

/// A packet's `result.json` with what differs between two Runs blanked.
fn packet_record(packet: &Path) -> Value {
    let text = std::fs::read_to_string(packet.join("result.json")).unwrap();
    comparable(&text)
}

#[test]
fn a_file_run_through_the_daemon_delivers_the_packet_a_local_run_delivers() {
    let (outer, path) = served();
    let source = source_folder(outer.path());
    let attach = format!("source={}", source.display());
    let args = |out: &Path| -> Vec<String> {
        ["run", "flow:flows/copy", "--attach", &attach, "--out"]
            .iter()
            .map(|s| s.to_string())
            .chain([out.to_str().unwrap().to_string()])
            .collect()
    };
    let local_out = outer.path().join("local-packet");
    let local = run_jig(&path, &refs(&args(&local_out)));
    assert_eq!(local.status, 0, "{local:?}");
    assert_eq!(
        local.json()["output"],
        json!(["b.txt", "blob.bin", "empty", "notes/a.txt"])
    );
    let daemon = Daemon::start(&path, &[]);
    let server = format!("unix:{}", daemon.socket.display());
    let served_out = outer.path().join("served-packet");
    let mut served_args = args(&served_out);
    served_args.splice(1..1, ["--server".to_string(), server.clone()]);
    let named = run_jig(&path, &refs(&served_args));
    assert_eq!(named.status, 0, "{named:?} {}", daemon.log());
    // The same stdout but for the Run id and the destination it names.
    let shown = |run: &Run, out: &Path| {
        let mut terminal = run.json();
        assert_eq!(
            terminal["delivery"]["destination"],
            json!(out.to_str().unwrap()),
            "{run:?}"
        );
        terminal["delivery"]["destination"] = Value::Null;
        comparable(&terminal.to_string())
    };
    assert_eq!(shown(&named, &served_out), shown(&local, &local_out));
    // The packets hold the same bytes: the Flow's files and the record.
    let delivered = tree(&served_out.join("files"));
    assert_eq!(delivered, tree(&local_out.join("files")));
    assert_eq!(delivered["b.txt"], b"eeb");
    assert_eq!(delivered["blob.bin"], [150u8, 146, 159, 0]);
    assert_eq!(packet_record(&served_out), packet_record(&local_out));
    // The daemon serves the packet it published until asked again.
    let id = named.json()["runId"].as_str().unwrap().to_string();
    let mut curl = daemon.curl();
    let fetched = curl
        .arg(format!("http://jig/v1/projects/p/runs/{id}/packet"))
        .output()
        .unwrap();
    let mut archive = tar::Archive::new(&fetched.stdout[..]);
    let mut names: Vec<String> = archive
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().to_string_lossy().to_string())
        .collect();
    names.sort();
    assert!(names.contains(&"result.json".to_string()), "{names:?}");
    assert!(
        names.contains(&"files/notes/a.txt".to_string()),
        "{names:?}"
    );
    // A direct Run has no packet; an unknown Run is not found.
    let (status, direct) = daemon.submit(json!({"target": "flow:flows/echo"}));
    assert_eq!(status, 200, "{direct}");
    let direct_id = direct["runId"].as_str().unwrap();
    let (status, body) = daemon.call(
        "GET",
        &format!("/v1/projects/p/runs/{direct_id}/packet"),
        None,
    );
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("PACKET_NOT_FOUND"))
    );
    let (status, _) = daemon.call("GET", "/v1/projects/p/runs/nope/packet", None);
    assert_eq!(status, 404);
    // An existing --out is refused before anything is sent, as locally.
    let again = run_jig(&path, &refs(&served_args));
    assert_eq!(again.status, 1, "{again:?}");
    assert!(again.stderr.starts_with("JIG_OUTPUT_EXISTS: "), "{again:?}");
    // The local Run, the served file Run and the direct one: the refused
    // submission recorded nothing.
    assert_eq!(daemon.runs().len(), 3, "{}", daemon.log());
}

/// A tar of (path bytes, entry type, content) entries, names kept as given.
fn raw_tar(entries: &[(&[u8], tar::EntryType, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, kind, content) in entries {
        let mut header = tar::Header::new_old();
        header.as_old_mut().name[..path.len()].copy_from_slice(path);
        header.set_entry_type(*kind);
        header.set_size(content.len() as u64);
        header.set_mode(0o600);
        if *kind == tar::EntryType::Symlink {
            header.set_link_name("/etc/passwd").unwrap();
        }
        header.set_cksum();
        builder.append(&header, *content).unwrap();
    }
    builder.into_inner().unwrap()
}

#[test]
fn oversized_and_traversing_tars_are_refused_with_the_local_codes_and_record_nothing() {
    let (outer, path, daemon) = start(&[]);
    let request = br#"{"target":"flow:flows/copy"}"#;
    let regular = tar::EntryType::Regular;
    let post_tar = |body: &[u8]| {
        let (status, text) = daemon.raw(
            "POST",
            "/v1/projects/p/runs",
            Some(body),
            &["content-type: application/x-tar"],
        );
        let value: Value = serde_json::from_str(text.trim()).unwrap_or_else(|_| panic!("{text}"));
        (status, value["code"].as_str().unwrap_or("").to_string())
    };
    let big = vec![b'x'; 8 * 1024 * 1024 + 1];
    let huge = vec![b'x'; 26 * 1024 * 1024];
    let cases: Vec<(Vec<u8>, u16)> = vec![
        // Past the capture byte limit, inside the body bound.
        (
            raw_tar(&[
                (b"request.json", regular, request),
                (b"attachments/source/big", regular, &big),
            ]),
            400,
        ),
        // Past the body bound altogether.
        (
            raw_tar(&[
                (b"request.json", regular, request),
                (b"attachments/source/a", regular, &huge),
            ]),
            413,
        ),
        (
            raw_tar(&[
                (b"request.json", regular, request),
                (b"attachments/source/../../x", regular, b"x"),
            ]),
            400,
        ),
        (
            raw_tar(&[
                (b"request.json", regular, request),
                (b"/etc/x", regular, b"x"),
            ]),
            400,
        ),
        (
            raw_tar(&[
                (b"request.json", regular, request),
                (b"attachments/source/l", tar::EntryType::Symlink, b""),
            ]),
            400,
        ),
        (
            raw_tar(&[
                (b"request.json", regular, request),
                (b"attachments/source/d", tar::EntryType::Char, b""),
            ]),
            400,
        ),
        // The target's attachments are matched as for --attach.
        (
            raw_tar(&[
                (b"request.json", regular, request),
                (b"attachments/deliverables/a", regular, b"x"),
            ]),
            400,
        ),
        (raw_tar(&[(b"request.json", regular, request)]), 400),
    ];
    for (i, (body, status)) in cases.iter().enumerate() {
        assert_eq!(
            post_tar(body),
            (*status, "JIG_RUN_FILES_INVALID".to_string()),
            "case {i}"
        );
    }
    // A file Run submitted as JSON is refused too.
    let (status, body) = daemon.submit(json!({"target": "flow:flows/copy"}));
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("JIG_RUN_FILES_INVALID"))
    );
    // The local refusals of the same shapes carry the same code, locally
    // and through the client.
    let source = outer.path().join("big");
    std::fs::create_dir(&source).unwrap();
    std::fs::write(source.join("big"), &big).unwrap();
    let linked = outer.path().join("linked");
    std::fs::create_dir(&linked).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", linked.join("l")).unwrap();
    let server = format!("unix:{}", daemon.socket.display());
    for folder in [&source, &linked] {
        let attach = format!("source={}", folder.display());
        let out = outer.path().join("never");
        let args = [
            "run",
            "flow:flows/copy",
            "--attach",
            &attach,
            "--out",
            out.to_str().unwrap(),
        ];
        let through = run_jig(
            &path,
            &[&args[..1], &["--server", &server], &args[1..]].concat(),
        );
        assert_eq!(through.status, 1, "{through:?}");
        assert!(
            through.stderr.starts_with("JIG_RUN_FILES_INVALID: "),
            "{through:?}"
        );
        assert!(!out.exists());
    }
    // Nothing was recorded for any refusal.
    assert!(daemon.runs().is_empty(), "{:?}", daemon.runs());
    drop(daemon);
    for folder in [&source, &linked] {
        let attach = format!("source={}", folder.display());
        let out = outer.path().join("never");
        let local = run_jig(
            &path,
            &[
                "run",
                "flow:flows/copy",
                "--attach",
                &attach,
                "--out",
                out.to_str().unwrap(),
            ],
        );
        assert_eq!(local.status, 1, "{local:?}");
        assert!(
            local.stderr.starts_with("JIG_RUN_FILES_INVALID: "),
            "{local:?}"
        );
    }
}

/// Fills the filesystem of the `.jig/` above its scratch as a neighbour
/// would (possible only without containment), then answers with an output
/// larger than the space set aside to settle a Run.
const FILL_PY: &str = "import os\nfrom jiggy.flow import handle\n\
async def run(context):\n    state = context.scratch\n    \
while os.path.basename(state) != '.jig':\n        state = os.path.dirname(state)\n    \
try:\n        with open(os.path.join(state, 'filler'), 'wb') as f:\n            \
while True:\n                f.write(b'\\0' * 65536)\n                f.flush()\n    \
except OSError:\n        pass\n    return {'outcome': 'done', 'output': 'x' * 300000}\n\
handle(run)\n";

/// Frees what `flows/fill` filled.
const FREE_PY: &str = "import os\nfrom jiggy.flow import handle\n\
async def run(context):\n    state = context.scratch\n    \
while os.path.basename(state) != '.jig':\n        state = os.path.dirname(state)\n    \
os.remove(os.path.join(state, 'filler'))\n    return {'outcome': 'done', 'output': 'freed'}\n\
handle(run)\n";

/// A daemon (with `flags`) of a project whose `.jig/` is an 8 MiB tmpfs
/// in a private user and mount namespace, with `flows/fill` (fills that
/// disk, then returns a 300 KB output) and `flows/free`, under
/// `[containment] mode = "none"` so that a Flow can fill it as a
/// neighbour would.
fn on_a_small_disk(flags: &str) -> (tempfile::TempDir, PathBuf, Daemon) {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("p");
    write_files(
        &root,
        &[
            ("jig.ts", JIG_TS),
            ("flows/fill/FLOW.md", &flow_md("fill", "")),
            ("flows/fill/flow.py", FILL_PY),
            ("flows/free/FLOW.md", &flow_md("free", "")),
            ("flows/free/flow.py", FREE_PY),
            (
                ".test-config-home/jig/host.toml",
                "[containment]\nmode = \"none\"\n",
            ),
        ],
    );
    review(&root);
    let state = root.join(".jig");
    let on_disk = root.join(".jig-on-disk");
    std::fs::rename(&state, &on_disk).unwrap();
    std::fs::create_dir(&state).unwrap();
    let daemon = Daemon::start_by(|socket| {
        let jig = jig(&root);
        let script = format!(
            "mount -t tmpfs -o size=8m tmpfs {state} && cp -a {on_disk}/. {state}/ && \
             exec \"$0\" -C {root} serve --socket {socket} {flags}",
            state = state.display(),
            on_disk = on_disk.display(),
            root = root.display(),
            socket = socket.display(),
        );
        let mut command = Command::new("unshare");
        command
            .args(["--user", "--map-root-user", "--mount", "sh", "-c", &script])
            .arg(jig.get_program())
            .current_dir(&root)
            .envs(jig.get_envs().filter_map(|(k, v)| Some((k, v?))));
        command
    });
    (outer, root, daemon)
}

/// A Run whose terminal cannot be written (its disk filled while it ran,
/// and its terminal larger than the space set aside for it) is answered
/// to its client from memory, not as pending; nothing counts it yet; a
/// new submission is refused 503 with the one code, naming no host path;
/// once there is room again the terminal is written, and it is the one
/// the client saw ([`on_a_small_disk`]).
#[test]
fn a_terminal_the_disk_cannot_take_is_served_from_memory_and_written_once_it_can() {
    let (_outer, root, daemon) = on_a_small_disk("");
    let state = root.join(".jig");
    let (status, filled) = daemon.submit(json!({"target": "flow:flows/fill", "input": null}));
    assert_eq!(status, 200, "{filled}");
    assert_eq!(filled["status"], "succeeded", "{filled}");
    assert_eq!(filled["output"].as_str().map(str::len), Some(300000));
    let id = filled["runId"].as_str().unwrap().to_string();
    let (status, shown) = daemon.call("GET", &format!("/v1/projects/p/runs/{id}"), None);
    assert_eq!(status, 200, "{shown}");
    assert_eq!(
        shown["terminal"]["status"], "succeeded",
        "served from memory: {}",
        shown["terminal"]["status"]
    );
    let metrics = |daemon: &Daemon| daemon.raw("GET", "/metrics", None, &[]).1;
    assert!(
        !metrics(&daemon).contains("jig_runs_total{status=\"succeeded\"}"),
        "counted before it is durable: {}",
        metrics(&daemon)
    );
    assert!(daemon
        .log()
        .contains(&format!("Run {id}: its terminal could not be written")));
    let settled = |daemon: &Daemon| {
        lifecycle(&daemon.log(), &id)
            .into_iter()
            .filter(|line| line["message"] == "settled")
            .collect::<Vec<_>>()
    };
    assert_eq!(
        settled(&daemon),
        Vec::<Value>::new(),
        "logged settled before it is durable"
    );
    // The full disk refuses the next submission; nothing is recorded.
    let (status, refused) = daemon.submit(json!({"target": "flow:flows/free", "input": null}));
    assert_eq!(status, 503, "{refused}");
    assert_eq!(refused["code"], "JIG_STORAGE_UNAVAILABLE", "{refused}");
    assert!(
        !refused.to_string().contains(&*root.to_string_lossy()),
        "{refused}"
    );
    assert_eq!(daemon.runs().len(), 1);
    // Room again (removed through the daemon's own view of its mounts):
    // the terminal is written, the one the client saw, and counted.
    let inside = PathBuf::from(format!("/proc/{}/root", daemon.pid()));
    let seen = |path: &Path| inside.join(path.strip_prefix("/").unwrap());
    std::fs::remove_file(seen(&state.join("filler"))).unwrap();
    let record = seen(&state.join(format!("runs/{id}.json")));
    let started = Instant::now();
    while !record.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{}",
            daemon.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let written: Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    assert_eq!(written["terminal"]["status"], "succeeded", "{written}");
    assert_eq!(written["terminal"]["output"], filled["output"]);
    let started = Instant::now();
    while !metrics(&daemon).contains("jig_runs_total{status=\"succeeded\"} 1")
        || settled(&daemon).is_empty()
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{}\n{}",
            metrics(&daemon),
            daemon.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let settled = settled(&daemon);
    assert_eq!(settled.len(), 1, "{settled:?}");
    assert_eq!(settled[0]["status"], "succeeded", "{settled:?}");
    drop(daemon);
}

/// A daemon stopped while a terminal is still waiting for room says so
/// on its way out, naming the Run, what it becomes and what to do.
#[test]
fn a_daemon_stopped_before_there_is_room_names_the_terminal_it_could_not_keep() {
    let (_outer, _root, mut daemon) = on_a_small_disk("--shutdown-grace 1s");
    let (status, filled) = daemon.submit(json!({"target": "flow:flows/fill", "input": null}));
    assert_eq!(status, 200, "{filled}");
    let id = filled["runId"].as_str().unwrap().to_string();
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    daemon.wait();
    let log = daemon.log();
    assert!(
        log.contains(&format!(
            "stopping with 1 terminal(s) the disk had no room for: {id}; the next start records \
             them lost"
        )),
        "{log}"
    );
    assert!(log.contains("raise [records] settle-reserve"), "{log}");
}

/// A record that cannot be read is listed apart, by its file in the
/// project, and the other Runs are served; a Run id that cannot be one is
/// not found.
#[test]
fn a_corrupt_record_is_listed_apart_and_the_rest_is_served() {
    let (_outer, root, daemon) = start(&[]);
    let (status, t) = daemon.submit(json!({"target": "flow:flows/echo", "input": 1}));
    assert_eq!(status, 200, "{t}");
    std::fs::write(root.join(".jig/runs/run-0-corrupt.json"), b"[").unwrap();
    let (status, list) = daemon.call("GET", "/v1/projects/p/runs", None);
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["runs"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(
        list["unreadable"],
        json!([{"id": "run-0-corrupt", "file": ".jig/runs/run-0-corrupt.json"}])
    );
    let (status, missing) = daemon.call("GET", "/v1/projects/p/runs/run-%00x", None);
    assert_eq!(status, 404, "{missing}");
    assert_eq!(missing["code"], "RUN_NOT_FOUND", "{missing}");
}
