//! Run/1 on the wire: LF-terminated frames, JSON-RPC 2.0 envelopes, request
//! IDs, the per-direction method table, error codes and the typed params and
//! results of every Run/1 method.
//!
//! Everything here is sans-IO: bytes in, values out. The same code serves the
//! synchronous SDK and the asynchronous host peer. Protocol *state* (which IDs
//! are pending, whether the root has answered) belongs to the peers, not here.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;

use serde_json::{Map, Value};

/// Most bytes in one frame before its LF (inclusive).
pub const MAX_FRAME_BYTES: usize = 16_777_216;
/// Most bytes in one request ID, operation ID or endpoint reference.
pub const MAX_ID_BYTES: usize = 128;
/// Most bytes in one `LocalName` (slot, method, outcome, error name).
pub const MAX_LOCAL_NAME_BYTES: usize = 64;
/// Most Unicode scalar values in a child-Flow `intent`.
pub const MAX_INTENT_CHARS: usize = 16_384;
/// Most Unicode scalar values in a JSON-RPC error `message`.
pub const MAX_ERROR_MESSAGE_CHARS: usize = 1_024;
/// Most named attachments in one Run.
pub const MAX_ATTACHMENTS: usize = 256;
/// Most entries in one channel grant or reference map.
pub const MAX_CHANNELS: usize = 256;
/// Most component-originated requests awaiting responses at once.
pub const MAX_PENDING_REQUESTS: usize = 64;
/// Most request-form messages one sender may originate on one channel.
pub const MAX_LIFETIME_REQUESTS: u64 = 65_536;
/// Most bytes in a package-local channel contract reference.
pub const MAX_CONTRACT_REF_BYTES: usize = 4_096;
/// Largest JSON/1 safe integer (`deadlineUnixMs`, sequences).
pub const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

/// The literal `protocol` value of `flow/run`.
pub const PROTOCOL: &str = "run/1";
/// The JSON-RPC version literal.
pub const JSONRPC: &str = "2.0";

/// JSON-RPC parse error.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC invalid request (envelope).
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC method not found (including wrong direction).
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC invalid params.
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC internal error.
pub const INTERNAL_ERROR: i64 = -32603;
/// JSON-RPC code carrying every Run/1 operational error.
pub const OPERATIONAL_ERROR: i64 = -32000;

// ---------------------------------------------------------------------------
// JSON/1 seam

/// Parses one frame payload as a JSON/1 value.
fn parse_json(bytes: &[u8]) -> Result<Value, String> {
    crate::json::parse(bytes).map_err(|e| e.to_string())
}

// ---------------------------------------------------------------------------
// Frames

/// Why a byte stream stopped yielding frames. Every variant is fatal to the
/// channel and none of them is answered on the wire.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// An LF with no bytes before it.
    #[error("empty frame")]
    Empty,
    /// More than [`MAX_FRAME_BYTES`] bytes without an LF.
    #[error("frame exceeds {MAX_FRAME_BYTES} bytes")]
    Oversized,
    /// EOF after nonempty bytes without an LF.
    #[error("incomplete frame at end of stream")]
    Incomplete,
    /// The underlying read failed.
    #[error("read failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Splits a byte stream into LF-terminated frames, enforcing the frame bound.
///
/// Feed bytes with [`FrameDecoder::push`], take frames with
/// [`FrameDecoder::next_frame`] until it returns `Ok(None)`, and call
/// [`FrameDecoder::finish`] at end of stream.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    /// Bytes of `buf` already known to contain no LF.
    scanned: usize,
}

impl FrameDecoder {
    /// An empty decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes buffered but not yet returned as a frame.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The next complete frame payload (without its LF), if one is buffered.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        match self.buf[self.scanned..].iter().position(|&b| b == b'\n') {
            Some(offset) => {
                let end = self.scanned + offset;
                if end == 0 {
                    return Err(FrameError::Empty);
                }
                if end > MAX_FRAME_BYTES {
                    return Err(FrameError::Oversized);
                }
                let rest = self.buf.split_off(end + 1);
                let mut frame = std::mem::replace(&mut self.buf, rest);
                frame.pop();
                self.scanned = 0;
                Ok(Some(frame))
            }
            None => {
                self.scanned = self.buf.len();
                if self.buf.len() > MAX_FRAME_BYTES {
                    return Err(FrameError::Oversized);
                }
                Ok(None)
            }
        }
    }

    /// Checks the stream ended on a frame boundary.
    pub fn finish(&self) -> Result<(), FrameError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(FrameError::Incomplete)
        }
    }
}

/// Reads frames from a blocking byte source.
#[derive(Debug)]
pub struct FrameReader<R> {
    inner: R,
    decoder: FrameDecoder,
    chunk: Box<[u8]>,
    done: bool,
}

const READ_CHUNK: usize = 64 * 1024;

impl<R: Read> FrameReader<R> {
    /// Wraps a reader.
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            decoder: FrameDecoder::new(),
            chunk: vec![0; READ_CHUNK].into_boxed_slice(),
            done: false,
        }
    }

    /// The next frame payload, or `Ok(None)` at a clean end of stream.
    pub fn read_frame(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        loop {
            if let Some(frame) = self.decoder.next_frame()? {
                return Ok(Some(frame));
            }
            if self.done {
                self.decoder.finish()?;
                return Ok(None);
            }
            let n = loop {
                match self.inner.read(&mut self.chunk) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(FrameError::Io(e)),
                }
            };
            if n == 0 {
                self.done = true;
            } else {
                self.decoder.push(&self.chunk[..n]);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Names and IDs

/// Whether `s` is a request ID / operation ID / endpoint token:
/// `[A-Za-z0-9][A-Za-z0-9._:/-]*`, 1–128 bytes.
pub fn is_wire_id(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_ID_BYTES
        && b[0].is_ascii_alphanumeric()
        && b[1..]
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b':' | b'/' | b'-'))
}

/// Whether `s` is a `LocalName`: `[a-z0-9]+(?:-[a-z0-9]+)*`, 1–64 bytes.
pub fn is_local_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_LOCAL_NAME_BYTES
        && b.split(|&c| c == b'-').all(|part| {
            !part.is_empty()
                && part
                    .iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
}

// ---------------------------------------------------------------------------
// Error codes

/// The thirteen wire-visible operational codes plus the two local-only
/// terminal classifications.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    Cancelled,
    DeadlineExceeded,
    OwnerClosed,
    OperationConflict,
    Unavailable,
    PermissionDenied,
    ResourceExhausted,
    InvalidInput,
    InvalidResult,
    Uncertain,
    ExecutionFailed,
    Lagged,
    Disconnected,
    /// Local only: a detected peer-protocol violation.
    ProtocolError,
    /// Local only: EOF or transport loss without a detected violation.
    ChannelLost,
}

