//! The `flow-conformance` binary as a user runs it: lines and exit status.

use std::process::Command;

use crate::example;

fn runner() -> Command {
    Command::new(env!("CARGO_BIN_EXE_flow-conformance"))
}

#[test]
fn passing_component_exits_zero_with_pass_lines() {
    let standard = example("standard");
    let out = runner()
        .args(["--case", "golden", "--"])
        .args(&standard.argv)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert_eq!(stdout, "PASS golden-conversation\n1 passed, 0 failed\n");
}

#[test]
fn component_subcommand_runs_the_named_components() {
    let wiring = example("channel_wiring");
    let out = runner()
        .args([
            "component",
            "--case",
            "channel-wiring-worker",
            "--channel-wiring",
        ])
        .args(&wiring.argv)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert_eq!(stdout, "PASS channel-wiring-worker\n1 passed, 0 failed\n");
}

#[test]
fn failing_component_exits_one_with_a_fail_line() {
    // greet answers at once, so it cannot be the standard component.
    let greet = example("greet");
    let out = runner()
        .args(["--case", "golden", "--"])
        .args(&greet.argv)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.starts_with("FAIL golden-conversation: expected a request"),
        "{stdout}"
    );
}

#[test]
fn usage_errors_exit_two() {
    let out = runner().output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = runner().arg("--bogus").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn greet_examples_answer_as_documented() {
    use flow_conformance::Session;
    use serde_json::json;

    let mut s = Session::spawn(&example("greet")).unwrap();
    s.send_root(json!("Ada")).unwrap();
    let result = s.expect_root().unwrap().unwrap();
    assert_eq!(
        result.to_value(),
        json!({"outcome":"done","output":{"message":"Hello, Ada!"}})
    );
    s.finish_clean().unwrap();
    assert!(
        s.stderr().contains("greeting Ada"),
        "println! went to stderr"
    );

    for (reply, want) in [
        (json!({"value": 42}), json!({"value": 42})),
        (
            json!({"error": {"name": "not-found", "data": null}}),
            json!({"error": "not-found"}),
        ),
    ] {
        let mut s = Session::spawn(&example("greet_capability")).unwrap();
        s.send_root(json!("k1")).unwrap();
        let call = s.expect_request().unwrap();
        assert_eq!(
            call.params,
            json!({"operationId":"lookup:1","slot":"store","method":"get","input":{"key":"k1"}})
        );
        s.reply(&call.id, reply).unwrap();
        let result = s.expect_root().unwrap().unwrap();
        assert_eq!(
            result.to_value(),
            json!({"outcome": "done", "output": want})
        );
        s.finish_clean().unwrap();
    }
}
