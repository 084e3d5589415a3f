//! `jig provider inspect|call`: a provider author's view of a provider
//! file, through the loader the host uses.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::support::{self, run_jig};

const KV: &str = "https://example.org/contracts/kv@1.0.0";

fn faulty_component() -> PathBuf {
    static CELL: OnceLock<PathBuf> = OnceLock::new();
    CELL.get_or_init(|| {
        support::cargo_build(&["-p", "faulty-provider", "--target", "wasm32-wasip2"])
            .join("wasm32-wasip2/debug/faulty_provider.wasm")
    })
    .clone()
}

fn call(dir: &Path, file: &Path, method: &str, input: &str, extra: &[&str]) -> support::Run {
    let file = file.to_str().unwrap();
    let mut args = vec![
        "provider",
        "call",
        file,
        "--contract",
        KV,
        "--method",
        method,
        "--input",
        input,
    ];
    args.extend_from_slice(extra);
    run_jig(dir, &args)
}

#[test]
fn inspect_shows_kind_world_contracts_and_imports_of_a_component() {
    let dir = tempfile::tempdir().unwrap();
    let file = support::kv_provider_component();
    let run = run_jig(
        dir.path(),
        &["provider", "inspect", file.to_str().unwrap(), "--json"],
    );
    assert_eq!(run.status, 0, "{run:?}");
    let report = run.json();
    assert_eq!(report["kind"], "wasm");
    assert_eq!(report["world"], "jig:provider/capability-provider@0.1.0");
    let contracts = report["contracts"].as_array().unwrap();
    assert_eq!(contracts.len(), 1);
    assert_eq!(contracts[0]["id"], "https://example.org/contracts/kv");
    assert_eq!(contracts[0]["version"], "1.0.0");
    assert_eq!(contracts[0]["methods"], serde_json::json!(["get"]));
    // The digest is the one `jig contract digest` computes for the descriptor.
    let descriptor = support::workspace().join("providers/examples/contracts/kv.capability.json");
    let digest = run_jig(
        dir.path(),
        &["contract", "digest", descriptor.to_str().unwrap(), "--json"],
    );
    assert_eq!(digest.status, 0, "{digest:?}");
    assert_eq!(contracts[0]["digest"], digest.json()["digest"]);
    let imports: Vec<&str> = report["imports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_str().unwrap())
        .collect();
    // What the Rust standard library asks of WASI, and nothing of the
    // filesystem, sockets or HTTP.
    assert!(
        imports.iter().any(|i| i.starts_with("wasi:io/streams@")),
        "{imports:?}"
    );
    assert!(
        imports
            .iter()
            .all(|i| i.starts_with("wasi:cli/") || i.starts_with("wasi:io/")),
        "{imports:?}"
    );
    assert!(
        report["exports"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("jig:provider/provider@0.1.0")),
        "{report}"
    );
    assert!(report["artifactDigest"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));

    let text = run_jig(dir.path(), &["provider", "inspect", file.to_str().unwrap()]);
    assert_eq!(text.status, 0, "{text:?}");
    assert!(text.stdout.contains("kind: wasm\n"), "{text:?}");
    assert!(
        text.stdout
            .contains("https://example.org/contracts/kv@1.0.0 sha256:"),
        "{text:?}"
    );
}

#[test]
fn inspect_shows_the_abi_version_of_a_native_library() {
    let dir = tempfile::tempdir().unwrap();
    let file = support::kv_provider_library();
    let run = run_jig(
        dir.path(),
        &["provider", "inspect", file.to_str().unwrap(), "--json"],
    );
    assert_eq!(run.status, 0, "{run:?}");
    let report = run.json();
    assert_eq!(report["kind"], "native");
    assert_eq!(report["abiVersion"], 2);
    assert_eq!(
        report["contracts"][0]["id"],
        "https://example.org/contracts/kv"
    );
}

#[test]
fn a_file_that_is_no_provider_is_refused_with_a_code() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "not a provider\n").unwrap();
    // A core module (the magic and version of WebAssembly 1.0, no sections).
    let core = dir.path().join("core.wasm");
    std::fs::write(&core, [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00]).unwrap();
    // A component, but not of the provider world: the Flow SDK's greet is a
    // wasm32-wasip1 command module, so use an empty component instead.
    let empty = dir.path().join("empty.wasm");
    std::fs::write(&empty, [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00]).unwrap();
    for file in [&text, &core, &empty] {
        let run = run_jig(dir.path(), &["provider", "inspect", file.to_str().unwrap()]);
        assert_eq!(run.status, 1, "{file:?}: {run:?}");
        assert!(
            run.stderr.starts_with("PROVIDER_LOAD_FAILED: "),
            "{file:?}: {run:?}"
        );
        assert!(run.stdout.is_empty(), "{run:?}");
    }
    let missing = run_jig(dir.path(), &["provider", "inspect", "absent.wasm"]);
    assert_eq!(missing.status, 1, "{missing:?}");
    assert!(
        missing.stderr.starts_with("INVALID_REQUEST: "),
        "{missing:?}"
    );
}

