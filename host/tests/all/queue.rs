//! Runs queued in PostgreSQL (docs/src/serving.md), against a real PostgreSQL started
//! by the test support: `jig serve --database` enqueues, `jig worker`s
//! claim and execute; workers are SIGKILLed and SIGSTOPped past their
//! lease, the database restarts, and bad input is refused with its code.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};

use crate::support::*;

/// Appends its `n` to the witness file as its first act, sleeps, answers.
const WITNESS_PY: &str = "import asyncio\nfrom jiggy.flow import handle\n\
async def run(context):\n    i = context.input\n    \
with open(i['witness'], 'a') as f:\n        f.write(str(i['n']) + '\\n')\n    \
await asyncio.sleep(i['sleep'])\n    return {'outcome': 'done', 'output': i['n']}\n\
handle(run)\n";

/// Sends three items on `events`, then answers.
const TICKER_PY: &str = "from jiggy.flow import handle\n\
async def run(context):\n    events = context.channels['events']\n    \
for i in range(3):\n        await events.send({'i': i})\n    \
return {'outcome': 'done', 'output': 'sent'}\n\
handle(run)\n";

/// The lease the chaos workers hold (short, so a stop outlives it).
const LEASE: &str = "2s";

/// A reviewed project `p` with `flows/witness`, run without containment
/// so the Flow can append to the witness file the test reads.
fn queued_project() -> (tempfile::TempDir, PathBuf) {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("p");
    write_files(
        &root,
        &[
            ("jig.ts", JIG_TS),
            (
                "flows/witness/FLOW.md",
                "---\nname: witness\ndescription: Appends to a witness file.\n---\n",
            ),
            ("flows/witness/flow.py", WITNESS_PY),
            (
                "flows/ticker/FLOW.md",
                "---\nname: ticker\ndescription: Sends three items.\n\
                 channels:\n  events:\n    direction: send\n---\n",
            ),
            ("flows/ticker/flow.py", TICKER_PY),
            (
                "flows/copy/FLOW.md",
                "---\nname: copy\ndescription: Copies its attachment reversed.\n\
                 attachments:\n  source: read\n  deliverables: read-write\n---\n",
            ),
            ("flows/copy/flow.py", crate::serve::COPY_PY),
            (
                ".test-config-home/jig/host.toml",
                "[containment]\nmode = \"none\"\n",
            ),
        ],
    );
    review(&root);
    (outer, root)
}

pub(crate) struct Process {
    child: Option<Child>,
    log: PathBuf,
}