impl ErrorCode {
    /// Every code, wire-visible first.
    pub const ALL: [ErrorCode; 15] = [
        ErrorCode::Cancelled,
        ErrorCode::DeadlineExceeded,
        ErrorCode::OwnerClosed,
        ErrorCode::OperationConflict,
        ErrorCode::Unavailable,
        ErrorCode::PermissionDenied,
        ErrorCode::ResourceExhausted,
        ErrorCode::InvalidInput,
        ErrorCode::InvalidResult,
        ErrorCode::Uncertain,
        ErrorCode::ExecutionFailed,
        ErrorCode::Lagged,
        ErrorCode::Disconnected,
        ErrorCode::ProtocolError,
        ErrorCode::ChannelLost,
    ];

    /// The stable spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Cancelled => "CANCELLED",
            ErrorCode::DeadlineExceeded => "DEADLINE_EXCEEDED",
            ErrorCode::OwnerClosed => "OWNER_CLOSED",
            ErrorCode::OperationConflict => "OPERATION_CONFLICT",
            ErrorCode::Unavailable => "UNAVAILABLE",
            ErrorCode::PermissionDenied => "PERMISSION_DENIED",
            ErrorCode::ResourceExhausted => "RESOURCE_EXHAUSTED",
            ErrorCode::InvalidInput => "INVALID_INPUT",
            ErrorCode::InvalidResult => "INVALID_RESULT",
            ErrorCode::Uncertain => "UNCERTAIN",
            ErrorCode::ExecutionFailed => "EXECUTION_FAILED",
            ErrorCode::Lagged => "LAGGED",
            ErrorCode::Disconnected => "DISCONNECTED",
            ErrorCode::ProtocolError => "PROTOCOL_ERROR",
            ErrorCode::ChannelLost => "CHANNEL_LOST",
        }
    }

    /// Parses any of the fifteen spellings.
    pub fn parse(s: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// Parses only a code that may cross the wire.
    pub fn parse_wire(s: &str) -> Option<ErrorCode> {
        ErrorCode::parse(s).filter(|c| c.is_wire())
    }

    /// Whether this code may be serialized in a `-32000` error.
    pub fn is_wire(self) -> bool {
        !matches!(self, ErrorCode::ProtocolError | ErrorCode::ChannelLost)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A JSON-RPC error object as carried on the wire.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    /// A standard (non-operational) JSON-RPC error without data.
    pub fn standard(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The operational error this object carries, when its code is `-32000`.
    pub fn operational(&self) -> Option<OperationalError> {
        OperationalError::from_rpc(self)
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("code".into(), Value::from(self.code));
        m.insert("message".into(), Value::String(self.message.clone()));
        if let Some(d) = &self.data {
            m.insert("data".into(), d.clone());
        }
        Value::Object(m)
    }
}

/// A Run/1 operational failure: `-32000` with data `{code, details?}`.
#[derive(Debug, Clone, PartialEq)]
pub struct OperationalError {
    pub code: ErrorCode,
    pub message: String,
    pub details: Option<Value>,
}

impl OperationalError {
    /// A new error without details. An empty message is sent as the code's
    /// spelling (JSON-RPC requires 1-1,024 characters).
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        OperationalError {
            code,
            message: message.into(),
            details: None,
        }
    }

    /// The wire error object. A local-only code is never serialized: it is
    /// sent as `EXECUTION_FAILED`. The message is clamped to 1–1,024 scalars.
    pub fn to_rpc(&self) -> RpcError {
        let code = if self.code.is_wire() {
            self.code
        } else {
            ErrorCode::ExecutionFailed
        };
        let mut data = Map::new();
        data.insert("code".into(), Value::String(code.as_str().into()));
        if let Some(d) = &self.details {
            data.insert("details".into(), d.clone());
        }
        RpcError {
            code: OPERATIONAL_ERROR,
            message: clamp_message(&self.message, code),
            data: Some(Value::Object(data)),
        }
    }

    /// Reads a `-32000` error object; `None` for any other shape.
    pub fn from_rpc(e: &RpcError) -> Option<OperationalError> {
        if e.code != OPERATIONAL_ERROR {
            return None;
        }
        let data = e.data.as_ref()?.as_object()?;
        if data.keys().any(|k| k != "code" && k != "details") {
            return None;
        }
        let code = ErrorCode::parse_wire(data.get("code")?.as_str()?)?;
        Some(OperationalError {
            code,
            message: e.message.clone(),
            details: data.get("details").cloned(),
        })
    }
}

impl fmt::Display for OperationalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for OperationalError {}

fn clamp_message(message: &str, code: ErrorCode) -> String {
    if message.is_empty() {
        return code.as_str().to_string();
    }
    message.chars().take(MAX_ERROR_MESSAGE_CHARS).collect()
}

// ---------------------------------------------------------------------------
// Messages

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

fn envelope(id: Option<String>, reason: &str) -> DecodeError {
    DecodeError::InvalidEnvelope {
        id,
        reason: reason.to_string(),
    }
}

fn decode_error_object(error: Value, has_id: bool) -> Result<RpcError, String> {
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

// ---------------------------------------------------------------------------
// Methods

/// Which peer sent a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    HostToComponent,
    ComponentToHost,
}

/// Every Run/1 method name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    FlowRun,
    RunChild,
    CapabilityCall,
    RequestCancel,
    ChannelCreate,
    ChannelSubscribe,
    ChannelSend,
    ChannelNext,
    ChannelClose,
    ChannelRelease,
}

impl Method {
    /// Every method.
    pub const ALL: [Method; 10] = [
        Method::FlowRun,
        Method::RunChild,
        Method::CapabilityCall,
        Method::RequestCancel,
        Method::ChannelCreate,
        Method::ChannelSubscribe,
        Method::ChannelSend,
        Method::ChannelNext,
        Method::ChannelClose,
        Method::ChannelRelease,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::FlowRun => "flow/run",
            Method::RunChild => "flow/run-child",
            Method::CapabilityCall => "capability/call",
            Method::RequestCancel => "request/cancel",
            Method::ChannelCreate => "channel/create",
            Method::ChannelSubscribe => "channel/subscribe",
            Method::ChannelSend => "channel/send",
            Method::ChannelNext => "channel/next",
            Method::ChannelClose => "channel/close",
            Method::ChannelRelease => "channel/release",
        }
    }

    /// Looks up a wire name.
    pub fn parse(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.as_str() == name)
    }

    /// Whether this method is a notification (never request-form).
    pub fn is_notification(self) -> bool {
        self == Method::RequestCancel
    }

    /// Whether `direction` may send this method in its proper form.
    pub fn allowed(self, direction: Direction) -> bool {
        match self {
            Method::FlowRun => direction == Direction::HostToComponent,
            Method::RequestCancel => true,
            _ => direction == Direction::ComponentToHost,
        }
    }
}

/// The request-form method a receiver should dispatch, or `None` when it must
/// answer `-32601` (unknown, wrong direction, or notification-only).
pub fn request_method(direction: Direction, name: &str) -> Option<Method> {
    Method::parse(name).filter(|m| !m.is_notification() && m.allowed(direction))
}

// ---------------------------------------------------------------------------
// Typed params and results

/// Method params (or a result) did not have the method's closed shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid params: {0}")]
pub struct InvalidParams(pub String);

impl InvalidParams {
    /// The `-32602` error object for this failure.
    pub fn to_rpc(&self) -> RpcError {
        RpcError::standard(
            INVALID_PARAMS,
            clamp_message(&self.0, ErrorCode::InvalidInput),
        )
    }
}

