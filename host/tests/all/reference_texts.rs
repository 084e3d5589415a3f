//! The reference's own CLI texts, each pinned with its
//! stream and exit status as a script sees them (redirected streams). A
//! refusal about a local file names no host path.

use crate::files::files_example;
use crate::support::*;

/// Exactly this exit status, stdout and stderr.
fn says(run: &Run, status: i32, stdout: &str, stderr: &str) {
    assert_eq!(
        (run.status, run.stdout.as_str(), run.stderr.as_str()),
        (status, stdout, stderr),
        "{run:?}"
    );
}

/// This exit status, nothing on stdout, and a diagnostic of `code` that
/// contains `part` and no part of `dir`'s host path.
fn refuses(run: &Run, status: i32, code: &str, part: &str, dir: &std::path::Path) {
    assert_eq!((run.status, run.stdout.as_str()), (status, ""), "{run:?}");
    assert!(run.stderr.starts_with(&format!("{code}: ")), "{run:?}");
    assert!(run.stderr.contains(part), "{run:?}");
    assert!(
        !run.stderr.contains(dir.to_str().unwrap()),
        "a host path is shown: {run:?}"
    );
}

#[test]
fn init_bare_says_what_it_made_and_why_it_cannot() {
    let dir = tempfile::tempdir().unwrap();
    says(
        &run_jig(dir.path(), &["init", "--bare", "demo"]),
        0,
        "created bare Jig project\n",
        "",
    );
    says(
        &run_jig(dir.path(), &["init", "--bare", "demo"]),
        1,
        "",
        "JIG_INIT_DESTINATION_EXISTS: the destination already exists\n",
    );
    says(
        &run_jig(dir.path(), &["init", "--bare", "missing/demo"]),
        2,
        "",
        "JIG_INIT_UNAVAILABLE: the destination cannot be initialized\n",
    );
}

#[test]
fn review_of_an_unchanged_project_says_only_that_it_is_ready() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(run_jig(dir.path(), &["init", "--bare", "demo"]).status, 0);
    let demo = dir.path().join("demo");
    review(&demo);
    says(&run_jig(&demo, &["review"]), 0, "project is ready\n", "");
}