impl Process {
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.as_ref().unwrap().id() as i32)
    }

    fn signal(&self, signal: Signal) {
        kill(self.pid(), signal).unwrap();
    }

    /// Wait (bounded) for the process to exit on its own.
    pub(crate) fn exited(&mut self, limit: Duration) -> std::process::ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                return status;
            }
            assert!(
                started.elapsed() < limit,
                "the process did not exit: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGCONT);
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub(crate) fn spawn(root: &Path, args: &[&str], log: PathBuf) -> Process {
    spawn_env(root, args, log, &[])
}

fn spawn_env(root: &Path, args: &[&str], log: PathBuf, env: &[(&str, &str)]) -> Process {
    let child = jig(root)
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    Process {
        child: Some(child),
        log,
    }
}

/// Workers start in a directory of their own (with only a host
/// configuration, containment off like the project's): they never read
/// the project directory, only the bytes published in the database.
pub(crate) fn worker(
    _root: &Path,
    pg: &Postgres,
    logs: &Path,
    n: usize,
    concurrency: &str,
) -> Process {
    worker_with(pg, logs, n, concurrency, &[])
}

/// [`worker`] with more arguments.
pub(crate) fn worker_with(
    pg: &Postgres,
    logs: &Path,
    n: usize,
    concurrency: &str,
    extra: &[&str],
) -> Process {
    worker_env(pg, logs, n, concurrency, extra, &[])
}

/// [`worker_with`] with more environment.
pub(crate) fn worker_env(
    pg: &Postgres,
    logs: &Path,
    n: usize,
    concurrency: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Process {
    let cache = logs.join(format!("cache-{n}"));
    let home = logs.join(format!("worker-home-{n}"));
    write_files(
        &home,
        &[(
            ".test-config-home/jig/host.toml",
            "[containment]\nmode = \"none\"\n",
        )],
    );
    let url = pg.url();
    let mut args = vec![
        "worker",
        "--database",
        &url,
        "--concurrency",
        concurrency,
        "--lease",
        LEASE,
        "--cache",
        cache.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    spawn_env(&home, &args, logs.join(format!("worker-{n}.log")), env)
}

pub(crate) struct Served {
    process: Process,
    socket: PathBuf,
}

impl Served {
    pub(crate) fn start(root: &Path, pg: &Postgres, logs: &Path) -> Served {
        Served::start_with(root, pg, logs, &[])
    }

    /// [`Served::start`] with more `jig serve` arguments.
    pub(crate) fn start_with(root: &Path, pg: &Postgres, logs: &Path, extra: &[&str]) -> Served {
        Served::start_env(root, pg, logs, extra, &[])
    }

    /// [`Served::start_with`] with more environment.
    pub(crate) fn start_env(
        root: &Path,
        pg: &Postgres,
        logs: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Served {
        let socket = logs.join("jig.sock");
        let url = pg.url();
        let mut args = vec![
            "-C",
            root.to_str().unwrap(),
            "serve",
            "--socket",
            socket.to_str().unwrap(),
            "--database",
            &url,
        ];
        args.extend_from_slice(extra);
        let process = spawn_env(root, &args, logs.join("serve.log"), env);
        let served = Served { process, socket };
        let started = Instant::now();
        while !(served.socket.exists() && served.call("GET", "/v1/health", None).0 == 200) {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "serve did not come up: {}",
                served.process.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        served
    }

    pub(crate) fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut curl = Command::new("curl");
        curl.args(["-sS", "--unix-socket"]).arg(&self.socket).args([
            "-X",
            method,
            "-w",
            "\n%{http_code}",
        ]);
        if body.is_some() {
            curl.args([
                "-H",
                "content-type: application/json",
                "--data-binary",
                "@-",
            ]);
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
            stdin.write_all(body.to_string().as_bytes()).unwrap();
        }
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
        let value = serde_json::from_str(body.trim()).unwrap_or(Value::String(body.into()));
        (status.trim().parse().unwrap_or(0), value)
    }

    /// Wait (bounded) for the daemon to exit on its own.
    pub(crate) fn exited(&mut self, limit: Duration) -> std::process::ExitStatus {
        self.process.exited(limit)
    }

    /// Follow `path` (an event stream) with curl, its body written to
    /// `out` as it arrives.
    pub(crate) fn stream(&self, path: &str, out: &Path) -> Child {
        Command::new("curl")
            .args(["-sSN", "--unix-socket"])
            .arg(&self.socket)
            .arg(format!("http://jig{path}"))
            .stdout(std::fs::File::create(out).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    /// Submit without waiting: the Run ID the daemon answered.
    pub(crate) fn submit(&self, key: &str, input: Value) -> String {
        let (status, body) = self.call(
            "POST",
            "/v1/projects/p/runs?wait=false",
            Some(json!({"target": "flow:flows/witness", "input": input, "key": key})),
        );
        assert!(status == 202, "{status} {body}");
        body["runId"].as_str().unwrap().to_string()
    }

    /// Submit without waiting a Run whose timeout is one second: the Run
    /// ID the daemon answered.
    pub(crate) fn submit_expiring(&self, input: Value) -> String {
        let (status, body) = self.call(
            "POST",
            "/v1/projects/p/runs?wait=false",
            Some(json!({"target": "flow:flows/witness", "input": input, "timeout": "1s"})),
        );
        assert_eq!(status, 202, "{body}");
        body["runId"].as_str().unwrap().to_string()
    }

    /// The Run's recorded terminal (null while it is unsettled).
    pub(crate) fn terminal(&self, id: &str) -> Value {
        let (status, body) = self.call("GET", &format!("/v1/projects/p/runs/{id}"), None);
        assert_eq!(status, 200, "{body}");
        body["terminal"].clone()
    }
}

pub(crate) fn input(witness: &Path, n: usize, sleep: u64) -> Value {
    json!({"witness": witness, "n": n, "sleep": sleep})
}

/// Wait (bounded) until `done` holds, polling the database.
pub(crate) fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The long (4 s) Runs a worker with pid `pid` holds dispatched now.
fn running_under(pg: &Postgres, pid: Pid) -> Vec<String> {
    pg.sql(&format!(
        "SELECT id FROM jig_runs WHERE status = 'running' AND owner LIKE '%-{pid}' \
         AND input LIKE '%\"sleep\":4%'"
    ))
    .lines()
    .map(str::to_string)
    .filter(|l| !l.is_empty())
    .collect()
}

fn refused_lines(log: &str) -> Vec<Value> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["event"] == "jig.worker.refused")
        .collect()
}

#[test]
fn chaos_no_run_starts_twice_and_every_run_ends_once() {
    const RUNS: usize = 200;
    const REPEATS: usize = 50;
    const SUBMITTERS: usize = 4;
    let (pg, _outer, root, logs, witness) = queue_fixture();
    // Every Run may be queued at once: the bound is not what this tests.
    let bound = RUNS.to_string();
    let served = Arc::new(Served::start_with(
        &root,
        &pg,
        logs.path(),
        &["--max-queued-runs", &bound],
    ));
    let mut workers: Vec<Process> = (0..6)
        .map(|n| worker(&root, &pg, logs.path(), n, "2"))
        .collect();
    // Every 10th Run sleeps long enough to be caught mid-Run.
    let sleep = |n: usize| if n.is_multiple_of(10) { 4 } else { 0 };
    let submitters: Vec<_> = (0..SUBMITTERS)
        .map(|s| {
            let served = served.clone();
            let witness = witness.clone();
            std::thread::spawn(move || {
                let mut ids = BTreeMap::new();
                for n in (s..RUNS).step_by(SUBMITTERS) {
                    ids.insert(
                        n,
                        served.submit(&format!("k{n}"), input(&witness, n, sleep(n))),
                    );
                }
                ids
            })
        })
        .collect();
    // Mid-test: catch a worker holding a dispatched long Run and SIGKILL
    // it; then catch another and SIGSTOP it past its lease. Whichever
    // workers claimed long Runs are caught: which worker claims what is
    // the database's choice, so waiting for one named worker could wait
    // past the last long Run.
    let holding = |workers: &[Process], except: Option<usize>| {
        workers
            .iter()
            .enumerate()
            .filter(|(n, _)| Some(*n) != except)
            .find_map(|(n, w)| {
                let held = running_under(&pg, w.pid());
                (!held.is_empty()).then_some((n, held))
            })
    };
    let mut caught = None;
    wait_until("a worker mid-Run", Duration::from_secs(120), || {
        caught = holding(&workers, None);
        caught.is_some()
    });
    let (killed, killed_held) = caught.take().expect("caught");
    workers[killed].signal(Signal::SIGKILL);
    wait_until("a second worker mid-Run", Duration::from_secs(120), || {
        caught = holding(&workers, Some(killed));
        caught.is_some()
    });
    let (stopped, stopped_held) = caught.take().expect("caught");
    workers[stopped].signal(Signal::SIGSTOP);
    let mut ids: BTreeMap<usize, String> = BTreeMap::new();
    for submitter in submitters {
        ids.extend(submitter.join().unwrap());
    }
    assert_eq!(ids.len(), RUNS);
    // Repeated keys from every submitter return the first Run.
    for r in 0..REPEATS {
        let n = (r * 7) % RUNS;
        let again = served.submit(&format!("k{n}"), input(&witness, n, sleep(n)));
        assert_eq!(again, ids[&n], "key k{n} returned another Run");
    }
    // The database restarts while Runs are in flight; then the stopped
    // worker resumes long after its lease, and a replacement joins.
    pg.restart();
    std::thread::sleep(Duration::from_secs(6));
    workers[stopped].signal(Signal::SIGCONT);
    workers.push(worker(&root, &pg, logs.path(), 6, "2"));
    wait_until("every Run settled", Duration::from_secs(600), || {
        pg.sql("SELECT count(*) FROM jig_runs WHERE status <> 'settled'") == "0"
    });
    // The resumed worker's late writes for the Runs it held were refused.
    wait_until(
        "the resumed worker's refusals",
        Duration::from_secs(60),
        || {
            let refused = refused_lines(&workers[stopped].log());
            stopped_held.iter().all(|id| {
                refused
                    .iter()
                    .any(|l| l["runId"] == id.as_str() && l["write"] == "terminal")
            })
        },
    );
    for id in stopped_held.iter().chain(&killed_held) {
        let record = served.terminal(id);
        assert_eq!(record["code"], "COORDINATOR_LOST", "{record}");
    }
    // A worker logs a refusal before it counts it in the database.
    let refused_terminals = || -> usize {
        pg.sql("SELECT count(*) FROM jig_refused_writes WHERE what = 'terminal'")
            .parse()
            .unwrap()
    };
    wait_until(
        "the refused terminal writes counted",
        Duration::from_secs(60),
        || refused_terminals() >= stopped_held.len(),
    );
    let counted = refused_terminals();
    assert!(counted >= stopped_held.len());
    // Exactly one terminal per Run, in the table and in the stream.
    assert_eq!(
        pg.sql("SELECT count(*) FROM jig_runs WHERE status = 'settled' AND terminal IS NOT NULL"),
        RUNS.to_string()
    );
    assert_eq!(
        pg.sql(
            "SELECT count(*) FROM (SELECT run_id FROM jig_events WHERE line LIKE '{\"result\":%' \
             GROUP BY run_id HAVING count(*) <> 1) AS t"
        ),
        "0"
    );
    assert_eq!(
        pg.sql("SELECT count(DISTINCT run_id) FROM jig_events WHERE line LIKE '{\"result\":%'"),
        RUNS.to_string()
    );
    // No Run's Flow code started twice; every succeeded Run's started once.
    let started: Vec<usize> = std::fs::read_to_string(&witness)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let unique: BTreeSet<usize> = started.iter().copied().collect();
    assert_eq!(
        unique.len(),
        started.len(),
        "a Flow started twice: {started:?}"
    );
    let mut lost = 0;
    for (n, id) in &ids {
        let record = served.terminal(id);
        match record["status"].as_str() {
            Some("succeeded") => {
                assert!(unique.contains(n), "Run {n} succeeded without starting");
                assert_eq!(record["output"], json!(n));
            }
            Some("lost") => lost += 1,
            other => panic!("Run {n}: {other:?} {record}"),
        }
    }
    assert!(lost >= stopped_held.len() + killed_held.len());
    eprintln!(
        "chaos: {} Runs, {lost} lost ({} held by the killed worker, {} by the stopped one), \
         {} Flow starts, {counted} refused terminal writes",
        ids.len(),
        killed_held.len(),
        stopped_held.len(),
        started.len()
    );
    drop(served);
}

/// With a database, what cannot be a key or a Run id (a NUL byte, which
/// PostgreSQL text refuses) is the request's fault, 400 or 404, never a 503;
/// and a database that cannot be reached is 503 with words of the daemon's
/// own, its server's text kept in the daemon's log under a reference.
#[test]
fn nul_bytes_are_the_requests_fault_and_the_databases_text_stays_in_the_log() {
    let pg = Postgres::start();
    let (_outer, root) = queued_project();
    let logs = tempfile::tempdir().unwrap();
    let served = Served::start(&root, &pg, logs.path());
    let witness = logs.path().join("witness");
    std::fs::write(&witness, "").unwrap();
    let body =
        json!({"target": "flow:flows/witness", "input": input(&witness, 1, 0), "key": "a\0b"});
    let (status, refused) = served.call("POST", "/v1/projects/p/runs?wait=false", Some(body));
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["code"], "INVALID_REQUEST", "{refused}");
    let (status, missing) = served.call("GET", "/v1/projects/p/runs/run-%00x", None);
    assert_eq!(status, 404, "{missing}");
    assert_eq!(missing["code"], "RUN_NOT_FOUND", "{missing}");
    assert_eq!(pg.sql("SELECT count(*) FROM jig_runs"), "0");

    pg.stop();
    let body = json!({"target": "flow:flows/witness", "input": input(&witness, 2, 0)});
    let (status, down) = served.call("POST", "/v1/projects/p/runs?wait=false", Some(body));
    pg.start_again();
    assert_eq!(status, 503, "{down}");
    assert_eq!(down["code"], "JIG_DATABASE_UNAVAILABLE", "{down}");
    let message = down["message"].as_str().unwrap();
    assert!(
        message.starts_with("the database is unavailable (ref "),
        "{down}"
    );
    assert!(
        !message.contains(&*pg.url()) && !message.contains("/tmp"),
        "{down}"
    );
    let reference = message
        .split("(ref ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap();
    let log = served.process.log();
    assert!(
        log.contains(&format!("ref {reference}: JIG_DATABASE_UNAVAILABLE: ")),
        "{log}"
    );
}

#[test]
fn bad_input_is_refused_with_its_code() {
    let pg = Postgres::start();
    let (_outer, root) = queued_project();
    let logs = tempfile::tempdir().unwrap();
    // A wrong URL: nothing listens there.
    let wrong = run_jig(
        &root,
        &[
            "worker",
            "--database",
            "postgresql:///postgres?host=/nonexistent&user=jig",
        ],
    );
    assert_ne!(wrong.status, 0, "{wrong:?}");
    assert!(
        wrong.stderr.contains("JIG_DATABASE_UNAVAILABLE"),
        "{wrong:?}"
    );
    // A password in the URL is refused before connecting.
    let password = run_jig(
        &root,
        &[
            "worker",
            "--database",
            "postgresql://jig:secret@localhost/postgres",
        ],
    );
    assert!(
        password.stderr.contains("JIG_DATABASE_URL_INVALID"),
        "{password:?}"
    );
    assert!(!password.stderr.contains("secret"), "{password:?}");
    // A blob whose bytes do not match its digest: nothing runs.
    let served = Served::start(&root, &pg, logs.path());
    let witness = logs.path().join("witness");
    std::fs::write(&witness, "").unwrap();
    let first = served.submit("a", input(&witness, 1, 0));
    pg.sql("UPDATE jig_blobs SET bytes = bytes || '\\x00'::bytea WHERE digest NOT IN (SELECT plan_digest FROM jig_generations)");
    let mut w = worker(&root, &pg, logs.path(), 0, "1");
    wait_until("the Run settled", Duration::from_secs(60), || {
        !served.terminal(&first).is_null()
    });
    let record = served.terminal(&first);
    assert_eq!(record["code"], "JIG_BLOB_DIGEST_MISMATCH", "{record}");
    assert_eq!(std::fs::read_to_string(&witness).unwrap(), "");
    // A database whose schema is newer than this jig knows.
    w.signal(Signal::SIGTERM);
    let _ = w.child.take().unwrap().wait();
    pg.sql("INSERT INTO jig_schema (version) VALUES (1000)");
    let newer = run_jig(&root, &["worker", "--database", &pg.url()]);
    assert_ne!(newer.status, 0, "{newer:?}");
    assert!(
        newer.stderr.contains("JIG_DATABASE_SCHEMA_NEWER"),
        "{newer:?}"
    );
}

#[test]
fn a_queued_run_streams_and_answers_like_a_local_one() {
    let (pg, _outer, root, logs, witness) = queue_fixture();
    let served = Served::start(&root, &pg, logs.path());
    let w = worker(&root, &pg, logs.path(), 0, "1");
    // Waiting submission: the terminal, as without --database.
    let (status, terminal) = served.call(
        "POST",
        "/v1/projects/p/runs",
        Some(json!({"target": "flow:flows/witness", "input": input(&witness, 7, 0), "key": "x"})),
    );
    assert_eq!(status, 200, "{terminal}");
    assert_eq!(terminal["status"], "succeeded", "{terminal}");
    assert_eq!(terminal["output"], 7);
    let id = terminal["runId"].as_str().unwrap();
    // Each daemon logs its part of the Run's lifecycle in the Run's span.
    let messages = |log: &str| -> Vec<String> {
        crate::serve::lifecycle(log, id)
            .iter()
            .map(|l| l["message"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let started = Instant::now();
    while messages(&w.log()).len() < 3 && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        messages(&served.process.log()),
        ["accepted"],
        "{}",
        served.process.log()
    );
    assert_eq!(
        crate::serve::lifecycle(&served.process.log(), id)[0]["queued"],
        true
    );
    assert_eq!(
        messages(&w.log()),
        ["claimed", "dispatched", "settled"],
        "{}",
        w.log()
    );
    assert_eq!(
        crate::serve::lifecycle(&w.log(), id)[2]["status"],
        "succeeded"
    );
    // The same key and content: the same Run; changed content: a conflict.
    let (_, again) = served.call(
        "POST",
        "/v1/projects/p/runs",
        Some(json!({"target": "flow:flows/witness", "input": input(&witness, 7, 0), "key": "x"})),
    );
    assert_eq!(again["runId"], id);
    let (status, conflict) = served.call(
        "POST",
        "/v1/projects/p/runs",
        Some(json!({"target": "flow:flows/witness", "input": input(&witness, 8, 0), "key": "x"})),
    );
    assert_eq!(status, 409, "{conflict}");
    assert_eq!(conflict["code"], "SUBMISSION_CONFLICT");
    // The event stream: queued, running, terminal.
    let (status, _) = served.call("GET", &format!("/v1/projects/p/runs/{id}"), None);
    assert_eq!(status, 200);
    let out = Command::new("curl")
        .args(["-sS", "--unix-socket"])
        .arg(&served.socket)
        .arg(format!("http://jig/v1/projects/p/runs/{id}/events"))
        .output()
        .unwrap();
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<String> = lines
        .iter()
        .map(|l| {
            l["status"]
                .as_str()
                .unwrap_or(l["type"].as_str().unwrap())
                .to_string()
        })
        .collect();
    assert_eq!(kinds, ["queued", "running", "terminal"], "{lines:?}");
    // Received channel items travel through the database to the stream.
    let (status, ticked) = served.call(
        "POST",
        "/v1/projects/p/runs",
        Some(json!({"target": "flow:flows/ticker", "receive": ["events"]})),
    );
    assert_eq!(status, 200, "{ticked}");
    assert_eq!(ticked["status"], "succeeded", "{ticked}");
    let out = Command::new("curl")
        .args(["-sS", "--unix-socket"])
        .arg(&served.socket)
        .arg(format!(
            "http://jig/v1/projects/p/runs/{}/events",
            ticked["runId"].as_str().unwrap()
        ))
        .output()
        .unwrap();
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        ["status", "status", "begin", "data", "data", "data", "end", "terminal"],
        "{lines:?}"
    );
    // Cancellation through the database, honoured by the owning worker.
    let long = served.submit("long", input(&witness, 9, 60));
    wait_until("the long Run dispatched", Duration::from_secs(60), || {
        run_status(&pg, &long) == "running"
    });
    let (status, _) = served.call("POST", &format!("/v1/projects/p/runs/{long}/cancel"), None);
    assert_eq!(status, 202);
    wait_until("the cancelled Run settled", Duration::from_secs(30), || {
        !served.terminal(&long).is_null()
    });
    let record = served.terminal(&long);
    assert_eq!(record["status"], "failed", "{record}");
    assert_ne!(record["code"], "COORDINATOR_LOST", "{record}");
}

/// PostgreSQL over TLS: a server with a self-signed certificate that takes
/// only TLS on TCP. With `sslmode=require` and the certificate as the CA
/// file, the queue connects (and a worker starts with
/// `--database-ca-file`); without it the certificate is refused, even
/// under `require` (jig verifies the chain and name, as libpq's
/// `verify-full`); a name the certificate does not hold is refused too.
#[test]
fn a_database_over_tls_is_verified_against_its_ca_file() {
    use jig_server::queue::{connect_config, Queue};
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let cert = certified.cert.pem();
    let key = certified.key_pair.serialize_pem();
    let (pg, port) = Postgres::start_tls(&cert, &key);
    let logs = tempfile::tempdir().unwrap();
    let ca = logs.path().join("ca.pem");
    std::fs::write(&ca, &cert).unwrap();
    let url = Postgres::tcp_url("localhost", port, "require");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let verified = connect_config(&url, None, Some(&ca)).unwrap();
        Queue::open(verified).await.expect("TLS with the CA file");
        let unknown = connect_config(&url, None, None).unwrap();
        let refused = Queue::open(unknown).await.err().expect("an unknown issuer");
        assert_eq!(refused.code(), "JIG_DATABASE_UNAVAILABLE", "{refused}");
        assert!(refused.to_string().contains("certificate"), "{refused}");
        let other_name = Postgres::tcp_url("127.0.0.1", port, "require");
        let refused = Queue::open(connect_config(&other_name, None, Some(&ca)).unwrap())
            .await
            .err()
            .expect("a name the certificate does not hold");
        assert!(refused.to_string().contains("certificate"), "{refused}");
        // The server takes no plain connection on TCP.
        let plain = Postgres::tcp_url("localhost", port, "disable");
        assert!(
            Queue::open(connect_config(&plain, None, Some(&ca)).unwrap())
                .await
                .is_err()
        );
    });
    let (root_dir, root) = queued_project();
    let mut worker = spawn(
        &root,
        &[
            "worker",
            "--database",
            &url,
            "--database-ca-file",
            ca.to_str().unwrap(),
        ],
        logs.path().join("worker.log"),
    );
    wait_until(
        "the worker started over TLS",
        Duration::from_secs(60),
        || worker.log().contains("jig.worker.started"),
    );
    worker.signal(Signal::SIGTERM);
    assert!(
        worker.exited(Duration::from_secs(30)).success(),
        "{}",
        worker.log()
    );
    drop((root_dir, pg));
}

/// The claim rules through the library against the real database: a lease
/// expired before dispatch requeues (the old claim's dispatch is refused),
/// one a sweep finds expired after dispatch ends `COORDINATOR_LOST` and is
/// never claimed again, the terminal is written once, late writes are
/// refused; a lapsed lease no sweep took yet is still its owner's.
#[test]
fn claims_are_fenced_by_epoch_and_lease() {
    use jig_server::queue::{connect_config, Queue, Write};
    let pg = Postgres::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let config = connect_config(&pg.url(), None, None).unwrap();
        let queue = Queue::open(config.clone()).await.unwrap();
        // Migrations are idempotent: a second start finds the schema current.
        Queue::open(config).await.unwrap();
        let submit = |n: i64| {
            let queue = queue.clone();
            async move {
                let content = json!({"n": n});
                queue
                    .submit(
                        "p",
                        None,
                        1,
                        "flow:flows/x",
                        &json!(n),
                        &content,
                        60_000,
                        &[],
                        None,
                    )
                    .await
                    .unwrap()
                    .0
                    .id
            }
        };
        let short = Duration::from_millis(300);
        let a = submit(1).await;
        let first = queue.claim("w1", short).await.unwrap().unwrap();
        assert_eq!((first.id.as_str(), first.epoch), (a.as_str(), 1));
        // Nothing else is queued while it is claimed.
        assert!(queue.claim("w2", short).await.unwrap().is_none());
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(queue.sweep().await.unwrap(), (0, 1, 0));
        assert_eq!(queue.dispatch(&first).await.unwrap(), Write::Refused);
        let second = queue
            .claim("w2", Duration::from_secs(30))
            .await
            .unwrap()
            .unwrap();
        assert_eq!((second.id.as_str(), second.epoch), (a.as_str(), 2));
        assert_eq!(queue.dispatch(&second).await.unwrap(), Write::Accepted);
        assert_eq!(queue.heartbeat(&first, short).await.unwrap(), None);
        assert_eq!(queue.heartbeat(&second, short).await.unwrap(), Some(false));
        let done = json!({"status": "succeeded", "output": 1});
        assert_eq!(
            queue.settle(&first, &done, None).await.unwrap(),
            Write::Refused
        );
        assert_eq!(
            queue.settle(&second, &done, None).await.unwrap(),
            Write::Accepted
        );
        assert_eq!(
            queue.settle(&second, &done, None).await.unwrap(),
            Write::Refused
        );
        // Expired after dispatch: lost, never claimed again.
        let b = submit(2).await;
        let held = queue.claim("w3", short).await.unwrap().unwrap();
        assert_eq!(held.id, b);
        assert_eq!(queue.dispatch(&held).await.unwrap(), Write::Accepted);
        // A checkpoint is kept while the claim holds the Run, even past its
        // lease until a sweep takes it; refused after.
        let aggregate = json!({"sequence": 1});
        let save = |claim| {
            let (queue, aggregate) = (queue.clone(), aggregate.clone());
            async move { queue.save_checkpoint(&claim, 1, &aggregate).await.unwrap() }
        };
        assert_eq!(save(held.clone()).await, Write::Accepted);
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(save(held.clone()).await, Write::Accepted);
        assert_eq!(queue.sweep().await.unwrap(), (0, 0, 1));
        assert_eq!(save(held.clone()).await, Write::Refused);
        assert_eq!(queue.heartbeat(&held, short).await.unwrap(), None);
        assert_eq!(
            queue.settle(&held, &done, None).await.unwrap(),
            Write::Refused
        );
        assert_eq!(
            queue.event(&held, &json!({"type": "data"})).await.unwrap(),
            Write::Refused
        );
        assert!(queue.claim("w4", short).await.unwrap().is_none());
        let lost = queue.load("p", &b).await.unwrap();
        assert_eq!(lost.value["terminal"]["code"], "COORDINATOR_LOST");
        // A queued Run cancelled through the database never reaches a worker.
        let c = submit(3).await;
        assert!(queue.request_cancel("p", &c).await.unwrap());
        assert!(queue.claim("w5", short).await.unwrap().is_none());
        let cancelled = queue.load("p", &c).await.unwrap();
        assert_eq!(cancelled.value["terminal"]["code"], "CANCELLED");
        // A lease that lapsed while no sweep ran (the worker's heartbeats
        // could not reach the database) is renewed by its owner, which
        // then settles the Run; a sweep after the renewal leaves it alone.
        let d = submit(4).await;
        let lapsed = queue.claim("w6", short).await.unwrap().unwrap();
        assert_eq!(lapsed.id, d);
        assert_eq!(queue.dispatch(&lapsed).await.unwrap(), Write::Accepted);
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(
            queue
                .heartbeat(&lapsed, Duration::from_secs(30))
                .await
                .unwrap(),
            Some(false)
        );
        assert_eq!(queue.sweep().await.unwrap(), (0, 0, 0));
        assert_eq!(
            queue.settle(&lapsed, &done, None).await.unwrap(),
            Write::Accepted
        );
        let settled = queue.load("p", &d).await.unwrap();
        assert_eq!(settled.value["terminal"]["status"], "succeeded");
    });
}

/// Queued Runs whose deadline passed are settled `DEADLINE_EXCEEDED` by a
/// sweep, without any claim: at most [`jig_server::queue::SWEEP_BATCH`] per
/// sweep, the one past it by the next; a Run with time left stays queued.
#[test]
fn a_sweep_settles_expired_queued_runs_in_bounded_batches() {
    use jig_server::queue::{connect_config, Queue, SWEEP_BATCH};
    let pg = Postgres::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let queue = Queue::open(connect_config(&pg.url(), None, None).unwrap())
            .await
            .unwrap();
        let submit = |n: i64, timeout_ms: i64| {
            let queue = queue.clone();
            async move {
                let (content, input) = (json!({"n": n}), json!(n));
                let target = "flow:flows/x";
                let run = queue.submit(
                    "p",
                    None,
                    1,
                    target,
                    &input,
                    &content,
                    timeout_ms,
                    &[],
                    None,
                );
                run.await.unwrap().0.id
            }
        };
        let timely = submit(0, 60_000).await;
        let mut expired = Vec::new();
        for n in 1..=SWEEP_BATCH + 1 {
            expired.push(submit(n, 0).await);
        }
        assert_eq!(queue.sweep().await.unwrap(), (SWEEP_BATCH as u64, 0, 0));
        assert_eq!(queue.sweep().await.unwrap(), (1, 0, 0));
        assert_eq!(queue.sweep().await.unwrap(), (0, 0, 0));
        for id in &expired {
            let run = queue.load("p", id).await.unwrap();
            assert_eq!(
                run.value["terminal"]["code"], "DEADLINE_EXCEEDED",
                "{}",
                run.value
            );
        }
        assert!(queue.load("p", &timely).await.unwrap().value["terminal"].is_null());
        let claim = queue
            .claim("w", Duration::from_secs(30))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(claim.id, timely);
    });
    assert_eq!(
        pg.sql("SELECT count(*) FROM jig_runs WHERE dispatched_at IS NOT NULL"),
        "0"
    );
}

