//! One Rust component, built as `flow.wasm` (wasm32-wasip1, run in-process
//! under wasmtime) and as `flow.bin` (native): the same result.

use crate::support::*;

const FLOW_MD: &str = "---\nname: greet\ndescription: Greet a name.\n---\n\nSay hello.\n";

#[test]
fn flow_wasm_and_flow_bin_give_the_same_result() {
    let wasm = greet_wasm();
    let native = greet_native();
    let dir = project(&[
        ("flows/greet-wasm/FLOW.md", FLOW_MD),
        ("flows/greet-bin/FLOW.md", FLOW_MD),
    ]);
    std::fs::copy(&wasm, dir.path().join("flows/greet-wasm/flow.wasm")).unwrap();
    std::fs::copy(&native, dir.path().join("flows/greet-bin/flow.bin")).unwrap();
    review(dir.path());
    let a = run_jig(
        dir.path(),
        &["run", "flow:flows/greet-wasm", "--input", "\"Ada\""],
    );
    let b = run_jig(
        dir.path(),
        &["run", "flow:flows/greet-bin", "--input", "\"Ada\""],
    );
    assert_eq!(a.status, 0, "{a:?}");
    assert_eq!(b.status, 0, "{b:?}");
    assert_eq!(
        a.json()["output"],
        serde_json::json!({"message": "Hello, Ada!"})
    );
    assert_eq!(a.json()["output"], b.json()["output"]);
    assert_eq!(a.json()["outcome"], b.json()["outcome"]);
    // The diagnostic line reaches stderr in both forms, never the protocol.
    assert!(
        a.json()["diagnostics"]["stderr"]
            .as_str()
            .unwrap()
            .contains("greeting Ada"),
        "{a:?}"
    );
    assert!(
        b.json()["diagnostics"]["stderr"]
            .as_str()
            .unwrap()
            .contains("greeting Ada"),
        "{b:?}"
    );
}
