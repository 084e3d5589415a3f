//! For the benches that measure a bare component against a Run
//! (`overhead`, `runtimes`): the Rust SDK's `greet` example as a
//! `flow.bin`, and one Run/1 exchange with a component started bare.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

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

/// Write one `flow/run` frame (input `"bench"`) to `child`, read the one
/// response frame, close stdin, wait for the exit: the response holds
/// `expected`.
pub fn exchange(mut child: Child, scratch: &Path, expected: &str) {
    let frame = serde_json::json!({
        "jsonrpc": "2.0", "id": "host:1", "method": "flow/run", "params": {
            "protocol": "run/1", "input": "bench", "settings": {}, "attachments": {},
            "channels": {}, "scratch": scratch,
            "deadlineUnixMs": 4_102_444_800_000u64,
        }
    });
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(format!("{frame}\n").as_bytes()).unwrap();
    let mut response = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut response)
        .unwrap();
    drop(stdin);
    assert!(child.wait().unwrap().success());
    assert!(response.contains(expected), "{response}");
}
