//! The checks every loader applies around a guest call, so that a WASM
//! component, a native library and a builtin fail in the same observable way.
//!
//! Before dispatch ([`ContractSet::admit`]): the deadline has not passed
//! (`DEADLINE_EXCEEDED`); the provider serves the exact contract and the
//! contract declares the method (`UNAVAILABLE` otherwise: no provider is
//! callable for that operation); the input satisfies the method's input
//! schema (`INVALID_INPUT`). After dispatch ([`Admitted`]): everything the
//! guest returned is strict JSON/1, a value satisfies the output schema, an
//! application error is one the method declares with data satisfying its
//! schema, and an operational error carries a Run/1 wire code; anything else
//! is `INVALID_RESULT`.

use serde_json::Value;

use crate::call::bounded_message;
use crate::{CallContext, CallError, ContractIdentity, LoadError, ServedContract, WIRE_CODES};

/// Milliseconds since the Unix epoch by the host's wall clock.
pub fn now_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The validated contracts one provider serves.
#[derive(Debug, Clone)]
pub struct ContractSet {
    compiled: Vec<flow::contract::Contract>,
    served: Vec<ServedContract>,
}

impl ContractSet {
    /// Validates the descriptors a provider reported (as JSON text) and
    /// derives their identities. The provider must serve at least one
    /// contract and no exact identity twice.
    pub fn from_descriptors<'a>(
        provider: &str,
        descriptors: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<ContractSet, LoadError> {
        let invalid = |index: usize, reason: String| LoadError::ContractInvalid {
            provider: provider.to_owned(),
            index,
            reason,
        };
        let mut compiled: Vec<flow::contract::Contract> = Vec::new();
        for (index, bytes) in descriptors.into_iter().enumerate() {
            let contract = flow::contract::Contract::parse(bytes)
                .map_err(|e| invalid(index, e.to_string()))?;
            if compiled.iter().any(|c| c.digest == contract.digest) {
                return Err(invalid(index, format!("{} is reported twice", contract.id)));
            }
            compiled.push(contract);
        }
        if compiled.is_empty() {
            return Err(invalid(0, "the provider serves no contract".to_owned()));
        }
        let served = compiled.iter().map(ServedContract::from).collect();
        Ok(ContractSet { compiled, served })
    }

    /// Like [`ContractSet::from_descriptors`] for descriptors already parsed
    /// as JSON/1 values; each is re-rendered so the descriptor byte limit
    /// applies exactly as for text.
    pub fn from_descriptor_values(
        provider: &str,
        descriptors: &[Value],
    ) -> Result<ContractSet, LoadError> {
        let texts: Vec<Vec<u8>> = descriptors
            .iter()
            .map(|d| d.to_string().into_bytes())
            .collect();
        ContractSet::from_descriptors(provider, texts.iter().map(Vec::as_slice))
    }

    pub fn served(&self) -> &[ServedContract] {
        &self.served
    }

    /// Checks a call before any guest code runs.
    pub fn admit<'s>(
        &'s self,
        ctx: &CallContext,
        method: &str,
        input: &Value,
    ) -> Result<Admitted<'s>, CallError> {
        if ctx.deadline_unix_ms <= now_unix_ms() {
            return Err(deadline_exceeded());
        }
        let contract = self
            .compiled
            .iter()
            .find(|c| ContractIdentity::of(c) == ctx.contract)
            .ok_or_else(|| {
                CallError::operational(
                    "UNAVAILABLE",
                    format!("this provider does not serve {}", ctx.contract),
                )
            })?;
        let declared = contract.method(method).ok_or_else(|| {
            CallError::operational(
                "UNAVAILABLE",
                format!("contract {} has no method {method:?}", contract.id),
            )
        })?;
        declared.input.validate(input).map_err(|e| {
            CallError::operational("INVALID_INPUT", format!("input of {method:?}: {e}"))
        })?;
        Ok(Admitted {
            method: declared,
            name: method.to_owned(),
        })
    }
}

/// A call that passed [`ContractSet::admit`]; judges what the guest returns.
#[derive(Debug)]
pub struct Admitted<'s> {
    method: &'s flow::contract::Method,
    name: String,
}

impl Admitted<'_> {
    /// A success value: must satisfy the method's output schema.
    pub fn output(&self, value: Value) -> Result<Value, CallError> {
        self.method
            .output
            .validate(&value)
            .map_err(|e| invalid_result(format!("output of {:?}: {e}", self.name)))?;
        Ok(value)
    }

    /// An application error: the method must declare `name`, and `data`
    /// must satisfy its schema.
    pub fn application(&self, name: &str, data: Value) -> CallError {
        let Some(schema) = self.method.errors.get(name) else {
            return invalid_result(format!(
                "method {:?} declares no application error {name:?}",
                self.name
            ));
        };
        if let Err(e) = schema.validate(&data) {
            return invalid_result(format!("data of error {name:?}: {e}"));
        }
        CallError::Application {
            name: name.to_owned(),
            data,
        }
    }

    /// An operational error: the code must be a Run/1 wire code; the
    /// message is bounded.
    pub fn operational(&self, code: &str, message: String, details: Option<Value>) -> CallError {
        if !WIRE_CODES.contains(&code) {
            return invalid_result(format!("unknown operational code {code:?}"));
        }
        if let Some(Err(e)) = details.as_ref().map(flow::json::check) {
            return invalid_result(format!("error details: {e}"));
        }
        CallError::Operational {
            code: code.to_owned(),
            message: bounded_message(code, message),
            details,
        }
    }
}

