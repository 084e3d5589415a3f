//! `jig-agent-acp`: jig's Agent worker for a native ACP client
//! (`JIG_AGENT_CLIENT=codex|claude|pi`). The host starts it, instead of
//! `jig __agent-worker`, in the same bounded Agent envelope with network
//! (seed 002 §9), and speaks the worker protocol of the HTTP Agent worker
//! (providers/builtin/src/agent/worker.rs) with it:
//!
//! - standard input: one JSON request line,
//!   `{"acp": {"program": <absolute path>, "env": [[name, value], …],
//!   "prompt": <text>}}`;
//! - standard output, one JSON value a line: `{"dispatching": true}` just
//!   before the prompt is sent (from here on, an end without a verdict is
//!   `UNCERTAIN`), `{"event": <public update item>}` for each public
//!   session update, then exactly one verdict:
//!   `{"answer": {"outcome", "text"}}` (the host judges it: text length,
//!   structured output) or `{"error": {"code", "message"}}`.
//!
//! It is a separate program, built alone, because the
//! `agent-client-protocol` crate turns on serde_json's `preserve_order`
//! feature, which must never reach the host's build (see Cargo.toml).

mod session;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{json, Value};

use session::{NoAnswer, Session};

/// The largest request read (the host's rendered input is at most 1 MiB;
/// the same bound as the HTTP Agent worker's).
const MAX_REQUEST_BYTES: u64 = 4 * 1024 * 1024;
/// The client's empty work directory, below the worker's own directory.
const WORK_DIR: &str = "acp-work";
/// The client's private home directory, below the worker's own directory.
const HOME_DIR: &str = "acp-home";

/// The request, parsed.
struct Request {
    program: PathBuf,
    env: Vec<(String, String)>,
    prompt: String,
}

fn parse(v: &Value) -> Option<Request> {
    let acp = v.get("acp")?;
    let env = acp
        .get("env")?
        .as_array()?
        .iter()
        .map(|pair| {
            Some((
                pair.get(0)?.as_str()?.to_string(),
                pair.get(1)?.as_str()?.to_string(),
            ))
        })
        .collect::<Option<Vec<_>>>()?;
    let program = PathBuf::from(acp.get("program")?.as_str()?);
    if !program.is_absolute() {
        return None;
    }
    Some(Request {
        program,
        env,
        prompt: acp.get("prompt")?.as_str()?.to_string(),
    })
}

fn print_line(value: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
}

fn error(code: &str, message: &str) -> Value {
    json!({ "error": { "code": code, "message": message } })
}

fn main() -> ExitCode {
    let mut input = Vec::new();
    let read = std::io::stdin()
        .take(MAX_REQUEST_BYTES + 1)
        .read_to_end(&mut input);
    let request = match read {
        Ok(n) if n as u64 <= MAX_REQUEST_BYTES => serde_json::from_slice::<Value>(&input)
            .ok()
            .and_then(|v| parse(&v)),
        _ => None,
    };
    drop(input);
    let Some(request) = request else {
        print_line(&error(
            "EXECUTION_FAILED",
            "the ACP Agent worker got no valid request",
        ));
        return ExitCode::FAILURE;
    };
    let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/tmp"));
    let (cwd, home) = (here.join(WORK_DIR), here.join(HOME_DIR));
    if std::fs::create_dir_all(&cwd).is_err() || std::fs::create_dir_all(&home).is_err() {
        print_line(&error(
            "EXECUTION_FAILED",
            "the ACP Agent worker cannot prepare the client's directories",
        ));
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(_) => {
            print_line(&error("UNAVAILABLE", "the ACP Agent worker cannot start"));
            return ExitCode::FAILURE;
        }
    };
    let session = Session {
        program: request.program,
        env: request.env,
        cwd,
        home,
        prompt: request.prompt,
    };
    let answer = runtime.block_on(session::run(
        session,
        |item| print_line(&json!({ "event": item })),
        || print_line(&json!({ "dispatching": true })),
    ));
    print_line(&match answer {
        Ok(answer) => json!({ "answer": {
            "outcome": answer.outcome.as_str(),
            "text": answer.text,
        }}),
        Err(NoAnswer::Failed(why)) => error("EXECUTION_FAILED", &why),
        Err(NoAnswer::Unproved(why)) => error("UNCERTAIN", &why),
    });
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_names_an_absolute_program_its_variables_and_the_prompt() {
        let v = json!({"acp": {"program": "/bin/x", "env": [["A", "1"]], "prompt": "p"}});
        let r = parse(&v).unwrap();
        assert_eq!(r.program, PathBuf::from("/bin/x"));
        assert_eq!(r.env, vec![("A".to_string(), "1".to_string())]);
        assert_eq!(r.prompt, "p");
        let relative = json!({"acp": {"program": "x", "env": [], "prompt": "p"}});
        assert!(parse(&relative).is_none());
        let bad_env = json!({"acp": {"program": "/bin/x", "env": [["A"]], "prompt": "p"}});
        assert!(parse(&bad_env).is_none());
    }
}
