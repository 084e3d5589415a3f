//! Messages: JSON-RPC 2.0 envelopes decoded strictly and encoded canonically.

use serde_json::{Map, Value};

use super::errors::RpcError;
use super::frame::parse_json;
use super::method::Method;
use super::params::CancelParams;
use super::{
    is_wire_id, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, JSONRPC, MAX_ERROR_MESSAGE_CHARS,
    METHOD_NOT_FOUND, OPERATIONAL_ERROR, PARSE_ERROR,
};

/// One decoded JSON-RPC message with a valid Run/1 envelope.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Request {
        id: String,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
    Success {
        id: String,
        result: Value,
    },
    Failure {
        id: Option<String>,
        error: RpcError,
    },
}

impl Message {
    /// A request with params.
    pub fn request(id: impl Into<String>, method: Method, params: Value) -> Self {
        Message::Request {
            id: id.into(),
            method: method.as_str().into(),
            params: Some(params),
        }
    }

    /// A `request/cancel` notification.
    pub fn cancel(request_id: impl Into<String>) -> Self {
        Message::Notification {
            method: Method::RequestCancel.as_str().into(),
            params: Some(
                CancelParams {
                    request_id: request_id.into(),
                }
                .to_value(),
            ),
        }
    }

    /// A success response.
    pub fn success(id: impl Into<String>, result: Value) -> Self {
        Message::Success {
            id: id.into(),
            result,
        }
    }

    /// A failure response.
    pub fn failure(id: Option<String>, error: RpcError) -> Self {
        Message::Failure { id, error }
    }

    /// The message as a JSON value.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("jsonrpc".into(), Value::String(JSONRPC.into()));
        match self {
            Message::Request { id, method, params } => {
                m.insert("id".into(), Value::String(id.clone()));
                m.insert("method".into(), Value::String(method.clone()));
                if let Some(p) = params {
                    m.insert("params".into(), p.clone());
                }
            }
            Message::Notification { method, params } => {
                m.insert("method".into(), Value::String(method.clone()));
                if let Some(p) = params {
                    m.insert("params".into(), p.clone());
                }
            }
            Message::Success { id, result } => {
                m.insert("id".into(), Value::String(id.clone()));
                m.insert("result".into(), result.clone());
            }
            Message::Failure { id, error } => {
                m.insert(
                    "id".into(),
                    id.clone().map(Value::String).unwrap_or(Value::Null),
                );
                m.insert("error".into(), error.to_value());
            }
        }
        Value::Object(m)
    }
}

/// Why a frame is not a Run/1 message, in the order the checks apply.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecodeError {
    /// Not UTF-8: fatal, not answered.
    #[error("frame is not valid UTF-8")]
    InvalidUtf8,
    /// Valid UTF-8 that fails JSON/1: answered with `-32700`, id null, then close.
    #[error("frame is not a JSON/1 value: {0}")]
    Parse(String),
    /// A JSON/1 value that is not a valid Run/1 JSON-RPC envelope: answered
    /// with `-32600` (with `id` when it is unambiguous), then close.
    #[error("invalid JSON-RPC envelope: {reason}")]
    InvalidEnvelope { id: Option<String>, reason: String },
}

impl DecodeError {
    /// The best-effort reply for this failure, if one should be attempted.
    pub fn reply(&self) -> Option<Message> {
        match self {
            DecodeError::InvalidUtf8 => None,
            DecodeError::Parse(_) => Some(Message::failure(
                None,
                RpcError::standard(PARSE_ERROR, "parse error"),
            )),
            DecodeError::InvalidEnvelope { id, .. } => Some(Message::failure(
                id.clone(),
                RpcError::standard(INVALID_REQUEST, "invalid request"),
            )),
        }
    }
}

/// Decodes one frame payload (without its LF).
pub fn decode(frame: &[u8]) -> Result<Message, DecodeError> {
    if std::str::from_utf8(frame).is_err() {
        return Err(DecodeError::InvalidUtf8);
    }
    let value = parse_json(frame).map_err(DecodeError::Parse)?;
    decode_value(value)
}

