//! A misbehaving component: every failure becomes a Run/1 code and the host
//! keeps serving.

use std::time::Instant;

use jig_provider_api::dispatch::now_unix_ms;
use serde_json::json;

use super::*;

fn faulty() -> Arc<dyn Provider> {
    load("faulty-provider", json!({"marker": "m"}))
}

#[test]
fn a_panic_traps_as_execution_failed_and_the_next_call_works() {
    let provider = faulty();
    let err = get(&*provider, "panic").unwrap_err();
    assert_eq!(err.code(), Some("EXECUTION_FAILED"));
    assert_eq!(get(&*provider, "fine").unwrap(), json!("fine"));
}

#[test]
fn an_endless_loop_is_interrupted_at_the_deadline() {
    let provider = faulty();
    let started = Instant::now();
    let ctx = ctx_with_deadline(now_unix_ms() + 300);
    let err = provider
        .call(&ctx, "get", &json!({"key": "spin"}), no_ports())
        .unwrap_err();
    let elapsed = started.elapsed();
    assert_eq!(err.code(), Some("DEADLINE_EXCEEDED"));
    assert!(elapsed.as_millis() >= 290, "interrupted early: {elapsed:?}");
    assert!(elapsed.as_secs() < 3, "interrupted late: {elapsed:?}");
    assert_eq!(get(&*provider, "fine").unwrap(), json!("fine"));
}

#[test]
fn growing_past_the_memory_ceiling_is_resource_exhausted() {
    let provider = faulty();
    let err = get(&*provider, "grow").unwrap_err();
    assert_eq!(err.code(), Some("RESOURCE_EXHAUSTED"));
    assert_eq!(get(&*provider, "fine").unwrap(), json!("fine"));
}

#[test]
fn undeclared_application_error_is_invalid_result() {
    assert_eq!(
        get(&*faulty(), "undeclared").unwrap_err().code(),
        Some("INVALID_RESULT")
    );
}

#[test]
fn operational_code_outside_run1_is_invalid_result() {
    assert_eq!(
        get(&*faulty(), "bad-code").unwrap_err().code(),
        Some("INVALID_RESULT")
    );
}

#[test]
fn output_outside_json1_is_invalid_result() {
    assert_eq!(
        get(&*faulty(), "big-int").unwrap_err().code(),
        Some("INVALID_RESULT")
    );
}

#[test]
fn operational_error_keeps_code_and_details() {
    let err = get(&*faulty(), "operational").unwrap_err();
    assert_eq!(
        err,
        jig_provider_api::CallError::Operational {
            code: "RESOURCE_EXHAUSTED".to_owned(),
            message: "quota".to_owned(),
            details: Some(json!({"limit": 3})),
        }
    );
}

#[test]
fn settings_and_secrets_reach_the_guest() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret").unwrap();
    let path = artifacts::wasm("faulty-provider", artifacts::Profile::Debug);
    let mut decl = decl("faulty", &path, json!({"marker": "m1"}));
    decl.secrets.insert("token".to_owned(), token);
    let provider = WasmProvider::load(&decl).unwrap();
    assert_eq!(get(&*provider, "config").unwrap(), json!("m1:s3cret"));
}

#[test]
fn the_guest_reaches_no_files_environment_arguments_or_network() {
    let reached = get(&*faulty(), "escape").unwrap();
    assert_eq!(
        reached,
        json!("fs:denied cwd:denied env:0 args:0 net:denied")
    );
}
