//! Loads the example components built from source and calls them the way
//! the host does.

#[path = "../../../examples/artifacts.rs"]
#[allow(dead_code)] // each test binary builds only the artifacts it loads
mod artifacts;

mod faults;
mod kv;
mod load;
mod pool;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use jig_provider_api::dispatch::now_unix_ms;
use jig_provider_api::{CallContext, ContractIdentity, Provider, ProviderDecl, ProviderKind};
use jig_provider_wasm::WasmProvider;
use serde_json::{json, Value};

pub fn kv_descriptor_path() -> PathBuf {
    artifacts::workspace_root().join("providers/examples/contracts/kv.capability.json")
}

/// The exact identity the host derives from the example descriptor file.
pub fn kv_identity() -> ContractIdentity {
    let bytes = std::fs::read(kv_descriptor_path()).unwrap();
    let descriptor = flow::json::parse(&bytes).unwrap();
    ContractIdentity {
        id: "https://example.org/contracts/kv".to_owned(),
        version: "1.0.0".to_owned(),
        digest: flow::contract::digest(&descriptor),
    }
}

pub fn decl(name: &str, path: &Path, settings: Value) -> ProviderDecl {
    ProviderDecl {
        name: name.to_owned(),
        kind: ProviderKind::Wasm,
        path: Some(path.to_owned()),
        settings,
        secrets: Default::default(),
    }
}

pub fn load(package: &str, settings: Value) -> Arc<dyn Provider> {
    let path = artifacts::wasm(package, artifacts::Profile::Debug);
    WasmProvider::load(&decl(package, &path, settings)).unwrap()
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