/// Validates the JSON-RPC envelope of an already parsed JSON/1 value.
pub fn decode_value(value: Value) -> Result<Message, DecodeError> {
    let Value::Object(mut obj) = value else {
        return Err(envelope(None, "frame is not a JSON object"));
    };
    // An ID is "unambiguous" when it is a valid wire ID; use it in the reply.
    let reply_id = obj
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| is_wire_id(s))
        .map(str::to_string);
    let fail = |reason: &str| envelope(reply_id.clone(), reason);

    if obj.get("jsonrpc").and_then(Value::as_str) != Some(JSONRPC) {
        return Err(fail("jsonrpc must be \"2.0\""));
    }
    obj.remove("jsonrpc");

    if obj.contains_key("method") {
        if obj.contains_key("result") || obj.contains_key("error") {
            return Err(fail("a request cannot carry result or error"));
        }
        let method = match obj.remove("method") {
            Some(Value::String(m)) => m,
            _ => return Err(fail("method must be a string")),
        };
        let params = obj.remove("params");
        if let Some(p) = &params {
            if !p.is_object() && !p.is_array() {
                return Err(fail("params must be an object or array"));
            }
        }
        let id = match obj.remove("id") {
            None => None,
            Some(Value::String(s)) if is_wire_id(&s) => Some(s),
            Some(_) => return Err(fail("request id must be a 1-128 byte token string")),
        };
        if let Some(k) = obj.keys().next() {
            return Err(fail(&format!("unknown member {k:?}")));
        }
        return Ok(match id {
            Some(id) => Message::Request { id, method, params },
            None => Message::Notification { method, params },
        });
    }

    let id = match obj.remove("id") {
        Some(Value::String(s)) if is_wire_id(&s) => Some(s),
        Some(Value::Null) => None,
        Some(_) => return Err(fail("response id must be a token string or null")),
        None => return Err(fail("response has no id")),
    };
    match (obj.remove("result"), obj.remove("error")) {
        (Some(result), None) => {
            if let Some(k) = obj.keys().next() {
                return Err(fail(&format!("unknown member {k:?}")));
            }
            let Some(id) = id else {
                return Err(fail("a successful response needs an id"));
            };
            Ok(Message::Success { id, result })
        }
        (None, Some(error)) => {
            if let Some(k) = obj.keys().next() {
                return Err(fail(&format!("unknown member {k:?}")));
            }
            let error = decode_error_object(error, id.is_some()).map_err(|r| fail(&r))?;
            Ok(Message::Failure { id, error })
        }
        _ => Err(fail("a response has exactly one of result and error")),
    }
}

pub(super) fn envelope(id: Option<String>, reason: &str) -> DecodeError {
    DecodeError::InvalidEnvelope {
        id,
        reason: reason.to_string(),
    }
}

pub(super) fn decode_error_object(error: Value, has_id: bool) -> Result<RpcError, String> {
    let Value::Object(mut e) = error else {
        return Err("error must be an object".into());
    };
    let code = e
        .remove("code")
        .and_then(|c| c.as_i64())
        .ok_or("error code must be an integer")?;
    let message = match e.remove("message") {
        Some(Value::String(m)) => m,
        _ => return Err("error message must be a string".into()),
    };
    let chars = message.chars().count();
    if chars == 0 || chars > MAX_ERROR_MESSAGE_CHARS {
        return Err(format!(
            "error message must have 1-{MAX_ERROR_MESSAGE_CHARS} characters"
        ));
    }
    let data = e.remove("data");
    if let Some(k) = e.keys().next() {
        return Err(format!("unknown error member {k:?}"));
    }
    let rpc = RpcError {
        code,
        message,
        data,
    };
    match code {
        OPERATIONAL_ERROR => {
            if !has_id {
                return Err("an operational error needs an id".into());
            }
            if rpc.operational().is_none() {
                return Err(
                    "operational error data must be {code, details?} with a wire code".into(),
                );
            }
        }
        PARSE_ERROR => {
            if has_id {
                return Err("a parse error has id null".into());
            }
        }
        INVALID_REQUEST => {}
        METHOD_NOT_FOUND | INVALID_PARAMS | INTERNAL_ERROR => {
            if !has_id {
                return Err("this standard error needs an id".into());
            }
        }
        other => return Err(format!("error code {other} is not used by Run/1")),
    }
    Ok(rpc)
}

/// Encodes a message as one frame: compact JSON followed by LF.
pub fn encode(message: &Message) -> Vec<u8> {
    let mut out = serde_json::to_vec(&message.to_value()).unwrap_or_default();
    out.push(b'\n');
    out
}
