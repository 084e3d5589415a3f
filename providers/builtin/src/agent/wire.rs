//! The two wire shapes of an OpenAI-compatible endpoint: the one request
//! body the worker sends, and how an answer becomes an Agent result.
//!
//! How stop reasons map onto the result's `outcome`:
//!
//! | API | answer | outcome |
//! |---|---|---|
//! | Responses | `status: "completed"`, no refusal | `completed` |
//! | Responses | any `refusal` content part | `blocked` (text: the refusal) |
//! | Responses | `status: "incomplete"`, reason `content_filter` | `blocked` |
//! | Responses | `status: "incomplete"`, any other reason (`max_output_tokens`) | `limit` |
//! | Responses | `status: "failed"` | error `EXECUTION_FAILED` (the endpoint says it failed) |
//! | Chat Completions | `finish_reason: "stop"`, no refusal | `completed` |
//! | Chat Completions | `message.refusal` set | `blocked` |
//! | Chat Completions | `finish_reason: "content_filter"` | `blocked` |
//! | Chat Completions | `finish_reason: "length"` | `limit` |
//!
//! Anything else after the request may have reached the endpoint (another
//! status or finish reason, a body that is not the documented shape, a cut
//! or unreadable body) proves no result and is `UNCERTAIN`.

use serde_json::{json, Map, Value};

use super::values::Api;

/// The name of the response format sent with a `responseSchema`.
pub const FORMAT_NAME: &str = "response";
/// The longest text a result may carry, in characters (the contract's
/// `text.maxLength`).
pub const MAX_TEXT_CHARS: usize = 8_388_608;

/// What the worker is asked to send: everything but the key.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    pub api: Api,
    pub model: String,
    /// The call's instructions (the task).
    pub instructions: String,
    /// The rendered skills text, read-only guidance, when skills were selected.
    pub skills: Option<String>,
    /// The `responseSchema` as sent (profile-checked, without `$schema`).
    pub schema: Option<Value>,
    /// Stream the answer (server-sent events) to feed the `events` port.
    pub stream: bool,
}

/// The request body for `ask`.
pub fn body(ask: &Ask) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(ask.model));
    match ask.api {
        Api::Responses => {
            body.insert("input".into(), json!(ask.instructions));
            if let Some(skills) = &ask.skills {
                body.insert("instructions".into(), json!(skills));
            }
            body.insert("store".into(), json!(false));
            if let Some(schema) = &ask.schema {
                body.insert(
                    "text".into(),
                    json!({ "format": {
                        "type": "json_schema", "name": FORMAT_NAME, "schema": schema, "strict": true
                    }}),
                );
            }
        }
        Api::ChatCompletions => {
            let mut messages = Vec::new();
            if let Some(skills) = &ask.skills {
                messages.push(json!({ "role": "system", "content": skills }));
            }
            messages.push(json!({ "role": "user", "content": ask.instructions }));
            body.insert("messages".into(), Value::Array(messages));
            if let Some(schema) = &ask.schema {
                body.insert(
                    "response_format".into(),
                    json!({ "type": "json_schema", "json_schema": {
                        "name": FORMAT_NAME, "schema": schema, "strict": true
                    }}),
                );
            }
        }
    }
    if ask.stream {
        body.insert("stream".into(), json!(true));
    }
    Value::Object(body)
}

/// The Agent result's outcome.
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

/// What an answer said, before structured output is parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub outcome: Outcome,
    pub text: String,
}

/// An answer that is not a result. `Failed` is proof the endpoint did not
/// complete the work; `Unproved` means it may have and no result is proved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoAnswer {
    Failed(String),
    Unproved(String),
}

/// Read a complete (non-streamed) answer body.
pub fn answer(api: Api, body: &Value) -> Result<Answer, NoAnswer> {
    match api {
        Api::Responses => responses_answer(body),
        Api::ChatCompletions => chat_answer(body),
    }
}

fn unproved(what: &str) -> NoAnswer {
    NoAnswer::Unproved(format!("the endpoint's answer is not a result: {what}"))
}

