//! Calling the kv example the way the host does: shared by the native and
//! WASM loader tests (included with `#[path]`, next to `artifacts.rs`).

use std::path::PathBuf;
use std::sync::Arc;

use jig_provider_api::dispatch::now_unix_ms;
use jig_provider_api::{CallContext, ChannelPorts, ContractIdentity, NoPorts, Provider};
use serde_json::{json, Value};

pub fn kv_descriptor_path() -> PathBuf {
    super::artifacts::workspace_root().join("providers/examples/contracts/kv.capability.json")
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
    provider.call(&ctx(), "get", &json!({ "key": key }), no_ports())
}

/// The ports of a call without channels.
pub fn no_ports() -> Arc<dyn ChannelPorts> {
    Arc::new(NoPorts)
}
