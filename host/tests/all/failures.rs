//! Endings a component can choose, and how the host classifies each.

use crate::support::*;

fn flow(name: &str, body: &str) -> Vec<(String, String)> {
    vec![
        (
            format!("flows/{name}/FLOW.md"),
            format!("---\nname: {name}\ndescription: A test Flow.\n---\n"),
        ),
        (format!("flows/{name}/flow.py"), body.to_string()),
    ]
}

fn project_of(flows: &[Vec<(String, String)>]) -> tempfile::TempDir {
    let files: Vec<(&str, &str)> = flows
        .iter()
        .flatten()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    project(&files)
}

const UNDECLARED: &str = "from jiggy.flow import handle\n\nasync def run(ctx):\n    return {\"outcome\": \"shrug\", \"output\": None}\n\nhandle(run)\n";
const EXITS: &str = "import sys\nprint('leaving early', file=sys.stderr)\nsys.exit(3)\n";
const SLEEPS: &str = "import time\nfrom jiggy.flow import handle\n\nasync def run(ctx):\n    time.sleep(60)\n\nhandle(run)\n";
const SILENT: &str = "import sys\nsys.stdin.readline()\n";
const GARBAGE: &str = "import sys, os\nos.write(1, b'not json\\n')\nsys.stdin.readline()\n";

#[test]
fn each_ending_has_its_code() {
    let dir = project_of(&[
        flow("undeclared", UNDECLARED),
        flow("exits", EXITS),
        flow("sleeps", SLEEPS),
        flow("silent", SILENT),
        flow("garbage", GARBAGE),
    ]);
    review(dir.path());
    let code = |target: &str, extra: &[&str]| {
        let mut args = vec!["run", target];
        args.extend_from_slice(extra);
        let run = run_jig(dir.path(), &args);
        assert_eq!(run.status, 1, "{run:?}");
        run.json()
    };
    assert_eq!(code("flow:flows/undeclared", &[])["code"], "INVALID_RESULT");
    let exits = code("flow:flows/exits", &[]);
    assert_eq!(exits["code"], "EXECUTION_FAILED");
    assert_eq!(exits["diagnostics"]["stderr"], "leaving early\n");
    let started = std::time::Instant::now();
    assert_eq!(
        code("flow:flows/sleeps", &["--timeout", "1s"])["code"],
        "DEADLINE_EXCEEDED"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "the deadline is enforced"
    );
    assert_eq!(code("flow:flows/silent", &[])["code"], "CHANNEL_LOST");
    assert_eq!(code("flow:flows/garbage", &[])["code"], "PROTOCOL_ERROR");
}
