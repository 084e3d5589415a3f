//! Loads the example native libraries built from source and calls them the
//! way the host does.

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
mod kv;
mod load;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use jig_provider_api::{Provider, ProviderDecl, ProviderKind};
use jig_provider_native::NativeProvider;
use serde_json::Value;

pub fn decl(name: &str, path: &Path, settings: Value) -> ProviderDecl {
    ProviderDecl {
        name: name.to_owned(),
        kind: ProviderKind::Native,
        path: Some(path.to_owned()),
        settings,
        secrets: Default::default(),
        grants: Default::default(),
    }
}

pub fn load(package: &str, settings: Value) -> Arc<dyn Provider> {
    let path = artifacts::native(package, artifacts::Profile::Debug);
    NativeProvider::load(&decl(package, &path, settings)).unwrap()
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