/// `jig serve --database` sweeps too: a queued Run past its deadline is
/// settled with no worker running, and its stream ends with the terminal.
#[test]
fn serve_settles_a_queued_run_past_its_deadline_without_a_worker() {
    let (pg, _outer, root, logs, witness) = queue_fixture();
    let served = Served::start(&root, &pg, logs.path());
    let id = served.submit_expiring(input(&witness, 1, 0));
    wait_until("the sweep settled it", Duration::from_secs(30), || {
        !served.terminal(&id).is_null()
    });
    let terminal = served.terminal(&id);
    assert_eq!(terminal["code"], "DEADLINE_EXCEEDED", "{terminal}");
    assert_eq!(run_status(&pg, &id), "settled");
    let (status, events) = served.call("GET", &format!("/v1/projects/p/runs/{id}/events"), None);
    assert_eq!(status, 200);
    assert!(events.to_string().contains("DEADLINE_EXCEEDED"), "{events}");
    assert_eq!(std::fs::read_to_string(&witness).unwrap(), "");
}

/// With a database and no worker, a person's `jig run` says so while it
/// waits (the live line: no worker has claimed the Run yet), and at its
/// deadline says that no worker claimed it and to start one, not to give
/// it more time; the record shows where it waits, and /metrics how long
/// the oldest queued Run has waited.
#[test]
fn a_run_no_worker_claims_says_so_while_it_waits_and_at_its_deadline() {
    let (pg, _outer, root, logs, witness) = queue_fixture();
    let served = Served::start(&root, &pg, logs.path());
    let server = format!("unix:{}", served.socket.display());
    let input = input(&witness, 1, 0).to_string();
    let command = format!(
        "{} run --server {server} flow:flows/witness --timeout 5s --input '{input}'",
        env!("CARGO_BIN_EXE_jig")
    );
    let client = Command::new("script")
        .current_dir(&root)
        .stdin(Stdio::null())
        .args(["-qec", &command, "/dev/null"])
        .envs(jig(&root).get_envs().filter_map(|(k, v)| Some((k, v?))))
        .env("TERM", "xterm")
        .env_remove("NO_COLOR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the Run is queued", Duration::from_secs(60), || {
        pg.sql("SELECT count(*) FROM jig_runs") == "1"
    });
    let id = pg.sql("SELECT id FROM jig_runs");
    let (status, record) = served.call("GET", &format!("/v1/projects/p/runs/{id}"), None);
    assert_eq!(status, 200, "{record}");
    assert_eq!(record["queue"], json!({"status": "queued", "claims": 0}));
    std::thread::sleep(Duration::from_secs(1));
    let waited: f64 = metric(&served, "jig_oldest_queued_seconds")
        .parse()
        .unwrap();
    assert!(waited >= 1.0, "{waited}");
    let finished = client.wait_with_output().unwrap();
    let shown = String::from_utf8_lossy(&finished.stdout).to_string();
    assert_eq!(finished.status.code(), Some(1), "{shown}");
    assert!(
        shown.contains("flow:flows/witness · 3.")
            && shown.contains("waiting on a worker: none has claimed it yet"),
        "{shown}"
    );
    assert!(
        shown.contains("no worker claimed the Run before its deadline passed"),
        "{shown}"
    );
    assert!(
        shown.contains("start a jig worker on the daemon's database"),
        "{shown}"
    );
    assert!(!shown.contains("more time with --timeout"), "{shown}");
    let terminal = served.terminal(&id);
    assert_eq!(
        terminal["details"],
        json!({"queue": "unclaimed"}),
        "{terminal}"
    );
    assert_eq!(metric(&served, "jig_oldest_queued_seconds"), "0.0");
    assert_eq!(std::fs::read_to_string(&witness).unwrap(), "");
}

