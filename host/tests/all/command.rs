//! Project Command (seed 002 §8 and §11 item 17, docs/src/commands.md,
//! seed 003): a command-capable Binding runs its reviewed commands on a
//! candidate its Flow supplies, each in its own keyless envelope, through
//! the real `jig` binary.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::*;

const FLOW_MD: &str = "---\nname: repair\ndescription: Runs the project's reviewed commands on a candidate.\nuses:\n  project:\n    contract: ./contracts/project-command.capability.json\n---\n";

/// Calls the command the input names and reports its value, or the
/// operational error it got (code and details), as the Flow's output.
const FLOW_TS: &str = r#"import { handle, OperationError } from "@jigging/flow";

await handle(async (run) => {
  // `abortAfterMs` (not part of the call) cancels the call from the Flow.
  const { abortAfterMs, twice, ...input } = run.input as { abortAfterMs?: number; twice?: boolean };
  if (twice) {
    // Two effects at once: the second must be refused before dispatch.
    const call = (id: string) => run.callCapability({ operationId: id, slot: "project", method: "run", input });
    const settled = await Promise.allSettled([call("c1"), call("c2")]);
    return { outcome: "done", output: settled.map((s) => (s.status === "fulfilled" ? "value" : (s.reason as OperationError).code)) };
  }
  const abort = new AbortController();
  if (abortAfterMs) setTimeout(() => abort.abort(), abortAfterMs);
  try {
    const value = await run.callCapability({ operationId: "c1", slot: "project", method: "run", input }, { signal: abort.signal });
    return { outcome: "done", output: { value } };
  } catch (e) {
    if (e instanceof OperationError) {
      // After cancelling, stay a while: the command must be gone meanwhile.
      if (abortAfterMs) await new Promise((r) => setTimeout(r, 3000));
      return { outcome: "done", output: { error: e.code, details: e.details ?? null } };
    }
    throw e;
  }
});
"#;

/// The candidate's program: what it does is chosen by its first argument.
const CLI_TS: &str = r#"import * as fs from "node:fs";
const args = process.argv.slice(2);
const stdin = await Bun.stdin.text();
switch (args[0]) {
  case "echo":
    console.log(JSON.stringify({ args, stdin, cwd: process.cwd(), files: fs.readdirSync(".").sort() }));
    console.error("to stderr");
    process.exit(3);
  case "print":
    process.stdout.write(args[1]);
    break;
  case "sleep":
    console.log("sleeping");
    await new Promise(() => setInterval(() => {}, 1000));
    break;
  case "env":
    console.log(JSON.stringify(process.env));
    break;
  case "net":
    try {
      await fetch(args[1], { signal: AbortSignal.timeout(2000) });
      console.log("reached");
    } catch {
      console.log("blocked");
    }
    break;
  case "read":
    try {
      console.log("read:" + fs.readFileSync(args[1], "utf8"));
    } catch {
      console.log("unreadable");
    }
    break;
  case "write":
    try {
      fs.writeFileSync(args[1], "pwned");
      console.log("written");
    } catch {
      console.log("refused");
    }
    break;
  case "fork": {
    let started = 0;
    try {
      for (; started < 200; started++) Bun.spawn(["/bin/sleep", args[1]], { stdio: ["ignore", "ignore", "ignore"] });
    } catch {}
    console.log("started " + started);
    break;
  }
  case "daemon":
    Bun.spawn(["/bin/sh", "-c", "(/bin/sleep " + args[1] + " &) ; exit 0"], { stdio: ["ignore", "ignore", "ignore"] });
    await Bun.sleep(200);
    console.log("daemonized");
    break;
}
"#;

const PASSING_TEST: &str = r#"import { expect, test } from "bun:test";
test("adds", () => { expect(1 + 1).toBe(2); });
"#;

const FAILING_TEST: &str = r#"import { expect, test } from "bun:test";
test("adds", () => { expect(1 + 1).toBe(3); });
"#;

const BINDING_TS: &str = r#"import { defineBinding } from "@jigging/jig";

