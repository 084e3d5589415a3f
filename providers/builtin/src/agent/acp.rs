//! Native ACP Agent clients (docs/src/agents.md): `JIG_AGENT_CLIENT=codex|claude|pi`.
//!
//! - **Discovery**: the optional absolute `CODEX_PATH` / `CLAUDE_PATH` /
//!   `PI_PATH`, else the client's ACP executable (`codex-acp`,
//!   `claude-agent-acp`, `pi-acp`) in the fixed directories [`ACP_DIRS`];
//!   never `PATH`.
//! - **Credentials** (passed to the Agent process only, never to the Flow,
//!   never recorded or shown):
//!   - Codex: API mode `OPENAI_API_KEY` + `OPENAI_MODEL` (optional
//!     `OPENAI_BASE_URL`; `OPENAI_API`, if set, must be `responses`), or
//!     subscription mode: an absolute `CODEX_HOME` holding `auth.json`
//!     (shown read-only) with optional `CODEX_MODEL`.
//!   - Claude: `CLAUDE_CODE_OAUTH_TOKEN` with optional `CLAUDE_MODEL`, or
//!     exactly one of `ANTHROPIC_API_KEY` / `ANTHROPIC_AUTH_TOKEN` plus
//!     `ANTHROPIC_MODEL` and optional `ANTHROPIC_BASE_URL`.
//!   - Pi: `PI_PROVIDER` + `PI_MODEL`, plus `PI_API_KEY` or an absolute
//!     `PI_CODING_AGENT_DIR` holding `auth.json` (shown read-only).
//!
//! The reviewed identity of a native client is its name, the executable's
//! path (and, pinned by the host, its digest) and the model when one is
//! given; the credentials are not part of it.
//!
//! The ACP session itself is not in this crate: it runs in the separate
//! `jig-agent-acp` worker program (providers/acp, built alone because the
//! `agent-client-protocol` crate turns on serde_json's `preserve_order`).
//! This module gives the host that worker's request ([`WorkerRequest`]) and
//! judges its verdict line ([`judge_line`]).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::values::{check_base_url, check_key, check_model, Api, EndpointError};
use super::wire::{Answer, Ask, Outcome};
use super::worker::{judge, Verdict};

/// The file name of the ACP Agent worker program, installed beside `jig`.
pub const WORKER_PROGRAM: &str = "jig-agent-acp";

/// The prompt of an ACP session: the rendered skills, the instructions,
/// and with a responseSchema the instruction to answer with JSON
/// satisfying it (an ACP client cannot enforce a schema; the host checks
/// the answer).
pub fn prompt(instructions: &str, skills: Option<&str>, schema: Option<&Value>) -> String {
    let mut text = String::new();
    if let Some(skills) = skills {
        text.push_str(skills);
        text.push_str("\n\n");
    }
    text.push_str(instructions);
    if let Some(schema) = schema {
        text.push_str("\n\nAnswer with exactly one JSON value and nothing else (no prose, no code fence). It must satisfy this JSON Schema:\n");
        text.push_str(&schema.to_string());
    }
    text
}

/// The one request line of the `jig-agent-acp` worker: the client's
/// executable and variables, and the prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerRequest {
    pub program: PathBuf,
    pub env: Vec<(String, String)>,
    pub prompt: String,
}

impl WorkerRequest {
    pub fn to_value(&self) -> Value {
        json!({
            "acp": {
                "program": self.program.to_string_lossy(),
                "env": self.env.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
                "prompt": self.prompt,
            },
        })
    }
}

/// The verdict of the worker's last line: its `{"answer": {outcome, text}}`
/// judged like an HTTP answer (text bound; with a responseSchema a
/// completed text must be JSON, which becomes `structured`), or its
/// `{"error": …}` as it is. `None`: not a verdict line.
pub fn judge_line(schema: Option<&Value>, line: &Value) -> Option<Value> {
    if line.get("error").is_some() {
        return Some(line.clone());
    }
    let answer = line.get("answer")?;
    let outcome = match answer.get("outcome")?.as_str()? {
        "completed" => Outcome::Completed,
        "blocked" => Outcome::Blocked,
        "limit" => Outcome::Limit,
        _ => return None,
    };
    let text = answer.get("text")?.as_str()?.to_string();
    let ask = Ask {
        api: Api::Responses,
        model: String::new(),
        instructions: String::new(),
        skills: None,
        schema: schema.cloned(),
        stream: true,
    };
    let verdict: Verdict = judge(&ask, Ok(Answer { outcome, text }));
    Some(verdict.to_value())
}

