//! The host's added cost of one Agent call against a direct HTTP request
//! to the same local server, both measured in one run. The Agent call is
//! what the builtin adds per call: the worker (`jig` re-executed with the
//! hidden worker argument) started in its own contained envelope
//! (`Limits::AGENT`, network), handed one request on stdin, sending it,
//! printing its verdict, then fenced and cleaned up. The same worker
//! without an envelope (process group) separates the envelope's share from
//! the worker's. The Flow side (`capability/call` over Run/1) is not part
//! of the difference.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::OnceLock;

use jig_provider_builtin::agent::values::{Api, KeySource};
use jig_provider_builtin::agent::wire::Ask;
use jig_provider_builtin::agent::worker::{Request, WORKER_ARG};
use jig_sandbox::{Launch, Limits, ProcessGroup, Sandbox};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn main() {
    divan::main();
}

const ANSWER: &str = r#"{"status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"ok"}]}]}"#;

struct Fixture {
    runtime: tokio::runtime::Runtime,
    contained: Box<dyn Sandbox>,
    dir: tempfile::TempDir,
    port: u16,
}

fn fixture() -> &'static Fixture {
    static CELL: OnceLock<Fixture> = OnceLock::new();
    CELL.get_or_init(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || answer(stream));
            }
        });
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("package")).unwrap();
        std::fs::create_dir_all(dir.path().join("scratch")).unwrap();
        Fixture {
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
            contained: Box::new(
                jig_sandbox::contained(&jig_sandbox::Containment::default())
                    .expect("this machine supports the contained envelope"),
            ),
            dir,
            port,
        }
    })
}

/// Read one request (headers, then content-length bytes) and answer it.
fn answer(mut stream: TcpStream) {
    let mut seen = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let Ok(n) = stream.read(&mut buf) else { return };
        if n == 0 {
            return;
        }
        seen.extend_from_slice(&buf[..n]);
        if let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&seen[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if seen.len() >= end + 4 + length {
                break;
            }
        }
    }
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{ANSWER}",
        ANSWER.len()
    );
}

const REQUEST_BODY: &str = r#"{"model":"m","input":"Say ok.","store":false}"#;

#[divan::bench]
fn direct_http_request() {
    let f = fixture();
    let body = REQUEST_BODY;
    let mut stream = TcpStream::connect(("127.0.0.1", f.port)).unwrap();
    write!(
        stream,
        "POST /v1/responses HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer k\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    assert!(answer.ends_with(ANSWER.as_bytes()));
}

fn worker_launch() -> Launch {
    let dir = fixture().dir.path();
    Launch {
        program: PathBuf::from(env!("CARGO_BIN_EXE_jig")),
        args: vec![WORKER_ARG.into()],
        env: vec![("LANG".into(), "C.UTF-8".into())],
        cwd: dir.join("scratch"),
        package: dir.join("package"),
        scratch: dir.join("scratch"),
        scratch_bytes: None,
        read_only: vec![PathBuf::from("/etc/hosts")],
        shown: Vec::new(),
        attachments: Vec::new(),
        limits: Limits::AGENT,
        network: true,
        view: None,
    }
}

fn one_call(sandbox: &dyn Sandbox) {
    let f = fixture();
    let request = Request {
        url: format!("http://127.0.0.1:{}/v1/responses", f.port),
        key: KeySource::Env("k".into()),
        ask: Ask {
            api: Api::Responses,
            model: "m".into(),
            instructions: "Say ok.".into(),
            skills: None,
            schema: None,
            stream: false,
        },
    };
    f.runtime.block_on(async {
        let mut contained = sandbox.spawn(&worker_launch()).expect("spawns");
        let mut stdin = contained.child.stdin.take().unwrap();
        stdin
            .write_all(request.to_value().to_string().as_bytes())
            .await
            .unwrap();
        drop(stdin);
        let mut out = String::new();
        let mut stdout = contained.child.stdout.take().unwrap();
        stdout.read_to_string(&mut out).await.unwrap();
        assert!(contained.child.wait().await.unwrap().success());
        contained.cleanup().expect("cleans up");
        assert!(
            out.contains(r#""result":{"outcome":"completed","text":"ok"}"#),
            "{out}"
        );
    });
}

#[divan::bench]
fn agent_call_contained_worker() {
    one_call(fixture().contained.as_ref());
}

#[divan::bench]
fn agent_call_worker_without_envelope() {
    one_call(&ProcessGroup);
}

/// The ACP Agent worker (`jig-agent-acp`, built beside `jig`: see the
/// README) asked once, with the tests' ACP agent (host/tests/fixtures/acp,
/// Node and the official SDK, installed by .ci/setup) as the client. Most
/// of it is the client's own start (Node); compare with the HTTP worker of
/// the same run.
fn one_acp_call(sandbox: &dyn Sandbox) {
    let f = fixture();
    let worker = PathBuf::from(env!("CARGO_BIN_EXE_jig")).with_file_name("jig-agent-acp");
    assert!(
        worker.is_file(),
        "build it: cargo build --manifest-path providers/acp/Cargo.toml --target-dir target"
    );
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/acp");
    let request = jig_provider_builtin::agent::acp::WorkerRequest {
        program: fixtures.join("claude-acp"),
        env: vec![("ANTHROPIC_API_KEY".into(), "k".into())],
        prompt: "ANSWER-JSON".into(),
    };
    let mut launch = worker_launch();
    launch.program = worker;
    launch.args = Vec::new();
    launch.read_only.push(fixtures);
    f.runtime.block_on(async {
        let mut contained = sandbox.spawn(&launch).expect("spawns");
        let mut stdin = contained.child.stdin.take().unwrap();
        stdin
            .write_all(request.to_value().to_string().as_bytes())
            .await
            .unwrap();
        drop(stdin);
        let mut out = String::new();
        let mut stdout = contained.child.stdout.take().unwrap();
        stdout.read_to_string(&mut out).await.unwrap();
        assert!(contained.child.wait().await.unwrap().success());
        contained.cleanup().expect("cleans up");
        assert!(
            out.contains(r#""answer":{"outcome":"completed","text":"{\"answer\":42}"}"#),
            "{out}"
        );
    });
}

#[divan::bench(sample_count = 20)]
fn acp_call_contained_worker() {
    one_acp_call(fixture().contained.as_ref());
}

#[divan::bench(sample_count = 20)]
fn acp_call_worker_without_envelope() {
    one_acp_call(&ProcessGroup);
}