fn bad(msg: impl Into<String>) -> InvalidParams {
    InvalidParams(msg.into())
}

/// A closed object reader: checks member names and hands out typed fields.
struct Fields<'a> {
    obj: &'a Map<String, Value>,
    what: &'static str,
}

impl<'a> Fields<'a> {
    fn new(value: &'a Value, what: &'static str, allowed: &[&str]) -> Result<Self, InvalidParams> {
        let obj = value
            .as_object()
            .ok_or_else(|| bad(format!("{what} must be an object")))?;
        if let Some(k) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(bad(format!("{what} has unknown member {k:?}")));
        }
        Ok(Fields { obj, what })
    }

    fn opt(&self, name: &str) -> Option<&'a Value> {
        self.obj.get(name)
    }

    fn req(&self, name: &str) -> Result<&'a Value, InvalidParams> {
        self.obj
            .get(name)
            .ok_or_else(|| bad(format!("{} needs {name:?}", self.what)))
    }

    fn string(&self, name: &str) -> Result<&'a str, InvalidParams> {
        self.req(name)?
            .as_str()
            .ok_or_else(|| bad(format!("{}.{name} must be a string", self.what)))
    }

    fn wire_id(&self, name: &str) -> Result<String, InvalidParams> {
        let s = self.string(name)?;
        if !is_wire_id(s) {
            return Err(bad(format!("{}.{name} is not a valid token", self.what)));
        }
        Ok(s.to_string())
    }

    fn local_name(&self, name: &str) -> Result<String, InvalidParams> {
        let s = self.string(name)?;
        if !is_local_name(s) {
            return Err(bad(format!("{}.{name} is not a LocalName", self.what)));
        }
        Ok(s.to_string())
    }
}

fn safe_integer(v: &Value, what: &str, min: u64) -> Result<u64, InvalidParams> {
    let n = match v {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                .map(|f| f as u64)
        }),
        _ => None,
    };
    match n {
        Some(n) if n >= min && n <= MAX_SAFE_INTEGER => Ok(n),
        _ => Err(bad(format!(
            "{what} must be an integer in {min}..={MAX_SAFE_INTEGER}"
        ))),
    }
}

/// Attachment access mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    ReadWrite,
}

impl Access {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::ReadWrite => "read-write",
        }
    }
}

/// One sandbox-local attachment root.
#[derive(Debug, Clone, PartialEq)]
pub struct Attachment {
    pub path: String,
    pub access: Access,
}

impl Attachment {
    fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(v, "attachment", &["path", "access"])?;
        let path = f.string("path")?;
        if path.is_empty() {
            return Err(bad("attachment path must be nonempty"));
        }
        let access = match f.string("access")? {
            "read" => Access::Read,
            "read-write" => Access::ReadWrite,
            _ => return Err(bad("attachment access must be read or read-write")),
        };
        Ok(Attachment {
            path: path.to_string(),
            access,
        })
    }

    fn to_value(&self) -> Value {
        serde_json::json!({"path": self.path, "access": self.access.as_str()})
    }
}

/// Channel delivery mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    Direct,
    Broadcast,
}

impl Delivery {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Delivery::Direct => "direct",
            Delivery::Broadcast => "broadcast",
        }
    }

    fn parse(v: &Value) -> Result<Self, InvalidParams> {
        match v.as_str() {
            Some("direct") => Ok(Delivery::Direct),
            Some("broadcast") => Ok(Delivery::Broadcast),
            _ => Err(bad("delivery must be direct or broadcast")),
        }
    }
}

/// The right an endpoint grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelDirection {
    Send,
    Receive,
}

/// Exact Channel Contract/1 source identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelContractIdentity {
    pub id: String,
    pub version: String,
    pub digest: String,
}

impl ChannelContractIdentity {
    fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(v, "contract", &["id", "version", "digest"])?;
        let id = f.string("id")?;
        let version = f.string("version")?;
        let digest = f.string("digest")?;
        if !id.starts_with("https://") {
            return Err(bad("contract id must be an https URI"));
        }
        let semver = version.split('.').collect::<Vec<_>>();
        let semver_ok = semver.len() == 3
            && semver.iter().all(|p| {
                !p.is_empty()
                    && p.bytes().all(|c| c.is_ascii_digit())
                    && (p.len() == 1 || !p.starts_with('0'))
            });
        if !semver_ok {
            return Err(bad("contract version must be MAJOR.MINOR.PATCH"));
        }
        let hex = digest.strip_prefix("sha256:").unwrap_or("");
        if hex.len() != 64 || !hex.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(bad("contract digest must be sha256:<64 lowercase hex>"));
        }
        Ok(ChannelContractIdentity {
            id: id.into(),
            version: version.into(),
            digest: digest.into(),
        })
    }

    fn to_value(&self) -> Value {
        serde_json::json!({"id": self.id, "version": self.version, "digest": self.digest})
    }
}

/// A host-granted channel endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelGrant {
    pub endpoint: String,
    pub direction: ChannelDirection,
    pub delivery: Delivery,
    pub contract: Option<ChannelContractIdentity>,
    /// Present exactly for receivers; `1` for direct delivery.
    pub start_sequence: Option<u64>,
}

impl ChannelGrant {
    /// Parses one grant object.
    pub fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(
            v,
            "channel grant",
            &[
                "endpoint",
                "direction",
                "delivery",
                "contract",
                "startSequence",
            ],
        )?;
        let endpoint = f.wire_id("endpoint")?;
        let delivery = Delivery::parse(f.req("delivery")?)?;
        let contract = f
            .opt("contract")
            .map(ChannelContractIdentity::from_value)
            .transpose()?;
        let (direction, start_sequence) = match f.string("direction")? {
            "send" => {
                if f.opt("startSequence").is_some() {
                    return Err(bad("a send grant has no startSequence"));
                }
                (ChannelDirection::Send, None)
            }
            "receive" => {
                let s = safe_integer(f.req("startSequence")?, "startSequence", 1)?;
                if delivery == Delivery::Direct && s != 1 {
                    return Err(bad("a direct receiver starts at sequence 1"));
                }
                (ChannelDirection::Receive, Some(s))
            }
            _ => return Err(bad("direction must be send or receive")),
        };
        Ok(ChannelGrant {
            endpoint,
            direction,
            delivery,
            contract,
            start_sequence,
        })
    }

    /// The grant object.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("endpoint".into(), Value::String(self.endpoint.clone()));
        m.insert(
            "direction".into(),
            Value::String(
                match self.direction {
                    ChannelDirection::Send => "send",
                    ChannelDirection::Receive => "receive",
                }
                .into(),
            ),
        );
        m.insert(
            "delivery".into(),
            Value::String(self.delivery.as_str().into()),
        );
        if let Some(c) = &self.contract {
            m.insert("contract".into(), c.to_value());
        }
        if let Some(s) = self.start_sequence {
            m.insert("startSequence".into(), Value::from(s));
        }
        Value::Object(m)
    }
}