/// The value of metric `name` in serve's /metrics text.
fn metric(served: &Served, name: &str) -> String {
    let out = Command::new("curl")
        .args(["-sS", "--unix-socket"])
        .arg(&served.socket)
        .arg("http://jig/metrics")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
        .to_string()
}

/// The daemon's bounds count the project's Runs in the database: past
/// `--max-queued-runs` a submission is 429 `RESOURCE_EXHAUSTED` and nothing
/// is recorded; a repeated key still returns its Run; /metrics shows the
/// database's queued and active Runs.
#[test]
fn a_database_queue_past_its_bound_refuses_before_recording() {
    let (pg, _outer, root, logs, witness) = queue_fixture();
    let served = Served::start_with(&root, &pg, logs.path(), &["--max-queued-runs", "1"]);
    let first = served.submit("a", input(&witness, 1, 0));
    assert_eq!(metric(&served, "jig_queued_runs"), "1");
    assert_eq!(metric(&served, "jig_active_runs"), "0");
    let (status, body) = served.call(
        "POST",
        "/v1/projects/p/runs?wait=false",
        Some(json!({"target": "flow:flows/witness", "input": input(&witness, 2, 0), "key": "b"})),
    );
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["code"], "RESOURCE_EXHAUSTED", "{body}");
    assert_eq!(pg.sql("SELECT count(*) FROM jig_runs"), "1");
    assert_eq!(pg.sql("SELECT count(*) FROM jig_keys WHERE key = 'b'"), "0");
    // The first key repeated: the same Run, not a new one.
    assert_eq!(served.submit("a", input(&witness, 1, 0)), first);
    // A worker drains the queue; the bound has room again.
    let _w = worker(&root, &pg, logs.path(), 0, "1");
    wait_until("the first Run settled", Duration::from_secs(60), || {
        !served.terminal(&first).is_null()
    });
    assert_eq!(metric(&served, "jig_queued_runs"), "0");
    let second = served.submit("b", input(&witness, 2, 0));
    assert_ne!(second, first);
}

