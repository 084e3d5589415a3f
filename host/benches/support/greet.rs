//! The Rust SDK's `greet` example as a `flow.bin`, for the benches that
//! measure a native component (`overhead`, `runtimes`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Build `greet` in release into `target/guests` (a separate target dir,
/// so the outer cargo's lock is not involved) and return the executable.
pub fn build() -> PathBuf {
    let target = workspace().join("target/guests");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(workspace())
        .args(["build", "--quiet", "--release", "-p", "flow-sdk"])
        .args(["--example", "greet", "--target-dir"])
        .arg(&target)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building the greet example failed");
    target.join("release/examples/greet")
}
