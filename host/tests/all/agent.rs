//! Agent Run through the real `jig` binary (docs/src/agents.md, seed 002 §11 item
//! 16): a Flow asks an OpenAI-compatible endpoint, here a real HTTP server
//! on 127.0.0.1 started by each test, through the builtin Agent Run
//! capability. The tests assert the exact requests the worker sends and
//! what the Flow and the operator see for each kind of answer.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::*;

pub(crate) const KEY: &str = "sk-test-4f1c9e7a-do-not-show";
pub(crate) const MODEL: &str = "test-model-1";

const FLOW_MD: &str = "---\nname: ask\ndescription: Ask the Agent.\nuses:\n  agent:\n    contract: ./contracts/agent-run.capability.json\n---\n";

/// Calls the Agent with the Run's input and returns the value, or the
/// operational error it got.
pub(crate) const FLOW_PY: &str = r#"from jiggy.flow import OperationError, handle


async def run(ctx):
    try:
        value = await ctx.call_capability(
            operation_id="ask:1", slot="agent", method="run", input=ctx.input
        )
        return {"outcome": "done", "output": {"value": value}}
    except OperationError as error:
        return {"outcome": "done", "output": {"code": error.code, "message": error.message, "details": error.details}}


handle(run)
"#;

/// A hostile Flow: while its Agent call is in flight it reads its
/// environment and everything in /proc it can, and tries to reach the
/// endpoint itself.
pub(crate) const HOSTILE_PY: &str = r#"import asyncio
import os
import socket

from jiggy.flow import OperationError, handle


def scan():
    seen = [repr(sorted(os.environ.items()))]
    for entry in os.listdir("/proc"):
        for name in ("environ", "cmdline"):
            try:
                with open(f"/proc/{entry}/{name}", "rb") as f:
                    seen.append(f.read().decode("utf-8", "replace"))
            except OSError:
                pass
    return "\n".join(seen)


async def run(ctx):
    call = asyncio.ensure_future(ctx.call_capability(
        operation_id="ask:1", slot="agent", method="run", input={"instructions": "hi"}
    ))
    await asyncio.sleep(0.3)
    seen = scan()
    try:
        socket.create_connection(("127.0.0.1", ctx.input["port"]), timeout=2).close()
        connected = True
    except OSError:
        connected = False
    try:
        value = await call
    except OperationError as error:
        value = {"code": error.code}
    return {"outcome": "done", "output": {"seen": seen, "connected": connected, "value": value}}


handle(run)
"#;

/// One answer of the test endpoint.
#[derive(Clone)]
pub(crate) enum Reply {
    Json(u16, Value),
    /// Read the whole request, wait, then answer.
    Slow(Duration, Value),
    /// Read the whole request, then close the connection unanswered.
    Close,
    /// Answer with these server-sent events, then close.
    Sse(Vec<String>),
}

/// One request the endpoint received.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A real HTTP/1.1 server on 127.0.0.1 that answers every request with
/// the same [`Reply`] and records what it got.
pub(crate) struct Endpoint {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Requests whose client hung up while a slow answer was pending.
    hung_up: Arc<Mutex<usize>>,
}