/// A burst of submissions past the pool's 16 connections is answered with
/// its Runs: a submission never holds one connection while it
/// waits for another, so none waits out the pool and is refused 503 after
/// it was recorded; one key shared by half the burst makes one Run.
#[test]
fn a_burst_past_the_pool_is_answered_with_its_runs() {
    const DISTINCT: usize = 100;
    const SHARED: usize = 100;
    let (pg, _outer, root, logs, witness) = queue_fixture();
    let served = Arc::new(Served::start_with(
        &root,
        &pg,
        logs.path(),
        &["--max-queued-runs", "1000"],
    ));
    let burst: Vec<_> = (0..DISTINCT + SHARED)
        .map(|n| {
            let (served, witness) = (served.clone(), witness.clone());
            std::thread::spawn(move || {
                let (key, value) = match n < DISTINCT {
                    true => (format!("k{n}"), input(&witness, n, 0)),
                    false => ("shared".to_string(), input(&witness, 0, 0)),
                };
                served.call(
                    "POST",
                    "/v1/projects/p/runs?wait=false",
                    Some(json!({"target": "flow:flows/witness", "input": value, "key": key})),
                )
            })
        })
        .collect();
    let answers: Vec<(u16, Value)> = burst.into_iter().map(|t| t.join().unwrap()).collect();
    for (status, body) in &answers {
        assert!(matches!(status, 200 | 202), "{status} {body}");
    }
    let shared: BTreeSet<&str> = answers[DISTINCT..]
        .iter()
        .map(|(_, body)| body["runId"].as_str().unwrap())
        .collect();
    assert_eq!(shared.len(), 1, "{shared:?}");
    let distinct: BTreeSet<&str> = answers[..DISTINCT]
        .iter()
        .map(|(_, body)| body["runId"].as_str().unwrap())
        .collect();
    assert_eq!(distinct.len(), DISTINCT);
    assert_eq!(
        pg.sql("SELECT count(*) FROM jig_runs"),
        (DISTINCT + 1).to_string()
    );
}

