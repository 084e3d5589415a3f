//! Native ACP Agent clients through the real `jig` binary (docs/src/agents.md):
//! `JIG_AGENT_CLIENT=claude` with `CLAUDE_PATH` at the tests' ACP agent
//! (host/tests/fixtures/acp/agent.mjs, built on the official npm SDK
//! `@agentclientprotocol/sdk`, installed by .ci/setup). The agent reports
//! what the client sent it, so these tests assert the exact handshake.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::agent::{
    agent_project, chunk, jig_with, pairs, review_with, FLOW_PY, HOSTILE_PY, KEY, MODEL,
};
use crate::support::*;

/// Asks with the `events` port connected and read concurrently.
const EVENTS_PY: &str = r#"import asyncio

from jiggy.flow import OperationError, handle


async def run(ctx):
    pair = await ctx.channel(contract="./contracts/acp-public-updates.json")

    async def read():
        items = []
        try:
            async for item in pair.receive:
                items.append(item)
            return {"items": items, "end": "closed"}
        except OperationError as error:
            return {"items": items, "end": error.code}

    reader = asyncio.ensure_future(read())
    try:
        value = await ctx.call_capability(
            operation_id="ask:1", slot="agent", method="run",
            input=ctx.input, channels={"events": pair.send}
        )
    except OperationError as error:
        value = {"code": error.code}
    return {"outcome": "done", "output": {"value": value, "events": await reader}}


handle(run)
"#;

fn agent_program() -> PathBuf {
    acp_worker();
    let program = workspace().join("host/tests/fixtures/acp/claude-acp");
    assert!(
        workspace()
            .join("host/tests/fixtures/acp/node_modules/@agentclientprotocol/sdk/package.json")
            .is_file(),
        "the ACP SDK is missing: run .ci/setup"
    );
    program
}

fn claude_env(program: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("JIG_AGENT_CLIENT", "claude".to_string()),
        ("CLAUDE_PATH", program.to_string_lossy().into_owned()),
        ("ANTHROPIC_API_KEY", KEY.to_string()),
        ("ANTHROPIC_MODEL", MODEL.to_string()),
    ]
}

