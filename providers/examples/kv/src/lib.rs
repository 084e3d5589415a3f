//! Example provider of `https://example.org/contracts/kv` 1.0.0. One
//! source, two forms: built for `wasm32-wasip2` it is a WASM component of
//! the `jig:provider` world; built natively it is a `cdylib` exporting the
//! `jig_provider_*` C ABI (`export_provider!` chooses).
//!
//! `get {"key": k}` answers the string stored under `k` in the operator's
//! settings `{"entries": {...}}`, or the declared application error
//! `not-found` with `{"key": k}`. The method is typed (`typed_methods!`):
//! the host has checked the input against the descriptor's schema before
//! it reaches [`get`] as a [`Key`].

use jig_provider_sdk::{typed_methods, CallError, Channels, Config, Context, Provider, Value};
use serde::{Deserialize, Serialize};

/// The kv provider; it keeps no state of its own.
pub struct Kv;

/// `#/$defs/Key` of the descriptor: the input of `get` and the data of
/// its `not-found` error.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Key {
    pub key: String,
}

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
        typed_methods!(method, input, {
            "get" => |key: Key| get(key, config),
        })
    }
}

/// The `get` method.
pub fn get(input: Key, config: &Config) -> Result<String, CallError> {
    match config
        .settings
        .get("entries")
        .and_then(|e| e.get(&input.key))
    {
        Some(Value::String(value)) => Ok(value.clone()),
        _ => Err(CallError::application_with("not-found", &input)),
    }
}

jig_provider_sdk::export_provider!(Kv);
