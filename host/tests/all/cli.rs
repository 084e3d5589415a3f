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

/// A reviewed project whose `flows/hello` answers `"ran"` and whose
/// `flows/broken` fails.
fn reviewed_project() -> tempfile::TempDir {
    let dir = project(&[
        (
            "flows/hello/FLOW.md",
            "---\nname: hello\ndescription: Answers.\n---\n",
        ),
        (
            "flows/hello/flow.py",
            "from jiggy.flow import handle\n\nasync def run(ctx):\n    return {'outcome': 'done', 'output': 'ran'}\n\nhandle(run)\n",
        ),
        (
            "flows/broken/FLOW.md",
            "---\nname: broken\ndescription: Fails.\n---\n",
        ),
        (
            "flows/broken/flow.py",
            "from jiggy.flow import handle\n\nasync def run(ctx):\n    raise RuntimeError('broken')\n\nhandle(run)\n",
        ),
    ]);
    review(dir.path());
    dir
}

/// The Run IDs `jig runs ARGS` lists (redirected: the first field of each line).
fn listed(dir: &std::path::Path, args: &[&str]) -> Vec<String> {
    let args: Vec<&str> = ["runs"].iter().chain(args).copied().collect();
    let run = run_jig(dir, &args);
    assert_eq!(run.status, 0, "{args:?}: {run:?}");
    run.stdout
        .lines()
        .map(|line| line.split('\t').next().unwrap().to_string())
        .collect()
}