fn name_map<T>(
    v: &Value,
    what: &str,
    max: usize,
    item: impl Fn(&Value) -> Result<T, InvalidParams>,
) -> Result<BTreeMap<String, T>, InvalidParams> {
    let obj = v
        .as_object()
        .ok_or_else(|| bad(format!("{what} must be an object")))?;
    if obj.len() > max {
        return Err(bad(format!("{what} has more than {max} entries")));
    }
    obj.iter()
        .map(|(k, v)| {
            if !is_local_name(k) {
                return Err(bad(format!("{what} key {k:?} is not a LocalName")));
            }
            Ok((k.clone(), item(v)?))
        })
        .collect()
}

fn channel_refs(v: Option<&Value>) -> Result<BTreeMap<String, String>, InvalidParams> {
    match v {
        None => Ok(BTreeMap::new()),
        Some(v) => name_map(v, "channels", MAX_CHANNELS, |e| match e.as_str() {
            Some(s) if is_wire_id(s) => Ok(s.to_string()),
            _ => Err(bad("a channel reference must be an endpoint token")),
        }),
    }
}

fn refs_value(refs: &BTreeMap<String, String>) -> Value {
    Value::Object(
        refs.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    )
}

/// `flow/run` params: the complete context of one invocation.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowRunParams {
    pub protocol: String,
    pub input: Value,
    pub settings: Map<String, Value>,
    pub attachments: BTreeMap<String, Attachment>,
    pub scratch: String,
    pub deadline_unix_ms: u64,
    pub channels: BTreeMap<String, ChannelGrant>,
}

impl FlowRunParams {
    /// Parses and checks `flow/run` params.
    pub fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(
            v,
            "flow/run params",
            &[
                "protocol",
                "input",
                "settings",
                "attachments",
                "scratch",
                "deadlineUnixMs",
                "channels",
            ],
        )?;
        if f.string("protocol")? != PROTOCOL {
            return Err(bad("protocol must be \"run/1\""));
        }
        let input = f.req("input")?.clone();
        let settings = f
            .req("settings")?
            .as_object()
            .ok_or_else(|| bad("settings must be an object"))?
            .clone();
        let attachments = name_map(
            f.req("attachments")?,
            "attachments",
            MAX_ATTACHMENTS,
            Attachment::from_value,
        )?;
        let scratch = f.string("scratch")?;
        if scratch.is_empty() {
            return Err(bad("scratch must be nonempty"));
        }
        let deadline_unix_ms = safe_integer(f.req("deadlineUnixMs")?, "deadlineUnixMs", 0)?;
        let channels = match f.opt("channels") {
            None => BTreeMap::new(),
            Some(c) => name_map(c, "channels", MAX_CHANNELS, ChannelGrant::from_value)?,
        };
        let mut endpoints: Vec<&str> = channels.values().map(|g| g.endpoint.as_str()).collect();
        endpoints.sort_unstable();
        if endpoints.windows(2).any(|w| w[0] == w[1]) {
            return Err(bad("channel grants must name distinct endpoints"));
        }
        Ok(FlowRunParams {
            protocol: PROTOCOL.into(),
            input,
            settings,
            attachments,
            scratch: scratch.into(),
            deadline_unix_ms,
            channels,
        })
    }

    /// The params object.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("protocol".into(), Value::String(self.protocol.clone()));
        m.insert("input".into(), self.input.clone());
        m.insert("settings".into(), Value::Object(self.settings.clone()));
        m.insert(
            "attachments".into(),
            Value::Object(
                self.attachments
                    .iter()
                    .map(|(k, a)| (k.clone(), a.to_value()))
                    .collect(),
            ),
        );
        m.insert("scratch".into(), Value::String(self.scratch.clone()));
        m.insert("deadlineUnixMs".into(), Value::from(self.deadline_unix_ms));
        if !self.channels.is_empty() {
            m.insert(
                "channels".into(),
                Value::Object(
                    self.channels
                        .iter()
                        .map(|(k, g)| (k.clone(), g.to_value()))
                        .collect(),
                ),
            );
        }
        Value::Object(m)
    }
}

/// `flow/run-child` params.
#[derive(Debug, Clone, PartialEq)]
pub struct RunChildParams {
    pub operation_id: String,
    pub slot: String,
    pub intent: Option<String>,
    pub input: Value,
    pub channels: BTreeMap<String, String>,
}

impl RunChildParams {
    /// Parses and checks `flow/run-child` params.
    pub fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(
            v,
            "flow/run-child params",
            &["operationId", "slot", "intent", "input", "channels"],
        )?;
        let intent = match f.opt("intent") {
            None => None,
            Some(Value::String(s)) => {
                let n = s.chars().count();
                if n == 0 || n > MAX_INTENT_CHARS {
                    return Err(bad(format!(
                        "intent must have 1-{MAX_INTENT_CHARS} characters"
                    )));
                }
                Some(s.clone())
            }
            Some(_) => return Err(bad("intent must be a string")),
        };
        Ok(RunChildParams {
            operation_id: f.wire_id("operationId")?,
            slot: f.local_name("slot")?,
            intent,
            input: f.req("input")?.clone(),
            channels: channel_refs(f.opt("channels"))?,
        })
    }

    /// The params object.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert(
            "operationId".into(),
            Value::String(self.operation_id.clone()),
        );
        m.insert("slot".into(), Value::String(self.slot.clone()));
        if let Some(i) = &self.intent {
            m.insert("intent".into(), Value::String(i.clone()));
        }
        m.insert("input".into(), self.input.clone());
        if !self.channels.is_empty() {
            m.insert("channels".into(), refs_value(&self.channels));
        }
        Value::Object(m)
    }
}

/// `capability/call` params.
#[derive(Debug, Clone, PartialEq)]
pub struct CapabilityCallParams {
    pub operation_id: String,
    pub slot: String,
    pub method: String,
    pub input: Value,
    pub channels: BTreeMap<String, String>,
}

impl CapabilityCallParams {
    /// Parses and checks `capability/call` params.
    pub fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(
            v,
            "capability/call params",
            &["operationId", "slot", "method", "input", "channels"],
        )?;
        Ok(CapabilityCallParams {
            operation_id: f.wire_id("operationId")?,
            slot: f.local_name("slot")?,
            method: f.local_name("method")?,
            input: f.req("input")?.clone(),
            channels: channel_refs(f.opt("channels"))?,
        })
    }

    /// The params object.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert(
            "operationId".into(),
            Value::String(self.operation_id.clone()),
        );
        m.insert("slot".into(), Value::String(self.slot.clone()));
        m.insert("method".into(), Value::String(self.method.clone()));
        m.insert("input".into(), self.input.clone());
        if !self.channels.is_empty() {
            m.insert("channels".into(), refs_value(&self.channels));
        }
        Value::Object(m)
    }
}

/// `request/cancel` params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CancelParams {
    pub request_id: String,
}

impl CancelParams {
    /// Parses and checks `request/cancel` params.
    pub fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(v, "request/cancel params", &["requestId"])?;
        Ok(CancelParams {
            request_id: f.wire_id("requestId")?,
        })
    }

    /// The params object.
    pub fn to_value(&self) -> Value {
        serde_json::json!({"requestId": self.request_id})
    }
}

