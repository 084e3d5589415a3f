//! Example provider of `https://example.org/contracts/kv` 1.0.0. One
//! source, two forms: built for `wasm32-wasip2` it is a WASM component of
//! the `jig:provider` world; built natively it is a `cdylib` exporting the
//! `jig_provider_*` C ABI (`export_provider!` chooses).
//!
//! `get {"key": k}` answers the string stored under `k` in the operator's
//! settings `{"entries": {...}}`, or the declared application error
//! `not-found` with `{"key": k}`.

use jig_provider_sdk::{serde_json::json, CallError, Channels, Config, Context, Provider, Value};

/// The kv provider; it keeps no state of its own.
pub struct Kv;

impl Provider for Kv {
    fn contracts() -> Vec<&'static str> {
        vec![include_str!("../../contracts/kv.capability.json")]
    }

    fn call(
        _: &Context,
        method: &str,
        input: Value,
        config: &Config,
        _: &Channels,
    ) -> Result<Value, CallError> {
        match method {
            "get" => get(&input, config),
            other => Err(CallError::unknown_method(other)),
        }
    }
}

/// The `get` method.
pub fn get(input: &Value, config: &Config) -> Result<Value, CallError> {
    let Some(key) = input.get("key").and_then(Value::as_str) else {
        return Err(CallError::operational(
            "INVALID_INPUT",
            "input.key must be a string",
        ));
    };
    match config.settings.get("entries").and_then(|e| e.get(key)) {
        Some(Value::String(value)) => Ok(Value::String(value.clone())),
        _ => Err(CallError::application("not-found", json!({ "key": key }))),
    }
}

jig_provider_sdk::export_provider!(Kv);