#[test]
fn run_refuses_a_target_input_or_timeout_in_the_reference_words() {
    let dir = tempfile::tempdir().unwrap();
    says(
        &run_jig(dir.path(), &["run", "work"]),
        1,
        "",
        "JIG_RUN_TARGET_INVALID: the target must be flow:<path> or binding:<id>\n",
    );
    says(
        &run_jig(
            dir.path(),
            &["run", "flow:flows/hello", "--input", r#"{"a":1,"a":2}"#],
        ),
        1,
        "",
        "JIG_RUN_INPUT_INVALID: --input must be FLOW JSON/1\n",
    );
    for bad in ["", "0s", "1", "1.5s", "25h", "-1s", "05s", "1441m"] {
        says(
            &run_jig(
                dir.path(),
                &["run", "flow:flows/hello", &format!("--timeout={bad}")],
            ),
            1,
            "",
            "JIG_RUN_TIMEOUT_INVALID: --timeout must be a positive integer followed by ms, s, \
             m, or h, up to 24h\n",
        );
    }
}

#[test]
fn an_input_file_is_refused_without_its_path() {
    let dir = tempfile::tempdir().unwrap();
    write_files(
        dir.path(),
        &[("real.json", "{}"), ("broken.json", "{\"a\":")],
    );
    std::os::unix::fs::symlink(dir.path().join("real.json"), dir.path().join("link.json")).unwrap();
    let run = |file: &str| {
        run_jig(
            dir.path(),
            &["run", "flow:flows/hello", "--input", &format!("@{file}")],
        )
    };
    let code = "JIG_RUN_INPUT_INVALID";
    let d = dir.path();
    refuses(
        &run("link.json"),
        1,
        code,
        "--input file cannot be a symbolic link",
        d,
    );
    refuses(
        &run("absent.json"),
        1,
        code,
        "the selected --input file does not exist",
        d,
    );
    refuses(
        &run("broken.json"),
        1,
        code,
        "the selected --input file is not FLOW JSON/1",
        d,
    );
}

#[test]
fn a_declared_read_attachment_not_given_asks_for_exactly_one() {
    let project = files_example();
    let out = tempfile::tempdir().unwrap();
    let out = out.path().join("o");
    let run = run_jig(
        project.path(),
        &[
            "run",
            "flow:flows/summarize",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    refuses(
        &run,
        1,
        "JIG_RUN_FILES_INVALID",
        "JIG_RUN_FILES_INVALID: supply exactly",
        project.path(),
    );
}

#[test]
fn an_invalid_binding_is_named_by_code_path_and_pointer_and_nothing_after() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(run_jig(dir.path(), &["init", "--bare", "p"]).status, 0);
    let p = dir.path().join("p");
    write_files(
        &p,
        &[
            ("flows/review/FLOW.md", "---\nname: review\ndescription: Reviews.\n---\n"),
            (
                "flows/review/flow.py",
                "from jiggy.flow import handle\n\nasync def run(ctx):\n    return {\"outcome\": \"done\", \"output\": None}\n\nhandle(run)\n",
            ),
            (
                "bindings/review.ts",
                "import { defineBinding } from \"@jigging/jig\";\nexport default defineBinding({ package: \"./flows/review\", settings: { strict: true } });\n",
            ),
        ],
    );
    let refusal = "INVALID_CANDIDATE: the project definition is invalid; \
                   PROJECT_BINDING_SETTINGS_INVALID at \"bindings/review.ts\" pointer \"/settings\"\n";
    says(&run_jig(&p, &["review", "--yes"]), 1, "", refusal);
    // `--details` explains each diagnostic after the same line.
    let explained = run_jig(&p, &["review", "--yes", "--details"]);
    assert_eq!((explained.status, explained.stdout.as_str()), (1, ""));
    let (first, rest) = explained.stderr.split_at(refusal.len());
    assert_eq!(first, refusal, "{explained:?}");
    assert!(
        rest.starts_with(
            "  PROJECT_BINDING_SETTINGS_INVALID at \"bindings/review.ts\" pointer \"/settings\": "
        ),
        "{explained:?}"
    );
}

#[test]
fn an_agent_flow_without_an_endpoint_is_refused_with_fixed_guidance_and_its_flow_md() {
    let dir = crate::agent::agent_project(crate::agent::FLOW_PY);
    let run = crate::agent::review_with(dir.path(), &[]);
    assert_eq!((run.status, run.stdout.as_str()), (2, ""), "{run:?}");
    assert!(run.stderr.starts_with("UNAVAILABLE: "), "{run:?}");
    assert!(
        run.stderr
            .ends_with("; PROJECT_AGENT_UNAVAILABLE at \"flows/ask/FLOW.md\"\n"),
        "{run:?}"
    );
    assert_eq!(run.stderr.lines().count(), 1, "{run:?}");
}

#[test]
fn an_attachment_on_another_filesystem_or_over_the_budget_names_no_path() {
    let project = files_example();
    let out = tempfile::tempdir().unwrap();
    let run = |source: &std::path::Path| {
        run_jig(
            project.path(),
            &[
                "run",
                "flow:flows/summarize",
                "--attach",
                &format!("source={}", source.display()),
                "--out",
                out.path().join("o").to_str().unwrap(),
            ],
        )
    };
    let proc = std::path::Path::new("/proc");
    let refused = run(proc);
    refuses(
        &refused,
        1,
        "JIG_RUN_FILES_INVALID",
        "ext4, XFS, Btrfs, or tmpfs",
        project.path(),
    );
    assert!(!refused.stderr.contains("/proc"), "{refused:?}");

    let big = tempfile::tempdir().unwrap();
    std::fs::write(big.path().join("big.bin"), vec![0u8; 8 * 1024 * 1024 + 1]).unwrap();
    let refused = run(big.path());
    refuses(
        &refused,
        1,
        "JIG_RUN_FILES_INVALID",
        "remaining 8388608-byte input budget",
        big.path(),
    );
    assert!(!refused.stderr.contains("big.bin"), "{refused:?}");
}