/// A Run's timeout counts from submission: a worker that claims it past
/// its deadline settles it `DEADLINE_EXCEEDED` without dispatching it.
#[test]
fn a_run_claimed_past_its_deadline_never_starts() {
    let (pg, _outer, root, logs, witness) = queue_fixture();
    let served = Served::start(&root, &pg, logs.path());
    let late = served.submit_expiring(input(&witness, 1, 0));
    wait_until("the deadline passed", Duration::from_secs(30), || {
        pg.sql(&format!(
            "SELECT deadline < now() FROM jig_runs WHERE id = '{late}'"
        )) == "t"
    });
    let _w = worker(&root, &pg, logs.path(), 0, "1");
    // One with time left, submitted after: the worker does run Flows.
    let timely = served.submit("timely", input(&witness, 2, 0));
    wait_until("both Runs settled", Duration::from_secs(60), || {
        !served.terminal(&late).is_null() && !served.terminal(&timely).is_null()
    });
    let terminal = served.terminal(&late);
    assert_eq!(terminal["status"], "failed", "{terminal}");
    assert_eq!(terminal["code"], "DEADLINE_EXCEEDED", "{terminal}");
    assert_eq!(
        pg.sql(&format!(
            "SELECT dispatched_at IS NULL FROM jig_runs WHERE id = '{late}'"
        )),
        "t"
    );
    assert_eq!(
        pg.sql(&format!(
            "SELECT count(*) FROM jig_events WHERE run_id = '{late}' AND line LIKE '%\"running\"%'"
        )),
        "0"
    );
    assert_eq!(served.terminal(&timely)["status"], "succeeded");
    assert_eq!(std::fs::read_to_string(&witness).unwrap(), "2\n");
}