#[test]
fn call_prints_the_value_and_the_declared_error() {
    let dir = tempfile::tempdir().unwrap();
    for file in [
        support::kv_provider_component(),
        support::kv_provider_library(),
    ] {
        let settings = r#"{"entries": {"a": "apple"}}"#;
        let run = call(
            dir.path(),
            &file,
            "get",
            r#"{"key":"a"}"#,
            &["--settings", settings],
        );
        assert_eq!(run.status, 0, "{run:?}");
        assert_eq!(run.stdout, "\"apple\"\n");

        let run = call(
            dir.path(),
            &file,
            "get",
            r#"{"key":"b"}"#,
            &["--settings", settings],
        );
        assert_eq!(run.status, 1, "{run:?}");
        assert_eq!(
            run.stdout,
            "{\"error\":{\"data\":{\"key\":\"b\"},\"name\":\"not-found\"}}\n"
        );
    }
}

#[test]
fn call_applies_the_hosts_checks_before_and_after_the_guest() {
    let dir = tempfile::tempdir().unwrap();
    let kv = support::kv_provider_component();
    let cases: [(&str, &str, &[&str], &str, i32); 4] = [
        // Input fails the method's schema: the guest is not called.
        ("get", r#"{"nope":1}"#, &[], "INVALID_INPUT: ", 1),
        // The contract declares no such method.
        ("put", r#"{"key":"a"}"#, &[], "UNAVAILABLE: ", 2),
        // Settings must be an object (the loader's own check).
        (
            "get",
            r#"{"key":"a"}"#,
            &["--settings", "[1]"],
            "PROVIDER_CONFIG_INVALID: ",
            1,
        ),
        (
            "get",
            r#"{"key":"a"}"#,
            &["--settings", "{"],
            "INVALID_SETTINGS: ",
            1,
        ),
    ];
    for (method, input, extra, prefix, status) in cases {
        let run = call(dir.path(), &kv, method, input, extra);
        assert_eq!(run.status, status, "{method} {input}: {run:?}");
        assert!(run.stderr.starts_with(prefix), "{method} {input}: {run:?}");
        assert!(run.stdout.is_empty(), "{run:?}");
    }
    // A contract version the provider does not serve.
    let run = run_jig(
        dir.path(),
        &[
            "provider",
            "call",
            kv.to_str().unwrap(),
            "--contract",
            "https://example.org/contracts/kv@2.0.0",
            "--method",
            "get",
            "--input",
            r#"{"key":"a"}"#,
        ],
    );
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stderr.starts_with("UNAVAILABLE: "), "{run:?}");
}

#[test]
fn call_reports_a_faulty_providers_failures_with_their_codes() {
    let dir = tempfile::tempdir().unwrap();
    let faulty = faulty_component();
    let cases = [
        ("panic", "EXECUTION_FAILED: "),
        ("grow", "RESOURCE_EXHAUSTED: "),
        ("undeclared", "INVALID_RESULT: "),
        ("bad-code", "INVALID_RESULT: "),
        ("big-int", "INVALID_RESULT: "),
        ("operational", "RESOURCE_EXHAUSTED: "),
    ];
    for (key, prefix) in cases {
        let input = format!(r#"{{"key":"{key}"}}"#);
        let run = call(dir.path(), &faulty, "get", &input, &[]);
        assert_eq!(run.status, 2, "{key}: {run:?}");
        assert!(run.stderr.starts_with(prefix), "{key}: {run:?}");
    }
    // A guest that never returns is stopped at the deadline.
    let run = call(
        dir.path(),
        &faulty,
        "get",
        r#"{"key":"spin"}"#,
        &["--timeout", "300ms"],
    );
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stderr.starts_with("DEADLINE_EXCEEDED: "), "{run:?}");
    // The guest sees no filesystem, environment or network.
    let run = call(dir.path(), &faulty, "get", r#"{"key":"escape"}"#, &[]);
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(
        run.stdout,
        "\"fs:denied cwd:denied env:0 args:0 net:denied\"\n"
    );
}

/// Builds an example provider written in another language from its source
/// in `providers/examples/<example>`: the source and the WIT world are
/// copied to `target/guests/<example>` (so no build litter lands in the
/// tree) and `tool` runs there. Returns the component.
fn build_foreign(example: &str, source: &str, tool: &mut std::process::Command) -> PathBuf {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let root = support::workspace();
    let dir = root.join("target/guests").join(example);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        root.join("providers/examples").join(example).join(source),
        dir.join(source),
    )
    .unwrap();
    std::fs::copy(
        root.join("providers/wit/provider.wit"),
        dir.join("provider.wit"),
    )
    .unwrap();
    let out = dir.join("provider.wasm");
    let _ = std::fs::remove_file(&out);
    let status = tool
        .current_dir(&dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .status()
        .unwrap_or_else(|e| panic!("{example}: the build tool does not run ({e}); run .ci/setup"));
    assert!(status.success(), "building {example} failed");
    out
}

pub fn python_kv_component() -> PathBuf {
    static CELL: OnceLock<PathBuf> = OnceLock::new();
    CELL.get_or_init(|| {
        let mut tool = std::process::Command::new("componentize-py");
        tool.args([
            "-d",
            "provider.wit",
            "-w",
            "capability-provider",
            "componentize",
            "app",
            "-o",
            "provider.wasm",
        ]);
        build_foreign("python-kv", "app.py", &mut tool)
    })
    .clone()
}

fn jco() -> PathBuf {
    let dir = std::env::var_os("JIG_JCO_DIR").unwrap_or_else(|| "/opt/jig-jco".into());
    PathBuf::from(dir).join("node_modules/.bin/jco")
}

pub fn js_kv_component() -> PathBuf {
    static CELL: OnceLock<PathBuf> = OnceLock::new();
    CELL.get_or_init(|| {
        let mut tool = std::process::Command::new(jco());
        tool.args([
            "componentize",
            "provider.js",
            "--wit",
            "provider.wit",
            "--world-name",
            "capability-provider",
            "--disable",
            "all",
            "-o",
            "provider.wasm",
        ]);
        build_foreign("js-kv", "provider.js", &mut tool)
    })
    .clone()
}

/// The lookup Flow of the provider tests, calling the `store` slot.
use crate::providers::{FLOW_MD as LOOKUP_FLOW_MD, FLOW_PY as LOOKUP_FLOW_PY};

/// A Flow calling the kv contract through `jig run`, served by `component`.
fn check_flow_calls(component: &Path) {
    let contract = std::fs::read_to_string(
        support::workspace().join("providers/examples/contracts/kv.capability.json"),
    )
    .unwrap();
    let dir = support::project(&[
        ("flows/lookup/FLOW.md", LOOKUP_FLOW_MD),
        ("flows/lookup/flow.py", LOOKUP_FLOW_PY),
        ("flows/lookup/contracts/kv.capability.json", &contract),
    ]);
    let config = format!(
        "[[providers]]\nname = \"kv\"\nkind = \"wasm\"\npath = \"{}\"\nsettings = {{ entries = {{ Ada = \"Lovelace\" }} }}\n",
        component.display()
    );
    support::write_files(dir.path(), &[(".test-config-home/jig/host.toml", &config)]);
    let review = support::review(dir.path());
    assert!(review.stdout.contains("served by \"kv\""), "{review:?}");
    let found = run_jig(
        dir.path(),
        &["run", "flow:flows/lookup", "--input", "\"Ada\""],
    );
    assert_eq!(found.status, 0, "{found:?}");
    assert_eq!(
        found.json()["output"],
        serde_json::json!({"value": "Lovelace"})
    );
    let missing = run_jig(
        dir.path(),
        &["run", "flow:flows/lookup", "--input", "\"Bob\""],
    );
    assert_eq!(missing.status, 0, "{missing:?}");
    assert_eq!(
        missing.json()["output"],
        serde_json::json!({"error": "not-found", "data": {"key": "Bob"}})
    );
}

/// The same `jig provider` answers for a foreign-language kv as for the Rust one.
fn check_provider_commands(component: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let inspected = run_jig(
        dir.path(),
        &["provider", "inspect", component.to_str().unwrap(), "--json"],
    );
    assert_eq!(inspected.status, 0, "{inspected:?}");
    let rust = run_jig(
        dir.path(),
        &[
            "provider",
            "inspect",
            support::kv_provider_component().to_str().unwrap(),
            "--json",
        ],
    );
    // The same contract identity as the Rust provider's descriptor file.
    assert_eq!(inspected.json()["contracts"], rust.json()["contracts"]);
    let settings = r#"{"entries": {"a": "apple"}}"#;
    let run = call(
        dir.path(),
        component,
        "get",
        r#"{"key":"a"}"#,
        &["--settings", settings],
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(run.stdout, "\"apple\"\n");
    let run = call(dir.path(), component, "get", r#"{"key":"b"}"#, &[]);
    assert_eq!(run.status, 1, "{run:?}");
    assert_eq!(
        run.stdout,
        "{\"error\":{\"data\":{\"key\":\"b\"},\"name\":\"not-found\"}}\n"
    );
}

#[test]
fn a_python_provider_built_with_componentize_py_serves_a_flow() {
    let component = python_kv_component();
    check_provider_commands(&component);
    check_flow_calls(&component);
}

#[test]
fn a_javascript_provider_built_with_jco_serves_a_flow() {
    let component = js_kv_component();
    check_provider_commands(&component);
    check_flow_calls(&component);
}

const PROBE: &str = "https://example.org/contracts/grants-probe@1.0.0";
/// wasi:http linked, no origin allowed.
const NO_ORIGIN: &str = r#"{"http": {"allow": []}}"#;

fn probe_component() -> PathBuf {
    static CELL: OnceLock<PathBuf> = OnceLock::new();
    CELL.get_or_init(|| {
        support::cargo_build(&["-p", "grants-probe", "--target", "wasm32-wasip2"])
            .join("wasm32-wasip2/debug/grants_probe.wasm")
    })
    .clone()
}

fn probe(dir: &Path, method: &str, input: &str, grants: Option<&str>) -> support::Run {
    let file = probe_component();
    let mut args = vec![
        "provider",
        "call",
        file.to_str().unwrap(),
        "--contract",
        PROBE,
        "--method",
        method,
        "--input",
        input,
    ];
    if let Some(grants) = grants {
        args.extend_from_slice(&["--grants", grants]);
    }
    run_jig(dir, &args)
}

/// Answers one HTTP request on 127.0.0.1 with `hello`.
fn serve_one(listener: std::net::TcpListener) -> std::thread::JoinHandle<()> {
    use std::io::{BufRead, Write};
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = std::io::BufReader::new(stream);
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap() > 0 && line != "\r\n" {
            line.clear();
        }
        let mut stream = reader.into_inner();
        stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
            .unwrap();
    })
}

#[test]
fn call_with_grants_reaches_an_allowed_origin_only_and_keeps_its_directory() {
    let dir = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let url = serde_json::json!({ "url": format!("{origin}/greeting") }).to_string();

    // Without a grant a component importing wasi:http does not load.
    let ungranted = probe(dir.path(), "fetch", &url, None);
    assert_eq!(ungranted.status, 1, "{ungranted:?}");
    assert!(
        ungranted.stderr.starts_with("PROVIDER_LOAD_FAILED: ")
            && ungranted.stderr.contains("grants.http"),
        "{ungranted:?}"
    );

    // Another origin on the allowlist: the guest is refused, nothing is sent.
    listener.set_nonblocking(true).unwrap();
    let elsewhere = r#"{"http": {"allow": ["http://127.0.0.1:1"]}}"#;
    let denied = probe(dir.path(), "fetch", &url, Some(elsewhere));
    assert_eq!(denied.status, 1, "{denied:?}");
    assert_eq!(
        denied.stdout,
        "{\"error\":{\"data\":{\"code\":\"HttpRequestDenied\"},\"name\":\"http-error\"}}\n",
        "{denied:?}"
    );
    assert!(
        listener.accept().is_err(),
        "the denied request reached the server"
    );

    // The server's origin allowed: the request arrives and its answer comes back.
    listener.set_nonblocking(false).unwrap();
    let server = serve_one(listener);
    let allowed = format!(r#"{{"http": {{"allow": ["{origin}"]}}}}"#);
    let fetched = probe(dir.path(), "fetch", &url, Some(&allowed));
    assert_eq!(fetched.status, 0, "{fetched:?}");
    assert_eq!(fetched.stdout, "{\"body\":\"hello\",\"status\":200}\n");
    server.join().unwrap();

    // A granted directory outlives the call (the probe imports wasi:http,
    // so it always needs an http grant, here one allowing nothing).
    let state = dir.path().join("state");
    let granted = serde_json::json!({ "http": {"allow": []}, "directory": state }).to_string();
    let note = r#"{"name": "note", "text": "kept"}"#;
    let wrote = probe(dir.path(), "write", note, Some(&granted));
    assert_eq!(wrote.status, 0, "{wrote:?}");
    let read = probe(dir.path(), "read", r#"{"name": "note"}"#, Some(&granted));
    assert_eq!(read.stdout, "{\"text\":\"kept\"}\n", "{read:?}");
    assert_eq!(std::fs::read_to_string(state.join("note")).unwrap(), "kept");
    // Without the directory grant there is no /data.
    let none = probe(dir.path(), "read", r#"{"name": "note"}"#, Some(NO_ORIGIN));
    assert_eq!(none.status, 2, "{none:?}");
    assert!(none.stderr.starts_with("UNAVAILABLE: "), "{none:?}");
}

#[test]
fn call_refuses_grants_the_host_configuration_would_refuse() {
    let dir = tempfile::tempdir().unwrap();
    let read = r#"{"name": "note"}"#;
    for grants in [
        r#"{"network": true}"#,
        r#"{"directory": "state"}"#,
        r#"{"http": {"allow": ["http://127.0.0.1:8080/path"]}}"#,
        r#"{"limits": {"concurrency": 65}}"#,
        r#"{"limits": {"memory": "64 megs"}}"#,
        "not json",
    ] {
        let run = probe(dir.path(), "read", read, Some(grants));
        assert_eq!(run.status, 1, "{grants}: {run:?}");
        assert!(
            run.stderr.starts_with("PROVIDER_CONFIG_INVALID: "),
            "{grants}: {run:?}"
        );
    }
    // At the limit it loads (and has no /data to read).
    let at_limit = probe(
        dir.path(),
        "read",
        read,
        Some(r#"{"http": {"allow": []}, "limits": {"concurrency": 64}}"#),
    );
    assert_eq!(at_limit.status, 2, "{at_limit:?}");
    assert!(at_limit.stderr.starts_with("UNAVAILABLE: "), "{at_limit:?}");
    // A native library runs with the host's rights: no grants for it.
    let native = support::kv_provider_library();
    let run = call(
        dir.path(),
        &native,
        "get",
        r#"{"key": "Ada"}"#,
        &["--grants", r#"{"limits": {"concurrency": 2}}"#],
    );
    assert_eq!(run.status, 1, "{run:?}");
    assert!(
        run.stderr.starts_with("PROVIDER_CONFIG_INVALID: ")
            && run.stderr.contains("wasm providers only"),
        "{run:?}"
    );
}

#[test]
fn inspect_shows_a_component_that_asks_for_http_without_granting_it_an_origin() {
    let dir = tempfile::tempdir().unwrap();
    let file = probe_component();
    let run = run_jig(
        dir.path(),
        &["provider", "inspect", file.to_str().unwrap(), "--json"],
    );
    assert_eq!(run.status, 0, "{run:?}");
    let report = run.json();
    assert_eq!(
        report["contracts"][0]["id"],
        "https://example.org/contracts/grants-probe"
    );
    let imports = report["imports"].as_array().unwrap();
    assert!(
        imports.iter().any(|i| i
            .as_str()
            .unwrap()
            .starts_with("wasi:http/outgoing-handler@")),
        "{imports:?}"
    );
}
