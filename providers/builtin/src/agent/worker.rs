//! The Agent worker: the body of the one separate bounded process that
//! holds the key and has network (seed 002 §9). The host starts it in its
//! own envelope (`jig` re-executed with [`WORKER_ARG`]), writes one
//! [`Request`] on its standard input and reads its lines on standard
//! output:
//!
//! - `{"dispatching": true}` just before the request is sent: from here
//!   on, a worker that ends without a verdict may have reached the
//!   endpoint (`UNCERTAIN`);
//! - with a streamed answer, `{"event": <agent_message_chunk item>}` for
//!   each piece of text as it arrives;
//! - then exactly one verdict, `{"result": {outcome, text, structured?}}`
//!   or `{"error": {code, message, details?}}`.
//!
//! The worker sends exactly one request, never retries and never follows a
//! redirect (a redirected POST would be a second request). Nothing it
//! prints carries the key or a raw endpoint body.

use std::io::{Read, Write};
use std::path::PathBuf;

use serde_json::{json, Value};

use super::stream::{chunk_item, Stream};
use super::values::{check_key, Api, KeySource, MAX_KEY_BYTES};
use super::wire::{self, Ask, NoAnswer, Outcome, MAX_TEXT_CHARS};

/// The hidden first argument that makes `jig` the Agent worker.
pub const WORKER_ARG: &str = "__agent-worker";
/// The largest request the worker reads (the rendered input is at most
/// 1 MiB; the schema and envelope fit well below this).
pub const MAX_REQUEST_BYTES: u64 = 4 * 1024 * 1024;
/// The largest successful answer body the worker reads.
pub const MAX_ANSWER_BYTES: usize = 32 * 1024 * 1024;
/// How much of an error answer the worker reads to find its code.
pub const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// One request for the worker.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub url: String,
    pub key: KeySource,
    pub ask: Ask,
}

impl Request {
    pub fn to_value(&self) -> Value {
        json!({
            "api": self.ask.api.as_str(),
            "url": self.url,
            "model": self.ask.model,
            "key": match &self.key {
                KeySource::Env(key) => json!({ "env": key }),
                KeySource::File(path) => json!({ "file": path.to_string_lossy() }),
            },
            "instructions": self.ask.instructions,
            "skills": self.ask.skills,
            "schema": self.ask.schema,
            "stream": self.ask.stream,
        })
    }

    pub fn from_value(v: &Value) -> Option<Request> {
        let key = match (v.pointer("/key/env"), v.pointer("/key/file")) {
            (Some(Value::String(key)), None) => KeySource::Env(key.clone()),
            (None, Some(Value::String(path))) => KeySource::File(PathBuf::from(path)),
            _ => return None,
        };
        Some(Request {
            url: v.get("url")?.as_str()?.to_string(),
            key,
            ask: Ask {
                api: Api::parse(v.get("api")?.as_str()?)?,
                model: v.get("model")?.as_str()?.to_string(),
                instructions: v.get("instructions")?.as_str()?.to_string(),
                skills: v.get("skills").and_then(Value::as_str).map(str::to_string),
                schema: v.get("schema").filter(|s| !s.is_null()).cloned(),
                stream: v.get("stream").and_then(Value::as_bool).unwrap_or(false),
            },
        })
    }
}

/// A verdict: the Agent result, or an operational error.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Result(Value),
    Error {
        code: &'static str,
        message: String,
        details: Option<Value>,
    },
}

fn error(code: &'static str, message: impl Into<String>) -> Verdict {
    Verdict::Error {
        code,
        message: message.into(),
        details: None,
    }
}

impl Verdict {
    pub fn to_value(&self) -> Value {
        match self {
            Verdict::Result(value) => json!({ "result": value }),
            Verdict::Error {
                code,
                message,
                details,
            } => {
                let mut e = json!({ "code": code, "message": message });
                if let Some(d) = details {
                    e["details"] = d.clone();
                }
                json!({ "error": e })
            }
        }
    }
}

/// The worker process: read the request, send it once, print the verdict.
/// Returns the process exit status.
pub fn main() -> u8 {
    let mut input = Vec::new();
    let read = std::io::stdin()
        .take(MAX_REQUEST_BYTES + 1)
        .read_to_end(&mut input);
    let request = match read {
        Ok(n) if n as u64 <= MAX_REQUEST_BYTES => serde_json::from_slice::<Value>(&input)
            .ok()
            .and_then(|v| Request::from_value(&v)),
        _ => None,
    };
    let Some(request) = request else {
        print_line(&error("EXECUTION_FAILED", "the Agent worker got no valid request").to_value());
        return 1;
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(_) => {
            print_line(&error("UNAVAILABLE", "the Agent worker cannot start").to_value());
            return 1;
        }
    };
    let verdict = runtime.block_on(run(request));
    print_line(&verdict.to_value());
    0
}

