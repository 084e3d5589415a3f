//! Runs the conformance runner against the SDK components: the Rust SDK's
//! examples (natively and as wasm32-wasip1), the Python SDK's and the
//! TypeScript SDK's components (`corpus`).
//!
//! The examples are built by this test with `cargo build -p flow-sdk
//! --examples` into a private target directory under `CARGO_TARGET_TMPDIR`
//! (the outer `cargo test` holds the lock on the shared target directory,
//! so building there would wait forever). The first run compiles the SDK
//! once more; later runs are incremental.

mod broken;
mod corpus;
mod runner;
mod wasm;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use flow_conformance::Component;

/// Builds the flow-sdk examples once per test process and returns their directory.
fn examples_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sdk-examples");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "flow-sdk", "--examples", "--target-dir"])
            .arg(&target)
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the flow-sdk examples failed");
        target.join("debug").join("examples")
    })
}

/// A component command for one example.
pub fn example(name: &str) -> Component {
    Component {
        argv: vec![examples_dir().join(name).display().to_string()],
    }
}