/// `channel/create` params.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChannelCreateParams {
    pub delivery: Option<Delivery>,
    /// A Schema/1 object or boolean.
    pub schema: Option<Value>,
    /// A package-local `./` contract reference.
    pub contract: Option<String>,
}

impl ChannelCreateParams {
    /// Parses and checks `channel/create` params.
    pub fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(
            v,
            "channel/create params",
            &["delivery", "schema", "contract"],
        )?;
        let delivery = f.opt("delivery").map(Delivery::parse).transpose()?;
        let schema = match f.opt("schema") {
            None => None,
            Some(s @ (Value::Object(_) | Value::Bool(_))) => Some(s.clone()),
            Some(_) => return Err(bad("schema must be an object or boolean")),
        };
        let contract = match f.opt("contract") {
            None => None,
            Some(Value::String(c))
                if c.len() > 2
                    && c.len() <= MAX_CONTRACT_REF_BYTES
                    && c.starts_with("./")
                    && !c.contains('\\') =>
            {
                Some(c.clone())
            }
            Some(_) => return Err(bad("contract must be a ./ package-local reference")),
        };
        if schema.is_some() && contract.is_some() {
            return Err(bad("schema and contract are mutually exclusive"));
        }
        Ok(ChannelCreateParams {
            delivery,
            schema,
            contract,
        })
    }

    /// The params object.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        if let Some(d) = self.delivery {
            m.insert("delivery".into(), Value::String(d.as_str().into()));
        }
        if let Some(s) = &self.schema {
            m.insert("schema".into(), s.clone());
        }
        if let Some(c) = &self.contract {
            m.insert("contract".into(), Value::String(c.clone()));
        }
        Value::Object(m)
    }
}

/// `channel/subscribe` params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelSubscribeParams {
    pub source: String,
}

impl ChannelSubscribeParams {
    /// Parses and checks `channel/subscribe` params.
    pub fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(v, "channel/subscribe params", &["source"])?;
        Ok(ChannelSubscribeParams {
            source: f.wire_id("source")?,
        })
    }

    /// The params object.
    pub fn to_value(&self) -> Value {
        serde_json::json!({"source": self.source})
    }
}

/// `channel/send` params.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelSendParams {
    pub endpoint: String,
    pub value: Value,
}

impl ChannelSendParams {
    /// Parses and checks `channel/send` params.
    pub fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(v, "channel/send params", &["endpoint", "value"])?;
        Ok(ChannelSendParams {
            endpoint: f.wire_id("endpoint")?,
            value: f.req("value")?.clone(),
        })
    }

    /// The params object.
    pub fn to_value(&self) -> Value {
        serde_json::json!({"endpoint": self.endpoint, "value": self.value})
    }
}

/// `channel/next`, `channel/close` and `channel/release` params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelEndpointParams {
    pub endpoint: String,
}

impl ChannelEndpointParams {
    /// Parses and checks endpoint params.
    pub fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(v, "channel endpoint params", &["endpoint"])?;
        Ok(ChannelEndpointParams {
            endpoint: f.wire_id("endpoint")?,
        })
    }

    /// The params object.
    pub fn to_value(&self) -> Value {
        serde_json::json!({"endpoint": self.endpoint})
    }
}

/// A complete Run result: `{outcome, output}`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    pub outcome: String,
    pub output: Value,
}

impl RunResult {
    /// `{"outcome":"done","output":output}`.
    pub fn done(output: Value) -> Self {
        RunResult {
            outcome: "done".into(),
            output,
        }
    }

    /// Parses and checks a Run result.
    pub fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(v, "run result", &["outcome", "output"])?;
        Ok(RunResult {
            outcome: f.local_name("outcome")?,
            output: f.req("output")?.clone(),
        })
    }

    /// The result object.
    pub fn to_value(&self) -> Value {
        serde_json::json!({"outcome": self.outcome, "output": self.output})
    }
}

/// A successful `capability/call` result: exactly one arm.
#[derive(Debug, Clone, PartialEq)]
pub enum CapabilityResult {
    /// `{"value": v}`.
    Value(Value),
    /// `{"error": {"name", "data"}}`: a declared application error.
    Error { name: String, data: Value },
}

impl CapabilityResult {
    /// Parses and checks a capability result.
    pub fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let f = Fields::new(v, "capability result", &["value", "error"])?;
        match (f.opt("value"), f.opt("error")) {
            (Some(value), None) => Ok(CapabilityResult::Value(value.clone())),
            (None, Some(error)) => {
                let e = Fields::new(error, "capability error", &["name", "data"])?;
                Ok(CapabilityResult::Error {
                    name: e.local_name("name")?,
                    data: e.req("data")?.clone(),
                })
            }
            _ => Err(bad("capability result has exactly one of value and error")),
        }
    }

    /// The result object.
    pub fn to_value(&self) -> Value {
        match self {
            CapabilityResult::Value(v) => serde_json::json!({"value": v}),
            CapabilityResult::Error { name, data } => {
                serde_json::json!({"error": {"name": name, "data": data}})
            }
        }
    }
}

/// How a receiver finished, as reported by `channel/release`.
#[derive(Debug, Clone, PartialEq)]
pub enum ReleaseStatus {
    Released,
    Ended {
        last_sequence: u64,
    },
    Failed {
        code: ErrorCode,
        details: Option<Value>,
    },
}

/// A successful result of one of the `channel/*` requests.
#[derive(Debug, Clone, PartialEq)]
pub enum ChannelResult {
    /// `null`: send accepted or writer sealed.
    Accepted,
    /// A direct pair from `channel/create`.
    Pair {
        send: ChannelGrant,
        receive: ChannelGrant,
    },
    /// A broadcast writer and its subscription source.
    Broadcast { send: ChannelGrant, source: String },
    /// A broadcast receive grant from `channel/subscribe`.
    Subscription(ChannelGrant),
    /// One item from `channel/next`.
    Item { sequence: u64, value: Value },
    /// A clean end from `channel/next`.
    End { last_sequence: u64 },
    /// A `channel/release` settlement.
    Release(ReleaseStatus),
}

