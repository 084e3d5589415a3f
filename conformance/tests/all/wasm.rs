//! The corpus against the SDK examples built for `wasm32-wasip1`, run by
//! `flow-wasm-run` under the wasmtime the host embeds: the same component
//! source must pass natively and as a WASM guest (no threads, no fd moves).

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use flow_conformance::{Component, Target, CASES};

/// Builds every flow-sdk example for wasm32-wasip1 once per test process.
fn wasm_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sdk-wasm");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "flow-sdk", "--examples"])
            .args(["--target", "wasm32-wasip1", "--target-dir"])
            .arg(&target)
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .status()
            .expect("cargo runs");
        assert!(
            status.success(),
            "building the wasm32-wasip1 examples failed"
        );
        target.join("wasm32-wasip1/debug/examples")
    })
}

/// `flow-wasm-run --cache DIR NAME.wasm`: compiled code is cached, so the
/// dozens of starts a corpus makes compile each module once.
pub fn wasm_example(name: &str) -> Component {
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("wasm-cache");
    Component {
        argv: vec![
            env!("CARGO_BIN_EXE_flow-wasm-run").into(),
            "--cache".into(),
            cache.display().to_string(),
            wasm_dir()
                .join(format!("{name}.wasm"))
                .display()
                .to_string(),
        ],
    }
}

fn target_passes(target: Target, example: &str) {
    let component = wasm_example(example);
    let mut failures = Vec::new();
    let mut ran = 0;
    for case in CASES.iter().filter(|c| c.target == target) {
        ran += 1;
        if let Err(reason) = (case.run)(&component) {
            failures.push(format!("FAIL {}: {reason}", case.name));
        }
    }
    assert!(ran > 0, "no cases for {target:?}");
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn standard_passes_as_wasm() {
    target_passes(Target::Standard, "standard");
}

#[test]
fn matrix_passes_as_wasm() {
    target_passes(Target::Matrix, "matrix");
}

#[test]
fn channel_examples_pass_as_wasm() {
    target_passes(Target::Channels, "channels");
    target_passes(Target::Broadcast, "broadcast");
    target_passes(Target::ChannelWiring, "channel_wiring");
}

#[test]
fn wasm_run_reports_usage_and_load_errors_with_status_two() {
    let run = || Command::new(env!("CARGO_BIN_EXE_flow-wasm-run"));
    let out = run().output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "usage: flow-wasm-run [--cache DIR] MODULE.wasm\n"
    );
    let out = run().arg("/nonexistent.wasm").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("flow-wasm-run: /nonexistent.wasm: "));
}

#[test]
fn a_wasm_component_without_a_root_exits_with_the_sdk_status() {
    let component = wasm_example("standard");
    let out = Command::new(&component.argv[0])
        .args(&component.argv[1..])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(flow_sdk::EXIT_UNANSWERED));
    assert!(out.stdout.is_empty());
}
