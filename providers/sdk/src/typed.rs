//! Typed methods: a method is a `fn(Input) -> Result<Output, CallError>`
//! over serde types instead of hand-parsed JSON.
//!
//! ```
//! use jig_provider_sdk::{typed_methods, CallError, Value};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Deserialize, Serialize)]
//! struct Key {
//!     key: String,
//! }
//!
//! fn get(input: Key) -> Result<String, CallError> {
//!     Err(CallError::application_with("not-found", &input))
//! }
//!
//! fn call(method: &str, input: Value) -> Result<Value, CallError> {
//!     typed_methods!(method, input, {
//!         "get" => get,
//!     })
//! }
//!
//! let err = call("get", serde_json::json!({"key": "Ada"})).unwrap_err();
//! assert_eq!(err, CallError::application("not-found", serde_json::json!({"key": "Ada"})));
//! assert!(call("put", Value::Null).is_err());
//! ```
//!
//! The host has already checked the input against the method's schema and
//! checks the output and error data again, so these conversions only catch
//! a Rust type that disagrees with the descriptor: the input as
//! `INVALID_INPUT`, the output as `EXECUTION_FAILED`.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{CallError, Value};

/// Calls `method` with `input` converted to its input type, and converts
/// its output back to JSON.
pub fn call<I, O, F>(input: Value, method: F) -> Result<Value, CallError>
where
    I: DeserializeOwned,
    O: Serialize,
    F: FnOnce(I) -> Result<O, CallError>,
{
    let input: I = serde_json::from_value(input).map_err(|e| {
        CallError::operational(
            "INVALID_INPUT",
            format!("the input does not fit the method's Rust type: {e}"),
        )
    })?;
    let output = method(input)?;
    serde_json::to_value(output).map_err(|e| {
        CallError::operational(
            "EXECUTION_FAILED",
            format!("the output cannot be rendered as JSON: {e}"),
        )
    })
}

impl CallError {
    /// A declared application error whose data is any serde value.
    pub fn application_with<D: Serialize + ?Sized>(name: &str, data: &D) -> CallError {
        match serde_json::to_value(data) {
            Ok(data) => CallError::application(name, data),
            Err(e) => CallError::operational(
                "EXECUTION_FAILED",
                format!("the data of error {name:?} cannot be rendered as JSON: {e}"),
            ),
        }
    }
}

/// Dispatches `method` to typed functions (see [`typed`](crate::typed)):
/// each arm names a method and a function or closure taking the method's
/// input type; any other method is [`CallError::unknown_method`].
#[macro_export]
macro_rules! typed_methods {
    ($method:expr, $input:expr, { $($name:literal => $handler:expr),+ $(,)? }) => {
        match $method {
            $($name => $crate::typed::call($input, $handler),)+
            other => ::std::result::Result::Err($crate::CallError::unknown_method(other)),
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Deserialize)]
    struct Pair {
        a: i64,
        b: i64,
    }

    fn dispatch(method: &str, input: Value) -> Result<Value, CallError> {
        typed_methods!(method, input, {
            "add" => |p: Pair| Ok::<_, CallError>(p.a + p.b),
            "fail" => |_: Value| Err::<(), _>(CallError::application_with("nope", &json!({"why": 1}))),
        })
    }

    #[test]
    fn a_typed_method_gets_its_input_type_and_returns_json() {
        assert_eq!(dispatch("add", json!({"a": 2, "b": 3})).unwrap(), json!(5));
        assert_eq!(
            dispatch("fail", json!(null)).unwrap_err(),
            CallError::application("nope", json!({"why": 1}))
        );
    }

    #[test]
    fn an_input_that_does_not_fit_the_type_is_invalid_input() {
        let err = dispatch("add", json!({"a": "two"})).unwrap_err();
        assert!(
            matches!(&err, CallError::Operational { code, .. } if code == "INVALID_INPUT"),
            "{err:?}"
        );
    }

    #[test]
    fn another_method_is_unknown() {
        assert_eq!(
            dispatch("sub", json!({})).unwrap_err(),
            CallError::unknown_method("sub")
        );
    }
}