fn responses_answer(body: &Value) -> Result<Answer, NoAnswer> {
    let status = body
        .get("status")
        .and_then(Value::as_str)
        .ok_or_else(|| unproved("no status"))?;
    let mut text = String::new();
    let mut refusal = String::new();
    for item in body
        .get("output")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if item.get("type").and_then(Value::as_str) != Some("message") {
            continue;
        }
        for part in item
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            match part.get("type").and_then(Value::as_str) {
                Some("output_text") => {
                    text.push_str(part.get("text").and_then(Value::as_str).unwrap_or_default())
                }
                Some("refusal") => refusal.push_str(
                    part.get("refusal")
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                ),
                _ => {}
            }
        }
    }
    if !refusal.is_empty() {
        return Ok(Answer {
            outcome: Outcome::Blocked,
            text: refusal,
        });
    }
    let outcome = match status {
        "completed" => Outcome::Completed,
        "incomplete" => {
            let reason = body
                .pointer("/incomplete_details/reason")
                .and_then(Value::as_str);
            if reason == Some("content_filter") {
                Outcome::Blocked
            } else {
                Outcome::Limit
            }
        }
        "failed" => {
            return Err(NoAnswer::Failed(
                "the endpoint reported that the response failed".into(),
            ))
        }
        _ => return Err(unproved("an unfinished status")),
    };
    Ok(Answer { outcome, text })
}

fn chat_answer(body: &Value) -> Result<Answer, NoAnswer> {
    let choice = body
        .pointer("/choices/0")
        .ok_or_else(|| unproved("no choice"))?;
    let message = choice
        .get("message")
        .ok_or_else(|| unproved("no message"))?;
    let text = message
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if let Some(refusal) = message.get("refusal").and_then(Value::as_str) {
        if !refusal.is_empty() {
            return Ok(Answer {
                outcome: Outcome::Blocked,
                text: refusal.to_string(),
            });
        }
    }
    let outcome = finish_outcome(choice.get("finish_reason").and_then(Value::as_str))?;
    Ok(Answer { outcome, text })
}

/// A Chat Completions finish reason as an outcome.
pub fn finish_outcome(reason: Option<&str>) -> Result<Outcome, NoAnswer> {
    match reason {
        Some("stop") => Ok(Outcome::Completed),
        Some("length") => Ok(Outcome::Limit),
        Some("content_filter") => Ok(Outcome::Blocked),
        _ => Err(unproved("an unexpected finish reason")),
    }
}

