//! The kv example component: found, not found, unknown method, deadlines.

use jig_provider_api::dispatch::now_unix_ms;
use jig_provider_api::CallError;
use serde_json::json;

use super::*;

const PACKAGE: &str = "kv-provider";

fn kv() -> Arc<dyn Provider> {
    load(
        PACKAGE,
        json!({"entries": {"greeting": "hello", "empty": ""}}),
    )
}

#[test]
fn serves_the_kv_contract_with_the_host_derived_identity() {
    let provider = kv();
    assert_eq!(provider.name(), "kv-provider");
    let served = provider.contracts();
    assert_eq!(served.len(), 1);
    let bytes = std::fs::read(artifacts::wasm(PACKAGE, artifacts::Profile::Debug)).unwrap();
    let expected = format!(
        "sha256:{:x}",
        <sha2::Sha256 as sha2::Digest>::digest(&bytes)
    );
    assert_eq!(provider.artifact_digest(), Some(expected.as_str()));
    assert_eq!(served[0].identity, kv_identity());
    assert!(served[0].identity.digest.starts_with("sha256:"));
}

#[test]
fn get_found_returns_the_stored_string() {
    let provider = kv();
    assert_eq!(get(&*provider, "greeting").unwrap(), json!("hello"));
    assert_eq!(get(&*provider, "empty").unwrap(), json!(""));
}

#[test]
fn get_missing_is_the_declared_not_found_error() {
    let err = get(&*kv(), "absent").unwrap_err();
    assert_eq!(
        err,
        CallError::Application {
            name: "not-found".to_owned(),
            data: json!({"key": "absent"})
        }
    );
}

#[test]
fn unknown_method_is_unavailable_without_dispatch() {
    let err = kv()
        .call(&ctx(), "put", &json!({"key": "a"}), no_ports())
        .unwrap_err();
    assert_eq!(err.code(), Some("UNAVAILABLE"));
}

#[test]
fn other_contract_version_is_unavailable() {
    let mut other = ctx();
    other.contract.version = "2.0.0".to_owned();
    let err = kv()
        .call(&other, "get", &json!({"key": "a"}), no_ports())
        .unwrap_err();
    assert_eq!(err.code(), Some("UNAVAILABLE"));
}

#[test]
fn input_outside_the_schema_is_invalid_input() {
    let err = kv()
        .call(&ctx(), "get", &json!({"key": 7}), no_ports())
        .unwrap_err();
    assert_eq!(err.code(), Some("INVALID_INPUT"));
}

#[test]
fn deadline_in_the_past_is_deadline_exceeded() {
    let past = ctx_with_deadline(now_unix_ms() - 1);
    let err = kv()
        .call(&past, "get", &json!({"key": "greeting"}), no_ports())
        .unwrap_err();
    assert_eq!(err.code(), Some("DEADLINE_EXCEEDED"));
}

#[test]
fn concurrent_calls_each_get_their_own_instance() {
    let provider = kv();
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let provider = Arc::clone(&provider);
            std::thread::spawn(move || {
                (0..5)
                    .map(|_| get(&*provider, "greeting").unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for thread in threads {
        assert!(thread.join().unwrap().iter().all(|v| v == "hello"));
    }
}