/// Parses JSON text the guest returned; `INVALID_RESULT` unless strict JSON/1.
pub fn json(text: &[u8]) -> Result<Value, CallError> {
    flow::json::parse(text).map_err(|e| invalid_result(format!("not JSON/1: {e}")))
}

/// The error for a call whose deadline won.
pub fn deadline_exceeded() -> CallError {
    CallError::operational("DEADLINE_EXCEEDED", "the call's deadline passed")
}

/// An `INVALID_RESULT` error naming what the guest got wrong.
pub fn invalid_result(what: String) -> CallError {
    CallError::operational(
        "INVALID_RESULT",
        format!("provider result is invalid: {what}"),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const KV: &str = r#"{
      "$schema": "https://flow.jig.md/schemas/capability-contract-1.schema.json",
      "flowCapabilityContract": 1,
      "id": "https://example.org/contracts/kv",
      "version": "1.0.0",
      "methods": {"get": {
        "input": {"type": "object", "properties": {"key": {"type": "string"}},
                  "required": ["key"], "additionalProperties": false},
        "output": {"type": "string"},
        "errors": {"not-found": {"type": "object", "required": ["key"]}}
      }}
    }"#;

    fn set() -> ContractSet {
        ContractSet::from_descriptors("kv", [KV.as_bytes()]).unwrap()
    }

    fn ctx(deadline_unix_ms: u64) -> CallContext {
        CallContext {
            contract: set().served()[0].identity.clone(),
            operation_id: "op:1".to_owned(),
            deadline_unix_ms,
        }
    }

    fn far() -> u64 {
        now_unix_ms() + 60_000
    }

    #[test]
    fn identity_is_derived_by_the_host() {
        let set = set();
        let identity = &set.served()[0].identity;
        assert_eq!(identity.id, "https://example.org/contracts/kv");
        assert_eq!(identity.version, "1.0.0");
        let descriptor = flow::json::parse(KV.as_bytes()).unwrap();
        assert_eq!(identity.digest, flow::contract::digest(&descriptor));
    }

    #[test]
    fn invalid_duplicate_or_missing_descriptors_are_load_errors() {
        let bad = ContractSet::from_descriptors("kv", [&b"{}"[..]]).unwrap_err();
        assert_eq!(bad.code(), "PROVIDER_CONTRACT_INVALID");
        let twice =
            ContractSet::from_descriptors("kv", [KV.as_bytes(), KV.as_bytes()]).unwrap_err();
        assert_eq!(twice.code(), "PROVIDER_CONTRACT_INVALID");
        let none = ContractSet::from_descriptors("kv", []).unwrap_err();
        assert_eq!(none.code(), "PROVIDER_CONTRACT_INVALID");
    }

    #[test]
    fn admits_declared_method_of_served_contract_with_valid_input() {
        let set = set();
        let input = json!({"key": "a"});
        assert!(set.admit(&ctx(far()), "get", &input).is_ok());
        let err = set.admit(&ctx(far()), "put", &input).unwrap_err();
        assert_eq!(err.code(), Some("UNAVAILABLE"));
        let mut other = ctx(far());
        other.contract.version = "2.0.0".to_owned();
        let err = set.admit(&other, "get", &input).unwrap_err();
        assert_eq!(err.code(), Some("UNAVAILABLE"));
        let err = set
            .admit(&ctx(far()), "get", &json!({"key": 1}))
            .unwrap_err();
        assert_eq!(err.code(), Some("INVALID_INPUT"));
    }

    #[test]
    fn past_deadline_is_refused_before_dispatch() {
        let err = set()
            .admit(&ctx(1), "get", &json!({"key": "a"}))
            .unwrap_err();
        assert_eq!(err.code(), Some("DEADLINE_EXCEEDED"));
    }

    #[test]
    fn guest_text_must_be_json1() {
        assert_eq!(json(br#"{"a":1}"#).unwrap(), json!({"a": 1}));
        for bad in [
            &br#"{"a":1,"a":2}"#[..],
            b"9007199254740993",
            b"NaN",
            b"",
            b"\"\\ud800\"",
        ] {
            assert_eq!(json(bad).unwrap_err().code(), Some("INVALID_RESULT"));
        }
    }

    #[test]
    fn results_are_judged_against_the_method() {
        let set = set();
        let admitted = set.admit(&ctx(far()), "get", &json!({"key": "a"})).unwrap();
        assert_eq!(admitted.output(json!("v")).unwrap(), json!("v"));
        assert_eq!(
            admitted.output(json!(1)).unwrap_err().code(),
            Some("INVALID_RESULT")
        );
        let declared = admitted.application("not-found", json!({"key": "a"}));
        assert_eq!(
            declared,
            CallError::Application {
                name: "not-found".into(),
                data: json!({"key": "a"})
            }
        );
        let bad_data = admitted.application("not-found", json!(null));
        assert_eq!(bad_data.code(), Some("INVALID_RESULT"));
        let undeclared = admitted.application("gone", json!({"key": "a"}));
        assert_eq!(undeclared.code(), Some("INVALID_RESULT"));
        let known = admitted.operational("UNAVAILABLE", "down".into(), Some(json!({"n": 1})));
        assert_eq!(known.code(), Some("UNAVAILABLE"));
        let unknown = admitted.operational("PROTOCOL_ERROR", "x".into(), None);
        assert_eq!(unknown.code(), Some("INVALID_RESULT"));
    }
}