#[test]
fn a_flow_target_with_one_trailing_slash_is_the_same_target() {
    let dir = reviewed_project();
    // As shell completion writes a directory.
    let run = run_jig(dir.path(), &["run", "flow:flows/hello/"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(run.json()["output"], "ran", "{run:?}");
    let runs = run_jig(dir.path(), &["runs"]);
    assert!(
        runs.stdout.ends_with("\tsucceeded\tflow:flows/hello\t\n"),
        "recorded as the same target: {runs:?}"
    );
    // Only one slash: the rest of the path is what it is, and refused.
    for target in ["flow:flows/hello//", "flow:/", "flow:flows//hello"] {
        let run = run_jig(dir.path(), &["run", target]);
        assert_eq!(run.status, 1, "{target}: {run:?}");
        assert!(
            run.stderr.starts_with("JIG_RUN_TARGET_INVALID: "),
            "{target}: {run:?}"
        );
    }
}

#[test]
fn commands_find_their_project_from_a_subdirectory_as_cargo_does() {
    let dir = reviewed_project();
    let deep = dir.path().join("notes/drafts");
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join("input.json"), "\"from drafts\"").unwrap();
    let again = run_jig(&deep, &["review"]);
    assert_eq!(
        (again.status, again.stdout.as_str()),
        (0, "project is ready\n"),
        "{again:?}"
    );
    // Relative paths stay relative to where the command runs.
    let run = run_jig(
        &deep,
        &["run", "flow:flows/hello", "--input", "@input.json"],
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(listed(&deep, &[]), listed(dir.path(), &[]));
    let from_c = run_jig(
        dir.path().parent().unwrap(),
        &["-C", deep.to_str().unwrap(), "runs"],
    );
    assert_eq!(from_c.status, 0, "{from_c:?}");
    assert_eq!(from_c.stdout.lines().count(), 1, "{from_c:?}");
    // A directory named to review is exactly that project.
    let named = run_jig(dir.path(), &["review", "notes"]);
    assert_eq!(named.status, 1, "{named:?}");
    assert!(
        named.stderr.starts_with("PROJECT_NOT_FOUND: no jig.ts in "),
        "{named:?}"
    );
    // Nowhere above: the message says where the search began.
    let nowhere = tempfile::tempdir().unwrap();
    let inside = nowhere.path().join("a/b");
    std::fs::create_dir_all(&inside).unwrap();
    let run = run_jig(&inside, &["runs"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert_eq!(
        run.stderr,
        format!(
            "PROJECT_NOT_FOUND: no jig.ts in {} or any directory above it\n",
            inside.canonicalize().unwrap().display()
        ),
        "{run:?}"
    );
    assert!(!inside.join(".jig").exists() && !nowhere.path().join(".jig").exists());
}

#[test]
fn runs_lists_by_status_target_and_limit() {
    let dir = reviewed_project();
    for target in ["flow:flows/hello", "flow:flows/broken", "flow:flows/hello"] {
        run_jig(dir.path(), &["run", target]);
    }
    let all = listed(dir.path(), &[]);
    assert_eq!(all.len(), 3);
    assert_eq!(
        listed(dir.path(), &["--status", "succeeded"]),
        [all[0].clone(), all[2].clone()]
    );
    assert_eq!(
        listed(dir.path(), &["--status", "failed"]),
        [all[1].clone()]
    );
    assert!(listed(dir.path(), &["--status", "pending"]).is_empty());
    assert_eq!(
        listed(dir.path(), &["--target", "flow:flows/broken/"]),
        [all[1].clone()]
    );
    assert_eq!(
        listed(
            dir.path(),
            &["--target", "flow:flows/hello", "--limit", "1"]
        ),
        [all[0].clone()]
    );
    assert_eq!(listed(dir.path(), &["--limit", "1000"]), all);
    // Refused: past the limit's range, an unknown status, a non-target,
    // and a filter given to `runs show`.
    for args in [
        &["runs", "--limit", "0"][..],
        &["runs", "--limit", "1001"][..],
        &["runs", "--status", "done"][..],
        &["runs", "--target", "hello"][..],
        &["runs", "show", all[0].as_str(), "--status", "failed"][..],
    ] {
        let run = run_jig(dir.path(), args);
        assert_eq!(
            (run.status, run.stdout.as_str()),
            (2, ""),
            "{args:?}: {run:?}"
        );
    }
}

/// `jig ARGS` with a stdout whose reader has already gone.
fn into_a_closed_pipe(dir: &std::path::Path, args: &[&str]) -> Run {
    let (reader, writer) = nix::unistd::pipe().unwrap();
    drop(reader);
    let child = jig(dir)
        .args(args)
        .stdout(std::process::Stdio::from(writer))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    output(child.wait_with_output().unwrap())
}

#[test]
fn a_reader_that_stops_early_ends_the_command_quietly() {
    let dir = reviewed_project();
    for _ in 0..3 {
        run_jig(dir.path(), &["run", "flow:flows/hello"]);
    }
    let id = listed(dir.path(), &[])[0].clone();
    for args in [
        &["completions", "zsh"][..],
        &["completions", "bash"][..],
        &["manpage"][..],
        &["--help"][..],
        &["runs"][..],
        &["runs", "show", id.as_str()][..],
        &["run", "flow:flows/hello"][..],
        &["review", "--details"][..],
        &["package", "inspect", "flows/hello"][..],
    ] {
        let run = into_a_closed_pipe(dir.path(), args);
        assert_eq!(
            (run.status, run.stderr.as_str()),
            (0, ""),
            "{args:?}: {run:?}"
        );
    }
}

#[test]
fn a_schema_syntax_error_names_its_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    write_files(
        dir.path(),
        &[(
            "input.schema.json",
            "{\n  \"type\": \"object\",\n  \"required\": [\"a\",]\n}\n",
        )],
    );
    let run = run_jig(dir.path(), &["schema", "check", "input.schema.json"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(
        run.stderr.starts_with("SCHEMA_INVALID_JSON: ")
            && run.stderr.contains(" at line 3, column 20"),
        "{run:?}"
    );
    assert!(!run.stderr.contains("byte"), "{run:?}");
}

#[test]
fn a_binding_typescript_error_names_its_file_line_and_column() {
    let dir = project(&[
        ("flows/a/FLOW.md", "---\nname: a\ndescription: A.\n---\n"),
        ("flows/a/flow.py", "from jiggy.flow import handle\n\nhandle(None)\n"),
        (
            "bindings/greeter.ts",
            "import { defineBinding } from \"@jigging/jig\";\nexport default defineBinding({\n  package: \"./flows/a\" settings: {},\n});\n",
        ),
    ]);
    let run = run_jig(dir.path(), &["review", "--yes", "--details"]);
    assert_eq!(run.status, 1, "{run:?}");
    let mut lines = run.stderr.lines();
    assert!(
        lines.next().unwrap().starts_with("INVALID_CANDIDATE: "),
        "{run:?}"
    );
    assert!(
        run.stderr
            .contains("\"bindings/greeter.ts:3:24\" is not valid TypeScript: "),
        "{run:?}"
    );
}

#[test]
fn a_flow_py_that_does_not_compile_is_refused_at_review_with_its_place() {
    let dir = project(&[
        ("flows/b/FLOW.md", "---\nname: b\ndescription: B.\n---\n"),
        (
            "flows/b/flow.py",
            "from jiggy.flow import handle\nasync def run(ctx:\n    return {'outcome': 'done', 'output': 1}\nhandle(run)\n",
        ),
    ]);
    let run = run_jig(dir.path(), &["review", "--yes"]);
    assert_eq!(
        (run.status, run.stdout.as_str(), run.stderr.as_str()),
        (
            1,
            "",
            "INVALID_CANDIDATE: the project definition is invalid; PACKAGE_ENTRYPOINT_INVALID at \"flows/b/flow.py\"\n"
        ),
        "{run:?}"
    );
    assert!(!dir.path().join("jig.lock").exists(), "nothing is admitted");
    let explained = run_jig(dir.path(), &["review", "--yes", "--details"]);
    assert!(
        explained
            .stderr
            .contains("\"flows/b/flow.py:2:14\" is not valid Python: "),
        "{explained:?}"
    );
    // Fixed, it is admitted and runs.
    write_files(
        dir.path(),
        &[(
            "flows/b/flow.py",
            "from jiggy.flow import handle\nasync def run(ctx):\n    return {'outcome': 'done', 'output': 1}\nhandle(run)\n",
        )],
    );
    review(dir.path());
    let ran = run_jig(dir.path(), &["run", "flow:flows/b"]);
    assert_eq!(
        (ran.status, ran.json()["output"].clone()),
        (0, serde_json::json!(1)),
        "{ran:?}"
    );
}