impl ChannelResult {
    /// Parses any channel result shape. The request's method decides which
    /// shapes a peer should accept; see [`ChannelResult::fits`].
    pub fn from_value(v: &Value) -> Result<Self, InvalidParams> {
        let Some(obj) = v.as_object() else {
            return if v.is_null() {
                Ok(ChannelResult::Accepted)
            } else {
                Err(bad("channel result must be null or an object"))
            };
        };
        if obj.contains_key("item") {
            let f = Fields::new(v, "channel result", &["item"])?;
            let i = Fields::new(f.req("item")?, "channel item", &["sequence", "value"])?;
            return Ok(ChannelResult::Item {
                sequence: safe_integer(i.req("sequence")?, "sequence", 1)?,
                value: i.req("value")?.clone(),
            });
        }
        if obj.contains_key("end") {
            let f = Fields::new(v, "channel result", &["end"])?;
            let e = Fields::new(f.req("end")?, "channel end", &["lastSequence"])?;
            return Ok(ChannelResult::End {
                last_sequence: safe_integer(e.req("lastSequence")?, "lastSequence", 0)?,
            });
        }
        if obj.contains_key("status") {
            let status = obj.get("status").and_then(Value::as_str);
            return match status {
                Some("released") => {
                    Fields::new(v, "release result", &["status"])?;
                    Ok(ChannelResult::Release(ReleaseStatus::Released))
                }
                Some("ended") => {
                    let f = Fields::new(v, "release result", &["status", "lastSequence"])?;
                    Ok(ChannelResult::Release(ReleaseStatus::Ended {
                        last_sequence: safe_integer(f.req("lastSequence")?, "lastSequence", 0)?,
                    }))
                }
                Some("failed") => {
                    let f = Fields::new(v, "release result", &["status", "code", "details"])?;
                    let code = ErrorCode::parse_wire(f.string("code")?)
                        .ok_or_else(|| bad("release failure code must be a wire code"))?;
                    Ok(ChannelResult::Release(ReleaseStatus::Failed {
                        code,
                        details: f.opt("details").cloned(),
                    }))
                }
                _ => Err(bad("unknown release status")),
            };
        }
        if obj.contains_key("source") {
            let f = Fields::new(v, "channel broadcast", &["send", "source"])?;
            let send = ChannelGrant::from_value(f.req("send")?)?;
            if send.direction != ChannelDirection::Send || send.delivery != Delivery::Broadcast {
                return Err(bad("broadcast creation returns a broadcast send grant"));
            }
            return Ok(ChannelResult::Broadcast {
                send,
                source: f.wire_id("source")?,
            });
        }
        if obj.contains_key("send") || obj.contains_key("receive") {
            let f = Fields::new(v, "channel pair", &["send", "receive"])?;
            let send = ChannelGrant::from_value(f.req("send")?)?;
            let receive = ChannelGrant::from_value(f.req("receive")?)?;
            if send.direction != ChannelDirection::Send
                || receive.direction != ChannelDirection::Receive
                || send.delivery != Delivery::Direct
                || receive.delivery != Delivery::Direct
            {
                return Err(bad(
                    "a channel pair is a direct sender and a direct receiver",
                ));
            }
            return Ok(ChannelResult::Pair { send, receive });
        }
        let grant = ChannelGrant::from_value(v)?;
        if grant.direction != ChannelDirection::Receive || grant.delivery != Delivery::Broadcast {
            return Err(bad("a subscription is a broadcast receive grant"));
        }
        Ok(ChannelResult::Subscription(grant))
    }

