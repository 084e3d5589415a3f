//! Load-time refusals carry stable codes.

use serde_json::json;

use super::*;

fn load_err(decl: &ProviderDecl) -> &'static str {
    match WasmProvider::load(decl) {
        Ok(_) => panic!("load unexpectedly succeeded"),
        Err(e) => e.code(),
    }
}

#[test]
fn missing_file_is_load_failed() {
    let decl = decl("x", Path::new("/nonexistent/x.wasm"), json!({}));
    assert_eq!(load_err(&decl), "PROVIDER_LOAD_FAILED");
}

#[test]
fn core_module_or_garbage_is_load_failed() {
    let dir = tempfile::tempdir().unwrap();
    let core = dir.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    let garbage = dir.path().join("garbage.wasm");
    std::fs::write(&garbage, b"not wasm").unwrap();
    for path in [core, garbage] {
        assert_eq!(
            load_err(&decl("x", &path, json!({}))),
            "PROVIDER_LOAD_FAILED"
        );
    }
}

#[test]
fn component_without_the_provider_world_is_load_failed() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.wasm");
    std::fs::write(&empty, b"(component)").unwrap();
    assert_eq!(
        load_err(&decl("x", &empty, json!({}))),
        "PROVIDER_LOAD_FAILED"
    );
}

#[test]
fn wrong_kind_or_settings_is_config_invalid() {
    let path = artifacts::wasm("kv-provider", artifacts::Profile::Debug);
    let mut native = decl("x", &path, json!({}));
    native.kind = ProviderKind::Native;
    assert_eq!(load_err(&native), "PROVIDER_CONFIG_INVALID");
    assert_eq!(
        load_err(&decl("x", &path, json!("flat"))),
        "PROVIDER_CONFIG_INVALID"
    );
}

#[test]
fn unreadable_secret_is_refused_before_loading() {
    let path = artifacts::wasm("kv-provider", artifacts::Profile::Debug);
    let mut decl = decl("x", &path, json!({}));
    decl.secrets
        .insert("token".to_owned(), PathBuf::from("/nonexistent/token"));
    assert_eq!(load_err(&decl), "PROVIDER_SECRET_UNREADABLE");
}