fn print_line(value: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
}

/// Send one request and judge its answer.
pub async fn run(request: Request) -> Verdict {
    let key = match load_key(&request.key) {
        Ok(key) => key,
        Err(verdict) => return verdict,
    };
    let client = match reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
    {
        Ok(client) => client,
        Err(_) => return error("UNAVAILABLE", "the Agent client cannot start"),
    };
    let body = wire::body(&request.ask);
    let sent = client
        .post(&request.url)
        .bearer_auth(&key)
        .header("content-type", "application/json")
        .body(body.to_string());
    drop(key);
    print_line(&json!({ "dispatching": true }));
    let response = match sent.send().await {
        Ok(response) => response,
        // Not connected: nothing reached the endpoint.
        Err(e) if e.is_connect() || e.is_builder() => {
            return error(
                "UNAVAILABLE",
                "the Agent endpoint could not be reached (nothing was sent)",
            )
        }
        Err(_) => {
            return error(
                "UNCERTAIN",
                "the connection to the Agent endpoint failed after the request may have reached it; it is not resent",
            )
        }
    };
    let status = response.status();
    if !status.is_success() {
        let body = read_bounded(response, MAX_ERROR_BODY_BYTES)
            .await
            .unwrap_or_default();
        let code = wire::error_code(&body);
        let mut details = json!({ "httpStatus": status.as_u16() });
        if let Some(code) = &code {
            details["endpointCode"] = json!(code);
        }
        return Verdict::Error {
            code: "UNAVAILABLE",
            message: match code {
                Some(code) => format!(
                    "the Agent endpoint answered HTTP {} ({code})",
                    status.as_u16()
                ),
                None => format!("the Agent endpoint answered HTTP {}", status.as_u16()),
            },
            details: Some(details),
        };
    }
    if request.ask.stream {
        return judge(&request.ask, read_stream(request.ask.api, response).await);
    }
    let bytes = match read_bounded(response, MAX_ANSWER_BYTES).await {
        Ok(bytes) => bytes,
        Err(why) => return error("UNCERTAIN", why),
    };
    let Ok(body) = serde_json::from_slice::<Value>(&bytes) else {
        return error(
            "UNCERTAIN",
            "the Agent endpoint's answer is not JSON; the request may have been processed",
        );
    };
    judge(&request.ask, wire::answer(request.ask.api, &body))
}

/// The verdict on an answer: a result value, structured output parsed
/// when a schema was asked for and the outcome is completed.
pub fn judge(ask: &Ask, answer: Result<wire::Answer, NoAnswer>) -> Verdict {
    let answer = match answer {
        Ok(answer) => answer,
        Err(NoAnswer::Failed(why)) => return error("EXECUTION_FAILED", why),
        Err(NoAnswer::Unproved(why)) => return error("UNCERTAIN", why),
    };
    if answer.text.chars().count() > MAX_TEXT_CHARS {
        return Verdict::Error {
            code: "INVALID_RESULT",
            message: format!("the Agent's text is longer than {MAX_TEXT_CHARS} characters"),
            details: Some(json!({ "code": "AGENT_PROVIDER_OUTPUT_LIMIT" })),
        };
    }
    let mut result = json!({ "outcome": answer.outcome.as_str(), "text": answer.text });
    if ask.schema.is_some() && answer.outcome == Outcome::Completed {
        match flow::json::parse(answer.text.as_bytes()) {
            Ok(structured) => result["structured"] = structured,
            Err(_) => {
                return Verdict::Error {
                    code: "INVALID_RESULT",
                    message:
                        "the Agent's completed answer is not the JSON the responseSchema asks for"
                            .into(),
                    details: Some(json!({ "code": "AGENT_RUN_STRUCTURED_INVALID" })),
                }
            }
        }
    }
    Verdict::Result(result)
}

