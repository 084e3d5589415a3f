//! Load-time refusals carry stable codes.

use jig_provider_native::ABI_VERSION;
use serde_json::json;

use super::*;

fn load_err(decl: &ProviderDecl) -> jig_provider_api::LoadError {
    match NativeProvider::load(decl) {
        Ok(_) => panic!("load unexpectedly succeeded"),
        Err(e) => e,
    }
}

#[test]
fn other_abi_version_is_abi_mismatch() {
    let path = fixture_library("abi_v1");
    let err = load_err(&decl("v1", &path, json!({})));
    assert_eq!(err.code(), "PROVIDER_ABI_MISMATCH");
    assert!(matches!(
        err,
        jig_provider_api::LoadError::AbiMismatch {
            found: 1,
            expected: ABI_VERSION,
            ..
        }
    ));
}

#[test]
fn missing_entry_point_is_load_failed() {
    let path = fixture_library("missing_call");
    let err = load_err(&decl("partial", &path, json!({})));
    assert_eq!(err.code(), "PROVIDER_LOAD_FAILED");
    assert!(err.to_string().contains("jig_provider_call"), "{err}");
}

#[test]
fn missing_or_non_library_file_is_load_failed() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("not-a-library.so");
    std::fs::write(&text, "hello").unwrap();
    for path in [PathBuf::from("/nonexistent/libx.so"), text] {
        assert_eq!(
            load_err(&decl("x", &path, json!({}))).code(),
            "PROVIDER_LOAD_FAILED"
        );
    }
}

#[test]
fn wrong_kind_is_config_invalid() {
    let path = artifacts::native("kv-provider", artifacts::Profile::Debug);
    let mut wasm = decl("x", &path, json!({}));
    wasm.kind = ProviderKind::Wasm;
    assert_eq!(load_err(&wasm).code(), "PROVIDER_CONFIG_INVALID");
}