export default defineBinding({
  package: "flows/repair",
  commands: {
    cli: { run: "src/cli.ts" },
    tests: { test: ["test/math.test.ts"] },
    quick: { run: "src/cli.ts", timeout: "1s" },
    short: { run: "src/cli.ts", tail: 8 },
  },
});
"#;

fn contract() -> String {
    std::fs::read_to_string(workspace().join("flow/tests/data/project-command.capability.json"))
        .unwrap()
}

/// On hosts where the test's own cgroup cannot delegate, CI names one.
fn containment_config(dir: &Path) {
    if let Ok(parent) = std::env::var("JIG_TEST_CGROUP_PARENT") {
        if !parent.is_empty() {
            write_files(
                dir,
                &[(
                    ".test-config-home/jig/host.toml",
                    &format!("[containment]\ncgroup-parent = {parent:?}\n"),
                )],
            );
        }
    }
}

fn command_project(binding: &str) -> tempfile::TempDir {
    let contract = contract();
    let dir = project(&[
        ("flows/repair/FLOW.md", FLOW_MD),
        ("flows/repair/flow.ts", FLOW_TS),
        (
            "flows/repair/contracts/project-command.capability.json",
            &contract,
        ),
        ("bindings/fixer.ts", binding),
    ]);
    containment_config(dir.path());
    dir
}

fn reviewed() -> tempfile::TempDir {
    let dir = command_project(BINDING_TS);
    review(dir.path());
    dir
}

fn candidate() -> Value {
    json!({
        "src/cli.ts": CLI_TS,
        "test/math.test.ts": PASSING_TEST,
        "README.md": "a candidate",
    })
}

/// Run the Binding with a call input; the Run itself must succeed.
fn call(dir: &Path, input: Value, extra: &[&str]) -> Value {
    let run = call_run(dir, input, extra);
    assert_eq!(run.status, 0, "{run:?}");
    let terminal = run.json();
    assert_eq!(terminal["status"], "succeeded", "{run:?}");
    assert_nothing_left(dir);
    terminal["output"].clone()
}

fn call_run(dir: &Path, input: Value, extra: &[&str]) -> Run {
    let input = input.to_string();
    let mut args = vec!["run", "binding:fixer", "--input", &input];
    args.extend_from_slice(extra);
    run_jig(dir, &args)
}

fn sha256(bytes: &[u8]) -> String {
    flow::digest::sha256_digest(bytes)
}

/// Every directory under `root` whose name starts with `prefix`.
fn dirs_named(root: &Path, prefix: &str) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
        if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            if entry.file_name().to_string_lossy().starts_with(prefix) {
                found.push(entry.path());
            }
            found.extend(dirs_named(&entry.path(), prefix));
        }
    }
    found
}

/// No process of the project and no command directory remain.
fn assert_nothing_left(dir: &Path) {
    let needle = dir.to_string_lossy().into_owned();
    let processes = processes_mentioning(&needle);
    assert!(processes.is_empty(), "processes remain: {processes:?}");
    let left = dirs_named(&dir.join(".jig"), "command-");
    assert!(left.is_empty(), "command files remain: {left:?}");
}

#[test]
fn a_run_command_gets_its_args_and_stdin_and_reports_its_exit() {
    let dir = reviewed();
    let input = json!({"command": "cli", "files": candidate(), "args": ["echo", "two words"], "stdin": "from the Flow"});
    let value = call(dir.path(), input.clone(), &[])["value"].clone();
    let printed: Value = serde_json::from_str(value["stdout"]["text"].as_str().unwrap()).unwrap();
    assert_eq!(printed["args"], json!(["echo", "two words"]));
    assert_eq!(printed["stdin"], "from the Flow");
    // The candidate is the working directory, and nothing else is in it.
    assert_eq!(printed["files"], json!(["README.md", "src", "test"]));
    assert_eq!(
        value["stderr"],
        json!({"text": "to stderr\n", "truncated": false})
    );
    // A non-zero exit is a successful effect with its evidence.
    assert_eq!(value["exitCode"], 3);
    assert_eq!(value["signal"], Value::Null);
    assert_eq!(value["stopReason"], "exited");
    assert_eq!(value["cleanup"], "complete");
    assert_eq!(value["command"], "cli");
    assert_eq!(
        value["invocation"],
        json!(["bun", "src/cli.ts", "echo", "two words"])
    );
    let canonical = flow::json::canonical_string(&candidate());
    assert_eq!(value["candidateDigest"], sha256(canonical.as_bytes()));
    assert_eq!(value["stdinDigest"], sha256(b"from the Flow"));
}