/// The fixed directories a native client's executable is looked up in
/// when its `*_PATH` variable is absent (never `PATH`).
pub const ACP_DIRS: [&str; 4] = [
    "/usr/bin",
    "/bin",
    "/run/current-system/sw/bin",
    "/usr/local/bin",
];

/// The environment variables a native client may read; with
/// `JIG_AGENT_CLIENT`, these are all the Agent variables of an ACP setup.
pub const ENV_VARS: [&str; 20] = [
    "CODEX_PATH",
    "CLAUDE_PATH",
    "PI_PATH",
    "CODEX_HOME",
    "CODEX_MODEL",
    "OPENAI_API_KEY",
    "OPENAI_MODEL",
    "OPENAI_BASE_URL",
    "OPENAI_API",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_MODEL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_MODEL",
    "ANTHROPIC_BASE_URL",
    "PI_PROVIDER",
    "PI_MODEL",
    "PI_API_KEY",
    "PI_CODING_AGENT_DIR",
    "JIG_AGENT_CLIENT",
];

/// One native client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    Codex,
    Claude,
    Pi,
}

impl Client {
    pub fn parse(text: &str) -> Option<Client> {
        match text {
            "codex" => Some(Client::Codex),
            "claude" => Some(Client::Claude),
            "pi" => Some(Client::Pi),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Client::Codex => "codex",
            Client::Claude => "claude",
            Client::Pi => "pi",
        }
    }

    /// The variable naming the executable explicitly.
    pub fn path_var(self) -> &'static str {
        match self {
            Client::Codex => "CODEX_PATH",
            Client::Claude => "CLAUDE_PATH",
            Client::Pi => "PI_PATH",
        }
    }

    /// The executable's name in [`ACP_DIRS`].
    pub fn executable(self) -> &'static str {
        match self {
            Client::Codex => "codex-acp",
            Client::Claude => "claude-agent-acp",
            Client::Pi => "pi-acp",
        }
    }
}

/// A configured native client. `Debug` never shows a credential value.
#[derive(Clone, PartialEq, Eq)]
pub struct Native {
    pub client: Client,
    /// The absolute path of the ACP executable.
    pub program: PathBuf,
    /// The model, when the configuration names one.
    pub model: Option<String>,
    /// The variables the Agent process gets (credentials, model, endpoint).
    pub env: Vec<(String, String)>,
    /// Credential files or directories the Agent process sees read-only.
    pub read_only: Vec<PathBuf>,
}

impl std::fmt::Debug for Native {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.env.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("Native")
            .field("client", &self.client)
            .field("program", &self.program)
            .field("model", &self.model)
            .field("env", &names)
            .field("read_only", &self.read_only)
            .finish()
    }
}

