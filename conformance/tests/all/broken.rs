//! The runner fails deliberately broken components with a clear message.
//! `tests/broken/component.py MODE` writes frames by hand and breaks one
//! rule per mode; mode `ok` breaks none, so the same script passing proves
//! each failure comes from the broken rule alone.

use std::process::Command;

use flow_conformance::{run, Component, Components};

fn broken(mode: &str) -> Component {
    Component {
        argv: vec![
            "python3".into(),
            concat!(env!("CARGO_MANIFEST_DIR"), "/tests/broken/component.py").into(),
            mode.into(),
        ],
    }
}

/// What `flow-conformance component --case golden -- <broken MODE>` prints.
fn golden_lines(mode: &str) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_flow-conformance"))
        .args(["component", "--case", "golden", "--"])
        .args(broken(mode).argv)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn the_unbroken_script_passes() {
    assert_eq!(
        golden_lines("ok"),
        (
            Some(0),
            "PASS golden-conversation\n1 passed, 0 failed\n".into()
        )
    );
}

#[test]
fn a_reused_request_id_fails() {
    assert_eq!(
        golden_lines("reused-id"),
        (
            Some(1),
            "FAIL golden-conversation: component reused request id \"c:1\"\n0 passed, 1 failed\n"
                .into()
        )
    );
}

#[test]
fn trailing_stdout_bytes_fail() {
    assert_eq!(
        golden_lines("trailing-bytes"),
        (
            Some(1),
            "FAIL golden-conversation: stdout ended inside a frame (trailing bytes)\n\
             0 passed, 1 failed\n"
                .into()
        )
    );
}

#[test]
fn a_nonzero_exit_fails() {
    assert_eq!(
        golden_lines("nonzero-exit"),
        (
            Some(1),
            "FAIL golden-conversation: component exited with exit status: 3 after its root \
             response\n0 passed, 1 failed\n"
                .into()
        )
    );
}

#[test]
fn sixty_five_open_requests_fail() {
    let components = Components {
        matrix: Some(broken("fanout-65")),
        ..Default::default()
    };
    let verdicts = run(&components, Some("simultaneous-request-ceiling"), |_| {});
    let lines: Vec<String> = verdicts.iter().map(|v| v.line()).collect();
    assert_eq!(
        lines,
        [
            "FAIL simultaneous-request-ceiling: 65th request before a slot freed: \
          component has 65 unanswered requests"
        ]
    );
}
