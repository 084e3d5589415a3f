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

#[test]
fn run_and_exec_refuse_bad_receive_values_before_reading_anything() {
    use jig_engine::exec::receive::MAX_RECEIVE;
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..=MAX_RECEIVE).map(|i| format!("c{i}")).collect();
    let repeat = |n: usize| -> Vec<&str> {
        names[..n]
            .iter()
            .flat_map(|name| ["--receive", name.as_str()])
            .collect()
    };
    for command in [
        &["run", "flow:flows/hello"][..],
        &["exec", "missing-dir"][..],
    ] {
        let cases: [Vec<&str>; 3] = [
            repeat(MAX_RECEIVE + 1),
            vec!["--receive", "events", "--receive", "events"],
            vec!["--receive", "Not-A-Name"],
        ];
        for extra in cases {
            let args: Vec<&str> = command.iter().copied().chain(extra.clone()).collect();
            let run = run_jig(dir.path(), &args);
            assert_eq!(run.status, 2, "{args:?}: {run:?}");
            assert!(run.stderr.starts_with("JIG_USAGE: "), "{args:?}: {run:?}");
        }
        // At the limit the values parse; what fails next is the missing
        // project or package, not the option.
        let args: Vec<&str> = command.iter().copied().chain(repeat(MAX_RECEIVE)).collect();
        let run = run_jig(dir.path(), &args);
        assert!(!run.stderr.starts_with("JIG_USAGE: "), "{args:?}: {run:?}");
    }
}
