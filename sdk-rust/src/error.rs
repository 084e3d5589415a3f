//! The two failures a component author branches on: an operational failure
//! (a Run/1 code) and a capability's declared application error.

use std::fmt;

use flow::json::Value;
use flow::wire::{ErrorCode, OperationalError};

/// An operational failure: one of the Run/1 codes, a human message and
/// optional JSON/1 details. Branch on `code`, never on `message`.
#[derive(Debug, Clone, PartialEq)]
pub struct OperationError {
    pub code: ErrorCode,
    pub message: String,
    pub details: Option<Value>,
}

impl OperationError {
    /// A new error without details.
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let e = OperationError::new(ErrorCode::Unavailable, "the index is down");
    /// assert_eq!(e.to_string(), "UNAVAILABLE: the index is down");
    /// // Returned from a handler, a wire-visible code is kept.
    /// let t = run_scripted(&[root(json!(null))], |_| async move {
    ///     Err::<RunResult, _>(OperationError::new(ErrorCode::Unavailable, "the index is down"))
    /// });
    /// assert_eq!(t.root_error_code(), Some("UNAVAILABLE"));
    /// ```
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        OperationError {
            code,
            message: message.into(),
            details: None,
        }
    }

    /// The same error with details attached.
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let t = run_scripted(&[root(json!(null))], |_| async move {
    ///     let e = OperationError::new(ErrorCode::InvalidInput, "bad size");
    ///     Err::<RunResult, _>(e.with_details(json!({"max": 10})))
    /// });
    /// assert_eq!(t.frames[0]["error"]["data"], json!({"code": "INVALID_INPUT", "details": {"max": 10}}));
    /// ```
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    pub(crate) fn cancelled() -> Self {
        OperationError::new(ErrorCode::Cancelled, "the call was cancelled")
    }

    pub(crate) fn to_wire(&self) -> OperationalError {
        OperationalError {
            code: self.code,
            message: self.message.clone(),
            details: self.details.clone(),
        }
    }

    pub(crate) fn from_wire(e: OperationalError) -> Self {
        OperationError {
            code: e.code,
            message: e.message,
            details: e.details,
        }
    }
}

impl fmt::Display for OperationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for OperationError {}

/// An application error declared by the exact capability contract.
#[derive(Debug, Clone, PartialEq)]
pub struct CapabilityError {
    pub error_name: String,
    pub data: Value,
}

impl fmt::Display for CapabilityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "capability error {}", self.error_name)
    }
}

impl std::error::Error for CapabilityError {}

/// Why `call_capability` did not return a value.
#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    /// The capability answered with one of its declared errors.
    Capability(CapabilityError),
    /// The call failed operationally.
    Operation(OperationError),
}

impl CallError {
    /// The operational code, when this is an operational failure.
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let operational = CallError::Operation(OperationError::new(ErrorCode::Lagged, "behind"));
    /// assert_eq!(operational.code(), Some(ErrorCode::Lagged));
    /// let declared = CallError::Capability(CapabilityError {
    ///     error_name: "not-found".into(),
    ///     data: json!(null),
    /// });
    /// assert_eq!(declared.code(), None);
    /// ```
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            CallError::Operation(e) => Some(e.code),
            CallError::Capability(_) => None,
        }
    }
}

impl From<OperationError> for CallError {
    fn from(e: OperationError) -> Self {
        CallError::Operation(e)
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Capability(e) => e.fmt(f),
            CallError::Operation(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for CallError {}

/// Whatever a handler fails with. An [`OperationError`] (or a
/// [`CallError::Operation`]) with a wire-visible code keeps its code on the
/// wire; anything else becomes `EXECUTION_FAILED`.
pub type HandlerError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The root error sent for a handler failure.
pub(crate) fn root_error(e: &HandlerError) -> OperationError {
    let op = e.downcast_ref::<OperationError>().cloned().or_else(|| {
        match e.downcast_ref::<CallError>() {
            Some(CallError::Operation(op)) => Some(op.clone()),
            _ => None,
        }
    });
    match op {
        Some(op) if op.code.is_wire() && valid_metadata(&op) => op,
        _ => OperationError::new(ErrorCode::ExecutionFailed, e.to_string()),
    }
}

/// Details must be JSON/1 and the message must fit the wire bound.
fn valid_metadata(op: &OperationError) -> bool {
    let n = op.message.chars().count();
    (1..=flow::wire::MAX_ERROR_MESSAGE_CHARS).contains(&n)
        && op
            .details
            .as_ref()
            .is_none_or(|d| flow::json::check(d).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_error_preserves_only_valid_wire_codes() {
        let keep: HandlerError = Box::new(OperationError::new(ErrorCode::Unavailable, "x"));
        assert_eq!(root_error(&keep).code, ErrorCode::Unavailable);
        let via_call: HandlerError = Box::new(CallError::Operation(OperationError::new(
            ErrorCode::PermissionDenied,
            "no",
        )));
        assert_eq!(root_error(&via_call).code, ErrorCode::PermissionDenied);
        let local: HandlerError = Box::new(OperationError::new(ErrorCode::ChannelLost, "x"));
        assert_eq!(root_error(&local).code, ErrorCode::ExecutionFailed);
        let empty: HandlerError = Box::new(OperationError::new(ErrorCode::Unavailable, ""));
        assert_eq!(root_error(&empty).code, ErrorCode::ExecutionFailed);
        let cap: HandlerError = Box::new(CallError::Capability(CapabilityError {
            error_name: "not-found".into(),
            data: Value::Null,
        }));
        assert_eq!(root_error(&cap).code, ErrorCode::ExecutionFailed);
        let other: HandlerError = "plain".into();
        assert_eq!(root_error(&other).code, ErrorCode::ExecutionFailed);
    }
}
