//! Operator grants: outbound HTTP to an allowlist, a private directory,
//! and limits, applied to a component that uses each (`grants-probe`).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use jig_provider_api::dispatch::now_unix_ms;
use jig_provider_api::{CallContext, CallError, ContractIdentity, Grants, LoadError};
use serde_json::json;

use super::*;

fn probe_identity() -> ContractIdentity {
    let path =
        artifacts::workspace_root().join("providers/examples/contracts/probe.capability.json");
    let descriptor = flow::json::parse(&std::fs::read(path).unwrap()).unwrap();
    ContractIdentity {
        id: "https://example.org/contracts/grants-probe".to_owned(),
        version: "1.0.0".to_owned(),
        digest: flow::contract::digest(&descriptor),
    }
}

fn probe_decl(name: &str, grants: serde_json::Value) -> ProviderDecl {
    let path = artifacts::wasm("grants-probe", artifacts::Profile::Debug);
    let mut decl = decl(name, &path, Value::Null);
    decl.grants = serde_json::from_value::<Grants>(grants).unwrap();
    decl
}

fn probe(name: &str, grants: serde_json::Value) -> Arc<dyn Provider> {
    WasmProvider::load(&probe_decl(name, grants)).unwrap()
}

fn call(provider: &dyn Provider, method: &str, input: Value) -> Result<Value, CallError> {
    let ctx = CallContext {
        contract: probe_identity(),
        operation_id: "op:1".to_owned(),
        deadline_unix_ms: now_unix_ms() + 30_000,
    };
    provider.call(&ctx, method, &input, no_ports())
}

/// An HTTP/1.1 server on 127.0.0.1 answering every request with `body`;
/// counts the connections it accepted.
struct Server {
    origin: String,
    connections: Arc<AtomicUsize>,
}

fn serve(body: &'static str) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let connections = Arc::new(AtomicUsize::new(0));
    let seen = connections.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            seen.fetch_add(1, Ordering::SeqCst);
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    Server {
        origin,
        connections,
    }
}

#[test]
fn http_reaches_an_allowed_origin_and_is_denied_outside_the_list() {
    let allowed = serve("hello from the allowed server");
    let other = serve("never served");
    let provider = probe("probe", json!({"http": {"allow": [allowed.origin]}}));

    let ok = call(
        &*provider,
        "fetch",
        json!({"url": format!("{}/greeting", allowed.origin)}),
    )
    .unwrap();
    assert_eq!(
        ok,
        json!({"status": 200, "body": "hello from the allowed server"})
    );

    let denied = call(
        &*provider,
        "fetch",
        json!({"url": format!("{}/greeting", other.origin)}),
    )
    .unwrap_err();
    assert_eq!(
        denied,
        CallError::Application {
            name: "http-error".to_owned(),
            data: json!({"code": "HttpRequestDenied"}),
        }
    );
    // Same host, another scheme: also outside the list.
    let https = allowed.origin.replace("http://", "https://");
    let denied = call(&*provider, "fetch", json!({ "url": https })).unwrap_err();
    assert!(
        matches!(&denied, CallError::Application { data, .. } if data["code"] == "HttpRequestDenied"),
        "{denied:?}"
    );
    assert_eq!(other.connections.load(Ordering::SeqCst), 0);
    assert_eq!(allowed.connections.load(Ordering::SeqCst), 1);
}

#[test]
fn a_component_importing_http_without_the_grant_does_not_load() {
    let Err(error) = WasmProvider::load(&probe_decl("probe", json!({}))) else {
        panic!("loaded without grants.http");
    };
    assert_eq!(error.code(), "PROVIDER_LOAD_FAILED", "{error}");
    let text = error.to_string();
    assert!(text.contains("wasi:http/"), "{text}");
    assert!(text.contains("grants.http"), "{text}");
}

