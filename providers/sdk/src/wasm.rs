//! The guest side of the `jig:provider` component world
//! (`providers/wit/provider.wit`). Public only so [`crate::export_provider!`]
//! can reach it.

/// Bindings generated from the provider world.
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "capability-provider",
        pub_export_macro: true,
        export_macro_name: "export_capability_provider",
        default_bindings_module: "::jig_provider_sdk::wasm::bindings",
    });
}

pub use bindings::export_capability_provider;
pub use bindings::exports::jig::provider::provider::{
    CallContext, CallError, Guest, OperationalError, ProviderConfig,
};
pub use wit_bindgen;

use bindings::exports::jig::provider::provider::{ApplicationError, PortDirection};
use bindings::jig::provider::channels as host;
use serde_json::Value;

use crate::channels::Link;
use crate::{Channels, Config, Context, Direction, Item, Port, Provider};

fn failure(f: host::ChannelFailure) -> crate::CallError {
    crate::CallError::operational(&f.code, f.message)
}

pub(crate) fn send(port: &str, item: &Value) -> Result<(), crate::CallError> {
    host::send(port, &item.to_string()).map_err(failure)
}

pub(crate) fn next(port: &str) -> Result<Option<Item>, crate::CallError> {
    match host::next(port).map_err(failure)? {
        None => Ok(None),
        Some(item) => {
            let value = serde_json::from_str(&item.value).map_err(|e| {
                crate::CallError::operational(
                    "EXECUTION_FAILED",
                    format!("the host sent an item that is not JSON: {e}"),
                )
            })?;
            Ok(Some(Item {
                sequence: item.sequence,
                value,
            }))
        }
    }
}

pub(crate) fn close(port: &str) -> Result<(), crate::CallError> {
    host::close(port).map_err(failure)
}

/// `contracts`: the descriptors exactly as the provider wrote them.
pub fn contracts<P: Provider>() -> Vec<String> {
    P::contracts().into_iter().map(str::to_owned).collect()
}

/// `call`: decodes the JSON text arguments, calls the provider and encodes
/// its answer. A panic aborts the instance, which the host reports as a trap.
pub fn call<P: Provider>(
    ctx: CallContext,
    method: String,
    input: String,
    config: ProviderConfig,
) -> Result<String, CallError> {
    let input = serde_json::from_str(&input).map_err(|e| {
        CallError::Operational(OperationalError {
            code: "INVALID_INPUT".to_owned(),
            message: format!("input is not JSON: {e}"),
            details: None,
        })
    })?;
    let settings = serde_json::from_str(&config.settings).unwrap_or_default();
    let config = Config {
        settings,
        secrets: config
            .secrets
            .into_iter()
            .map(|s| (s.name, s.value))
            .collect(),
    };
    let ports = ctx
        .ports
        .into_iter()
        .map(|p| Port {
            name: p.name,
            direction: match p.direction {
                PortDirection::Send => Direction::Send,
                PortDirection::Receive => Direction::Receive,
            },
        })
        .collect();
    let channels = Channels::new(ports, Link::Component);
    let ctx = Context {
        contract_id: ctx.contract_id,
        contract_version: ctx.contract_version,
        contract_digest: ctx.contract_digest,
        operation_id: ctx.operation_id,
        deadline_unix_ms: ctx.deadline_unix_ms,
    };
    match P::call(&ctx, &method, input, &config, &channels) {
        Ok(value) => Ok(value.to_string()),
        Err(crate::CallError::Application { name, data }) => {
            Err(CallError::Application(ApplicationError {
                name,
                data: data.to_string(),
            }))
        }
        Err(crate::CallError::Operational {
            code,
            message,
            details,
        }) => Err(CallError::Operational(OperationalError {
            code,
            message,
            details: details.map(|d| d.to_string()),
        })),
    }
}