#[test]
fn a_test_command_reports_passing_and_failing_tests() {
    let dir = reviewed();
    let passing = call(
        dir.path(),
        json!({"command": "tests", "files": candidate()}),
        &[],
    )["value"]
        .clone();
    assert_eq!(passing["exitCode"], 0, "{passing}");
    assert_eq!(
        passing["invocation"],
        json!(["bun", "test", "test/math.test.ts"])
    );
    let mut files = candidate();
    files["test/math.test.ts"] = json!(FAILING_TEST);
    let failing =
        call(dir.path(), json!({"command": "tests", "files": files}), &[])["value"].clone();
    assert_eq!(failing["exitCode"], 1, "{failing}");
    assert_eq!(failing["stopReason"], "exited");
    let evidence = format!("{}{}", failing["stdout"]["text"], failing["stderr"]["text"]);
    assert!(evidence.contains("1 fail"), "{failing}");
    // Tests take no arguments.
    let args = call(
        dir.path(),
        json!({"command": "tests", "files": candidate(), "args": ["x"]}),
        &[],
    );
    assert_eq!(args["error"], "INVALID_INPUT", "{args}");
}

#[test]
fn the_timeout_option_stops_the_command_with_its_evidence() {
    let dir = reviewed();
    let started = Instant::now();
    let value = call(
        dir.path(),
        json!({"command": "quick", "files": candidate(), "args": ["sleep"]}),
        &[],
    )["value"]
        .clone();
    assert_eq!(value["stopReason"], "deadline", "{value}");
    assert_eq!(value["exitCode"], Value::Null);
    assert_eq!(value["signal"], "SIGKILL");
    assert_eq!(value["stdout"]["text"], "sleeping\n");
    assert!(started.elapsed() >= Duration::from_secs(1));
}

#[test]
fn the_callers_deadline_cuts_the_command() {
    let dir = reviewed();
    let run = call_run(
        dir.path(),
        json!({"command": "cli", "files": candidate(), "args": ["sleep"]}),
        &["--timeout", "3s"],
    );
    assert_eq!(run.status, 1, "{run:?}");
    assert_eq!(run.json()["code"], "DEADLINE_EXCEEDED", "{run:?}");
    assert_nothing_left(dir.path());
}

