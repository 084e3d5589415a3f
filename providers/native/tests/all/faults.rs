//! A misbehaving library: a panic is caught at the boundary and every bad
//! answer becomes a Run/1 code.

use serde_json::json;

use super::*;

fn faulty() -> Arc<dyn Provider> {
    load("faulty-provider", json!({}))
}

#[test]
fn a_panic_is_execution_failed_and_the_host_keeps_serving() {
    let provider = faulty();
    let err = get(&*provider, "panic").unwrap_err();
    assert_eq!(err.code(), Some("EXECUTION_FAILED"));
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
fn output_outside_the_schema_is_invalid_result() {
    // `grow` answers a number where the contract declares a string.
    assert_eq!(
        get(&*faulty(), "grow").unwrap_err().code(),
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
fn settings_and_secrets_reach_the_library() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret").unwrap();
    let path = artifacts::native("faulty-provider", artifacts::Profile::Debug);
    let mut decl = decl("faulty", &path, json!({"marker": "m1"}));
    decl.secrets.insert("token".to_owned(), token);
    let provider = NativeProvider::load(&decl).unwrap();
    assert_eq!(get(&*provider, "config").unwrap(), json!("m1:s3cret"));
}
