//! Error codes: the Run/1 operational registry, JSON-RPC errors, and the
//! operational error a request may fail with.

use std::fmt;

use serde_json::{Map, Value};

use super::{MAX_ERROR_MESSAGE_CHARS, OPERATIONAL_ERROR};

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

    pub(super) fn to_value(&self) -> Value {
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

pub(super) fn clamp_message(message: &str, code: ErrorCode) -> String {
    if message.is_empty() {
        return code.as_str().to_string();
    }
    message.chars().take(MAX_ERROR_MESSAGE_CHARS).collect()
}