#[test]
fn cancelling_the_run_ends_the_command_and_leaves_nothing() {
    let dir = reviewed();
    let input = json!({"command": "cli", "files": candidate(), "args": ["sleep"]}).to_string();
    let child = jig(dir.path())
        .args(["run", "binding:fixer", "--input", &input])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait for the command's envelope (bwrap names its work directory).
    let until = Instant::now() + Duration::from_secs(20);
    while !processes_mentioning(&dir.path().to_string_lossy())
        .iter()
        .any(|p| p.contains("/command-"))
    {
        assert!(Instant::now() < until, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    let run = output(child.wait_with_output().unwrap());
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stderr.contains("JIG_COMMAND_INTERRUPTED"), "{run:?}");
    assert_nothing_left(dir.path());
}

#[test]
fn a_flow_cancelling_its_call_ends_the_command_and_leaves_nothing() {
    let dir = reviewed();
    let input =
        json!({"command": "cli", "files": candidate(), "args": ["sleep"], "abortAfterMs": 1500});
    let mut child = jig(dir.path())
        .args(["run", "binding:fixer", "--input", &input.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let project = dir.path().to_string_lossy().into_owned();
    let command_running = || {
        processes_mentioning(&project)
            .iter()
            .any(|p| p.contains("/command-"))
    };
    let until = Instant::now() + Duration::from_secs(20);
    while !command_running() {
        assert!(Instant::now() < until, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Cancelled by the Flow, the command's envelope ends while the Run
    // (which waits 3 s after the cancellation) still runs.
    while command_running() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the Run ended before the cancelled command did"
        );
        assert!(Instant::now() < until, "the cancelled command kept running");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Its files go right after its processes, while the Run still waits.
    while !dirs_named(&dir.path().join(".jig"), "command-").is_empty() {
        assert!(
            Instant::now() < until,
            "the cancelled command's files stayed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    if child.try_wait().unwrap().is_some() {
        let run = output(child.wait_with_output().unwrap());
        panic!("the Run ended with the command: {run:?}");
    }
    let run = output(child.wait_with_output().unwrap());
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(run.json()["output"]["error"], "CANCELLED", "{run:?}");
    assert_nothing_left(dir.path());
}

#[test]
fn one_command_effect_is_active_at_a_time() {
    let dir = reviewed();
    let output = call(
        dir.path(),
        json!({"command": "quick", "files": candidate(), "args": ["sleep"], "twice": true}),
        &[],
    );
    let mut codes: Vec<String> = serde_json::from_value(output).unwrap();
    codes.sort();
    assert_eq!(codes, ["RESOURCE_EXHAUSTED", "value"]);
}

#[test]
fn the_tail_option_keeps_its_value_and_cuts_one_past() {
    let dir = reviewed();
    let print = |text: &str| {
        call(
            dir.path(),
            json!({"command": "short", "files": candidate(), "args": ["print", text]}),
            &[],
        )["value"]["stdout"]
            .clone()
    };
    assert_eq!(
        print("12345678"),
        json!({"text": "12345678", "truncated": false})
    );
    assert_eq!(
        print("123456789"),
        json!({"text": "23456789", "truncated": true})
    );
}

#[test]
fn a_name_the_binding_did_not_review_is_refused() {
    let dir = reviewed();
    let output = call(
        dir.path(),
        json!({"command": "deploy", "files": candidate()}),
        &[],
    );
    assert_eq!(output["error"], "INVALID_INPUT", "{output}");
    assert_eq!(output["details"]["code"], "PROJECT_COMMAND_UNCONFIGURED");
    // And an entry the candidate does not contain.
    let output = call(
        dir.path(),
        json!({"command": "cli", "files": {"other.ts": ""}}),
        &[],
    );
    assert_eq!(output["error"], "INVALID_INPUT", "{output}");
}

#[test]
fn a_hostile_candidate_is_contained() {
    let dir = reviewed();
    let project = dir.path().to_string_lossy().into_owned();
    let run = |args: Value| -> Value {
        call(
            dir.path(),
            json!({"command": "cli", "files": candidate(), "args": args}),
            &[],
        )["value"]
            .clone()
    };
    // Network: a listener on the host's loopback is not reachable.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    assert_eq!(run(json!(["net", url]))["stdout"]["text"], "blocked\n");
    assert!(listener.accept().is_err(), "the command reached the host");
    // Environment: only what the envelope sets, no PATH, nothing of jig's.
    let env: Value =
        serde_json::from_str(run(json!(["env"]))["stdout"]["text"].as_str().unwrap()).unwrap();
    let mut names: Vec<&str> = env
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    names.sort_unstable();
    // (PWD is the working directory bubblewrap changed to.)
    assert_eq!(
        names,
        ["HOME", "LANG", "NO_COLOR", "PWD", "TMPDIR"],
        "{env}"
    );
    assert_eq!(env["HOME"], "/tmp");
    // Project files outside the candidate cannot be read...
    let jig_ts = format!("{project}/jig.ts");
    assert_eq!(
        run(json!(["read", jig_ts]))["stdout"]["text"],
        "unreadable\n"
    );
    // ...nor written: the path may exist inside (the envelope's own /tmp
    // when the project lives under /tmp), the project never changes.
    let pwned = format!("{project}/pwned.txt");
    run(json!(["write", pwned]));
    assert!(!dir.path().join("pwned.txt").exists());
    let written = run(json!(["write", "/usr/pwned.txt"]));
    assert_eq!(written["stdout"]["text"], "refused\n");
    // A fork bomb stops at the task ceiling and takes nothing with it.
    let forked = run(json!(["fork", "4242.5"]));
    let started: u32 = forked["stdout"]["text"]
        .as_str()
        .unwrap()
        .trim()
        .strip_prefix("started ")
        .unwrap()
        .parse()
        .unwrap();
    assert!(started < 64, "{forked}");
    assert!(processes_mentioning("4242.5").is_empty());
    // A daemon does not outlive the command.
    assert_eq!(
        run(json!(["daemon", "4343.5"]))["stdout"]["text"],
        "daemonized\n"
    );
    assert!(processes_mentioning("4343.5").is_empty());
}

#[test]
fn commands_are_reviewed_and_locked_with_their_options() {
    let binding = BINDING_TS.replace(
        "short: { run: \"src/cli.ts\", tail: 8 },",
        "short: { run: \"src/cli.ts\", tail: 8, timeout: \"90s\" },",
    );
    let dir = command_project(&binding);
    let review = review(dir.path());
    let lock: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("jig.lock")).unwrap())
            .unwrap();
    assert_eq!(lock["packages"]["flows/repair"]["directRun"], false);
    assert_eq!(
        lock["bindings"]["fixer"]["commands"]["short"],
        json!({"run": "src/cli.ts", "tail": 8, "timeout": "90s"})
    );
    assert!(
        review.stdout.contains("\\\"timeout\\\":\\\"90s\\\""),
        "{review:?}"
    );
    // A command-capable package is not a direct target.
    let direct = run_jig(dir.path(), &["run", "flow:flows/repair"]);
    assert_eq!(direct.status, 1, "{direct:?}");
    assert!(
        direct.stderr.starts_with("JIG_RUN_TARGET_INVALID"),
        "{direct:?}"
    );
}

#[test]
fn commands_need_the_capability_and_the_capability_needs_commands() {
    // A map on a package that does not declare the capability.
    let dir = command_project(BINDING_TS);
    write_files(
        dir.path(),
        &[
            ("flows/plain/FLOW.md", "---\nname: plain\ndescription: No capability.\n---\n"),
            ("flows/plain/flow.ts", FLOW_TS),
            (
                "bindings/fixer.ts",
                "import { defineBinding } from \"@jigging/jig\";\nexport default defineBinding({ package: \"flows/plain\", commands: { cli: { run: \"src/cli.ts\" } } });\n",
            ),
        ],
    );
    let run = run_jig(dir.path(), &["review", "--yes"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(
        run.stderr.starts_with("INVALID_CANDIDATE: ")
            && run.stderr.contains(
                "PROJECT_DECLARATION_INVALID at \"bindings/fixer.ts\" pointer \"/commands\""
            ),
        "{run:?}"
    );
    // The capability without a map: the target is unavailable.
    let dir = command_project(
        "import { defineBinding } from \"@jigging/jig\";\nexport default defineBinding({ package: \"flows/repair\" });\n",
    );
    let run = run_jig(dir.path(), &["review", "--yes"]);
    assert_eq!(run.status, 2, "{run:?}");
    assert!(
        run.stderr.starts_with("UNAVAILABLE: ")
            && run.stderr.contains(
                "PROJECT_COMMAND_UNCONFIGURED at \"bindings/fixer.ts\" pointer \"/commands\""
            ),
        "{run:?}"
    );
}

/// Review refuses the Binding with seed 003's text at its location.
fn refused(entry: &str, pointer: Option<&str>, text: &str) {
    let binding = format!(
        "import {{ defineBinding, secret }} from \"@jigging/jig\";\nexport default defineBinding({{ package: \"flows/repair\", commands: {{ cli: {entry} }} }});\n"
    );
    let dir = command_project(&binding);
    // `--details` adds each diagnostic's text after the reference's line.
    let run = run_jig(dir.path(), &["review", "--yes", "--details"]);
    assert_eq!(run.status, 1, "{entry}: {run:?}");
    let located = match pointer {
        Some(pointer) => format!("at \"bindings/fixer.ts\" pointer \"{pointer}\""),
        None => "at \"bindings/fixer.ts\"".to_string(),
    };
    assert!(run.stderr.contains(&located), "{entry}: {run:?}");
    assert!(run.stderr.contains(text), "{entry}: {run:?}");
}

#[test]
fn seed_003_refusals_are_reported_at_review_with_their_texts() {
    refused(
        "{ run: \"src/cli.ts\", timeout: \"0s\" }",
        Some("/commands/cli/timeout"),
        "command: timeout \"0s\" is not a positive duration (like \"90s\", \"10m\", \"1h\").",
    );
    refused(
        "{ run: \"src/cli.ts\", timeout: \"ten minutes\" }",
        Some("/commands/cli/timeout"),
        "command: timeout \"ten minutes\" is not a positive duration (like \"90s\", \"10m\", \"1h\").",
    );
    for name in ["PATH", "HOME", "TMPDIR", "NOT-A-NAME"] {
        refused(
            &format!("{{ run: \"src/cli.ts\", env: {{ \"{name}\": secret(\"token\") }} }}"),
            Some(&format!("/commands/cli/env/{name}")),
            &format!("command(argv, {{ env }}): \"{name}\" is not a variable the author sets — PATH, HOME and TMPDIR are the Effector's (ADR-0067)."),
        );
    }
    refused(
        "{ run: \"src/cli.ts\", pin: true }",
        Some("/commands/cli/pin"),
        "command(argv, { pin: true }) names no secret in its env: `pin` chooses the commit a credentialed command runs against in the Sandbox Effector, and a command that names no secret runs in the live Worktree (ADR-0067) — name its secret, command(argv, { env: { NAME: secret(\"x\") }, pin: true }), or drop `pin` .",
    );
    refused(
        "{ run: \"src/cli.ts\", slot: \"main\" }",
        // The bundled helper refuses it already, before Jig's normalizer.
        None,
        "command cli has unknown field slot",
    );
}

#[test]
fn secrets_are_named_not_held_in_the_lock() {
    let binding = "import { defineBinding, secret } from \"@jigging/jig\";\nexport default defineBinding({ package: \"flows/repair\", commands: { cli: { run: \"src/cli.ts\" }, deploy: { run: \"src/cli.ts\", env: { TOKEN: secret(\"deploy-token\"), KEY_FILE: secret(\"deploy-key\").path }, pin: true } } });\n";
    let dir = command_project(binding);
    review(dir.path());
    let lock: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("jig.lock")).unwrap())
            .unwrap();
    assert_eq!(
        lock["bindings"]["fixer"]["commands"]["deploy"],
        json!({"run": "src/cli.ts", "pin": true, "env": {
            "KEY_FILE": {"kind": "secretPath", "name": "deploy-key"},
            "TOKEN": {"kind": "secret", "name": "deploy-token"},
        }})
    );
}

#[test]
fn the_repair_example_tests_its_proposed_change() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&workspace().join("examples/repair"), dir.path());
    containment_config(dir.path());
    let review = review(dir.path());
    assert!(review.stdout.contains("project is ready"), "{review:?}");
    let run = run_jig(
        dir.path(),
        &["run", "binding:fixer", "--input", "@input.json"],
    );
    assert_eq!(run.status, 0, "{run:?}");
    let terminal = run.json();
    assert_eq!(terminal["outcome"], "repaired", "{run:?}");
    assert_eq!(terminal["output"]["before"]["exitCode"], 1);
    assert_eq!(terminal["output"]["after"]["exitCode"], 0);
    assert_ne!(
        terminal["output"]["before"]["candidateDigest"],
        terminal["output"]["after"]["candidateDigest"]
    );
    assert_nothing_left(dir.path());
}

const TOKEN: &str = "s3cr3t-token-value";
const KEY: &str = "k3y-file-content";

const VAULT_FLOW_MD: &str = "---\nname: vault\ndescription: Runs the project's credentialed and candidate commands.\nuses:\n  project:\n    contract: ./contracts/project-command.capability.json\n  vault:\n    contract: ./contracts/project-command-credentialed.capability.json\n---\n";

/// Calls `input.call` on slot `input.slot`; reports the value or the error.
const VAULT_FLOW_TS: &str = r#"import { handle, OperationError } from "@jigging/flow";

await handle(async (run) => {
  const { slot, call } = run.input as { slot: string; call: unknown };
  try {
    const value = await run.callCapability({ operationId: "c1", slot, method: "run", input: call });
    return { outcome: "done", output: { value } };
  } catch (e) {
    if (e instanceof OperationError) return { outcome: "done", output: { error: e.code, message: e.message } };
    throw e;
  }
});
"#;

const VAULT_BINDING_TS: &str = r#"import { defineBinding, secret } from "@jigging/jig";

export default defineBinding({
  package: "flows/vault",
  commands: {
    deploy: { run: "tools/deploy.ts", env: { TOKEN: secret("deploy-token"), KEY_FILE: secret("deploy-key").path } },
    pinned: { run: "tools/deploy.ts", env: { TOKEN: secret("deploy-token") }, pin: true },
  },
});
"#;

/// Prints which commit's bytes run, what it was given (the values
/// themselves, to prove the redaction, and their digests, to prove they
/// arrived), and the path form.
fn deploy_ts(marker: &str) -> String {
    format!(
        r#"import * as fs from "node:fs";
const hash = (s: string) => new Bun.CryptoHasher("sha256").update(s).digest("hex");
const token = process.env.TOKEN ?? "";
const key = process.env.KEY_FILE ? fs.readFileSync(process.env.KEY_FILE, "utf8") : "";
console.log("{marker}");
console.log("token=" + token + " sha=" + hash(token));
console.log("key=" + key + " sha=" + hash(key));
console.error("stderr " + token);
"#
    )
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=jig",
            "-c",
            "user.email=jig@example.invalid",
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn sha256_hex(text: &str) -> String {
    flow::digest::sha256_hex(text.as_bytes())
}

/// A git project with two commits of `tools/deploy.ts` and the operator's
/// secret files outside the project.
fn vault_project() -> (tempfile::TempDir, tempfile::TempDir, String, String) {
    let contract = contract();
    let credentialed = std::fs::read_to_string(
        workspace()
            .join("providers/builtin/contracts/project-command-credentialed.capability.json"),
    )
    .unwrap();
    let dir = project(&[
        ("flows/vault/FLOW.md", VAULT_FLOW_MD),
        ("flows/vault/flow.ts", VAULT_FLOW_TS),
        (
            "flows/vault/contracts/project-command.capability.json",
            &contract,
        ),
        (
            "flows/vault/contracts/project-command-credentialed.capability.json",
            &credentialed,
        ),
        ("bindings/vault.ts", VAULT_BINDING_TS),
        ("tools/deploy.ts", &deploy_ts("commit one")),
        (".gitignore", ".jig/\n.test-config-home/\n"),
    ]);
    git(dir.path(), &["init", "-q"]);
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "one"]);
    let first = git(dir.path(), &["rev-parse", "HEAD"]);
    write_files(dir.path(), &[("tools/deploy.ts", &deploy_ts("commit two"))]);
    git(dir.path(), &["commit", "-qam", "two"]);
    let second = git(dir.path(), &["rev-parse", "HEAD"]);
    // The live tree differs from both commits: it never runs.
    write_files(dir.path(), &[("tools/deploy.ts", &deploy_ts("live tree"))]);
    let secrets = tempfile::tempdir().unwrap();
    std::fs::write(secrets.path().join("token"), TOKEN).unwrap();
    std::fs::write(secrets.path().join("key"), KEY).unwrap();
    let mut config = format!(
        "[secrets]\ndeploy-token = {:?}\ndeploy-key = {:?}\n",
        secrets.path().join("token"),
        secrets.path().join("key")
    );
    if let Ok(parent) = std::env::var("JIG_TEST_CGROUP_PARENT") {
        if !parent.is_empty() {
            config.push_str(&format!("[containment]\ncgroup-parent = {parent:?}\n"));
        }
    }
    write_files(dir.path(), &[(".test-config-home/jig/host.toml", &config)]);
    (dir, secrets, first, second)
}