/// Resolve the native client `client` from the environment.
pub fn resolve(
    client: Client,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Native, EndpointError> {
    let program = discover(client, env)?;
    let mut native = Native {
        client,
        program,
        model: None,
        env: Vec::new(),
        read_only: Vec::new(),
    };
    let pass = |native: &mut Native, name: &'static str, value: String| {
        native.env.push((name.to_string(), value));
    };
    match client {
        Client::Claude => {
            let oauth = env("CLAUDE_CODE_OAUTH_TOKEN");
            let api_key = env("ANTHROPIC_API_KEY");
            let token = env("ANTHROPIC_AUTH_TOKEN");
            match (oauth, api_key, token) {
                (Some(oauth), None, None) => {
                    if env("ANTHROPIC_MODEL").is_some() || env("ANTHROPIC_BASE_URL").is_some() {
                        return Err(EndpointError::Invalid(
                            "CLAUDE_CODE_OAUTH_TOKEN",
                            "it cannot be mixed with ANTHROPIC_* variables",
                        ));
                    }
                    let oauth = check_key("CLAUDE_CODE_OAUTH_TOKEN", &oauth)?;
                    pass(&mut native, "CLAUDE_CODE_OAUTH_TOKEN", oauth);
                    if let Some(model) = env("CLAUDE_MODEL") {
                        let model = check_model("CLAUDE_MODEL", &model)?;
                        pass(&mut native, "ANTHROPIC_MODEL", model.clone());
                        native.model = Some(model);
                    }
                }
                (None, Some(_), Some(_)) | (Some(_), _, _) => {
                    return Err(EndpointError::Invalid(
                        "ANTHROPIC_API_KEY",
                        "set exactly one of CLAUDE_CODE_OAUTH_TOKEN, ANTHROPIC_API_KEY and ANTHROPIC_AUTH_TOKEN",
                    ))
                }
                (None, key, token) => {
                    let (name, value) = match (key, token) {
                        (Some(key), None) => ("ANTHROPIC_API_KEY", key),
                        (None, Some(token)) => ("ANTHROPIC_AUTH_TOKEN", token),
                        _ => return Err(EndpointError::Required("ANTHROPIC_API_KEY")),
                    };
                    let value = check_key(name, &value)?;
                    pass(&mut native, name, value);
                    let model = env("ANTHROPIC_MODEL")
                        .ok_or(EndpointError::Required("ANTHROPIC_MODEL"))?;
                    let model = check_model("ANTHROPIC_MODEL", &model)?;
                    pass(&mut native, "ANTHROPIC_MODEL", model.clone());
                    native.model = Some(model);
                    if let Some(url) = env("ANTHROPIC_BASE_URL") {
                        let url = check_base_url("ANTHROPIC_BASE_URL", &url)?;
                        pass(&mut native, "ANTHROPIC_BASE_URL", url);
                    }
                }
            }
        }
        Client::Codex => match env("OPENAI_API_KEY") {
            Some(key) => {
                let key = check_key("OPENAI_API_KEY", &key)?;
                pass(&mut native, "OPENAI_API_KEY", key);
                let model = env("OPENAI_MODEL").ok_or(EndpointError::Required("OPENAI_MODEL"))?;
                let model = check_model("OPENAI_MODEL", &model)?;
                pass(&mut native, "OPENAI_MODEL", model.clone());
                native.model = Some(model);
                if let Some(url) = env("OPENAI_BASE_URL") {
                    let url = check_base_url("OPENAI_BASE_URL", &url)?;
                    pass(&mut native, "OPENAI_BASE_URL", url);
                }
                if env("OPENAI_API").is_some_and(|api| api != "responses") {
                    return Err(EndpointError::Invalid(
                        "OPENAI_API",
                        "Codex speaks responses only",
                    ));
                }
            }
            None => {
                let home = env("CODEX_HOME").ok_or(EndpointError::Required(
                    "OPENAI_API_KEY (API mode) or CODEX_HOME (subscription mode)",
                ))?;
                let home = credential_dir("CODEX_HOME", &home)?;
                pass(
                    &mut native,
                    "CODEX_HOME",
                    home.to_string_lossy().into_owned(),
                );
                native.read_only.push(home);
                if let Some(model) = env("CODEX_MODEL") {
                    let model = check_model("CODEX_MODEL", &model)?;
                    pass(&mut native, "CODEX_MODEL", model.clone());
                    native.model = Some(model);
                }
            }
        },
        Client::Pi => {
            let provider = env("PI_PROVIDER").ok_or(EndpointError::Required("PI_PROVIDER"))?;
            let provider = check_model("PI_PROVIDER", &provider)?;
            pass(&mut native, "PI_PROVIDER", provider);
            let model = env("PI_MODEL").ok_or(EndpointError::Required("PI_MODEL"))?;
            let model = check_model("PI_MODEL", &model)?;
            pass(&mut native, "PI_MODEL", model.clone());
            native.model = Some(model);
            match (env("PI_API_KEY"), env("PI_CODING_AGENT_DIR")) {
                (Some(key), None) => {
                    let key = check_key("PI_API_KEY", &key)?;
                    pass(&mut native, "PI_API_KEY", key);
                }
                (None, Some(dir)) => {
                    let dir = credential_dir("PI_CODING_AGENT_DIR", &dir)?;
                    pass(
                        &mut native,
                        "PI_CODING_AGENT_DIR",
                        dir.to_string_lossy().into_owned(),
                    );
                    native.read_only.push(dir);
                }
                (Some(_), Some(_)) => {
                    return Err(EndpointError::Invalid(
                        "PI_API_KEY",
                        "set PI_API_KEY or PI_CODING_AGENT_DIR, not both",
                    ))
                }
                (None, None) => {
                    return Err(EndpointError::Required(
                        "PI_API_KEY or PI_CODING_AGENT_DIR (with auth.json)",
                    ))
                }
            }
        }
    }
    Ok(native)
}