/// SIGTERM: the worker stops claiming, its dispatched Run is cancelled at
/// the end of the grace and settled once by it, it exits 0, and a queued
/// Run stays queued for another worker.
#[test]
fn a_stopped_worker_settles_its_run_and_leaves_the_queue() {
    let (pg, _outer, root, logs, witness) = queue_fixture();
    let served = Served::start(&root, &pg, logs.path());
    let mut first = worker_with(&pg, logs.path(), 0, "1", &["--shutdown-grace", "1s"]);
    let long = served.submit("long", input(&witness, 1, 60));
    wait_until("the long Run dispatched", Duration::from_secs(60), || {
        run_status(&pg, &long) == "running"
    });
    let next = served.submit("next", input(&witness, 2, 0));
    first.signal(Signal::SIGTERM);
    let status = first.exited(Duration::from_secs(60));
    assert!(status.success(), "{status:?}: {}", first.log());
    let terminal = served.terminal(&long);
    assert_eq!(terminal["status"], "failed", "{terminal}");
    assert_eq!(terminal["code"], "CANCELLED", "{terminal}");
    assert_eq!(
        pg.sql(&format!(
            "SELECT count(*) FROM jig_events WHERE run_id = '{long}' AND line LIKE '{{\"result\"%'"
        )),
        "1"
    );
    assert!(refused_lines(&first.log()).is_empty(), "{}", first.log());
    assert_eq!(run_status(&pg, &next), "queued");
    // Another worker takes it.
    let _second = worker(&root, &pg, logs.path(), 1, "1");
    wait_until("the queued Run settled", Duration::from_secs(60), || {
        !served.terminal(&next).is_null()
    });
    assert_eq!(served.terminal(&next)["status"], "succeeded");
    assert_eq!(std::fs::read_to_string(&witness).unwrap(), "1\n2\n");
}

/// SIGTERM within the grace: the dispatched Run finishes as it would have,
/// and the worker exits 0 after writing its terminal.
#[test]
fn a_stopped_worker_lets_its_run_finish_within_the_grace() {
    let (pg, _outer, root, logs, witness) = queue_fixture();
    let served = Served::start(&root, &pg, logs.path());
    let mut first = worker_with(&pg, logs.path(), 0, "1", &["--shutdown-grace", "2m"]);
    let run = served.submit("short", input(&witness, 1, 3));
    wait_until("the Run dispatched", Duration::from_secs(60), || {
        run_status(&pg, &run) == "running"
    });
    first.signal(Signal::SIGTERM);
    let status = first.exited(Duration::from_secs(60));
    assert!(status.success(), "{status:?}: {}", first.log());
    let terminal = served.terminal(&run);
    assert_eq!(terminal["status"], "succeeded", "{terminal}");
    assert_eq!(terminal["output"], 1, "{terminal}");
}

/// A running PostgreSQL, the admitted queued project (its temporary
/// parent, then its root), and the logs directory with its witness file.
/// Bound in this order, the database is dropped last.
pub(crate) fn queue_fixture() -> (
    Postgres,
    tempfile::TempDir,
    PathBuf,
    tempfile::TempDir,
    PathBuf,
) {
    let pg = Postgres::start();
    let (outer, root) = queued_project();
    let (logs, witness) = logs_and_witness();
    (pg, outer, root, logs, witness)
}

/// A directory for the daemon's and workers' logs, and the empty witness
/// file in it that each Flow appends to.
fn logs_and_witness() -> (tempfile::TempDir, PathBuf) {
    let logs = tempfile::tempdir().unwrap();
    let witness = logs.path().join("witness");
    std::fs::write(&witness, "").unwrap();
    (logs, witness)
}

/// A Run's status column.
pub(crate) fn run_status(pg: &Postgres, id: &str) -> String {
    pg.sql(&format!("SELECT status FROM jig_runs WHERE id = '{id}'"))
}

/// `jig run --server` of `flows/copy` with `source` attached, its packet
/// delivered to `out`.
fn copy_through(root: &Path, socket: &Path, source: &Path, out: &Path) -> Run {
    let server = format!("unix:{}", socket.display());
    let attach = format!("source={}", source.display());
    run_jig(
        root,
        &[
            "run",
            "--server",
            &server,
            "flow:flows/copy",
            "--attach",
            &attach,
            "--out",
            out.to_str().unwrap(),
        ],
    )
}

/// A file Run through `jig serve --database` and a worker: the
/// attachments travel as blobs by digest, the worker publishes the packet
/// as a blob with its terminal, and serve delivers exactly those bytes.
/// An attachment blob whose bytes do not match its digest is refused
/// before dispatch.
#[test]
fn a_file_run_through_the_database_delivers_its_packet_through_serve() {
    let (pg, _outer, root, logs, _witness) = queue_fixture();
    let served = Served::start(&root, &pg, logs.path());
    // Tampered: submitted while no worker runs, its attachment's blob
    // then corrupted in the database.
    let tampered = logs.path().join("tampered");
    write_files(&tampered, &[("t.txt", "tampered bytes")]);
    let refused = std::thread::spawn({
        let (root, socket, out) = (
            root.clone(),
            served.socket.clone(),
            logs.path().join("out-t"),
        );
        let tampered = tampered.clone();
        move || copy_through(&root, &socket, &tampered, &out)
    });
    wait_until("the file Run is queued", Duration::from_secs(60), || {
        pg.sql("SELECT count(*) FROM jig_runs WHERE files IS NOT NULL") == "1"
    });
    let tampered_id = pg.sql("SELECT id FROM jig_runs WHERE files IS NOT NULL");
    assert_eq!(
        pg.sql("WITH u AS (UPDATE jig_blobs SET bytes = bytes || '\\x00'::bytea \
                WHERE digest = 'sha256:' || encode(sha256('tampered bytes'::bytea), 'hex') RETURNING 1) \
                SELECT count(*) FROM u"),
        "1"
    );
    let _w = worker(&root, &pg, logs.path(), 0, "1");
    let refused = refused.join().unwrap();
    assert_ne!(refused.status, 0, "{refused:?}");
    let terminal = served.terminal(&tampered_id);
    assert_eq!(terminal["code"], "JIG_BLOB_DIGEST_MISMATCH", "{terminal}");
    assert_eq!(
        pg.sql(&format!(
            "SELECT dispatched_at IS NULL FROM jig_runs WHERE id = '{tampered_id}'"
        )),
        "t"
    );
    // A good one: the Flow's files come back through serve.
    let source = logs.path().join("source");
    write_files(&source, &[("notes/a.txt", "one\ntwo\n"), ("b.txt", "bee")]);
    std::fs::write(source.join("blob.bin"), [0u8, 159, 146, 150]).unwrap();
    let out = logs.path().join("out");
    let run = copy_through(&root, &served.socket, &source, &out);
    assert_eq!(run.status, 0, "{run:?} {}", served.process.log());
    let terminal = run.json();
    assert_eq!(
        terminal["output"],
        json!(["b.txt", "blob.bin", "notes/a.txt"]),
        "{terminal}"
    );
    assert_eq!(terminal["delivery"]["source"], "final", "{terminal}");
    let delivered = tree(&out.join("files"));
    assert_eq!(delivered["b.txt"], b"eeb");
    assert_eq!(delivered["blob.bin"], [150u8, 146, 159, 0]);
    assert_eq!(delivered["notes/a.txt"], b"\nowt\neno");
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("result.json")).unwrap()).unwrap();
    assert_eq!(record["runId"], terminal["runId"]);
    assert_eq!(record["delivery"]["source"], "final");
    // The packet serve delivers is byte for byte the blob the worker
    // published with the terminal.
    let id = terminal["runId"].as_str().unwrap();
    let fetched = Command::new("curl")
        .args(["-sS", "--unix-socket"])
        .arg(&served.socket)
        .arg(format!("http://jig/v1/projects/p/runs/{id}/packet"))
        .output()
        .unwrap();
    let published = pg.sql(&format!(
        "SELECT encode(bytes, 'hex') FROM jig_blobs WHERE digest = (SELECT packet FROM jig_runs WHERE id = '{id}')"
    ));
    let hex = flow::digest::hex(&fetched.stdout);
    assert!(!published.is_empty());
    assert_eq!(hex, published);
    // The Run without a packet (refused before dispatch) has none.
    let (status, body) = served.call(
        "GET",
        &format!("/v1/projects/p/runs/{tampered_id}/packet"),
        None,
    );
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("PACKET_NOT_FOUND")),
        "{body}"
    );
}