fn vault_call(dir: &Path, slot: &str, call: Value) -> (Value, Run) {
    let input = json!({ "slot": slot, "call": call }).to_string();
    let run = run_jig(dir, &["run", "binding:vault", "--input", &input]);
    assert_eq!(run.status, 0, "{run:?}");
    assert_nothing_left(dir);
    (run.json()["output"].clone(), run)
}

#[test]
fn credentialed_commands_run_a_commit_with_their_secrets_redacted() {
    let (dir, _secrets, first, second) = vault_project();
    let review = review(dir.path());
    let (output, run) = vault_call(dir.path(), "vault", json!({"command": "deploy"}));
    let value = &output["value"];
    assert_eq!(value["commit"], second, "{output}");
    let stdout = value["stdout"]["text"].as_str().unwrap();
    // HEAD's bytes, not the live tree's; both forms arrived, neither shows.
    assert!(stdout.starts_with("commit two\n"), "{output}");
    assert!(
        stdout.contains(&format!("token=[redacted] sha={}", sha256_hex(TOKEN))),
        "{output}"
    );
    assert!(
        stdout.contains(&format!("key=[redacted] sha={}", sha256_hex(KEY))),
        "{output}"
    );
    assert_eq!(value["stderr"]["text"], "stderr [redacted]\n");
    assert_eq!(value["invocation"], json!(["bun", "tools/deploy.ts"]));
    // The shipped descriptor is the contract the host serves.
    let digest = run_jig(
        dir.path(),
        &[
            "contract",
            "digest",
            "flows/vault/contracts/project-command-credentialed.capability.json",
        ],
    );
    assert_eq!(
        digest.stdout.trim(),
        jig_provider_builtin::command::CREDENTIALED_CONTRACT_DIGEST
    );
    // The pinned command runs the commit the call names.
    let (pinned, _) = vault_call(
        dir.path(),
        "vault",
        json!({"command": "pinned", "sha": first}),
    );
    assert_eq!(pinned["value"]["commit"], first, "{pinned}");
    assert!(pinned["value"]["stdout"]["text"]
        .as_str()
        .unwrap()
        .starts_with("commit one\n"));
    // Seed 003's refusal of a sha that is not a full commit id.
    let (short, _) = vault_call(
        dir.path(),
        "vault",
        json!({"command": "pinned", "sha": &first[..12]}),
    );
    assert_eq!(short["error"], "INVALID_INPUT", "{short}");
    assert_eq!(
        short["message"],
        "command \"pinned\" (pin): its input's sha is not a full commit id."
    );
    // A credentialed command never meets a candidate.
    let (candidate, _) = vault_call(
        dir.path(),
        "project",
        json!({"command": "deploy", "files": {"tools/deploy.ts": "console.log(process.env.TOKEN)"}}),
    );
    assert_eq!(candidate["error"], "INVALID_INPUT", "{candidate}");
    // The values are nowhere jig wrote: terminal, review, lock, .jig.
    for secret in [TOKEN, KEY] {
        assert!(!run.stdout.contains(secret) && !run.stderr.contains(secret));
        assert!(!review.stdout.contains(secret) && !review.stderr.contains(secret));
        let lock = std::fs::read_to_string(dir.path().join("jig.lock")).unwrap();
        assert!(!lock.contains(secret));
        assert!(lock.contains("deploy-token"), "{lock}");
        for file in files_under(&dir.path().join(".jig")) {
            let bytes = std::fs::read(&file).unwrap();
            let text = String::from_utf8_lossy(&bytes);
            assert!(!text.contains(secret), "{} holds a secret", file.display());
        }
    }
}

fn files_under(root: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            found.extend(files_under(&entry.path()));
        } else if kind.is_file() {
            found.push(entry.path());
        }
    }
    found
}