    /// Whether this result shape answers a request of `method`.
    pub fn fits(&self, method: Method) -> bool {
        matches!(
            (method, self),
            (
                Method::ChannelCreate,
                ChannelResult::Pair { .. } | ChannelResult::Broadcast { .. }
            ) | (Method::ChannelSubscribe, ChannelResult::Subscription(_))
                | (
                    Method::ChannelSend | Method::ChannelClose,
                    ChannelResult::Accepted
                )
                | (
                    Method::ChannelNext,
                    ChannelResult::Item { .. } | ChannelResult::End { .. }
                )
                | (Method::ChannelRelease, ChannelResult::Release(_))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn frames(bytes: &[u8]) -> Result<Vec<Vec<u8>>, FrameError> {
        let mut r = FrameReader::new(bytes);
        let mut out = Vec::new();
        while let Some(f) = r.read_frame()? {
            out.push(f);
        }
        Ok(out)
    }

    #[test]
    fn frame_at_limit_is_accepted_and_one_more_is_fatal() {
        let mut at = vec![b' '; MAX_FRAME_BYTES];
        at.push(b'\n');
        assert_eq!(frames(&at).unwrap()[0].len(), MAX_FRAME_BYTES);
        let mut over = vec![b' '; MAX_FRAME_BYTES + 1];
        over.push(b'\n');
        assert!(matches!(frames(&over), Err(FrameError::Oversized)));
        // Without an LF the decoder fails as soon as the bound is passed.
        let mut d = FrameDecoder::new();
        d.push(&vec![b'x'; MAX_FRAME_BYTES]);
        assert!(d.next_frame().unwrap().is_none());
        d.push(b"x");
        assert!(matches!(d.next_frame(), Err(FrameError::Oversized)));
    }

    #[test]
    fn empty_and_incomplete_frames_are_fatal() {
        assert!(matches!(frames(b"{}\n\n"), Err(FrameError::Empty)));
        assert!(matches!(frames(b"{}\n{}"), Err(FrameError::Incomplete)));
        assert_eq!(frames(b"{}\n{\"a\":1}\n").unwrap().len(), 2);
        assert!(frames(b"").unwrap().is_empty());
    }

    #[test]
    fn decoder_splits_across_pushes() {
        let mut d = FrameDecoder::new();
        d.push(b"{\"a\"");
        assert!(d.next_frame().unwrap().is_none());
        d.push(b":1}\n{}\n{");
        assert_eq!(d.next_frame().unwrap().unwrap(), b"{\"a\":1}");
        assert_eq!(d.next_frame().unwrap().unwrap(), b"{}");
        assert!(d.next_frame().unwrap().is_none());
        assert!(matches!(d.finish(), Err(FrameError::Incomplete)));
    }

    #[test]
    fn wire_id_grammar_and_bounds() {
        assert!(is_wire_id("component:1"));
        assert!(is_wire_id("a._:/-Z9"));
        assert!(!is_wire_id(""));
        assert!(!is_wire_id("-a"));
        assert!(!is_wire_id("a b"));
        assert!(is_wire_id(&"a".repeat(MAX_ID_BYTES)));
        assert!(!is_wire_id(&"a".repeat(MAX_ID_BYTES + 1)));
    }

    #[test]
    fn local_name_grammar_and_bounds() {
        assert!(is_local_name("not-found"));
        assert!(!is_local_name("Not"));
        assert!(!is_local_name("a--b"));
        assert!(!is_local_name("-a"));
        assert!(!is_local_name("a-"));
        assert!(is_local_name(&"a".repeat(MAX_LOCAL_NAME_BYTES)));
        assert!(!is_local_name(&"a".repeat(MAX_LOCAL_NAME_BYTES + 1)));
    }

    #[test]
    fn error_codes_round_trip() {
        for c in ErrorCode::ALL {
            assert_eq!(ErrorCode::parse(c.as_str()), Some(c));
        }
        assert_eq!(ErrorCode::ALL.iter().filter(|c| c.is_wire()).count(), 13);
        assert_eq!(ErrorCode::parse_wire("PROTOCOL_ERROR"), None);
        let e = OperationalError {
            code: ErrorCode::Unavailable,
            message: "gone".into(),
            details: Some(json!({"slot": "x"})),
        };
        let rpc = e.to_rpc();
        assert_eq!(rpc.code, -32000);
        assert_eq!(
            rpc.data,
            Some(json!({"code": "UNAVAILABLE", "details": {"slot": "x"}}))
        );
        assert_eq!(rpc.operational(), Some(e));
        let local = OperationalError::new(ErrorCode::ChannelLost, "");
        assert_eq!(
            local.to_rpc().data,
            Some(json!({"code": "EXECUTION_FAILED"}))
        );
    }

    #[test]
    fn error_message_bound() {
        let at = "é".repeat(MAX_ERROR_MESSAGE_CHARS);
        let over = "é".repeat(MAX_ERROR_MESSAGE_CHARS + 1);
        let frame = |m: &str| json!({"jsonrpc":"2.0","id":"a","error":{"code":-32000,"message":m,"data":{"code":"UNCERTAIN"}}});
        assert!(decode_value(frame(&at)).is_ok());
        assert!(decode_value(frame(&over)).is_err());
        assert!(decode_value(frame("")).is_err());
        let e = OperationalError::new(ErrorCode::Uncertain, over).to_rpc();
        assert_eq!(e.message.chars().count(), MAX_ERROR_MESSAGE_CHARS);
    }

    #[test]
    fn envelope_rules() {
        let inv = |v: Value| matches!(decode_value(v), Err(DecodeError::InvalidEnvelope { .. }));
        assert!(inv(json!([])));
        assert!(inv(json!(1)));
        assert!(inv(
            json!({"jsonrpc":"1.0","id":"a","method":"flow/run","params":{}})
        ));
        assert!(inv(
            json!({"jsonrpc":"2.0","id":1,"method":"flow/run","params":{}})
        ));
        assert!(inv(
            json!({"jsonrpc":"2.0","id":null,"method":"flow/run","params":{}})
        ));
        assert!(inv(
            json!({"jsonrpc":"2.0","id":"a","method":"x","params":null})
        ));
        assert!(inv(
            json!({"jsonrpc":"2.0","id":"a","method":"x","params":3})
        ));
        assert!(inv(
            json!({"jsonrpc":"2.0","id":"a","method":"x","extra":1})
        ));
        assert!(inv(json!({"jsonrpc":"2.0","id":"a","result":1,"error":{}})));
        assert!(inv(
            json!({"jsonrpc":"2.0","id":"a","error":{"code":-32001,"message":"m"}})
        ));
        assert!(inv(json!({"jsonrpc":"2.0","id":null,"result":1})));
        assert!(!inv(json!({"jsonrpc":"2.0","method":"x","params":[]})));
        assert!(!inv(
            json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"p"}})
        ));
        // The reply to an invalid envelope carries a valid id when there is one.
        let e =
            decode_value(json!({"jsonrpc":"2.0","id":"h:2","method":"x","params":1})).unwrap_err();
        let reply = e.reply().unwrap().to_value();
        assert_eq!(reply["id"], json!("h:2"));
        assert_eq!(reply["error"]["code"], json!(-32600));
    }

    #[test]
    fn decode_classes() {
        assert_eq!(decode(b"{\"a\":\xff}"), Err(DecodeError::InvalidUtf8));
        let parse = decode(b"{").unwrap_err();
        assert!(matches!(parse, DecodeError::Parse(_)));
        assert_eq!(
            parse.reply().unwrap().to_value()["error"]["code"],
            json!(-32700)
        );
        assert_eq!(parse.reply().unwrap().to_value()["id"], Value::Null);
    }

    #[test]
    fn encode_round_trips() {
        let m = Message::request(
            "component:1",
            Method::CapabilityCall,
            json!({"operationId":"a","slot":"b","method":"c","input":null}),
        );
        let bytes = encode(&m);
        assert_eq!(bytes.last(), Some(&b'\n'));
        assert_eq!(decode(&bytes[..bytes.len() - 1]).unwrap(), m);
        let c = Message::cancel("component:1");
        assert_eq!(
            c.to_value(),
            json!({"jsonrpc":"2.0","method":"request/cancel","params":{"requestId":"component:1"}})
        );
    }

    #[test]
    fn method_table_per_direction() {
        use Direction::*;
        assert_eq!(
            request_method(HostToComponent, "flow/run"),
            Some(Method::FlowRun)
        );
        assert_eq!(request_method(ComponentToHost, "flow/run"), None);
        assert_eq!(request_method(HostToComponent, "capability/call"), None);
        assert_eq!(
            request_method(ComponentToHost, "flow/run-child"),
            Some(Method::RunChild)
        );
        assert_eq!(
            request_method(ComponentToHost, "channel/next"),
            Some(Method::ChannelNext)
        );
        assert_eq!(request_method(HostToComponent, "request/cancel"), None);
        assert_eq!(request_method(ComponentToHost, "nope"), None);
        assert!(Method::RequestCancel.allowed(HostToComponent));
    }

    fn root_params() -> Value {
        json!({"protocol":"run/1","input":null,"settings":{},"attachments":{},"scratch":"/s","deadlineUnixMs":0})
    }

    #[test]
    fn flow_run_params_limits() {
        let ok = FlowRunParams::from_value(&root_params()).unwrap();
        assert_eq!(FlowRunParams::from_value(&ok.to_value()).unwrap(), ok);
        let with = |k: &str, v: Value| {
            let mut p = root_params();
            p[k] = v;
            FlowRunParams::from_value(&p)
        };
        assert!(with("deadlineUnixMs", json!(MAX_SAFE_INTEGER)).is_ok());
        assert!(with("deadlineUnixMs", json!(MAX_SAFE_INTEGER + 1)).is_err());
        assert!(with("deadlineUnixMs", json!(-1)).is_err());
        assert!(with("protocol", json!("run/2")).is_err());
        assert!(with("scratch", json!("")).is_err());
        assert!(with("settings", json!([])).is_err());
        let atts = |n: usize| {
            Value::Object(
                (0..n)
                    .map(|i| (format!("a{i}"), json!({"path":"/p","access":"read"})))
                    .collect(),
            )
        };
        assert_eq!(
            with("attachments", atts(MAX_ATTACHMENTS))
                .unwrap()
                .attachments
                .len(),
            MAX_ATTACHMENTS
        );
        assert!(with("attachments", atts(MAX_ATTACHMENTS + 1)).is_err());
        assert!(with("attachments", json!({"A":{"path":"/p","access":"read"}})).is_err());
        assert!(with("attachments", json!({"a":{"path":"/p","access":"write"}})).is_err());
        let grants = |n: usize| {
            Value::Object(
                (0..n)
                    .map(|i| {
                        (
                            format!("c{i}"),
                            json!({"endpoint":format!("e{i}"),"direction":"send","delivery":"direct"}),
                        )
                    })
                    .collect(),
            )
        };
        assert_eq!(
            with("channels", grants(MAX_CHANNELS))
                .unwrap()
                .channels
                .len(),
            MAX_CHANNELS
        );
        assert!(with("channels", grants(MAX_CHANNELS + 1)).is_err());
        let dup = json!({
            "a":{"endpoint":"e","direction":"send","delivery":"direct"},
            "b":{"endpoint":"e","direction":"receive","delivery":"direct","startSequence":1}
        });
        assert!(with("channels", dup).is_err());
        let direct_late = json!({"a":{"endpoint":"e","direction":"receive","delivery":"direct","startSequence":2}});
        assert!(with("channels", direct_late).is_err());
    }

    #[test]
    fn intent_bound() {
        let p = |intent: String| {
            RunChildParams::from_value(
                &json!({"operationId":"o","slot":"s","intent":intent,"input":null}),
            )
        };
        assert!(p("é".repeat(MAX_INTENT_CHARS)).is_ok());
        assert!(p("é".repeat(MAX_INTENT_CHARS + 1)).is_err());
        assert!(p(String::new()).is_err());
    }

    #[test]
    fn channel_reference_map_bound() {
        let refs = |n: usize| {
            Value::Object(
                (0..n)
                    .map(|i| (format!("c{i}"), json!(format!("e{i}"))))
                    .collect(),
            )
        };
        let p = |channels: Value| {
            CapabilityCallParams::from_value(
                &json!({"operationId":"o","slot":"s","method":"m","input":null,"channels":channels}),
            )
        };
        assert!(p(refs(MAX_CHANNELS)).is_ok());
        assert!(p(refs(MAX_CHANNELS + 1)).is_err());
    }

    #[test]
    fn channel_contract_reference_bound() {
        let p = |c: String| ChannelCreateParams::from_value(&json!({ "contract": c }));
        let at = format!("./{}", "a".repeat(MAX_CONTRACT_REF_BYTES - 2));
        let over = format!("./{}", "a".repeat(MAX_CONTRACT_REF_BYTES - 1));
        assert!(p(at).is_ok());
        assert!(p(over).is_err());
        assert!(p("contracts/x.json".into()).is_err());
    }

    #[test]
    fn channel_results_fit_their_methods() {
        let r = ChannelResult::from_value(&json!(null)).unwrap();
        assert!(r.fits(Method::ChannelSend));
        assert!(!r.fits(Method::ChannelNext));
        let end = ChannelResult::from_value(&json!({"end":{"lastSequence":0}})).unwrap();
        assert!(end.fits(Method::ChannelNext));
        let sub = ChannelResult::from_value(
            &json!({"endpoint":"r","direction":"receive","delivery":"broadcast","startSequence":3}),
        )
        .unwrap();
        assert!(sub.fits(Method::ChannelSubscribe));
        let rel = ChannelResult::from_value(&json!({"status":"failed","code":"LAGGED"})).unwrap();
        assert_eq!(
            rel,
            ChannelResult::Release(ReleaseStatus::Failed {
                code: ErrorCode::Lagged,
                details: None
            })
        );
    }
    /// Whether `value` satisfies the named definition of the Run/1 message
    /// schema, using only this module's decoders.
    fn conforms(definition: &str, value: Value) -> bool {
        let Ok(message) = decode_value(value) else {
            return false;
        };
        let request = |method: Method, check: fn(&Value) -> bool| match &message {
            Message::Request {
                method: m,
                params: Some(p),
                ..
            } => m == method.as_str() && check(p),
            _ => false,
        };
        let success = |check: fn(&Value) -> bool| match &message {
            Message::Success { result, .. } => check(result),
            _ => false,
        };
        match definition {
            "flowRunRequest" => request(Method::FlowRun, |p| FlowRunParams::from_value(p).is_ok()),
            "childFlowRequest" => {
                request(Method::RunChild, |p| RunChildParams::from_value(p).is_ok())
            }
            "capabilityCallRequest" => request(Method::CapabilityCall, |p| {
                CapabilityCallParams::from_value(p).is_ok()
            }),
            "channelCreateRequest" => request(Method::ChannelCreate, |p| {
                ChannelCreateParams::from_value(p).is_ok()
            }),
            "channelSubscribeRequest" => request(Method::ChannelSubscribe, |p| {
                ChannelSubscribeParams::from_value(p).is_ok()
            }),
            "channelSendRequest" => request(Method::ChannelSend, |p| {
                ChannelSendParams::from_value(p).is_ok()
            }),
            "channelNextRequest" => request(Method::ChannelNext, |p| {
                ChannelEndpointParams::from_value(p).is_ok()
            }),
            "channelCloseRequest" => request(Method::ChannelClose, |p| {
                ChannelEndpointParams::from_value(p).is_ok()
            }),
            "channelReleaseRequest" => request(Method::ChannelRelease, |p| {
                ChannelEndpointParams::from_value(p).is_ok()
            }),
            "requestCancelNotification" => matches!(
                &message,
                Message::Notification { method, params: Some(p) }
                    if method == "request/cancel" && CancelParams::from_value(p).is_ok()
            ),
            "runSuccessResponse" => success(|r| RunResult::from_value(r).is_ok()),
            "capabilitySuccessResponse" => success(|r| CapabilityResult::from_value(r).is_ok()),
            "channelSuccessResponse" => success(|r| ChannelResult::from_value(r).is_ok()),
            "flowErrorResponse" => matches!(
                &message,
                Message::Failure { id: Some(_), error } if error.operational().is_some()
            ),
            other => panic!("fixture names unknown definition {other}"),
        }
    }

    #[test]
    fn message_fixtures_are_accepted_and_rejected_as_tagged() {
        let fixtures: Value =
            serde_json::from_str(include_str!("../tests/data/run-1/messages.json")).unwrap();
        let mut seen = 0;
        for (group, expect) in [("valid", true), ("invalid", false)] {
            for case in fixtures[group].as_array().unwrap() {
                let name = case["name"].as_str().unwrap();
                let def = case["definition"].as_str().unwrap();
                assert_eq!(
                    conforms(def, case["value"].clone()),
                    expect,
                    "{group} fixture {name} ({def})"
                );
                // Valid messages survive an encode/decode round trip.
                if expect {
                    let m = decode_value(case["value"].clone()).unwrap();
                    let bytes = encode(&m);
                    assert_eq!(decode(&bytes[..bytes.len() - 1]).unwrap(), m, "{name}");
                }
                seen += 1;
            }
        }
        assert_eq!(seen, 33);
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// Frames a byte stream and parses every frame as JSON/1.
    fn frame_and_parse(bytes: &[u8]) -> Result<usize, String> {
        let mut r = FrameReader::new(bytes);
        let mut n = 0;
        while let Some(f) = r.read_frame().map_err(|e| e.to_string())? {
            match decode(&f) {
                Err(DecodeError::InvalidEnvelope { .. }) | Ok(_) => n += 1,
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok(n)
    }

    #[test]
    fn framing_fixtures() {
        let fixtures: Value =
            serde_json::from_str(include_str!("../tests/data/run-1/framing.json")).unwrap();
        for case in fixtures["valid"].as_array().unwrap() {
            let bytes = hex(case["hex"].as_str().unwrap());
            assert_eq!(frame_and_parse(&bytes), Ok(1), "{}", case["name"]);
        }
        for case in fixtures["invalid"].as_array().unwrap() {
            let bytes = hex(case["hex"].as_str().unwrap());
            assert!(frame_and_parse(&bytes).is_err(), "{}", case["name"]);
        }
        // Classes: invalid UTF-8 is not answered; a BOM or duplicate member is -32700.
        let class = |h: &str| decode(&hex(h)[..hex(h).len() - 1]);
        assert_eq!(class("7b2261223aff7d0a"), Err(DecodeError::InvalidUtf8));
        assert!(matches!(class("efbbbf7b7d0a"), Err(DecodeError::Parse(_))));
        assert!(matches!(
            class("7b2261223a312c2261223a327d0a"),
            Err(DecodeError::Parse(_))
        ));
    }
}
