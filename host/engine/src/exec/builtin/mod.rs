//! The host's builtin capabilities, as a Run serves them: a `capability/call`
//! whose slot the review pinned to a builtin comes here instead of going to
//! a loaded provider. Their policy and wire clients live in
//! `jig-provider-builtin`; this room gives them what only the host has (the
//! admitted package, the Run's deadline and cancellation, envelopes from the
//! sandbox, the Run's record) through [`BuiltinCall`].

mod agent;
pub(crate) mod checkpoint;
mod command;

use std::sync::Arc;

use flow::json::Value;
use jig_provider_api::{CallContext, CallError, ChannelPorts};

use super::invocation::InvocationServices;
use super::peer::BoxFuture;

/// One call to a builtin, with everything the host lends it.
#[allow(dead_code)] // read by the builtins as they land
pub(super) struct BuiltinCall {
    /// The calling invocation: its package, resolved target (settings,
    /// Binding policy), deadline, cancellation and executor (sandbox,
    /// store, budget).
    pub services: Arc<InvocationServices>,
    pub ctx: CallContext,
    pub method: String,
    pub input: Value,
    /// The channel endpoints the caller mapped to the method's ports.
    pub ports: Arc<dyn ChannelPorts>,
}

/// Serve one call by builtin `name`; the caller validates the value
/// against the contract method and settles the channels.
pub(super) fn call(name: &str, call: BuiltinCall) -> BoxFuture<Result<Value, CallError>> {
    let waiting = &call.services.executor.waiting;
    let waited = match name {
        "agent-run" => Some(super::Waited::new(waiting, |w| &w.agents)),
        "project-command" => Some(super::Waited::new(waiting, |w| &w.commands)),
        _ => None,
    };
    let served = match name {
        "agent-run" => agent::call(call),
        "project-command" => command::call(call),
        "project-command-credentialed" => command::call_credentialed(call),
        "run-checkpoint" => checkpoint::call(call),
        other => {
            let message = format!("no builtin capability {other:?} in this build");
            Box::pin(async move { Err(CallError::operational("UNAVAILABLE", message)) })
        }
    };
    Box::pin(async move {
        let _waited = waited;
        served.await
    })
}
