//! `jig exec` and the host's classification of components that break the
//! Run/1 rules. The hostile components are bare Python speaking raw frames.

use std::path::Path;

use crate::support::*;

fn package(root: &Path, name: &str, flow_py: &str) {
    write_files(
        root,
        &[
            (
                &format!("{name}/FLOW.md"),
                &format!("---\nname: {name}\ndescription: A hostile test component.\n---\n"),
            ),
            (&format!("{name}/flow.py"), flow_py),
        ],
    );
}

/// Read the flow/run request, then run `then` (Python source with `req`, `send`).
fn raw(then: &str) -> String {
    format!(
        "import json, os, sys, time\n\
         req = json.loads(sys.stdin.readline())\n\
         def send(obj):\n    os.write(1, (json.dumps(obj) + '\\n').encode())\n\
         def ok(result):\n    send({{'jsonrpc': '2.0', 'id': req['id'], 'result': result}})\n\
         {then}\n"
    )
}

fn exec(dir: &Path, name: &str, extra: &[&str]) -> Run {
    let mut args = vec!["exec", name, "--json"];
    args.extend_from_slice(extra);
    run_jig(dir, &args)
}

#[test]
fn exec_runs_a_package_with_a_child_slot() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&workspace().join("examples/triage/flows"), dir.path());
    let run = exec(
        dir.path(),
        "intake",
        &[
            "--child",
            "classifier=code",
            "--input",
            "\"please add dark mode\"",
        ],
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(run.json()["output"]["label"], "feature");
    assert!(
        std::fs::read_dir(dir.path())
            .unwrap()
            .all(|e| e.unwrap().file_name() != ".jig"),
        "exec keeps no state"
    );
}

#[test]
fn broken_components_are_classified() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, String, &str)] = &[
        ("trailing", raw("ok({'outcome': 'done', 'output': None})\nos.write(1, b'{}\\n')"), "PROTOCOL_ERROR"),
        ("exits-three", raw("ok({'outcome': 'done', 'output': None})\nsys.exit(3)"), "EXECUTION_FAILED"),
        ("never-answers", raw("sys.stdin.read()\ntime.sleep(60)"), "DEADLINE_EXCEEDED"),
        ("ignores-cancel", raw("while True:\n    time.sleep(1)"), "DEADLINE_EXCEEDED"),
        (
            "answers-twice",
            raw("ok({'outcome': 'done', 'output': None})\nok({'outcome': 'done', 'output': None})"),
            "PROTOCOL_ERROR",
        ),
        ("numeric-id", raw("send({'jsonrpc': '2.0', 'id': 7, 'method': 'capability/call', 'params': {}})\ntime.sleep(5)"), "PROTOCOL_ERROR"),
        ("bad-outcome", raw("ok({'outcome': 'Done!', 'output': None})"), "INVALID_RESULT"),
        ("no-output", raw("ok({'outcome': 'done'})"), "INVALID_RESULT"),
    ];
    for (name, source, _) in cases {
        package(dir.path(), name, source);
    }
    for (name, _, code) in cases {
        let started = std::time::Instant::now();
        let run = exec(dir.path(), name, &["--timeout", "3s"]);
        assert_eq!(run.status, 1, "{name}: {run:?}");
        assert_eq!(run.json()["code"], *code, "{name}: {run:?}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{name} took {:?}",
            started.elapsed()
        );
    }
}

#[test]
fn a_sixty_fifth_pending_request_is_refused_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    package(dir.path(), "sleeper", &raw("time.sleep(30)"));
    // 64 requests join one pending child operation (one sibling, 64 waiters
    // on the wire); the 65th request is refused before dispatch. The
    // component then cancels the 64, collects their CANCELLED responses, and
    // succeeds with what it saw.
    let flood = raw(
        "call = {'operationId': 'op:1', 'slot': 'slow', 'input': None}\n\
         for i in range(65):\n\
         \x20   send({'jsonrpc': '2.0', 'id': f'c:{i}', 'method': 'flow/run-child', 'params': call})\n\
         first = json.loads(sys.stdin.readline())\n\
         for i in range(64):\n\
         \x20   send({'jsonrpc': '2.0', 'method': 'request/cancel', 'params': {'requestId': f'c:{i}'}})\n\
         seen = {}\n\
         while len(seen) < 64:\n\
         \x20   msg = json.loads(sys.stdin.readline())\n\
         \x20   seen[msg['id']] = msg['error']['data']['code']\n\
         ok({'outcome': 'done', 'output': {'refused': [first['id'], first['error']['data']['code']], 'cancelled': sorted(set(seen.values()))}})",
    );
    package(dir.path(), "flood", &flood);
    let run = exec(
        dir.path(),
        "flood",
        &["--child", "slow=sleeper", "--timeout", "20s"],
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(
        run.json()["output"],
        serde_json::json!({"refused": ["c:64", "RESOURCE_EXHAUSTED"], "cancelled": ["CANCELLED"]})
    );
}

