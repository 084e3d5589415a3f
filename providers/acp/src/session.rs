//! The one private ACP mechanism (seed 002 §9; docs/src/agents.md, ACP clients): inside the
//! Agent worker's envelope (this process), start the native client's ACP
//! executable with
//! an empty work directory and only its credential variables, and speak
//! ACP v1 to it over its stdio with the `agent-client-protocol` crate:
//!
//!
//! `initialize{protocolVersion: 1}` with default (all false) client
//! capabilities: no filesystem, no terminal, no MCP → `session/new{cwd,
//! mcpServers: []}` → `session/prompt` with one text block (the
//! instructions, the rendered skills, and, with a responseSchema, the
//! instruction to answer with JSON satisfying it). No `authenticate` is
//! sent: the credentials reach the client through its environment.
//!
//! Every permission request is rejected (its `reject_once` /
//! `reject_always` option, or `cancelled` when it offers none). Session
//! updates feed the worker's `event` lines: `agent_message_chunk` text
//! (which also makes up the answer's `text`) and `plan`; other updates are
//! not public and are dropped.
//!
//! Stop reasons: `end_turn` → `completed`; `refusal` and `cancelled` (Jig
//! never cancels, so the Agent gave up) → `blocked`; `max_tokens` and
//! `max_turn_requests` → `limit`.
//!
//! A responseSchema cannot be enforced by an ACP client: the host states
//! it in the prompt, and judges the final text (JSON, validated with
//! Schema/1; `INVALID_RESULT` otherwise).

use std::path::PathBuf;
use std::process::Stdio;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ContentBlock, InitializeRequest, NewSessionRequest, PermissionOptionKind, PromptRequest,
    RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SelectedPermissionOutcome, SessionNotification, TextContent,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Agent, ByteStreams};
use serde_json::{json, Value};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// How an ACP prompt turn ended, as the Agent Run contract says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Completed,
    Blocked,
    Limit,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Blocked => "blocked",
            Outcome::Limit => "limit",
        }
    }
}

/// A finished turn: its outcome and the text of the Agent's message chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub outcome: Outcome,
    pub text: String,
}

/// A turn without an answer. `Failed` is proof the prompt was not sent;
/// `Unproved` means it may have been processed and no result is proved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoAnswer {
    Failed(String),
    Unproved(String),
}

/// One ACP session for the worker.
#[derive(Clone, PartialEq)]
pub struct Session {
    pub program: PathBuf,
    /// The client's variables (credentials among them).
    pub env: Vec<(String, String)>,
    /// The empty work directory the client starts in (and `session/new`'s cwd).
    pub cwd: PathBuf,
    /// A private home directory for the client's own state.
    pub home: PathBuf,
    /// The whole prompt text.
    pub prompt: String,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("program", &self.program)
            .field("cwd", &self.cwd)
            .finish_non_exhaustive()
    }
}

/// The fixed `PATH` the client runs with (it is never searched for the
/// client itself).
pub const CLIENT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The outcome of an ACP stop reason (as its wire string).
pub fn outcome(stop_reason: &str) -> Option<Outcome> {
    match stop_reason {
        "end_turn" => Some(Outcome::Completed),
        "refusal" | "cancelled" => Some(Outcome::Blocked),
        "max_tokens" | "max_turn_requests" => Some(Outcome::Limit),
        _ => None,
    }
}

/// The public `events` item of a session update, if it is one.
pub fn public_item(update: &Value) -> Option<(Value, Option<String>)> {
    match update.get("sessionUpdate").and_then(Value::as_str)? {
        "agent_message_chunk" => {
            let content = update.get("content")?;
            if content.get("type").and_then(Value::as_str) != Some("text") {
                return None;
            }
            let text = content.get("text")?.as_str()?.to_string();
            let mut item = chunk_item(&text);
            if let Some(id) = update.get("messageId").and_then(Value::as_str) {
                item["messageId"] = json!(id);
            }
            Some((item, Some(text)))
        }
        "plan" => {
            let entries: Vec<Value> = update
                .get("entries")?
                .as_array()?
                .iter()
                .map(|e| {
                    json!({
                        "content": e.get("content").cloned().unwrap_or(json!("")),
                        "priority": e.get("priority").cloned().unwrap_or(json!("medium")),
                        "status": e.get("status").cloned().unwrap_or(json!("pending")),
                    })
                })
                .collect();
            Some((json!({ "sessionUpdate": "plan", "entries": entries }), None))
        }
        _ => None,
    }
}

/// The `events` item of one piece of the Agent's text (the ACP
/// public-updates channel contract's `agent_message_chunk`).
pub fn chunk_item(text: &str) -> Value {
    json!({ "sessionUpdate": "agent_message_chunk", "content": { "type": "text", "text": text } })
}

