//! Loads the example components built from source and calls them the way
//! the host does.

#[path = "../../../examples/artifacts.rs"]
#[allow(dead_code)] // each test binary builds only the artifacts it loads
mod artifacts;

#[path = "../../../examples/kv_calls.rs"]
#[allow(dead_code)] // not every binary uses every helper
mod kv_calls;
pub use kv_calls::{ctx, ctx_with_deadline, get, kv_descriptor_path, kv_identity, no_ports};

#[path = "../../../examples/channel_calls.rs"]
mod channel_calls;

mod channels;
mod faults;
mod grants;
mod kv;
mod load;
mod pool;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use jig_provider_api::{Provider, ProviderDecl, ProviderKind};
use jig_provider_wasm::WasmProvider;
use serde_json::Value;

pub fn decl(name: &str, path: &Path, settings: Value) -> ProviderDecl {
    ProviderDecl {
        name: name.to_owned(),
        kind: ProviderKind::Wasm,
        path: Some(path.to_owned()),
        settings,
        secrets: Default::default(),
        grants: Default::default(),
    }
}

pub fn load(package: &str, settings: Value) -> Arc<dyn Provider> {
    let path = artifacts::wasm(package, artifacts::Profile::Debug);
    WasmProvider::load(&decl(package, &path, settings)).unwrap()
}
