//! The guest side of the `jig:provider` component world
//! (`providers/wit/provider.wit`). Public only so [`crate::export_provider!`]
//! can reach it.

pub use crate::wit::export_capability_provider;
pub use crate::wit::exports::jig::provider::provider::{
    CallContext, CallError, Guest, OperationalError, ProviderConfig,
};
pub use wit_bindgen;

use crate::channels::Link;
use crate::port::{Direction, Port};
use crate::wit::exports::jig::provider::provider::{ApplicationError, PortDirection};
use crate::{Channels, Config, Context, Provider};

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