/// Run the session; `event` gets each public item as it arrives; `dispatching`
/// is called just before the prompt is sent.
pub async fn run(
    session: Session,
    event: impl Fn(&Value) + Send + Sync + 'static,
    dispatching: impl FnOnce() + Send + 'static,
) -> Result<Answer, NoAnswer> {
    let mut command = tokio::process::Command::new(&session.program);
    command
        .env_clear()
        .envs(session.env.iter().map(|(k, v)| (k, v)))
        .env("HOME", &session.home)
        .env("PATH", CLIENT_PATH)
        .env("LANG", "C.UTF-8")
        .current_dir(&session.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|_| NoAnswer::Failed("the ACP client cannot be started".into()))?;
    let stdin = child.stdin.take().expect("piped stdin");
    let stdout = child.stdout.take().expect("piped stdout");
    let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());

    let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let collected = text.clone();
    let cwd = session.cwd.clone();
    let prompt = session.prompt.clone();
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sent_flag = sent.clone();
    let result = agent_client_protocol::Client
        .v1()
        .name("jig")
        .on_receive_notification(
            async move |notification: SessionNotification, _cx| {
                if let Ok(update) = serde_json::to_value(&notification.update) {
                    if let Some((item, piece)) = public_item(&update) {
                        if let Some(piece) = piece {
                            collected.lock().expect("text").push_str(&piece);
                        }
                        event(&item);
                    }
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request: RequestPermissionRequest, responder, _cx| {
                let reject = [
                    PermissionOptionKind::RejectOnce,
                    PermissionOptionKind::RejectAlways,
                ]
                .iter()
                .find_map(|kind| {
                    request
                        .options
                        .iter()
                        .find(|option| option.kind == *kind)
                        .map(|option| option.option_id.clone())
                });
                responder.respond(RequestPermissionResponse::new(match reject {
                    Some(id) => {
                        RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id))
                    }
                    None => RequestPermissionOutcome::Cancelled,
                }))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, async move |connection: ConnectionTo<Agent>| {
            connection
                .send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let session = connection
                .send_request(NewSessionRequest::new(cwd))
                .block_task()
                .await?;
            dispatching();
            sent_flag.store(true, std::sync::atomic::Ordering::SeqCst);
            let response = connection
                .send_request(PromptRequest::new(
                    session.session_id,
                    vec![ContentBlock::Text(TextContent::new(prompt))],
                ))
                .block_task()
                .await?;
            Ok(serde_json::to_value(response.stop_reason).unwrap_or(Value::Null))
        })
        .await;
    let _ = child.start_kill();
    let stop = match result {
        Ok(stop) => stop,
        Err(_) if sent.load(std::sync::atomic::Ordering::SeqCst) => {
            return Err(NoAnswer::Unproved(
                "the ACP session failed after the prompt was sent; it is not resent".into(),
            ))
        }
        Err(_) => {
            return Err(NoAnswer::Failed(
                "the ACP client failed before the prompt was sent".into(),
            ))
        }
    };
    let Some(outcome) = stop.as_str().and_then(outcome) else {
        return Err(NoAnswer::Unproved(
            "the ACP client ended the prompt with an unknown stop reason".into(),
        ));
    };
    let text = text.lock().expect("text").clone();
    Ok(Answer { outcome, text })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_reasons_map_to_outcomes() {
        assert_eq!(outcome("end_turn"), Some(Outcome::Completed));
        assert_eq!(outcome("refusal"), Some(Outcome::Blocked));
        assert_eq!(outcome("cancelled"), Some(Outcome::Blocked));
        assert_eq!(outcome("max_tokens"), Some(Outcome::Limit));
        assert_eq!(outcome("max_turn_requests"), Some(Outcome::Limit));
        assert_eq!(outcome("other"), None);
    }

    #[test]
    fn only_text_chunks_and_plans_are_public() {
        let chunk = json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}});
        assert_eq!(
            public_item(&chunk),
            Some((chunk_item("hi"), Some("hi".into())))
        );
        let plan = json!({"sessionUpdate": "plan", "entries": [{"content": "c", "priority": "high", "status": "pending", "_meta": {}}]});
        assert_eq!(
            public_item(&plan).unwrap().0,
            json!({"sessionUpdate": "plan", "entries": [{"content": "c", "priority": "high", "status": "pending"}]})
        );
        let thought = json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "x"}});
        assert_eq!(public_item(&thought), None);
    }

    /// The session against the tests' SDK agent (host/tests/fixtures/acp,
    /// installed by .ci/setup), outside any envelope.
    #[tokio::test]
    async fn a_session_with_the_sdk_agent_rejects_permission_and_collects_chunks() {
        let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../host/tests/fixtures/acp")
            .canonicalize()
            .unwrap();
        assert!(
            fixtures
                .join("node_modules/@agentclientprotocol/sdk/package.json")
                .is_file(),
            "the ACP SDK is missing: run .ci/setup"
        );
        let dir = tempfile::tempdir().unwrap();
        let (cwd, home) = (dir.path().join("work"), dir.path().join("home"));
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = events.clone();
        let answer = run(
            Session {
                program: fixtures.join("claude-acp"),
                env: vec![("ANTHROPIC_API_KEY".into(), "k".into())],
                cwd: cwd.clone(),
                home,
                prompt: "Report.".into(),
            },
            move |item| sink.lock().unwrap().push(item.clone()),
            || {},
        )
        .await
        .unwrap();
        assert_eq!(answer.outcome, Outcome::Completed);
        let report: Value = serde_json::from_str(&answer.text).unwrap();
        assert_eq!(report["seen"]["initialize"]["protocolVersion"], 1);
        assert_eq!(report["seen"]["sessionNew"]["mcpServers"], json!([]));
        assert_eq!(
            report["seen"]["sessionNew"]["cwd"],
            json!(cwd.to_string_lossy())
        );
        assert_eq!(report["cwdEntries"], json!([]));
        assert_eq!(
            report["permission"],
            json!({"outcome": "selected", "optionId": "no"})
        );
        let events = events.lock().unwrap();
        assert_eq!(events.len(), 4, "{events:?}");
        assert_eq!(events[0]["sessionUpdate"], "plan");
    }
}
