//! Loads the example native libraries built from source and calls them the
//! way the host does.

#[path = "../../../examples/artifacts.rs"]
#[allow(dead_code)] // each test binary builds only the artifacts it loads
mod artifacts;

mod faults;
mod kv;
mod load;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use jig_provider_api::dispatch::now_unix_ms;
use jig_provider_api::{CallContext, ContractIdentity, Provider, ProviderDecl, ProviderKind};
use jig_provider_native::NativeProvider;
use serde_json::{json, Value};

/// The exact identity the host derives from the example descriptor file.
pub fn kv_identity() -> ContractIdentity {
    let path = artifacts::workspace_root().join("providers/examples/contracts/kv.capability.json");
    let descriptor = flow::json::parse(&std::fs::read(path).unwrap()).unwrap();
    ContractIdentity {
        id: "https://example.org/contracts/kv".to_owned(),
        version: "1.0.0".to_owned(),
        digest: flow::contract::digest(&descriptor),
    }
}

pub fn decl(name: &str, path: &Path, settings: Value) -> ProviderDecl {
    ProviderDecl {
        name: name.to_owned(),
        kind: ProviderKind::Native,
        path: Some(path.to_owned()),
        settings,
        secrets: Default::default(),
    }
}

pub fn load(package: &str, settings: Value) -> Arc<dyn Provider> {
    let path = artifacts::native(package, artifacts::Profile::Debug);
    NativeProvider::load(&decl(package, &path, settings)).unwrap()
}

pub fn ctx_with_deadline(deadline_unix_ms: u64) -> CallContext {
    CallContext {
        contract: kv_identity(),
        operation_id: "op:1".to_owned(),
        deadline_unix_ms,
    }
}

pub fn ctx() -> CallContext {
    ctx_with_deadline(now_unix_ms() + 30_000)
}

pub fn get(provider: &dyn Provider, key: &str) -> Result<Value, jig_provider_api::CallError> {
    provider.call(&ctx(), "get", &json!({ "key": key }))
}

/// Compiles a one-file fixture library from `tests/all/fixtures`.
pub fn fixture_library(name: &str) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/all/fixtures")
        .join(format!("{name}.rs"));
    let out_dir = artifacts::guests_dir().join("native-fixtures");
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = out_dir.join(format!(
        "{}{name}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let status = Command::new(rustc)
        .args(["--edition", "2021", "--crate-type", "cdylib", "-o"])
        .arg(&out)
        .arg(&source)
        .status()
        .expect("rustc runs");
    assert!(status.success(), "compiling fixture {name} failed");
    out
}