/// Review, then run `flow:flows/ask` with `input`; the Run's output.
fn ask(dir: &Path, env: &[(&'static str, String)], input: &Value) -> Value {
    let env = pairs(env);
    let reviewed = review_with(dir, &env);
    assert_eq!(reviewed.status, 0, "{reviewed:?}");
    let input = input.to_string();
    let run = jig_with(dir, &env, &["run", "flow:flows/ask", "--input", &input]);
    assert_eq!(run.status, 0, "{run:?}");
    assert!(
        !run.stdout.contains(KEY) && !run.stderr.contains(KEY),
        "{run:?}"
    );
    run.json()["output"].clone()
}

#[test]
fn an_acp_agent_gets_the_exact_handshake_and_its_updates_feed_events() {
    let dir = agent_project(EVENTS_PY);
    let output = ask(
        dir.path(),
        &claude_env(&agent_program()),
        &json!({"instructions": "Report what you saw.", "skills": ["style"]}),
    );
    let value = &output["value"];
    assert_eq!(value["outcome"], "completed", "{output}");
    let text = value["text"].as_str().unwrap();
    let report: Value = serde_json::from_str(text).unwrap();
    let seen = &report["seen"];
    // initialize{protocolVersion:1}: no filesystem, terminal or MCP capability.
    assert_eq!(seen["initialize"]["protocolVersion"], 1, "{report}");
    let caps = &seen["initialize"]["clientCapabilities"];
    assert_ne!(caps["fs"]["readTextFile"], true, "{report}");
    assert_ne!(caps["fs"]["writeTextFile"], true, "{report}");
    assert_ne!(caps["terminal"], true, "{report}");
    assert!(caps.get("mcp").is_none(), "{report}");
    assert!(seen["authenticate"].is_null());
    // session/new{cwd, mcpServers: []}, the cwd an empty directory that is
    // also the process's own.
    assert_eq!(seen["sessionNew"]["mcpServers"], json!([]), "{report}");
    let cwd = seen["sessionNew"]["cwd"].as_str().unwrap();
    assert!(cwd.starts_with('/'), "{report}");
    assert_eq!(report["cwd"], cwd);
    assert_eq!(report["cwdEntries"], json!([]), "{report}");
    // The prompt: one text block with the skill and the instructions.
    let prompt = &seen["prompt"]["prompt"];
    assert_eq!(prompt.as_array().unwrap().len(), 1);
    assert_eq!(prompt[0]["type"], "text");
    let prompt = prompt[0]["text"].as_str().unwrap();
    assert!(prompt.contains("Answer in one word."), "{prompt}");
    assert!(prompt.contains("Report what you saw."), "{prompt}");
    // The permission request was rejected.
    assert_eq!(
        report["permission"],
        json!({"outcome": "selected", "optionId": "no"})
    );
    // The client got its credential and nothing of the host environment
    // (PWD is set by the wrapper's own /bin/sh).
    let digest = flow::digest::sha256_hex(KEY.as_bytes());
    assert_eq!(report["keySha256"], digest);
    assert_eq!(
        report["env"],
        json!([
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_MODEL",
            "HOME",
            "LANG",
            "PATH",
            "PWD"
        ]),
        "{report}"
    );
    // events: the plan, then the three chunks that make up the text.
    let items = output["events"]["items"].as_array().unwrap();
    assert_eq!(output["events"]["end"], "closed", "{output}");
    assert_eq!(
        items[0],
        json!({"sessionUpdate": "plan", "entries": [
            {"content": "answer the prompt", "priority": "high", "status": "in_progress"}]})
    );
    assert_eq!(items.len(), 4, "{output}");
    let mut joined = String::new();
    for item in &items[1..] {
        let piece = item["content"]["text"].as_str().unwrap();
        assert_eq!(item, &chunk(piece));
        joined.push_str(piece);
    }
    assert_eq!(joined, text);
}

#[test]
fn acp_stop_reasons_are_completed_blocked_or_limit() {
    let dir = agent_project(FLOW_PY);
    let env = claude_env(&agent_program());
    for (word, outcome) in [
        ("STOP-REFUSAL", "blocked"),
        ("STOP-MAX-TOKENS", "limit"),
        ("STOP-CANCELLED", "blocked"),
    ] {
        let output = ask(
            dir.path(),
            &env,
            &json!({"instructions": format!("ANSWER-JSON {word}")}),
        );
        assert_eq!(
            output["value"],
            json!({"outcome": outcome, "text": "{\"answer\":42}"}),
            "{word}"
        );
    }
}

fn answer_schema() -> Value {
    json!({"$schema": "https://flow.jig.md/schemas/schema-1.json", "type": "object",
           "properties": {"answer": {"type": "integer"}},
           "required": ["answer"], "additionalProperties": false})
}

#[test]
fn an_acp_answer_to_a_response_schema_is_validated_json() {
    let dir = agent_project(FLOW_PY);
    let env = claude_env(&agent_program());
    let output = ask(
        dir.path(),
        &env,
        &json!({"instructions": "ANSWER-JSON", "responseSchema": answer_schema()}),
    );
    assert_eq!(
        output["value"],
        json!({"outcome": "completed", "text": "{\"answer\":42}", "structured": {"answer": 42}})
    );
    let output = ask(
        dir.path(),
        &env,
        &json!({"instructions": "ANSWER-BAD-JSON", "responseSchema": answer_schema()}),
    );
    assert_eq!(output["code"], "INVALID_RESULT", "{output}");
    assert_eq!(output["details"]["code"], "AGENT_RUN_STRUCTURED_INVALID");
}

#[test]
fn a_hostile_flow_sees_no_acp_credential() {
    let dir = agent_project(HOSTILE_PY);
    let output = ask(
        dir.path(),
        &claude_env(&agent_program()),
        &json!({"port": 9}),
    );
    let seen = output["seen"].as_str().unwrap();
    assert!(!seen.contains(KEY), "the Flow saw the key");
    assert!(
        !seen.contains("ANTHROPIC"),
        "the Flow saw the client's variables"
    );
    assert_eq!(output["value"]["outcome"], "completed", "{output}");
}

#[test]
fn review_pins_the_acp_client_executable_and_model() {
    let dir = agent_project(FLOW_PY);
    let program = agent_program();
    let env = claude_env(&program);
    let run = jig_with(dir.path(), &pairs(&env), &["review"]);
    let line = format!(
        "  \"flows/ask#agent\" served by \"agent-run\" (builtin) client \"claude\" api \"acp\" endpoint \"{}\" model \"{MODEL}\"\n",
        program.display()
    );
    assert!(run.stdout.contains(&line), "{run:?}");
    assert!(!run.stdout.contains(KEY), "{run:?}");

    // A changed executable (its bytes) or model requires review.
    let bin = tempfile::tempdir().unwrap();
    let copy = bin.path().join("claude-acp");
    std::fs::copy(&program, &copy).unwrap();
    let env = claude_env(&copy);
    let reviewed = review_with(dir.path(), &pairs(&env));
    assert_eq!(reviewed.status, 0, "{reviewed:?}");
    let input = r#"{"instructions":"Go."}"#;
    let refused = |env: &[(&'static str, String)]| {
        let run = jig_with(
            dir.path(),
            &pairs(env),
            &["run", "flow:flows/ask", "--input", input],
        );
        assert_eq!(run.status, 1, "{run:?}");
        let terminal = run.json();
        assert_eq!(terminal["code"], "REVIEW_REQUIRED", "{run:?}");
        assert_eq!(
            terminal["details"],
            json!({"reason": "EXECUTION_ENVIRONMENT_CHANGED", "flowStarted": false})
        );
    };
    let mut remodeled = env.clone();
    remodeled.retain(|(n, _)| *n != "ANTHROPIC_MODEL");
    remodeled.push(("ANTHROPIC_MODEL", "other-model".into()));
    refused(&remodeled);
    let mut script = std::fs::read_to_string(&copy).unwrap();
    script.push_str("# changed\n");
    std::fs::write(&copy, script).unwrap();
    refused(&env);
}

#[test]
fn review_refuses_an_undiscoverable_or_uncredentialed_acp_client() {
    let dir = agent_project(FLOW_PY);
    let program = agent_program().to_string_lossy().into_owned();
    let relative = [
        ("JIG_AGENT_CLIENT", "claude"),
        ("CLAUDE_PATH", "claude-acp"),
        ("ANTHROPIC_API_KEY", KEY),
        ("ANTHROPIC_MODEL", MODEL),
    ];
    let no_model = [
        ("JIG_AGENT_CLIENT", "claude"),
        ("CLAUDE_PATH", program.as_str()),
        ("ANTHROPIC_API_KEY", KEY),
    ];
    let unknown = [("JIG_AGENT_CLIENT", "gemini")];
    for env in [&relative[..], &no_model[..], &unknown[..]] {
        let run = review_with(dir.path(), env);
        assert_eq!(run.status, 2, "{env:?}: {run:?}");
        assert!(
            run.stderr
                .contains("PROJECT_AGENT_UNAVAILABLE at \"flows/ask/FLOW.md\"\n"),
            "{run:?}"
        );
        assert!(!run.stderr.contains(KEY), "{run:?}");
    }
}

#[test]
fn doctor_shows_the_acp_client_and_names_its_credentials_only() {
    let dir = agent_project(FLOW_PY);
    let program = agent_program();
    let env = claude_env(&program);
    let run = jig_with(dir.path(), &pairs(&env), &["doctor"]);
    let expected = format!(
        "agent:\n  client: claude\n  api: acp\n  endpoint: {}\n  model: {MODEL}\n  credentials: ANTHROPIC_API_KEY ANTHROPIC_MODEL (passed to the ACP client only)\n  configuration: valid (from the environment; the client was not started)\n",
        program.display()
    );
    assert!(run.stdout.contains(&expected), "{run:?}");
    assert!(!run.stdout.contains(KEY), "{run:?}");
}

/// The directory of a `jig` linked alone into `dir/.lone-bin`, so that no
/// `jig-agent-acp` is installed beside it unless a test puts one there.
fn lone_bin(dir: &Path) -> PathBuf {
    let bin = dir.join(".lone-bin");
    let lone = bin.join("jig");
    if !lone.exists() {
        std::fs::create_dir_all(&bin).unwrap();
        let jig = Path::new(env!("CARGO_BIN_EXE_jig"));
        if std::fs::hard_link(jig, &lone).is_err() {
            std::fs::copy(jig, &lone).unwrap();
        }
    }
    bin
}

/// That lone `jig`, run in `dir` with `env`.
fn lone_jig(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Run {
    let lone = lone_bin(dir).join("jig");
    let mut command = std::process::Command::new(&lone);
    command
        .current_dir(dir)
        .env_remove("JIG_CONFIG")
        .env("XDG_CONFIG_HOME", dir.join(".test-config-home"))
        .env("NO_COLOR", "1");
    for name in jig_provider_builtin::agent::endpoint::ENV_VARS
        .iter()
        .chain(&jig_provider_builtin::agent::acp::ENV_VARS)
    {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    output(command.args(args).output().expect("jig runs"))
}

#[test]
fn without_the_installed_acp_worker_review_refuses_and_doctor_says_so() {
    let dir = agent_project(FLOW_PY);
    let program = agent_program();
    let env = claude_env(&program);
    let env = pairs(&env);
    assert!(!lone_bin(dir.path()).join("jig-agent-acp").exists());
    // `--details` explains each diagnostic after the reference's line.
    let run = lone_jig(dir.path(), &env, &["review", "--yes", "--details"]);
    assert_eq!(run.status, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("PROJECT_AGENT_UNAVAILABLE at \"flows/ask/FLOW.md\"\n"),
        "{run:?}"
    );
    assert!(
        run.stderr
            .contains("jig-agent-acp is not installed beside jig"),
        "{run:?}"
    );
    assert!(!run.stderr.contains(KEY), "{run:?}");
    let doctor = lone_jig(dir.path(), &env, &["doctor"]);
    assert!(
        doctor
            .stdout
            .contains("  acp worker: unavailable: jig-agent-acp is not installed beside jig"),
        "{doctor:?}"
    );
    // The HTTP client does not need it.
    let http = [("OPENAI_API_KEY", KEY), ("OPENAI_MODEL", MODEL)];
    let run = lone_jig(dir.path(), &http, &["review", "--yes"]);
    assert_eq!(run.status, 0, "{run:?}");
}

#[test]
fn doctor_shows_the_installed_acp_worker() {
    let dir = agent_project(FLOW_PY);
    let worker = acp_worker();
    let run = jig_with(dir.path(), &[], &["doctor"]);
    let line = format!("  acp worker: jig-agent-acp at {}\n", worker.display());
    assert!(run.stdout.contains(&line), "{run:?}");
}

#[test]
fn a_changed_acp_worker_requires_review() {
    let dir = agent_project(FLOW_PY);
    let env = claude_env(&agent_program());
    let env = pairs(&env);
    let worker = lone_bin(dir.path()).join("jig-agent-acp");
    std::fs::copy(acp_worker(), &worker).unwrap();
    let reviewed = lone_jig(dir.path(), &env, &["review", "--yes"]);
    assert_eq!(reviewed.status, 0, "{reviewed:?}");
    let input = r#"{"instructions":"ANSWER-JSON"}"#;
    let args = ["run", "flow:flows/ask", "--input", input];
    let run = lone_jig(dir.path(), &env, &args);
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(
        run.json()["output"]["value"]["outcome"],
        "completed",
        "{run:?}"
    );
    // Other bytes of the worker (the same path) are another environment.
    let mut bytes = std::fs::read(&worker).unwrap();
    bytes.push(0);
    std::fs::write(&worker, bytes).unwrap();
    let run = lone_jig(dir.path(), &env, &args);
    assert_eq!(run.status, 1, "{run:?}");
    let terminal = run.json();
    assert_eq!(terminal["code"], "REVIEW_REQUIRED", "{run:?}");
    assert_eq!(
        terminal["details"],
        json!({"reason": "EXECUTION_ENVIRONMENT_CHANGED", "flowStarted": false})
    );
}
