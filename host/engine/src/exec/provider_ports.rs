//! The channel ports of one capability call, as its provider reaches them.
//!
//! A provider runs on a blocking thread; each operation here drives the
//! tree broker's async `channel/*` request for the call's own holder from
//! that thread and wakes it with `CANCELLED` when the call ends or its Run
//! is cancelled, or with `DEADLINE_EXCEEDED` at the deadline. A provider
//! thread is therefore never left blocked in a channel after its call.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use flow::json::Value;
use flow::package::Package;
use flow::wire::{ChannelDirection, ChannelGrant, Method, OperationalError};
use jig_provider_api::{
    check_granted, CallError, ChannelItem, ChannelPorts, GrantedPort, PortDirection,
};
use serde_json::json;
use tokio::sync::watch;

use super::channels::{Broker, HolderId};

/// The ports one provider call holds: port name → its endpoint in the
/// call's holder.
pub(super) struct ProviderPorts {
    broker: Arc<Broker>,
    holder: HolderId,
    caller: Arc<Package>,
    ports: Vec<GrantedPort>,
    endpoints: BTreeMap<String, String>,
    runtime: tokio::runtime::Handle,
    deadline_unix_ms: u64,
    /// Becomes true (or closes) when the call ends for any reason.
    call_over: watch::Receiver<bool>,
    run_cancel: watch::Receiver<bool>,
}

/// Held by the call's future: dropping it (the call settled, timed out or
/// was cancelled with its owner) wakes every blocked port operation.
pub(super) struct CallOver(watch::Sender<bool>);

impl Drop for CallOver {
    fn drop(&mut self) {
        self.0.send_replace(true);
    }
}

impl ProviderPorts {
    /// Ports for the rights `grants` (port → grant) moved into `holder`.
    pub(super) fn new(
        broker: Arc<Broker>,
        holder: HolderId,
        caller: Arc<Package>,
        grants: BTreeMap<String, ChannelGrant>,
        deadline_unix_ms: u64,
        run_cancel: watch::Receiver<bool>,
    ) -> (ProviderPorts, CallOver) {
        let (over, call_over) = watch::channel(false);
        let ports = grants
            .iter()
            .map(|(name, grant)| GrantedPort {
                name: name.clone(),
                direction: match grant.direction {
                    ChannelDirection::Send => PortDirection::Send,
                    ChannelDirection::Receive => PortDirection::Receive,
                },
            })
            .collect();
        let endpoints = grants
            .into_iter()
            .map(|(name, grant)| (name, grant.endpoint))
            .collect();
        let ports = ProviderPorts {
            broker,
            holder,
            caller,
            ports,
            endpoints,
            runtime: tokio::runtime::Handle::current(),
            deadline_unix_ms,
            call_over,
            run_cancel,
        };
        (ports, CallOver(over))
    }

    /// Runs one `channel/*` request of this call's holder to its end, or
    /// until the call is over.
    fn drive(
        &self,
        port: &str,
        direction: PortDirection,
        method: Method,
        mut params: Value,
    ) -> Result<Value, CallError> {
        check_granted(&self.ports, port, direction)?;
        params["endpoint"] = Value::String(self.endpoints[port].clone());
        let request = self
            .broker
            .request(self.holder, &self.caller, method, &params)
            .map_err(|e| {
                CallError::operational("EXECUTION_FAILED", format!("channel request: {e:?}"))
            })?;
        let left = Duration::from_millis(
            self.deadline_unix_ms
                .saturating_sub(jig_provider_api::dispatch::now_unix_ms()),
        );
        let mut call_over = self.call_over.clone();
        let mut run_cancel = self.run_cancel.clone();
        self.runtime.block_on(async move {
            tokio::select! {
                settled = request => settled.map_err(operational),
                _ = call_over.wait_for(|over| *over) => Err(cancelled()),
                _ = run_cancel.wait_for(|c| *c) => Err(cancelled()),
                _ = tokio::time::sleep(left) => Err(CallError::operational(
                    "DEADLINE_EXCEEDED",
                    "the capability call reached the deadline in a channel operation",
                )),
            }
        })
    }
}

fn cancelled() -> CallError {
    CallError::operational("CANCELLED", "the capability call was cancelled")
}

fn operational(e: OperationalError) -> CallError {
    CallError::Operational {
        code: e.code.as_str().to_owned(),
        message: e.message,
        details: e.details,
    }
}

impl ChannelPorts for ProviderPorts {
    fn ports(&self) -> &[GrantedPort] {
        &self.ports
    }

    fn send(&self, port: &str, item: Value) -> Result<(), CallError> {
        let params = json!({ "value": item });
        self.drive(port, PortDirection::Send, Method::ChannelSend, params)
            .map(drop)
    }

    fn next(&self, port: &str) -> Result<Option<ChannelItem>, CallError> {
        let answer = self.drive(port, PortDirection::Receive, Method::ChannelNext, json!({}))?;
        if answer.get("end").is_some() {
            return Ok(None);
        }
        let item = &answer["item"];
        match (item["sequence"].as_u64(), item.get("value")) {
            (Some(sequence), Some(value)) => Ok(Some(ChannelItem {
                sequence,
                value: value.clone(),
            })),
            _ => Err(CallError::operational(
                "EXECUTION_FAILED",
                "the channel answered outside Run/1",
            )),
        }
    }

    fn close(&self, port: &str) -> Result<(), CallError> {
        self.drive(port, PortDirection::Send, Method::ChannelClose, json!({}))
            .map(drop)
    }

    fn fail(&self, port: &str, code: &str, message: &str) -> Result<(), CallError> {
        check_granted(&self.ports, port, PortDirection::Send)?;
        let code = flow::wire::ErrorCode::parse_wire(code)
            .unwrap_or(flow::wire::ErrorCode::ExecutionFailed);
        let cause = OperationalError::new(code, message.to_string());
        if self
            .broker
            .fail_writer(self.holder, &self.endpoints[port], cause)
        {
            Ok(())
        } else {
            Err(CallError::operational(
                "DISCONNECTED",
                "the port's writer is no longer held",
            ))
        }
    }
}
