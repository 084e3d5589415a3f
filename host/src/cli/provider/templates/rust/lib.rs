//! The @NAME@ capability provider (contract `@NAME@.capability.json`).

use jig_provider_sdk::{typed_methods, CallError, Channels, Config, Context, Provider, Value};
use serde::Deserialize;

pub struct Service;

/// The input of `greet`, as the contract's schema describes it (the host
/// checks the schema before a call reaches this code).
#[derive(Deserialize)]
pub struct Greet {
    pub name: String,
}

impl Provider for Service {
    fn contracts() -> Vec<&'static str> {
        vec![include_str!("../@NAME@.capability.json")]
    }

    fn call(
        _: &Context,
        method: &str,
        input: Value,
        _: &Config,
        _: &Channels,
    ) -> Result<Value, CallError> {
        typed_methods!(method, input, {
            "greet" => greet,
        })
    }
}

/// `greet {"name"}`: a greeting, or the declared error `nameless`.
pub fn greet(input: Greet) -> Result<String, CallError> {
    if input.name.is_empty() {
        return Err(CallError::application_with("nameless", &jig_provider_sdk::serde_json::json!({})));
    }
    Ok(format!("Hello, {}!", input.name))
}

jig_provider_sdk::export_provider!(Service);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greets_by_name_and_refuses_no_name() {
        let name = |n: &str| Greet { name: n.to_owned() };
        assert_eq!(greet(name("Ada")).unwrap(), "Hello, Ada!");
        assert!(matches!(
            greet(name("")),
            Err(CallError::Application { name, .. }) if name == "nameless"
        ));
    }
}