#[test]
fn the_private_directory_persists_between_calls_and_is_invisible_to_another_provider() {
    let root = tempfile::tempdir().unwrap();
    let (a_dir, b_dir) = (root.path().join("a"), root.path().join("b"));
    let grants = |dir: &std::path::Path| json!({"http": {"allow": []}, "directory": dir});
    let a = probe("a", grants(&a_dir));
    let b = probe("b", grants(&b_dir));
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&a_dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "created owner-private");
    }

    call(&*a, "write", json!({"name": "note", "text": "kept"})).unwrap();
    // Every call is a fresh instance: only the directory carries the note.
    assert_eq!(
        call(&*a, "read", json!({"name": "note"})).unwrap(),
        json!({"text": "kept"})
    );
    assert_eq!(std::fs::read_to_string(a_dir.join("note")).unwrap(), "kept");
    assert_eq!(
        call(&*b, "read", json!({"name": "note"})).unwrap(),
        json!({})
    );
    assert!(!b_dir.join("note").exists());

    // A provider loaded again over the same directory finds its state.
    let again = probe("a", grants(&a_dir));
    assert_eq!(
        call(&*again, "read", json!({"name": "note"})).unwrap(),
        json!({"text": "kept"})
    );

    // Without the grant there is no /data at all.
    let none = probe("none", json!({"http": {"allow": []}}));
    let err = call(&*none, "read", json!({"name": "note"})).unwrap_err();
    assert_eq!(err.code(), Some("UNAVAILABLE"), "{err:?}");
}

#[test]
fn a_granted_directory_other_users_can_reach_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("open");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o750)).unwrap();
    let decl = probe_decl("probe", json!({"http": {"allow": []}, "directory": dir}));
    let Err(error) = WasmProvider::load(&decl) else {
        panic!("loaded over a group-readable directory");
    };
    assert!(
        matches!(error, LoadError::ConfigInvalid { .. }),
        "{error:?}"
    );
    assert_eq!(error.code(), "PROVIDER_CONFIG_INVALID");
}

#[test]
fn the_memory_limit_grant_replaces_the_default_ceiling() {
    // 32 MiB fits the default 64 MiB ceiling...
    let default = probe("probe", json!({"http": {"allow": []}}));
    assert_eq!(
        call(&*default, "allocate", json!({"mebibytes": 32})).unwrap(),
        json!(32u64 << 20)
    );
    // ...and not a granted 16 MiB one.
    let small = probe(
        "probe",
        json!({"http": {"allow": []}, "limits": {"memory": "16MiB"}}),
    );
    let err = call(&*small, "allocate", json!({"mebibytes": 32})).unwrap_err();
    assert_eq!(err.code(), Some("RESOURCE_EXHAUSTED"), "{err:?}");
    assert_eq!(
        call(&*small, "allocate", json!({"mebibytes": 1})).unwrap(),
        json!(1u64 << 20)
    );
}

#[test]
fn the_call_timeout_grant_ends_a_call_before_the_runs_deadline() {
    let path = artifacts::wasm("faulty-provider", artifacts::Profile::Debug);
    let mut decl = decl("faulty-provider", &path, json!({"marker": "m"}));
    decl.grants = serde_json::from_value(json!({"limits": {"call-timeout": "200ms"}})).unwrap();
    let provider = WasmProvider::load(&decl).unwrap();
    let run_deadline = now_unix_ms() + 120_000;
    let started = Instant::now();
    let err = provider
        .call(
            &ctx_with_deadline(run_deadline),
            "get",
            &json!({"key": "spin"}),
            no_ports(),
        )
        .unwrap_err();
    assert_eq!(err.code(), Some("DEADLINE_EXCEEDED"));
    // Not the Run's deadline, two minutes away.
    assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
}

#[test]
fn bad_grants_refuse_the_load_as_a_configuration_error() {
    for grants in [
        json!({"directory": "relative/dir"}),
        json!({"http": {"allow": ["ftp://127.0.0.1"]}}),
        json!({"limits": {"memory": "2GiB"}}),
    ] {
        let decl = probe_decl("probe", grants.clone());
        let Err(error) = WasmProvider::load(&decl) else {
            panic!("loaded with {grants}");
        };
        assert_eq!(error.code(), "PROVIDER_CONFIG_INVALID", "{grants}: {error}");
    }
}
