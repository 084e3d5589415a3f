//! The bundled Python SDK's own test suite, with an independent host peer.

use crate::support::*;

#[test]
fn python_sdk_unit_tests_pass() {
    let dir = workspace().join("host/python");
    let out = std::process::Command::new("python3")
        .current_dir(&dir)
        .args(["-m", "unittest", "discover", "-s", "tests"])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3 runs");
    let run = output(out);
    assert_eq!(run.status, 0, "{run:?}");
    assert!(run.stderr.contains("\nOK"), "{run:?}");
}
