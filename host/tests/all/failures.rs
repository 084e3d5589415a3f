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

const RAISES_PY: &str = "from jiggy.flow import handle\n\n\ndef lookup(request):\n    return request[\"data\"]\n\n\nasync def run(ctx):\n    return {\"outcome\": \"done\", \"output\": lookup(dict(ctx.input))}\n\nhandle(run)\n";
const THROWS_TS: &str = "import { handle } from \"@jigging/flow\";\n\nfunction lookup(request: any) {\n  return request.missing.data;\n}\n\nawait handle(async (run) => ({ outcome: \"done\", output: lookup(run.input) }));\n";

/// Issue 50: a handler's ordinary error arrives with its type, its message
/// and its own frames, in the details and on stderr, in both SDKs.
#[test]
fn a_handler_error_keeps_its_type_message_and_stack() {
    let dir = project(&[
        (
            "flows/raises/FLOW.md",
            "---\nname: raises\ndescription: Raises.\n---\n",
        ),
        ("flows/raises/flow.py", RAISES_PY),
        (
            "flows/throws/FLOW.md",
            "---\nname: throws\ndescription: Throws.\n---\n",
        ),
        ("flows/throws/flow.ts", THROWS_TS),
    ]);
    review(dir.path());

    let run = run_jig(dir.path(), &["run", "flow:flows/raises", "--input", "{}"]);
    assert_eq!(run.status, 1, "{run:?}");
    let terminal = run.json();
    assert_eq!(terminal["code"], "EXECUTION_FAILED", "{terminal}");
    assert_eq!(terminal["message"], "KeyError: 'data'", "{terminal}");
    let exception = &terminal["details"]["exception"];
    assert_eq!(exception["type"], "KeyError");
    assert_eq!(exception["message"], "'data'");
    let stack: Vec<&str> = exception["stack"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    // Innermost first, the Flow's own frames only.
    // Innermost first, the Flow's own frames only, by their path in the
    // package (no host directory).
    assert_eq!(
        stack,
        ["lookup (flow.py:5)", "run (flow.py:9)"],
        "{terminal}"
    );
    let stderr = terminal["diagnostics"]["stderr"].as_str().unwrap();
    // The usual traceback on stderr, with the same frames and nothing of
    // the SDK's or the host's directories.
    assert!(
        stderr.starts_with(
            "Traceback (most recent call last):\n  File \"flow.py\", line 9, in run\n"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("\n  File \"flow.py\", line 5, in lookup\n"),
        "{stderr}"
    );
    assert!(stderr.ends_with("\nKeyError: 'data'\n"), "{stderr}");
    assert!(
        !stderr.contains("_session.py") && !stderr.contains("/.jig/"),
        "{stderr}"
    );

    let run = run_jig(dir.path(), &["run", "flow:flows/throws", "--input", "{}"]);
    assert_eq!(run.status, 1, "{run:?}");
    let terminal = run.json();
    assert_eq!(terminal["code"], "EXECUTION_FAILED", "{terminal}");
    let message = terminal["message"].as_str().unwrap();
    assert!(message.starts_with("TypeError: "), "{terminal}");
    let exception = &terminal["details"]["exception"];
    assert_eq!(exception["type"], "TypeError");
    let top = exception["stack"][0].as_str().unwrap();
    assert!(top.starts_with("lookup (flow.ts:4:"), "{terminal}");
    assert!(
        exception["stack"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| !f.as_str().unwrap().contains("@jigging/flow")),
        "no SDK frames: {terminal}"
    );
    let stderr = terminal["diagnostics"]["stderr"].as_str().unwrap();
    assert!(stderr.starts_with(message), "{stderr}");
    assert!(stderr.contains("    at lookup (flow.ts:4:"), "{stderr}");
    assert!(!stderr.contains("/.jig/"), "no host directory: {stderr}");
}

fn parent_and_child(child_body: &str) -> tempfile::TempDir {
    let dir = project(&[
        (
            "flows/parent/FLOW.md",
            "---\nname: parent\ndescription: Asks its child.\n---\n",
        ),
        (
            "flows/parent/flow.py",
            "import sys\nfrom jiggy.flow import handle\n\nasync def run(ctx):\n    print('parent asks', file=sys.stderr)\n    child = await ctx.run_child_flow(operation_id='ask:1', slot='helper', input=ctx.input)\n    return {'outcome': 'done', 'output': child}\n\nhandle(run)\n",
        ),
        (
            "flows/child/FLOW.md",
            "---\nname: child\ndescription: Helps.\n---\n",
        ),
        ("flows/child/result.schema.json", "{\"$schema\": \"https://flow.jig.md/schemas/schema-1.json\", \"type\": \"object\", \"properties\": {\"output\": {\"type\": \"string\"}}}\n"),
        ("flows/child/flow.py", child_body),
        (
            "bindings/ask.ts",
            "import { defineBinding } from \"@jigging/jig\";\n\nexport default defineBinding({\n  package: \"./flows/parent\",\n  slots: {\n    helper: \"flow:./flows/child\",\n  },\n});\n",
        ),
    ]);
    review(dir.path());
    dir
}

/// Issue 50: a parent that fails because its child did names the slot, the
/// child target, the child's code and message, and keeps the child's stderr.
#[test]
fn a_failed_child_is_named_in_its_parents_terminal() {
    let invalid = parent_and_child(
        "import sys\nfrom jiggy.flow import handle\n\nasync def run(ctx):\n    print('child answers a number', file=sys.stderr)\n    return {'outcome': 'done', 'output': 42}\n\nhandle(run)\n",
    );
    let run = run_jig(invalid.path(), &["run", "binding:ask", "--input", "\"q\""]);
    assert_eq!(run.status, 1, "{run:?}");
    let terminal = run.json();
    assert_eq!(terminal["code"], "INVALID_RESULT", "{terminal}");
    let message = terminal["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "child slot \"helper\" (flow:flows/child) failed with INVALID_RESULT: the result does not satisfy result.schema.json"
        ),
        "{terminal}"
    );
    let child = &terminal["details"]["child"];
    assert_eq!(child["slot"], "helper");
    assert_eq!(child["target"], "flow:flows/child");
    assert_eq!(child["code"], "INVALID_RESULT");
    assert_eq!(child["details"]["instancePointer"], "/output", "{terminal}");
    assert_eq!(child["stderr"], "child answers a number\n");
    assert_eq!(child["stderrTruncated"], false);
    // The parent's own stderr stays its own.
    let parent_stderr = terminal["diagnostics"]["stderr"].as_str().unwrap();
    assert!(parent_stderr.starts_with("parent asks\n"), "{terminal}");
    assert!(!parent_stderr.contains("child answers"), "{terminal}");

    let raising = parent_and_child(
        "import sys\nfrom jiggy.flow import handle\n\nasync def run(ctx):\n    print('child starts', file=sys.stderr)\n    return {'outcome': 'done', 'output': ctx.input['data']}\n\nhandle(run)\n",
    );
    let run = run_jig(raising.path(), &["run", "binding:ask", "--input", "{}"]);
    assert_eq!(run.status, 1, "{run:?}");
    let terminal = run.json();
    assert_eq!(terminal["code"], "EXECUTION_FAILED", "{terminal}");
    assert_eq!(
        terminal["message"],
        "child slot \"helper\" (flow:flows/child) failed with EXECUTION_FAILED: KeyError: 'data'"
    );
    let child = &terminal["details"]["child"];
    assert_eq!(child["code"], "EXECUTION_FAILED");
    assert_eq!(child["message"], "KeyError: 'data'");
    assert_eq!(child["details"]["exception"]["type"], "KeyError");
    let stderr = child["stderr"].as_str().unwrap();
    assert!(stderr.starts_with("child starts\nTraceback"), "{stderr}");
    assert!(stderr.ends_with("KeyError: 'data'\n"), "{stderr}");
}