/// The executable: the absolute `*_PATH`, else the first executable
/// `ACP_DIRS/<name>`.
fn discover(
    client: Client,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<PathBuf, EndpointError> {
    let var = client.path_var();
    if let Some(path) = env(var) {
        let path = PathBuf::from(path);
        if !path.is_absolute() {
            return Err(EndpointError::Invalid(var, "it must be an absolute path"));
        }
        if !is_executable(&path) {
            return Err(EndpointError::Invalid(var, "it is not an executable file"));
        }
        return Ok(path);
    }
    ACP_DIRS
        .iter()
        .map(|dir| Path::new(dir).join(client.executable()))
        .find(|p| is_executable(p))
        .ok_or(EndpointError::Required(var))
}

/// An absolute directory holding a regular `auth.json`.
fn credential_dir(name: &'static str, dir: &str) -> Result<PathBuf, EndpointError> {
    let dir = PathBuf::from(dir);
    if !dir.is_absolute() {
        return Err(EndpointError::Invalid(name, "it must be an absolute path"));
    }
    if !dir.join("auth.json").is_file() {
        return Err(EndpointError::Invalid(name, "it holds no auth.json file"));
    }
    Ok(dir)
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn the_worker_answer_is_judged_like_an_http_answer() {
        let schema = json!({"type": "object"});
        let completed = json!({"answer": {"outcome": "completed", "text": "{\"a\":1}"}});
        assert_eq!(
            judge_line(Some(&schema), &completed),
            Some(
                json!({"result": {"outcome": "completed", "text": "{\"a\":1}", "structured": {"a": 1}}})
            )
        );
        assert_eq!(
            judge_line(None, &completed),
            Some(json!({"result": {"outcome": "completed", "text": "{\"a\":1}"}}))
        );
        let prose = json!({"answer": {"outcome": "completed", "text": "no"}});
        let judged = judge_line(Some(&schema), &prose).unwrap();
        assert_eq!(judged["error"]["code"], "INVALID_RESULT");
        assert_eq!(
            judged["error"]["details"]["code"],
            "AGENT_RUN_STRUCTURED_INVALID"
        );
        // A blocked answer needs no structured value.
        let blocked = json!({"answer": {"outcome": "blocked", "text": "no"}});
        assert_eq!(
            judge_line(Some(&schema), &blocked),
            Some(json!({"result": {"outcome": "blocked", "text": "no"}}))
        );
        let error = json!({"error": {"code": "UNCERTAIN", "message": "m"}});
        assert_eq!(judge_line(None, &error), Some(error.clone()));
        let unknown = json!({"answer": {"outcome": "maybe", "text": ""}});
        assert_eq!(judge_line(None, &unknown), None);
        assert_eq!(judge_line(None, &json!({"other": 1})), None);
    }

    #[test]
    fn the_worker_request_is_one_acp_object() {
        let request = WorkerRequest {
            program: PathBuf::from("/bin/acp"),
            env: vec![("K".into(), "v".into())],
            prompt: prompt("do", Some("SKILLS"), Some(&json!({"type": "object"}))),
        };
        assert_eq!(
            request.to_value(),
            json!({"acp": {"program": "/bin/acp", "env": [["K", "v"]],
                "prompt": format!("SKILLS\n\ndo\n\nAnswer with exactly one JSON value and nothing else (no prose, no code fence). It must satisfy this JSON Schema:\n{}", json!({"type": "object"}))}})
        );
        assert_eq!(prompt("do", None, None), "do");
    }

    fn env(pairs: Vec<(&str, String)>) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> =
            pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        move |name: &str| map.get(name).cloned()
    }

    fn executable() -> (tempfile::TempDir, String) {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent");
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let text = path.to_string_lossy().into_owned();
        (dir, text)
    }

    #[test]
    fn claude_with_an_api_key_needs_a_model_and_passes_only_its_variables() {
        let (_dir, path) = executable();
        let n = resolve(
            Client::Claude,
            &env(vec![
                ("CLAUDE_PATH", path.clone()),
                ("ANTHROPIC_API_KEY", "sk-ant".into()),
                ("ANTHROPIC_MODEL", "claude-x".into()),
            ]),
        )
        .unwrap();
        assert_eq!(n.program, PathBuf::from(&path));
        assert_eq!(n.model.as_deref(), Some("claude-x"));
        assert_eq!(
            n.env,
            vec![
                ("ANTHROPIC_API_KEY".to_string(), "sk-ant".to_string()),
                ("ANTHROPIC_MODEL".to_string(), "claude-x".to_string())
            ]
        );
        assert!(!format!("{n:?}").contains("sk-ant"));
        assert_eq!(
            resolve(
                Client::Claude,
                &env(vec![
                    ("CLAUDE_PATH", path.clone()),
                    ("ANTHROPIC_API_KEY", "k".into())
                ])
            ),
            Err(EndpointError::Required("ANTHROPIC_MODEL"))
        );
        assert!(resolve(
            Client::Claude,
            &env(vec![
                ("CLAUDE_PATH", path.clone()),
                ("ANTHROPIC_API_KEY", "k".into()),
                ("ANTHROPIC_AUTH_TOKEN", "t".into()),
                ("ANTHROPIC_MODEL", "m".into()),
            ])
        )
        .is_err());
        let oauth = resolve(
            Client::Claude,
            &env(vec![
                ("CLAUDE_PATH", path),
                ("CLAUDE_CODE_OAUTH_TOKEN", "o".into()),
            ]),
        )
        .unwrap();
        assert_eq!(oauth.model, None);
    }

    #[test]
    fn the_path_variable_must_be_absolute_and_executable_and_path_is_never_searched() {
        let (dir, path) = executable();
        let key = || ("ANTHROPIC_API_KEY", "k".to_string());
        let model = || ("ANTHROPIC_MODEL", "m".to_string());
        assert!(matches!(
            resolve(
                Client::Claude,
                &env(vec![("CLAUDE_PATH", "agent".into()), key(), model()])
            ),
            Err(EndpointError::Invalid("CLAUDE_PATH", _))
        ));
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "").unwrap();
        assert!(matches!(
            resolve(
                Client::Claude,
                &env(vec![
                    ("CLAUDE_PATH", plain.to_string_lossy().into_owned()),
                    key(),
                    model()
                ])
            ),
            Err(EndpointError::Invalid("CLAUDE_PATH", _))
        ));
        // An executable named like the client on PATH is not found.
        let named = dir.path().join("claude-agent-acp");
        std::fs::copy(&path, &named).unwrap();
        let found = resolve(
            Client::Claude,
            &env(vec![
                ("PATH", dir.path().to_string_lossy().into()),
                key(),
                model(),
            ]),
        );
        if !Path::new("/usr/bin/claude-agent-acp").exists() {
            assert_eq!(found, Err(EndpointError::Required("CLAUDE_PATH")));
        }
    }

    #[test]
    fn codex_and_pi_follow_their_credential_rules() {
        let (dir, path) = executable();
        let api = resolve(
            Client::Codex,
            &env(vec![
                ("CODEX_PATH", path.clone()),
                ("OPENAI_API_KEY", "k".into()),
                ("OPENAI_MODEL", "gpt".into()),
                ("OPENAI_API", "chat-completions".into()),
            ]),
        );
        assert!(matches!(api, Err(EndpointError::Invalid("OPENAI_API", _))));
        assert!(matches!(
            resolve(
                Client::Codex,
                &env(vec![
                    ("CODEX_PATH", path.clone()),
                    ("CODEX_HOME", dir.path().to_string_lossy().into())
                ])
            ),
            Err(EndpointError::Invalid("CODEX_HOME", _))
        ));
        std::fs::write(dir.path().join("auth.json"), "{}").unwrap();
        let sub = resolve(
            Client::Codex,
            &env(vec![
                ("CODEX_PATH", path.clone()),
                ("CODEX_HOME", dir.path().to_string_lossy().into()),
            ]),
        )
        .unwrap();
        assert_eq!(sub.read_only, vec![dir.path().to_path_buf()]);
        assert_eq!(
            resolve(
                Client::Pi,
                &env(vec![("PI_PATH", path.clone()), ("PI_PROVIDER", "p".into())])
            ),
            Err(EndpointError::Required("PI_MODEL"))
        );
        let pi = resolve(
            Client::Pi,
            &env(vec![
                ("PI_PATH", path),
                ("PI_PROVIDER", "p".into()),
                ("PI_MODEL", "m".into()),
                ("PI_API_KEY", "k".into()),
            ]),
        )
        .unwrap();
        assert_eq!(pi.model.as_deref(), Some("m"));
    }
}