#[test]
fn answering_the_root_with_requests_pending_is_a_violation() {
    let dir = tempfile::tempdir().unwrap();
    package(dir.path(), "sleeper", &raw("time.sleep(30)"));
    let eager = raw(
        "send({'jsonrpc': '2.0', 'id': 'c:1', 'method': 'flow/run-child', 'params': {'operationId': 'op:1', 'slot': 'slow', 'input': None}})\n\
         time.sleep(0.2)\n\
         ok({'outcome': 'done', 'output': None})",
    );
    package(dir.path(), "eager", &eager);
    let run = exec(
        dir.path(),
        "eager",
        &["--child", "slow=sleeper", "--timeout", "10s"],
    );
    assert_eq!(run.status, 1, "{run:?}");
    assert_eq!(run.json()["code"], "PROTOCOL_ERROR", "{run:?}");
}

/// `jig exec` takes a file Run's options as `jig run` does: a read
/// attachment (whole, or the files `--select` names), a writable one whose
/// files become the packet `--out` publishes, and the same refusals
/// before anything runs.
#[test]
fn exec_attaches_selects_and_publishes_a_packet_as_run_does() {
    let dir = tempfile::tempdir().unwrap();
    write_files(
        dir.path(),
        &[
            (
                "count/FLOW.md",
                "---\nname: count\ndescription: Count the attached files.\nattachments:\n  source: read\n  deliverables: read-write\n---\n",
            ),
            (
                "count/flow.py",
                "import os\nfrom jiggy.flow import handle\n\nasync def run(context):\n    source = context.attachments['source']['path']\n    names = sorted(os.path.relpath(os.path.join(d, f), source) for d, _, fs in os.walk(source) for f in fs)\n    out = context.attachments.get('deliverables')\n    if out:\n        with open(os.path.join(out['path'], 'names.txt'), 'w') as f:\n            f.write('\\n'.join(names))\n    return {'outcome': 'done', 'output': names}\n\nhandle(run)\n",
            ),
            (
                "list/FLOW.md",
                "---\nname: list\ndescription: List the attached files.\nattachments:\n  source: read\n---\n",
            ),
            (
                "list/flow.py",
                "import os\nfrom jiggy.flow import handle\n\nasync def run(context):\n    source = context.attachments['source']['path']\n    return {'outcome': 'done', 'output': sorted(os.path.relpath(os.path.join(d, f), source) for d, _, fs in os.walk(source) for f in fs)}\n\nhandle(run)\n",
            ),
            ("docs/a.txt", "one\n"),
            ("docs/sub/b.txt", "two\n"),
        ],
    );
    let run = exec(dir.path(), "list", &["--attach", "source=docs"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(
        run.json()["output"],
        serde_json::json!(["a.txt", "sub/b.txt"])
    );
    let run = exec(
        dir.path(),
        "list",
        &["--attach", "source=docs", "--select", "source=sub/b.txt"],
    );
    assert_eq!(
        run.json()["output"],
        serde_json::json!(["sub/b.txt"]),
        "{run:?}"
    );

    let run = exec(
        dir.path(),
        "count",
        &["--attach", "source=docs", "--out", "packet"],
    );
    assert_eq!(run.status, 0, "{run:?}");
    let terminal = run.json();
    assert_eq!(terminal["delivery"]["status"], "written", "{run:?}");
    assert_eq!(terminal["method"]["target"], "binding:exec");
    assert_eq!(
        terminal["input"]["attachments"]["source"][0]["path"],
        "a.txt"
    );
    let packet = dir.path().join("packet");
    assert_eq!(
        std::fs::read_to_string(packet.join("files/names.txt")).unwrap(),
        "a.txt\nsub/b.txt"
    );
    let result: serde_json::Value =
        serde_json::from_slice(&std::fs::read(packet.join("result.json")).unwrap()).unwrap();
    assert_eq!(result["execution"]["status"], "succeeded");
    assert_eq!(result["input"], terminal["input"]);

    // The same refusals as jig run, before anything runs: a writable
    // attachment without --out, an attachment the package does not
    // declare, and an --out that exists.
    let refused = exec(dir.path(), "count", &["--attach", "source=docs"]);
    assert_eq!(refused.status, 1, "{refused:?}");
    assert!(
        refused.stderr.contains("give --out DIR to receive it"),
        "{refused:?}"
    );
    let refused = exec(dir.path(), "list", &["--attach", "other=docs"]);
    assert_eq!(refused.status, 1, "{refused:?}");
    assert!(
        refused.stderr.starts_with("JIG_RUN_FILES_INVALID: "),
        "{refused:?}"
    );
    let refused = exec(
        dir.path(),
        "count",
        &["--attach", "source=docs", "--out", "packet"],
    );
    assert_eq!(refused.status, 1, "{refused:?}");
    assert!(
        refused.stderr.starts_with("JIG_OUTPUT_EXISTS: "),
        "{refused:?}"
    );
}