/// A checkpointing file Run through the database: worker A keeps each
/// accepted save in the database under its claim and is SIGKILLed after
/// the first; worker B's sweep fences the Run `COORDINATOR_LOST` (never
/// replayed) and delivers A's checkpoint, which the submitting client
/// downloads through serve.
#[test]
fn a_lost_checkpoint_run_is_delivered_by_another_worker_from_the_database() {
    let pg = Postgres::start();
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("p");
    copy_dir(&workspace().join("examples/checkpoint"), &root);
    write_files(
        &root,
        &[(
            ".test-config-home/jig/host.toml",
            "[containment]\nmode = \"none\"\n",
        )],
    );
    review(&root);
    let (logs, _witness) = logs_and_witness();
    let served = Served::start(&root, &pg, logs.path());
    // Without --out a checkpointing target is refused, as locally.
    let (status, body) = served.call(
        "POST",
        "/v1/projects/p/runs",
        Some(json!({"target": "flow:flows/chapters", "input": {"chapters": ["intro"]}})),
    );
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("JIG_RUN_FILES_INVALID")),
        "{body}"
    );
    let mut a = worker(&root, &pg, logs.path(), 0, "1");
    let out = logs.path().join("recovered");
    let server = format!("unix:{}", served.socket.display());
    let input = json!({"chapters": ["intro", "method"], "waitAfter": 1}).to_string();
    let client = jig(&root)
        .args([
            "run",
            "--server",
            &server,
            "flow:flows/chapters",
            "--input",
            &input,
        ])
        .args(["--out", out.to_str().unwrap(), "--timeout", "5m"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(
        "the first save is in the database",
        Duration::from_secs(60),
        || pg.sql("SELECT count(*) FROM jig_checkpoints WHERE sequence = 1") == "1",
    );
    let id = pg.sql("SELECT run_id FROM jig_checkpoints");
    a.signal(Signal::SIGKILL);
    let _ = a.exited(Duration::from_secs(10));
    let _b = worker(&root, &pg, logs.path(), 1, "1");
    let finished = client.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&finished.stdout).to_string();
    let stderr = String::from_utf8_lossy(&finished.stderr).to_string();
    let terminal: Value = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    assert_eq!(terminal["code"], "COORDINATOR_LOST", "{stdout} {stderr}");
    assert_eq!(terminal["runId"], id.as_str());
    assert_eq!(terminal["delivery"]["source"], "checkpoint", "{terminal}");
    assert_eq!(terminal["checkpoint"]["sequence"], 1, "{terminal}");
    // The packet holds the first chapter exactly as saved, nothing else
    // (no draft, no second chapter).
    let delivered = tree(&out.join("files"));
    assert_eq!(
        delivered.keys().collect::<Vec<_>>(),
        ["chapters/01-intro.md"],
        "{delivered:?}"
    );
    assert_eq!(
        delivered["chapters/01-intro.md"],
        b"# 1. intro\n\nThis chapter is finished.\n"
    );
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("result.json")).unwrap()).unwrap();
    assert_eq!(record["execution"]["status"], "lost", "{record}");
    assert_eq!(record["delivery"]["source"], "checkpoint");
    assert_eq!(record["checkpoint"], terminal["checkpoint"]);
    // Dispatched once, by A; the aggregate is not kept past its Run.
    assert_eq!(pg.sql("SELECT count(*) FROM jig_checkpoints"), "0");
    assert_eq!(
        pg.sql(&format!("SELECT epoch FROM jig_runs WHERE id = '{id}'")),
        "1"
    );
}

/// A provider pinned by the generation travels as a blob: serve publishes
/// the reviewed component by its file digest, and a worker with no
/// provider configured fetches it, checks it, and the Run calls it.
#[test]
fn a_worker_without_the_provider_configured_runs_a_run_that_uses_it() {
    let pg = Postgres::start();
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("p");
    let contract = std::fs::read_to_string(
        workspace().join("providers/examples/contracts/kv.capability.json"),
    )
    .unwrap();
    let component = kv_provider_component();
    let config = format!(
        "[containment]\nmode = \"none\"\n[[providers]]\nname = \"kv\"\nkind = \"wasm\"\npath = \"{}\"\n\
         settings = {{ entries = {{ Ada = \"Lovelace\" }} }}\n",
        component.display()
    );
    write_files(
        &root,
        &[
            ("jig.ts", JIG_TS),
            ("flows/lookup/FLOW.md", crate::providers::FLOW_MD),
            ("flows/lookup/flow.py", crate::providers::FLOW_PY),
            ("flows/lookup/contracts/kv.capability.json", &contract),
            (".test-config-home/jig/host.toml", &config),
        ],
    );
    review(&root);
    let (logs, _witness) = logs_and_witness();
    let served = Served::start(&root, &pg, logs.path());
    // The worker's own configuration names no provider.
    let w = worker(&root, &pg, logs.path(), 0, "1");
    let (status, terminal) = served.call(
        "POST",
        "/v1/projects/p/runs",
        Some(json!({"target": "flow:flows/lookup", "input": "Ada"})),
    );
    assert_eq!(status, 200, "{terminal} {}", w.log());
    assert_eq!(terminal["status"], "succeeded", "{terminal} {}", w.log());
    assert_eq!(
        terminal["output"],
        json!({"value": "Lovelace"}),
        "{terminal}"
    );
    let digest = format!("sha256:{}", sha256_file(&component));
    assert_eq!(
        pg.sql(&format!(
            "SELECT count(*) FROM jig_blobs WHERE digest = '{digest}'"
        )),
        "1"
    );
    // The worker cached the component by its digest.
    let cached = logs
        .path()
        .join("cache-0/providers")
        .join(&digest["sha256:".len()..]);
    assert_eq!(sha256_file(&cached), digest["sha256:".len()..]);
    let config_home = logs
        .path()
        .join("worker-home-0/.test-config-home/jig/host.toml");
    assert!(!std::fs::read_to_string(config_home)
        .unwrap()
        .contains("providers"));
}

fn sha256_file(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}