impl Endpoint {
    pub(crate) fn start(reply: Reply) -> Endpoint {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let hung_up = Arc::new(Mutex::new(0));
        let (record, hangups) = (seen.clone(), hung_up.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let reply = reply.clone();
                let (record, hangups) = (record.clone(), hangups.clone());
                std::thread::spawn(move || serve(stream, reply, record, hangups));
            }
        });
        Endpoint {
            port,
            seen,
            hung_up,
        }
    }

    /// Wait (boundedly) until a client hung up on a pending slow answer.
    fn wait_for_hang_up(&self) -> bool {
        for _ in 0..200 {
            if *self.hung_up.lock().unwrap() > 0 {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// Wait (boundedly) until `n` requests arrived.
    fn wait_for_requests(&self, n: usize) {
        for _ in 0..400 {
            if self.requests().len() >= n {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the endpoint never got {n} requests");
    }

    pub(crate) fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn serve(
    stream: TcpStream,
    reply: Reply,
    record: Arc<Mutex<Vec<Seen>>>,
    hung_up: Arc<Mutex<usize>>,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut first = String::new();
    if reader.read_line(&mut first).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = first.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    record.lock().unwrap().push(Seen {
        method,
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    });
    let mut stream = stream;
    let (status, value) = match reply {
        Reply::Close => return,
        Reply::Sse(events) => {
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
            );
            for event in events {
                let _ = write!(stream, "data: {event}\n\n");
                let _ = stream.flush();
            }
            return;
        }
        Reply::Json(status, value) => (status, value),
        Reply::Slow(wait, value) => {
            // Wait, watching for the client to hang up (the worker's
            // envelope ended) before the answer is due.
            stream
                .set_read_timeout(Some(Duration::from_millis(50)))
                .unwrap();
            let until = std::time::Instant::now() + wait;
            let mut byte = [0u8; 1];
            while std::time::Instant::now() < until {
                if let Ok(0) = stream.read(&mut byte) {
                    *hung_up.lock().unwrap() += 1;
                    return;
                }
            }
            (200, value)
        }
    };
    let text = value.to_string();
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    );
}

pub(crate) fn responses_text(text: &str) -> Value {
    json!({"id": "resp_1", "object": "response", "status": "completed", "output": [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}]})
}

fn chat(finish: &str, message: Value) -> Value {
    json!({"id": "c1", "object": "chat.completion", "choices": [
        {"index": 0, "finish_reason": finish, "message": message}]})
}

/// The agent-using project: the Flow, its contract copies, and a skill.
pub(crate) fn agent_project(flow_py: &str) -> tempfile::TempDir {
    agent_project_carrying(flow_py, "agent-run.capability.json")
}

/// The agent-using project whose Agent Run descriptor is `descriptor`
/// (under `flow/tests/data`): one of the revisions the reference published.
fn agent_project_carrying(flow_py: &str, descriptor: &str) -> tempfile::TempDir {
    let read = |name: &str| {
        std::fs::read_to_string(workspace().join("flow/tests/data").join(name)).unwrap()
    };
    project(&[
        ("flows/ask/FLOW.md", FLOW_MD),
        ("flows/ask/flow.py", flow_py),
        (
            "flows/ask/contracts/agent-run.capability.json",
            &read(descriptor),
        ),
        // The method's channel descriptor, where this host resolves it
        // (from the package root) and where the reference does (beside
        // the capability descriptor).
        (
            "flows/ask/contracts/acp-public-updates.json",
            &read("acp-public-updates.json"),
        ),
        (
            "flows/ask/contracts/contracts/acp-public-updates.json",
            &read("acp-public-updates.json"),
        ),
        ("flows/ask/skills/style/SKILL.md", "Answer in one word.\n"),
        ("flows/ask/skills/style/glossary.md", "pass: good\n"),
        ("flows/ask/skills/unused/SKILL.md", "Never shown.\n"),
    ])
}

/// `jig` in `dir` with exactly the given Agent environment variables.
pub(crate) fn jig_with(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Run {
    let mut command = jig(dir);
    for name in jig_provider_builtin::agent::endpoint::ENV_VARS
        .iter()
        .chain(&jig_provider_builtin::agent::acp::ENV_VARS)
    {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    output(command.args(args).output().expect("jig runs"))
}

fn openai_env(endpoint: &Endpoint) -> Vec<(&'static str, String)> {
    vec![
        ("OPENAI_API_KEY", KEY.to_string()),
        ("OPENAI_MODEL", MODEL.to_string()),
        ("OPENAI_BASE_URL", endpoint.base_url()),
    ]
}

pub(crate) fn pairs<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// Review with `env`, then run `flow:flows/ask` with `input`; the
/// terminal's output.
fn ask(dir: &Path, env: &[(&'static str, String)], input: &Value) -> Value {
    let env = pairs(env);
    let reviewed = jig_with(dir, &env, &["review", "--yes"]);
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

fn verdict_schema() -> Value {
    json!({"$schema": "https://flow.jig.md/schemas/schema-1.json", "type": "object",
           "properties": {"verdict": {"type": "string", "enum": ["pass", "fail"]}},
           "required": ["verdict"], "additionalProperties": false})
}

#[test]
fn responses_sends_one_exact_request_and_returns_the_structured_result() {
    let endpoint = Endpoint::start(Reply::Json(200, responses_text("{\"verdict\":\"pass\"}")));
    let dir = agent_project(FLOW_PY);
    let input = json!({"instructions": "Judge the change.", "skills": ["style"],
                       "responseSchema": verdict_schema()});
    let output = ask(dir.path(), &openai_env(&endpoint), &input);
    assert_eq!(
        output,
        json!({"value": {"outcome": "completed", "text": "{\"verdict\":\"pass\"}",
                         "structured": {"verdict": "pass"}}})
    );
    let requests = endpoint.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let request = &requests[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/v1/responses");
    assert_eq!(
        request.header("authorization"),
        Some(&*format!("Bearer {KEY}"))
    );
    let body = &request.body;
    assert_eq!(body["model"], MODEL);
    assert_eq!(body["store"], false);
    assert_eq!(body["input"], "Judge the change.");
    let skills = body["instructions"].as_str().unwrap();
    assert!(skills.contains("<skill name=\"style\">\n<file path=\"SKILL.md\">\nAnswer in one word.\n</file>\n<file path=\"glossary.md\">\npass: good\n</file>"), "{skills}");
    assert!(!skills.contains("Never shown."), "{skills}");
    let mut strict = verdict_schema();
    strict.as_object_mut().unwrap().remove("$schema");
    assert_eq!(
        body["text"],
        json!({"format": {"type": "json_schema", "name": "response", "schema": strict, "strict": true}})
    );
    assert!(body.get("stream").is_none());
}

#[test]
fn chat_completions_maps_refusal_to_blocked_and_length_to_limit() {
    for (reply, outcome, text) in [
        (
            chat(
                "stop",
                json!({"role": "assistant", "content": null, "refusal": "I cannot."}),
            ),
            "blocked",
            "I cannot.",
        ),
        (
            chat(
                "length",
                json!({"role": "assistant", "content": "Half an ans"}),
            ),
            "limit",
            "Half an ans",
        ),
        (
            chat("stop", json!({"role": "assistant", "content": "Done."})),
            "completed",
            "Done.",
        ),
    ] {
        let endpoint = Endpoint::start(Reply::Json(200, reply));
        let dir = agent_project(FLOW_PY);
        let mut env = openai_env(&endpoint);
        env.push(("OPENAI_API", "chat-completions".into()));
        let output = ask(
            dir.path(),
            &env,
            &json!({"instructions": "Go.", "skills": ["style"]}),
        );
        assert_eq!(output, json!({"value": {"outcome": outcome, "text": text}}));
        let requests = endpoint.requests();
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].path, "/v1/chat/completions");
        let messages = requests[0].body["messages"].as_array().unwrap().clone();
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0]["role"], "system");
        assert!(messages[0]["content"]
            .as_str()
            .unwrap()
            .contains("Answer in one word."));
        assert_eq!(messages[1], json!({"role": "user", "content": "Go."}));
        assert_eq!(requests[0].body["model"], MODEL);
        assert!(requests[0].body.get("store").is_none());
    }
}

#[test]
fn a_structured_result_outside_the_schema_is_invalid_result() {
    let endpoint = Endpoint::start(Reply::Json(200, responses_text("{\"verdict\":\"maybe\"}")));
    let dir = agent_project(FLOW_PY);
    let input = json!({"instructions": "Judge.", "responseSchema": verdict_schema()});
    let output = ask(dir.path(), &openai_env(&endpoint), &input);
    assert_eq!(output["code"], "INVALID_RESULT", "{output}");
    assert_eq!(output["details"]["code"], "AGENT_RUN_STRUCTURED_INVALID");
    assert_eq!(endpoint.requests().len(), 1);
}

#[test]
fn a_responses_limit_is_data_and_carries_no_structured_value() {
    let reply = json!({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
                       "output": [{"type": "message", "content": [{"type": "output_text", "text": "{\"ver"}]}]});
    let endpoint = Endpoint::start(Reply::Json(200, reply));
    let dir = agent_project(FLOW_PY);
    let input = json!({"instructions": "Judge.", "responseSchema": verdict_schema()});
    let output = ask(dir.path(), &openai_env(&endpoint), &input);
    assert_eq!(
        output,
        json!({"value": {"outcome": "limit", "text": "{\"ver"}})
    );
}

#[test]
fn an_http_error_is_a_bounded_message_without_the_key_or_the_body() {
    let body = json!({"error": {"message": format!("upstream exploded; key {KEY}; trace XYZZY"), "type": "server_error"}});
    let endpoint = Endpoint::start(Reply::Json(500, body));
    let dir = agent_project(FLOW_PY);
    let output = ask(
        dir.path(),
        &openai_env(&endpoint),
        &json!({"instructions": "Go."}),
    );
    assert_eq!(output["code"], "UNAVAILABLE", "{output}");
    assert_eq!(
        output["message"],
        "the Agent endpoint answered HTTP 500 (server_error)"
    );
    assert_eq!(
        output["details"],
        json!({"httpStatus": 500, "endpointCode": "server_error"})
    );
    assert!(!output.to_string().contains("XYZZY"));
    assert_eq!(endpoint.requests().len(), 1);
}

#[test]
fn a_connection_closed_after_the_request_was_read_is_uncertain_and_never_resent() {
    let endpoint = Endpoint::start(Reply::Close);
    let dir = agent_project(FLOW_PY);
    let output = ask(
        dir.path(),
        &openai_env(&endpoint),
        &json!({"instructions": "Go."}),
    );
    assert_eq!(output["code"], "UNCERTAIN", "{output}");
    assert_eq!(endpoint.requests().len(), 1);
}

#[test]
fn nothing_is_sent_for_an_input_review_would_refuse_to_dispatch() {
    let endpoint = Endpoint::start(Reply::Json(200, responses_text("x")));
    let dir = agent_project(FLOW_PY);
    let env = openai_env(&endpoint);
    let mut outside = verdict_schema();
    outside["properties"]["flag"] = json!({"type": "boolean"});
    outside["required"] = json!(["verdict", "flag"]);
    for (input, code) in [
        (
            json!({"instructions": "Go.", "responseSchema": outside}),
            "AGENT_RUN_INPUT_INVALID",
        ),
        (
            json!({"instructions": "Go.", "skills": ["missing"]}),
            "AGENT_RUN_SKILL_UNKNOWN",
        ),
        (
            json!({"instructions": "Go.", "skills": ["unused", "style"]}),
            "AGENT_RUN_SKILL_SELECTION_INVALID",
        ),
    ] {
        let output = ask(dir.path(), &env, &input);
        assert_eq!(output["code"], "INVALID_INPUT", "{input}: {output}");
        assert_eq!(output["details"]["code"], code, "{input}: {output}");
    }
    assert_eq!(endpoint.requests().len(), 0);
}

#[test]
fn a_hostile_flow_sees_no_key_and_cannot_reach_the_endpoint() {
    let endpoint = Endpoint::start(Reply::Slow(
        Duration::from_millis(1500),
        responses_text("ok"),
    ));
    let dir = agent_project(HOSTILE_PY);
    let input = json!({"port": endpoint.port});
    let output = ask(dir.path(), &openai_env(&endpoint), &input);
    assert_eq!(output["connected"], false, "{output}");
    assert_eq!(
        output["value"],
        json!({"outcome": "completed", "text": "ok"})
    );
    let seen = output["seen"].as_str().unwrap();
    assert!(!seen.contains(KEY), "the Flow saw the key");
    assert!(!seen.contains("OPENAI"), "the Flow saw an Agent variable");
    // The only request is the worker's.
    assert_eq!(endpoint.requests().len(), 1);
}

pub(crate) fn review_with(dir: &Path, env: &[(&str, &str)]) -> Run {
    jig_with(dir, env, &["review", "--yes"])
}

#[test]
fn review_refuses_a_missing_or_invalid_configuration_with_fixed_guidance() {
    let dir = agent_project(FLOW_PY);
    let invalid_url = [
        ("OPENAI_API_KEY", KEY),
        ("OPENAI_MODEL", MODEL),
        ("OPENAI_BASE_URL", "http://192.0.2.1/v1"),
    ];
    let mixed = [
        ("OPENAI_API_KEY", KEY),
        ("OPENAI_MODEL", MODEL),
        ("OPENROUTER_API_KEY", KEY),
    ];
    for env in [
        &[][..],
        &[("OPENAI_MODEL", MODEL)][..],
        &invalid_url[..],
        &mixed[..],
    ] {
        let run = review_with(dir.path(), env);
        assert_eq!(run.status, 2, "{env:?}: {run:?}");
        assert!(run.stderr.starts_with("UNAVAILABLE: "), "{run:?}");
        assert!(
            run.stderr
                .contains("PROJECT_AGENT_UNAVAILABLE at \"flows/ask/FLOW.md\"\n"),
            "{run:?}"
        );
        assert!(run.stderr.contains("check it with jig doctor"), "{run:?}");
        assert!(
            !run.stderr.contains(KEY) && !run.stdout.contains(KEY),
            "{run:?}"
        );
    }
}

#[test]
fn review_names_client_api_endpoint_and_model_and_never_the_key() {
    let endpoint = Endpoint::start(Reply::Json(200, responses_text("x")));
    let dir = agent_project(FLOW_PY);
    let env = openai_env(&endpoint);
    for details in [false, true] {
        let mut args = vec!["review"];
        if details {
            args.push("--details");
        }
        // Not admitted (no --yes, not a terminal): both views are shown.
        let run = jig_with(dir.path(), &pairs(&env), &args);
        assert_eq!(run.status, 2, "{run:?}");
        let line = format!(
            "  \"flows/ask#agent\" served by \"agent-run\" (builtin) client \"openai-compatible\" api \"responses\" endpoint \"{}\" model \"{MODEL}\"\n",
            endpoint.base_url()
        );
        assert!(run.stdout.contains(&line), "{run:?}");
        assert!(!run.stdout.contains(KEY), "{run:?}");
    }
}

#[test]
fn a_changed_model_or_endpoint_requires_review_but_a_changed_key_does_not() {
    let endpoint = Endpoint::start(Reply::Json(200, responses_text("fine")));
    let dir = agent_project(FLOW_PY);
    let env = openai_env(&endpoint);
    let reviewed = review_with(dir.path(), &pairs(&env));
    assert_eq!(reviewed.status, 0, "{reviewed:?}");
    let input = r#"{"instructions":"Go."}"#;
    let other = Endpoint::start(Reply::Json(200, responses_text("elsewhere")));
    for (name, value) in [
        ("OPENAI_MODEL", "other-model".to_string()),
        ("OPENAI_BASE_URL", other.base_url()),
        ("OPENAI_API", "chat-completions".to_string()),
    ] {
        let mut changed = env.clone();
        changed.retain(|(n, _)| *n != name);
        changed.push((name, value));
        let run = jig_with(
            dir.path(),
            &pairs(&changed),
            &["run", "flow:flows/ask", "--input", input],
        );
        assert_eq!(run.status, 1, "{name}: {run:?}");
        let terminal = run.json();
        assert_eq!(terminal["status"], "failed");
        assert_eq!(terminal["code"], "REVIEW_REQUIRED", "{name}: {run:?}");
        assert_eq!(
            terminal["details"],
            json!({"reason": "EXECUTION_ENVIRONMENT_CHANGED", "flowStarted": false})
        );
    }
    assert_eq!(endpoint.requests().len() + other.requests().len(), 0);
    let mut rekeyed = env.clone();
    rekeyed.retain(|(n, _)| *n != "OPENAI_API_KEY");
    rekeyed.push(("OPENAI_API_KEY", "sk-rotated".into()));
    let run = jig_with(
        dir.path(),
        &pairs(&rekeyed),
        &["run", "flow:flows/ask", "--input", input],
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(
        run.json()["output"],
        json!({"value": {"outcome": "completed", "text": "fine"}})
    );
    assert_eq!(
        endpoint.requests()[0].header("authorization"),
        Some("Bearer sk-rotated")
    );
}

#[test]
fn the_agent_table_of_host_toml_wins_and_its_key_file_is_read_by_the_worker() {
    let endpoint = Endpoint::start(Reply::Json(
        200,
        chat(
            "stop",
            json!({"role": "assistant", "content": "from table"}),
        ),
    ));
    let dir = agent_project(FLOW_PY);
    let key_file = dir.path().join("agent-key");
    std::fs::write(&key_file, "sk-from-file\n").unwrap();
    let config = format!(
        "[agent]\napi = \"chat-completions\"\nbase-url = \"{}\"\nmodel = \"table-model\"\napi-key-file = \"{}\"\n",
        endpoint.base_url(),
        key_file.display()
    );
    write_files(dir.path(), &[(".test-config-home/jig/host.toml", &config)]);
    // The environment's model is ignored: a complete table is the whole configuration.
    let env = vec![("OPENAI_MODEL", "env-model".to_string())];
    let output = ask(dir.path(), &env, &json!({"instructions": "Go."}));
    assert_eq!(
        output,
        json!({"value": {"outcome": "completed", "text": "from table"}})
    );
    let requests = endpoint.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body["model"], "table-model");
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer sk-from-file")
    );
    // A partial table next to Agent variables is ambiguous.
    let partial = format!(
        "[agent]\nmodel = \"table-model\"\nbase-url = \"{}\"\n",
        endpoint.base_url()
    );
    write_files(dir.path(), &[(".test-config-home/jig/host.toml", &partial)]);
    // `--details` explains each diagnostic after the reference's line.
    let run = jig_with(
        dir.path(),
        &[("OPENAI_API_KEY", KEY)],
        &["review", "--yes", "--details"],
    );
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stderr.contains("PROJECT_AGENT_UNAVAILABLE"), "{run:?}");
    assert!(
        run.stderr.contains("never borrows from the environment"),
        "{run:?}"
    );
}

#[test]
fn doctor_shows_the_agent_identity_and_sends_nothing() {
    let endpoint = Endpoint::start(Reply::Json(200, responses_text("x")));
    let dir = agent_project(FLOW_PY);
    let env = openai_env(&endpoint);
    let run = jig_with(dir.path(), &pairs(&env), &["doctor"]);
    let expected = format!(
        "agent:\n  client: openai-compatible\n  api: responses\n  endpoint: {}\n  model: {MODEL}\n  key: OPENAI_API_KEY (environment)\n  configuration: valid (from the environment; no request was sent)\n",
        endpoint.base_url()
    );
    assert!(run.stdout.contains(&expected), "{run:?}");
    assert!(!run.stdout.contains(KEY), "{run:?}");
    let invalid = jig_with(dir.path(), &[("OPENAI_MODEL", MODEL)], &["doctor"]);
    assert!(
        invalid
            .stdout
            .contains("agent:\n  configuration: invalid: OPENAI_API_KEY is required\n"),
        "{invalid:?}"
    );
    // The Agent is optional host support: doctor's status does not change.
    assert_eq!(invalid.status, run.status);
    assert_eq!(endpoint.requests().len(), 0);
}

#[test]
fn the_agent_call_ends_at_the_run_deadline() {
    let endpoint = Endpoint::start(Reply::Slow(Duration::from_secs(20), responses_text("late")));
    let dir = agent_project(FLOW_PY);
    let env = openai_env(&endpoint);
    let reviewed = review_with(dir.path(), &pairs(&env));
    assert_eq!(reviewed.status, 0, "{reviewed:?}");
    let run = jig_with(
        dir.path(),
        &pairs(&env),
        &[
            "run",
            "flow:flows/ask",
            "--input",
            r#"{"instructions":"Go."}"#,
            "--timeout",
            "3s",
        ],
    );
    assert_eq!(run.status, 1, "{run:?}");
    assert_eq!(run.json()["code"], "DEADLINE_EXCEEDED", "{run:?}");
    assert_eq!(endpoint.requests().len(), 1);
    // The worker's envelope was ended: its connection is gone.
    assert!(endpoint.wait_for_hang_up());
}

#[test]
fn an_interrupted_run_ends_the_agent_worker_and_its_request() {
    let endpoint = Endpoint::start(Reply::Slow(Duration::from_secs(30), responses_text("late")));
    let dir = agent_project(FLOW_PY);
    let env = openai_env(&endpoint);
    let reviewed = review_with(dir.path(), &pairs(&env));
    assert_eq!(reviewed.status, 0, "{reviewed:?}");
    let mut command = jig(dir.path());
    for name in jig_provider_builtin::agent::endpoint::ENV_VARS
        .iter()
        .chain(&jig_provider_builtin::agent::acp::ENV_VARS)
    {
        command.env_remove(name);
    }
    let child = command
        .envs(pairs(&env))
        .args([
            "run",
            "flow:flows/ask",
            "--input",
            r#"{"instructions":"Go."}"#,
            "--timeout",
            "60s",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    endpoint.wait_for_requests(1);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let run = output(child.wait_with_output().unwrap());
    assert_interrupted(&run);
    assert_eq!(newest_terminal(dir.path())["code"], "CANCELLED", "{run:?}");
    assert!(endpoint.wait_for_hang_up());
    assert_eq!(endpoint.requests().len(), 1);
}

/// Two Agent calls at once: the second is refused before dispatch.
const TWICE_PY: &str = r#"import asyncio

from jiggy.flow import OperationError, handle


async def run(ctx):
    async def one(n):
        try:
            return await ctx.call_capability(
                operation_id=f"ask:{n}", slot="agent", method="run", input={"instructions": "hi"}
            )
        except OperationError as error:
            return {"code": error.code}
    first = asyncio.ensure_future(one(1))
    await asyncio.sleep(0.5)
    second = await one(2)
    return {"outcome": "done", "output": {"first": await first, "second": second}}


handle(run)
"#;

#[test]
fn an_agent_call_is_the_one_exclusive_effect() {
    let endpoint = Endpoint::start(Reply::Slow(
        Duration::from_millis(2500),
        responses_text("one"),
    ));
    let dir = agent_project(TWICE_PY);
    let output = ask(dir.path(), &openai_env(&endpoint), &json!({}));
    assert_eq!(
        output,
        json!({"first": {"outcome": "completed", "text": "one"}, "second": {"code": "RESOURCE_EXHAUSTED"}})
    );
    assert_eq!(endpoint.requests().len(), 1);
}

/// Asks with the `events` port connected; reads the port concurrently (or
/// only after the call when `read` is false).
const STREAM_PY: &str = r#"import asyncio

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

    reader = asyncio.ensure_future(read()) if ctx.input["read"] else None
    try:
        value = await ctx.call_capability(
            operation_id="ask:1", slot="agent", method="run",
            input={"instructions": "Stream it."}, channels={"events": pair.send}
        )
    except OperationError as error:
        value = {"code": error.code}
    if reader is None:
        reader = asyncio.ensure_future(read())
    return {"outcome": "done", "output": {"value": value, "events": await reader}}


handle(run)
"#;

pub(crate) fn chunk(text: &str) -> Value {
    json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})
}

fn responses_deltas(pieces: &[&str]) -> Vec<String> {
    let mut events: Vec<String> = pieces
        .iter()
        .map(|p| json!({"type": "response.output_text.delta", "delta": p}).to_string())
        .collect();
    events.push(
        json!({"type": "response.completed", "response": {"status": "completed", "output": [
            {"type": "message", "content": [{"type": "output_text", "text": pieces.concat()}]}]}})
        .to_string(),
    );
    events
}

#[test]
fn a_streamed_responses_answer_feeds_events_and_settles_as_one_value() {
    let endpoint = Endpoint::start(Reply::Sse(responses_deltas(&["Hello", " ", "world"])));
    let dir = agent_project(STREAM_PY);
    let output = ask(dir.path(), &openai_env(&endpoint), &json!({"read": true}));
    assert_eq!(
        output,
        json!({"value": {"outcome": "completed", "text": "Hello world"},
               "events": {"items": [chunk("Hello"), chunk(" "), chunk("world")], "end": "closed"}})
    );
    let requests = endpoint.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body["stream"], true);
    assert_eq!(requests[0].body["store"], false);
}

#[test]
fn a_streamed_chat_answer_feeds_events_and_maps_its_finish_reason() {
    let events = vec![
        json!({"choices": [{"delta": {"role": "assistant", "content": "Par"}, "finish_reason": null}]}).to_string(),
        json!({"choices": [{"delta": {"content": "tial"}, "finish_reason": null}]}).to_string(),
        json!({"choices": [{"delta": {}, "finish_reason": "length"}]}).to_string(),
        "[DONE]".to_string(),
    ];
    let endpoint = Endpoint::start(Reply::Sse(events));
    let dir = agent_project(STREAM_PY);
    let mut env = openai_env(&endpoint);
    env.push(("OPENAI_API", "chat-completions".into()));
    let output = ask(dir.path(), &env, &json!({"read": true}));
    assert_eq!(
        output,
        json!({"value": {"outcome": "limit", "text": "Partial"},
               "events": {"items": [chunk("Par"), chunk("tial")], "end": "closed"}})
    );
    assert_eq!(endpoint.requests()[0].body["stream"], true);
}

#[test]
fn an_overflowed_events_ingress_fails_lagged_while_the_result_settles() {
    let pieces: Vec<String> = (0..200).map(|i| format!("p{i} ")).collect();
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let endpoint = Endpoint::start(Reply::Sse(responses_deltas(&refs)));
    let dir = agent_project(STREAM_PY);
    let output = ask(dir.path(), &openai_env(&endpoint), &json!({"read": false}));
    assert_eq!(
        output["value"],
        json!({"outcome": "completed", "text": pieces.concat()})
    );
    assert_eq!(output["events"]["end"], "LAGGED", "{output}");
    let delivered = output["events"]["items"].as_array().unwrap();
    assert!(delivered.len() < 200, "{output}");
    // What was delivered is the stream's beginning, in order.
    for (i, item) in delivered.iter().enumerate() {
        assert_eq!(item, &chunk(&pieces[i]));
    }
}

#[test]
fn the_review_example_asks_with_its_skill_and_schema() {
    let reply = responses_text(
        "{\"concerns\":[\"subtracts instead of adding\"],\"verdict\":\"request-changes\"}",
    );
    let endpoint = Endpoint::start(Reply::Json(200, reply));
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&workspace().join("examples/review"), dir.path());
    let env = openai_env(&endpoint);
    let reviewed = review_with(dir.path(), &pairs(&env));
    assert_eq!(reviewed.status, 0, "{reviewed:?}");
    let run = jig_with(
        dir.path(),
        &pairs(&env),
        &[
            "run",
            "binding:reviewer",
            "--input",
            "\"- a + b\\n+ a - b\"",
        ],
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(
        run.json()["output"],
        json!({"concerns": ["subtracts instead of adding"], "verdict": "request-changes"})
    );
    let body = &endpoint.requests()[0].body;
    assert!(body["instructions"]
        .as_str()
        .unwrap()
        .contains("# Code review"));
    assert_eq!(body["text"]["format"]["strict"], true);
}

/// A Binding whose child asks the Agent: the parent has a skill of the
/// same name, which must not be the one sent.
const PARENT_PY: &str = r#"from jiggy.flow import handle


async def run(ctx):
    child = await ctx.run_child_flow(
        operation_id="child:1", slot="helper",
        input={"instructions": "Go.", "skills": ["style"]}
    )
    return {"outcome": "done", "output": child["output"]}


handle(run)
"#;

#[test]
fn a_childs_skills_come_only_from_the_childs_package() {
    let endpoint = Endpoint::start(Reply::Json(200, responses_text("child answer")));
    let dir = agent_project(FLOW_PY);
    write_files(
        dir.path(),
        &[
            (
                "flows/parent/FLOW.md",
                "---\nname: parent\ndescription: Ask through a child.\n---\n",
            ),
            ("flows/parent/flow.py", PARENT_PY),
            ("flows/parent/skills/style/SKILL.md", "PARENT SKILL TEXT\n"),
            (
                "bindings/parent.ts",
                "import { defineBinding } from \"@jigging/jig\";\n\nexport default defineBinding({\n  package: \"./flows/parent\",\n  slots: { helper: \"flow:./flows/ask\" },\n});\n",
            ),
        ],
    );
    let env = openai_env(&endpoint);
    let reviewed = review_with(dir.path(), &pairs(&env));
    assert_eq!(reviewed.status, 0, "{reviewed:?}");
    let run = jig_with(dir.path(), &pairs(&env), &["run", "binding:parent"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(
        run.json()["output"],
        json!({"value": {"outcome": "completed", "text": "child answer"}})
    );
    let skills = endpoint.requests()[0].body["instructions"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(skills.contains("Answer in one word."), "{skills}");
    assert!(!skills.contains("PARENT SKILL TEXT"), "{skills}");
}

/// A project carrying the Agent Run revision `descriptor` (digest
/// `digest`) reviews against the local endpoint, naming that revision in
/// the review text and the lock, and its Run gets the Agent's answer.
fn a_revision_reviews_and_its_run_gets_the_answer(descriptor: &str, digest: &str) {
    let endpoint = Endpoint::start(Reply::Json(200, responses_text("Revision answered.")));
    let dir = agent_project_carrying(FLOW_PY, descriptor);
    let env = openai_env(&endpoint);
    let reviewed = jig_with(dir.path(), &pairs(&env), &["review", "--yes"]);
    assert_eq!(reviewed.status, 0, "{reviewed:?}");
    assert!(
        reviewed.stdout.contains("  + \"flows/ask\" sha256:")
            && reviewed.stdout.contains(&format!(
                " uses \"agent\" = \"https://jig.md/contracts/agent-run\"@\"1.0.0\" {digest}\n"
            )),
        "{reviewed:?}"
    );
    assert!(
        reviewed
            .stdout
            .contains("  \"flows/ask#agent\" served by \"agent-run\" (builtin)"),
        "{reviewed:?}"
    );
    assert!(
        reviewed.stdout.ends_with("project is ready\n"),
        "{reviewed:?}"
    );
    let lock: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("jig.lock")).unwrap())
            .unwrap();
    assert_eq!(
        lock["packages"]["flows/ask"]["uses"]["agent"],
        json!({"id": "https://jig.md/contracts/agent-run", "version": "1.0.0", "digest": digest})
    );
    let input = json!({"instructions": "Answer."}).to_string();
    let run = jig_with(
        dir.path(),
        &pairs(&env),
        &["run", "flow:flows/ask", "--input", &input],
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(
        run.json()["output"],
        json!({"value": {"outcome": "completed", "text": "Revision answered."}})
    );
    let requests = endpoint.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0].body["input"], "Answer.");
    // No events port was connected: the answer is asked for in one piece.
    assert!(requests[0].body.get("stream").is_none());
}

#[test]
fn the_current_agent_run_revision_reviews_and_runs() {
    a_revision_reviews_and_its_run_gets_the_answer(
        "agent-run.capability.json",
        "sha256:b43fba88de62ef189f54004318e9639df58661bb04b3bf76ecfac70e3a5d098b",
    );
}

#[test]
fn the_agent_run_revision_whose_events_name_no_delivery_reviews_and_runs() {
    a_revision_reviews_and_its_run_gets_the_answer(
        "variants/agent-run-299110c.capability.json",
        "sha256:5e7df4408fd1f6aebf7e1269573a10ff87c7374248a51dacb63cd1c9c97e2b56",
    );
}

#[test]
fn the_agent_run_revision_without_channels_reviews_and_runs() {
    a_revision_reviews_and_its_run_gets_the_answer(
        "variants/agent-run-b38b3a9.capability.json",
        "sha256:5a0f06495323419d275eeff92617d9287647ece137dacc9c5c6d50466d65c0f0",
    );
}

/// The revision whose `events` names no `delivery` still streams: the
/// Flow's channel opens direct, which that port accepts.
#[test]
fn the_events_of_the_revision_without_delivery_are_fed_directly() {
    let endpoint = Endpoint::start(Reply::Sse(responses_deltas(&["One", " two"])));
    let dir = agent_project_carrying(STREAM_PY, "variants/agent-run-299110c.capability.json");
    let output = ask(dir.path(), &openai_env(&endpoint), &json!({"read": true}));
    assert_eq!(
        output,
        json!({"value": {"outcome": "completed", "text": "One two"},
               "events": {"items": [chunk("One"), chunk(" two")], "end": "closed"}})
    );
    assert_eq!(endpoint.requests()[0].body["stream"], true);
}

/// `jig new flow --agent` (issue 49): the Flow it scaffolds, in Python and
/// TypeScript, names the exact Agent Run descriptor this jig serves (its
/// digest is the builtin's), reviews against a configured endpoint and
/// runs, returning the Agent's answer.
#[test]
fn a_new_agent_flow_names_the_served_descriptor_and_asks_the_agent() {
    let endpoint = Endpoint::start(Reply::Json(
        200,
        chat(
            "stop",
            json!({"role": "assistant", "content": "hello from the Agent"}),
        ),
    ));
    let outer = tempfile::tempdir().unwrap();
    assert_eq!(run_jig(outer.path(), &["init", "--bare", "p"]).status, 0);
    let dir = outer.path().join("p");
    for (name, lang) in [("ask", "python"), ("tell", "typescript")] {
        let made = run_jig(&dir, &["new", "flow", name, "--agent", "--lang", lang]);
        assert_eq!(made.status, 0, "{made:?}");
        assert!(
            made.stdout.contains(
                "contracts/agent-run.capability.json: the Agent Run 1.0.0 this jig serves)"
            ),
            "{made:?}"
        );
        let digest = run_jig(
            &dir,
            &[
                "contract",
                "digest",
                &format!("flows/{name}/contracts/agent-run.capability.json"),
            ],
        );
        assert_eq!(
            digest.stdout.trim(),
            jig_provider_builtin::agent::CONTRACT_DIGEST,
            "{digest:?}"
        );
    }
    let key_file = dir.join("agent-key");
    std::fs::write(&key_file, "sk-new-flow\n").unwrap();
    write_files(
        &dir,
        &[(
            ".test-config-home/jig/host.toml",
            &format!(
                "[agent]\napi = \"chat-completions\"\nbase-url = \"{}\"\nmodel = \"m\"\napi-key-file = \"{}\"\n",
                endpoint.base_url(),
                key_file.display()
            ),
        )],
    );
    review(&dir);
    for target in ["flow:flows/ask", "flow:flows/tell"] {
        let run = run_jig(&dir, &["run", target, "--input", "\"Greet me.\""]);
        assert_eq!(run.status, 0, "{run:?}");
        assert_eq!(
            run.json()["output"],
            json!({"text": "hello from the Agent"}),
            "{run:?}"
        );
    }
    assert_eq!(endpoint.requests().len(), 2);
}
