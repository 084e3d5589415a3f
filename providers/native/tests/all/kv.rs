//! The kv example library: found, not found, unknown method, deadlines.

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
    let served = provider.contracts();
    assert_eq!(served.len(), 1);
    let bytes = std::fs::read(artifacts::native(PACKAGE, artifacts::Profile::Debug)).unwrap();
    let expected = format!(
        "sha256:{:x}",
        <sha2::Sha256 as sha2::Digest>::digest(&bytes)
    );
    assert_eq!(provider.artifact_digest(), Some(expected.as_str()));
    assert_eq!(served[0].identity, kv_identity());
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
fn one_library_serves_two_declarations_with_their_own_settings() {
    let a = load(PACKAGE, json!({"entries": {"k": "from-a"}}));
    let b = load(PACKAGE, json!({"entries": {"k": "from-b"}}));
    assert_eq!(get(&*a, "k").unwrap(), json!("from-a"));
    assert_eq!(get(&*b, "k").unwrap(), json!("from-b"));
}

#[test]
fn unknown_method_is_unavailable_without_dispatch() {
    let err = kv()
        .call(&ctx(), "put", &json!({"key": "a"}), no_ports())
        .unwrap_err();
    assert_eq!(err.code(), Some("UNAVAILABLE"));
}

#[test]
fn input_outside_the_schema_is_invalid_input() {
    let err = kv()
        .call(&ctx(), "get", &json!({}), no_ports())
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
fn concurrent_calls_share_the_library() {
    let provider = kv();
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let provider = Arc::clone(&provider);
            std::thread::spawn(move || get(&*provider, "greeting").unwrap())
        })
        .collect();
    for thread in threads {
        assert_eq!(thread.join().unwrap(), json!("hello"));
    }
}