/// A short, safe spelling of an endpoint's error code (`error.code` or
/// `error.type` of an error body), or `None`: never the raw body.
pub fn error_code(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let error = value.get("error")?;
    ["code", "type"].iter().find_map(|key| {
        let text = error.get(*key)?.as_str()?;
        let safe = !text.is_empty()
            && text.len() <= 64
            && text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
        safe.then(|| text.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(api: Api) -> Ask {
        Ask {
            api,
            model: "m".into(),
            instructions: "Do it.".into(),
            skills: Some("SKILLS".into()),
            schema: Some(json!({"type": "object"})),
            stream: false,
        }
    }

    #[test]
    fn the_responses_body() {
        assert_eq!(
            body(&ask(Api::Responses)),
            json!({"model": "m", "input": "Do it.", "instructions": "SKILLS", "store": false,
                   "text": {"format": {"type": "json_schema", "name": "response",
                                       "schema": {"type": "object"}, "strict": true}}})
        );
        let plain = Ask {
            skills: None,
            schema: None,
            ..ask(Api::Responses)
        };
        assert_eq!(
            body(&plain),
            json!({"model": "m", "input": "Do it.", "store": false})
        );
    }

    #[test]
    fn the_chat_completions_body() {
        assert_eq!(
            body(&ask(Api::ChatCompletions)),
            json!({"model": "m", "messages": [
                      {"role": "system", "content": "SKILLS"},
                      {"role": "user", "content": "Do it."}],
                   "response_format": {"type": "json_schema", "json_schema": {
                      "name": "response", "schema": {"type": "object"}, "strict": true}}})
        );
    }

    fn responses(status: &str, parts: Value, extra: Value) -> Value {
        let mut v = json!({"status": status, "output": [
            {"type": "reasoning"},
            {"type": "message", "content": parts}]});
        if let Some(o) = extra.as_object() {
            for (k, x) in o {
                v[k] = x.clone();
            }
        }
        v
    }

    #[test]
    fn responses_stop_reasons() {
        let text =
            json!([{"type": "output_text", "text": "Hi"}, {"type": "output_text", "text": "!"}]);
        assert_eq!(
            answer(
                Api::Responses,
                &responses("completed", text.clone(), json!({}))
            ),
            Ok(Answer {
                outcome: Outcome::Completed,
                text: "Hi!".into()
            })
        );
        let refusal = json!([{"type": "refusal", "refusal": "No."}]);
        assert_eq!(
            answer(Api::Responses, &responses("completed", refusal, json!({}))),
            Ok(Answer {
                outcome: Outcome::Blocked,
                text: "No.".into()
            })
        );
        let limit = json!({"incomplete_details": {"reason": "max_output_tokens"}});
        assert_eq!(
            answer(
                Api::Responses,
                &responses("incomplete", text.clone(), limit)
            )
            .unwrap()
            .outcome,
            Outcome::Limit
        );
        let filter = json!({"incomplete_details": {"reason": "content_filter"}});
        assert_eq!(
            answer(
                Api::Responses,
                &responses("incomplete", text.clone(), filter)
            )
            .unwrap()
            .outcome,
            Outcome::Blocked
        );
        assert!(matches!(
            answer(
                Api::Responses,
                &responses("failed", text.clone(), json!({}))
            ),
            Err(NoAnswer::Failed(_))
        ));
        assert!(matches!(
            answer(Api::Responses, &responses("in_progress", text, json!({}))),
            Err(NoAnswer::Unproved(_))
        ));
        assert!(matches!(
            answer(Api::Responses, &json!({})),
            Err(NoAnswer::Unproved(_))
        ));
    }

    #[test]
    fn chat_stop_reasons() {
        let chat = |finish: Value, message: Value| json!({"choices": [{"finish_reason": finish, "message": message}]});
        let said = json!({"role": "assistant", "content": "Hi"});
        assert_eq!(
            answer(Api::ChatCompletions, &chat(json!("stop"), said.clone())),
            Ok(Answer {
                outcome: Outcome::Completed,
                text: "Hi".into()
            })
        );
        assert_eq!(
            answer(Api::ChatCompletions, &chat(json!("length"), said.clone()))
                .unwrap()
                .outcome,
            Outcome::Limit
        );
        assert_eq!(
            answer(
                Api::ChatCompletions,
                &chat(json!("content_filter"), said.clone())
            )
            .unwrap()
            .outcome,
            Outcome::Blocked
        );
        let refused = json!({"role": "assistant", "content": null, "refusal": "No."});
        assert_eq!(
            answer(Api::ChatCompletions, &chat(json!("stop"), refused)),
            Ok(Answer {
                outcome: Outcome::Blocked,
                text: "No.".into()
            })
        );
        assert!(matches!(
            answer(Api::ChatCompletions, &chat(json!("tool_calls"), said)),
            Err(NoAnswer::Unproved(_))
        ));
        assert!(matches!(
            answer(Api::ChatCompletions, &json!({"choices": []})),
            Err(NoAnswer::Unproved(_))
        ));
    }

    #[test]
    fn error_codes_are_short_safe_words_or_nothing() {
        assert_eq!(
            error_code(br#"{"error":{"message":"sk-secret is bad","code":"invalid_api_key"}}"#),
            Some("invalid_api_key".into())
        );
        assert_eq!(
            error_code(br#"{"error":{"type":"server_error","code":null}}"#),
            Some("server_error".into())
        );
        assert_eq!(error_code(br#"{"error":{"code":"has space"}}"#), None);
        assert_eq!(error_code(b"<html>oops</html>"), None);
    }
}
