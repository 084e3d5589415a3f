use crate::support::*;

#[test]
fn version_prints_the_version_and_a_newline() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_jig(dir.path(), &["--version"]);
    assert_eq!(run.status, 0);
    assert_eq!(run.stdout, format!("{}\n", env!("CARGO_PKG_VERSION")));
    assert!(
        !dir.path().join(".jig").exists(),
        "--version must not touch a project"
    );
}

#[test]
fn init_refuses_an_existing_destination() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("demo")).unwrap();
    let run = run_jig(dir.path(), &["init", "demo"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(
        run.stderr.starts_with("JIG_INIT_DESTINATION_EXISTS: "),
        "{run:?}"
    );
}

#[test]
fn run_validates_arguments_before_reading_anything() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_jig(dir.path(), &["run", "hello"]);
    assert_eq!(run.status, 1);
    assert!(
        run.stderr.starts_with("JIG_RUN_TARGET_INVALID: "),
        "{run:?}"
    );
    let run = run_jig(dir.path(), &["run", "flow:flows/hello", "--timeout", "25h"]);
    assert_eq!(run.status, 1);
    assert!(
        run.stderr.starts_with("JIG_RUN_TIMEOUT_INVALID: "),
        "{run:?}"
    );
    let run = run_jig(
        dir.path(),
        &["run", "flow:flows/hello", "--input", "{\"a\":1,\"a\":2}"],
    );
    assert_eq!(run.status, 1);
    assert!(run.stderr.starts_with("JIG_RUN_INPUT_INVALID: "), "{run:?}");
    let run = run_jig(dir.path(), &["run", "flow:flows/hello"]);
    assert_eq!(run.status, 1);
    assert!(run.stderr.starts_with("PROJECT_NOT_FOUND: "), "{run:?}");
}
