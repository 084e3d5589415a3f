//! One call to a provider: its context and the two ways it can fail.

use serde_json::Value;

use crate::ContractIdentity;

/// The closed set of Run/1 operational codes that may travel on the wire
/// (Run/1 §7). A provider reporting any other code produced an invalid result.
pub const WIRE_CODES: [&str; 13] = [
    "CANCELLED",
    "DEADLINE_EXCEEDED",
    "OWNER_CLOSED",
    "OPERATION_CONFLICT",
    "UNAVAILABLE",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "INVALID_INPUT",
    "INVALID_RESULT",
    "UNCERTAIN",
    "EXECUTION_FAILED",
    "LAGGED",
    "DISCONNECTED",
];

/// Run/1 §7: a JSON-RPC error message holds 1–1,024 Unicode scalar values.
pub const MAX_MESSAGE_CHARS: usize = 1024;

/// What the host knows about one capability call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallContext {
    /// The exact contract the caller's slot is bound to.
    pub contract: ContractIdentity,
    /// The Run-scoped operation identity (Run/1 §6).
    pub operation_id: String,
    /// The Run's deadline, Unix milliseconds.
    pub deadline_unix_ms: u64,
}

/// Why a call produced no value.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CallError {
    /// A named application error declared by the contract method; the host
    /// answers `{"error": {"name", "data"}}` (Capability Contract/1 §2).
    #[error("application error {name}")]
    Application { name: String, data: Value },
    /// A Run/1 operational failure with one of [`WIRE_CODES`].
    #[error("{code}: {message}")]
    Operational {
        code: String,
        message: String,
        details: Option<Value>,
    },
}

impl CallError {
    /// An operational error without details. `message` is bounded to
    /// [`MAX_MESSAGE_CHARS`] and never empty.
    pub fn operational(code: &str, message: impl Into<String>) -> CallError {
        CallError::Operational {
            code: code.to_owned(),
            message: bounded_message(code, message.into()),
            details: None,
        }
    }

    /// The Run/1 code of an operational error; `None` for an application error.
    pub fn code(&self) -> Option<&str> {
        match self {
            CallError::Application { .. } => None,
            CallError::Operational { code, .. } => Some(code),
        }
    }
}

/// Makes `message` a valid Run/1 message: truncated to [`MAX_MESSAGE_CHARS`]
/// scalar values, and replaced by a generic text when empty.
pub(crate) fn bounded_message(code: &str, message: String) -> String {
    if message.is_empty() {
        return format!("provider reported {code}");
    }
    match message.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((cut, _)) => message[..cut].to_owned(),
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_at_limit_is_kept_and_one_past_is_truncated() {
        let at = "é".repeat(MAX_MESSAGE_CHARS);
        assert_eq!(bounded_message("UNAVAILABLE", at.clone()), at);
        let past = "é".repeat(MAX_MESSAGE_CHARS + 1);
        let kept = bounded_message("UNAVAILABLE", past);
        assert_eq!(kept.chars().count(), MAX_MESSAGE_CHARS);
    }

    #[test]
    fn empty_message_is_replaced() {
        let err = CallError::operational("EXECUTION_FAILED", "");
        let CallError::Operational { message, .. } = err else {
            panic!("expected operational")
        };
        assert_eq!(message, "provider reported EXECUTION_FAILED");
    }
}