/// Read a streamed answer, printing each text piece as an `events` item.
async fn read_stream(api: Api, mut response: reqwest::Response) -> Result<wire::Answer, NoAnswer> {
    let mut stream = Stream::new(api);
    let mut total = 0usize;
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                total += chunk.len();
                if total > MAX_ANSWER_BYTES {
                    return Err(NoAnswer::Unproved(format!(
                        "the Agent endpoint's stream is larger than {MAX_ANSWER_BYTES} bytes"
                    )));
                }
                for piece in stream.feed(&chunk)? {
                    print_line(&json!({ "event": chunk_item(&piece) }));
                }
            }
            Ok(None) => return stream.finish(),
            Err(_) => {
                return Err(NoAnswer::Unproved(
                    "the Agent endpoint's stream was cut off; the request may have been processed"
                        .into(),
                ))
            }
        }
    }
}

fn load_key(source: &KeySource) -> Result<String, Verdict> {
    match source {
        KeySource::Env(key) => Ok(key.clone()),
        KeySource::File(path) => {
            let unavailable = || error("UNAVAILABLE", "the Agent key file cannot be read");
            let file = std::fs::File::open(path).map_err(|_| unavailable())?;
            let mut bytes = Vec::new();
            file.take(MAX_KEY_BYTES as u64 + 2)
                .read_to_end(&mut bytes)
                .map_err(|_| unavailable())?;
            let text = String::from_utf8(bytes)
                .map_err(|_| error("UNAVAILABLE", "the Agent key file is not UTF-8"))?;
            // A file written by an editor or `echo` ends with a newline.
            let key = text.strip_suffix('\n').unwrap_or(&text);
            let key = key.strip_suffix('\r').unwrap_or(key);
            check_key("[agent] api-key-file", key).map_err(|e| error("UNAVAILABLE", e.to_string()))
        }
    }
}

async fn read_bounded(mut response: reqwest::Response, limit: usize) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if bytes.len() + chunk.len() > limit {
                    return Err(format!(
                        "the Agent endpoint's answer is larger than {limit} bytes"
                    ));
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(bytes),
            Err(_) => {
                return Err(
                    "the Agent endpoint's answer was cut off; the request may have been processed"
                        .into(),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_round_trips_without_showing_an_env_key_in_debug() {
        let request = Request {
            url: "http://127.0.0.1:1/v1/responses".into(),
            key: KeySource::Env("sk-x".into()),
            ask: Ask {
                api: Api::Responses,
                model: "m".into(),
                instructions: "i".into(),
                skills: None,
                schema: Some(json!({"type": "object"})),
                stream: false,
            },
        };
        assert_eq!(
            Request::from_value(&request.to_value()),
            Some(request.clone())
        );
        assert!(!format!("{request:?}").contains("sk-x"));
    }

    fn ask(schema: bool) -> Ask {
        Ask {
            api: Api::Responses,
            model: "m".into(),
            instructions: "i".into(),
            skills: None,
            schema: schema.then(|| json!({})),
            stream: false,
        }
    }

    #[test]
    fn structured_output_is_parsed_only_when_completed_and_asked_for() {
        let done = |text: &str| {
            Ok(wire::Answer {
                outcome: Outcome::Completed,
                text: text.into(),
            })
        };
        assert_eq!(
            judge(&ask(true), done("{\"a\":1}")),
            Verdict::Result(
                json!({"outcome": "completed", "text": "{\"a\":1}", "structured": {"a": 1}})
            )
        );
        assert_eq!(
            judge(&ask(false), done("{\"a\":1}")),
            Verdict::Result(json!({"outcome": "completed", "text": "{\"a\":1}"}))
        );
        assert!(matches!(
            judge(&ask(true), done("not json")),
            Verdict::Error {
                code: "INVALID_RESULT",
                ..
            }
        ));
        let limit = Ok(wire::Answer {
            outcome: Outcome::Limit,
            text: "{\"a\":".into(),
        });
        assert_eq!(
            judge(&ask(true), limit),
            Verdict::Result(json!({"outcome": "limit", "text": "{\"a\":"}))
        );
    }

    #[test]
    fn the_text_is_at_most_8_mib_characters() {
        let at = "x".repeat(MAX_TEXT_CHARS);
        let answer = |text: String| {
            Ok(wire::Answer {
                outcome: Outcome::Completed,
                text,
            })
        };
        assert!(matches!(
            judge(&ask(false), answer(at.clone())),
            Verdict::Result(_)
        ));
        assert!(matches!(
            judge(&ask(false), answer(format!("{at}x"))),
            Verdict::Error {
                code: "INVALID_RESULT",
                ..
            }
        ));
    }
}
