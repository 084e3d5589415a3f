//! What a running component may ask of its host (`flow/run-child`,
//! `capability/call`, `channel/*`); the slots that bound how much of it
//! runs at once are `invocation`'s.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use flow::json::Value;
use flow::wire::CapabilityCallParams;
use flow::wire::ErrorCode;
use flow::wire::OperationalError;
use flow::wire::RunChildParams;
use jig_provider_api::CallContext;
use jig_provider_api::CallError;
use jig_provider_api::ContractIdentity;
use serde_json::json;

use super::invocation::{ChildSlot, InvocationServices};
use super::outcome::invalid_details;
use super::peer::BoxFuture;
use super::peer::Services;
use super::{builtin, channels, provider_ports, Invocation, Waited};

/// The channels of one root Run tree as the host connects them: the tree's
/// broker (one per root Run), the host's own holder in it, and the writers
/// (root port → host-held token) it maps into the root.
pub(crate) struct RootChannels {
    pub broker: Arc<channels::Broker>,
    pub host: channels::HolderId,
    pub writers: BTreeMap<String, String>,
}

impl RootChannels {
    /// A fresh tree whose root the host connects to no port.
    pub fn none() -> RootChannels {
        let broker = channels::Broker::new();
        RootChannels {
            host: broker.new_holder(),
            broker,
            writers: BTreeMap::new(),
        }
    }
}

/// Where an invocation sits in its tree's channel broker, and the rights a
/// caller maps into it (`(caller, port → caller token)`).
pub(super) struct ChannelLink {
    pub(super) broker: Arc<channels::Broker>,
    pub(super) holder: channels::HolderId,
    pub(super) transfer: Option<(channels::HolderId, BTreeMap<String, String>)>,
}

/// Settles an invocation's channel rights when it ends, also when its
/// future is dropped (cancelled with its owner).
pub(super) struct SettleRights {
    pub(super) broker: Arc<channels::Broker>,
    pub(super) holder: channels::HolderId,
    pub(super) healthy: bool,
}

impl Drop for SettleRights {
    fn drop(&mut self) {
        self.broker.finish(self.holder, self.healthy);
    }
}

/// How an invocation ended, for the channel rights it held.
#[derive(Clone, Copy)]
pub(super) enum Ended {
    Healthy,
    Failed,
    /// Cancelled or past its deadline: its writers' rights ended unsealed.
    Stopped,
}

/// Settles a Flow invocation's channel rights when it ends; a future
/// dropped before its result was cancelled with its owner (stopped).
pub(super) struct SettleInvocation {
    pub(super) broker: Arc<channels::Broker>,
    pub(super) holder: channels::HolderId,
    pub(super) ended: Option<Ended>,
}

impl Drop for SettleInvocation {
    fn drop(&mut self) {
        match self.ended.unwrap_or(Ended::Stopped) {
            Ended::Healthy => self.broker.finish(self.holder, true),
            Ended::Failed => self.broker.finish(self.holder, false),
            Ended::Stopped => self.broker.finish_stopped(self.holder),
        }
    }
}

/// How much of a failed child's stderr its parent's error keeps: the tail,
/// where a traceback ends. The parent's own terminal keeps its own 64 KiB.
pub(super) const CHILD_STDERR_BYTES: usize = 8 * 1024;
/// A failed child's own details larger than this (serialized) are left
/// out of its parent's error, so a deep tree of failures stays bounded.
pub(super) const CHILD_DETAILS_BYTES: usize = 16 * 1024;

/// A child's failure as its parent receives it (seed 002: a child has no
/// Run history of its own, so what it was is carried here): the child's
/// wire code, a message naming the slot and the child target, and
/// `details.child` with the slot, target, the child's own code, message
/// and details, and the tail of its stderr.
pub(super) fn attributed(slot: &str, target: &str, failure: &super::Failure) -> OperationalError {
    let wire = failure.to_operational();
    let stderr = &failure.diagnostics.stderr;
    let mut cut = stderr.len().saturating_sub(CHILD_STDERR_BYTES);
    while !stderr.is_char_boundary(cut) {
        cut += 1;
    }
    let details = failure.details.clone().unwrap_or(Value::Null);
    let details_fit = serde_json::to_vec(&details).is_ok_and(|b| b.len() <= CHILD_DETAILS_BYTES);
    let mut child = json!({
        "slot": slot,
        "target": target,
        "code": failure.code.as_str(),
        "message": failure.message,
        "details": if details_fit { details } else { Value::Null },
        "stderr": &stderr[cut..],
        "stderrBytes": failure.diagnostics.stderr_bytes,
        "stderrTruncated": cut > 0 || failure.diagnostics.stderr_truncated,
    });
    if !details_fit {
        child["detailsOmitted"] = Value::Bool(true);
    }
    OperationalError {
        code: wire.code,
        message: format!(
            "child slot {slot:?} ({target}) failed with {}: {}",
            failure.code.as_str(),
            failure.message
        ),
        details: Some(json!({ "child": child })),
    }
}

impl Services for InvocationServices {
    fn channel(
        &self,
        method: flow::wire::Method,
        params: &Value,
    ) -> Result<BoxFuture<Result<Value, OperationalError>>, flow::wire::RpcError> {
        self.broker
            .request(self.holder, &self.package, method, params)
    }

    fn run_child(&self, params: RunChildParams) -> BoxFuture<Result<Value, OperationalError>> {
        let Some(target) = self.resolved.slots.get(&params.slot).cloned() else {
            let e = OperationalError::new(
                ErrorCode::Unavailable,
                format!("no child slot {:?} is admitted here", params.slot),
            );
            return Box::pin(async move { Err(e) });
        };
        let slot = match ChildSlot::take(&self.activity) {
            Ok(slot) => slot,
            Err(e) => return Box::pin(async move { Err(e) }),
        };
        let invocation = Invocation {
            target,
            input: params.input,
            deadline_unix_ms: self.deadline_unix_ms,
            cancel: self.cancel.clone(),
            attachments: Vec::new(),
            run: None,
        };
        let link = ChannelLink {
            broker: self.broker.clone(),
            holder: self.broker.new_holder(),
            transfer: Some((self.holder, params.channels)),
        };
        let called = (params.slot.clone(), invocation.target.to_string());
        let child = self.executor.run_child(invocation, link);
        let waited = Waited::new(&self.executor.waiting, |w| &w.children);
        Box::pin(async move {
            let _slot = slot;
            let _waited = waited;
            match child.await {
                Ok(success) => Ok(json!({ "outcome": success.outcome, "output": success.output })),
                Err(failure) => Err(attributed(&called.0, &called.1, &failure)),
            }
        })
    }

    fn call_capability(
        &self,
        params: CapabilityCallParams,
    ) -> BoxFuture<Result<Value, OperationalError>> {
        let prepared = self.prepare_call(&params);
        let deadline_unix_ms = self.deadline_unix_ms;
        let broker = self.broker.clone();
        let caller = self.holder;
        let package = self.package.clone();
        let run_cancel = self.cancel.clone();
        let me = self.me.upgrade();
        Box::pin(async move {
            let (target, method, identity, declared_channels) = prepared?;
            // The provider call is its own holder: the mapped rights move
            // into it (all validated first against the method's declared
            // ports, else nothing moves and nothing dispatches), and are
            // settled when the call ends, also when this future is dropped.
            let holder = broker.new_holder();
            let grants = broker.transfer_to_method(
                caller,
                holder,
                &params.channels,
                declared_channels.as_ref(),
                &package,
            )?;
            let mut settle = SettleRights {
                broker: broker.clone(),
                holder,
                healthy: false,
            };
            let (ports, _call_over) = provider_ports::ProviderPorts::new(
                broker,
                holder,
                package,
                grants,
                deadline_unix_ms,
                run_cancel,
            );
            let ports: Arc<dyn jig_provider_api::ChannelPorts> = Arc::new(ports);
            let ctx = CallContext {
                contract: identity,
                operation_id: params.operation_id.clone(),
                deadline_unix_ms,
            };
            let name = params.method.clone();
            let input = params.input.clone();
            let left = Duration::from_millis(
                deadline_unix_ms.saturating_sub(jig_provider_api::dispatch::now_unix_ms()),
            );
            let deadline = || {
                OperationalError::new(
                    ErrorCode::DeadlineExceeded,
                    "the capability call reached the deadline",
                )
            };
            let outcome = match target {
                CallTarget::Provider(provider) => {
                    let call = tokio::task::spawn_blocking(move || {
                        provider.call(&ctx, &name, &input, ports)
                    });
                    match tokio::time::timeout(left, call).await {
                        Err(_) => return Err(deadline()),
                        Ok(Err(_)) => {
                            return Err(OperationalError::new(
                                ErrorCode::ExecutionFailed,
                                "the provider failed",
                            ))
                        }
                        Ok(Ok(outcome)) => outcome,
                    }
                }
                CallTarget::Builtin(builtin_name) => {
                    let Some(services) = me else {
                        return Err(OperationalError::new(
                            ErrorCode::OwnerClosed,
                            "the invocation has ended",
                        ));
                    };
                    let call = builtin::BuiltinCall {
                        services,
                        ctx,
                        method: name,
                        input,
                        ports,
                    };
                    // A builtin ends its own effect at the deadline (with
                    // its evidence); this bound only backs that up.
                    let backstop = left + jig_sandbox::KILL_GRACE * 4;
                    match tokio::time::timeout(backstop, builtin::call(&builtin_name, call)).await {
                        Err(_) => return Err(deadline()),
                        Ok(outcome) => outcome,
                    }
                }
            };
            let answer = match outcome {
                Ok(value) => match method.output.validate(&value) {
                    Ok(()) => Ok(json!({ "value": value })),
                    Err(invalid) => Err(OperationalError {
                        code: ErrorCode::InvalidResult,
                        message: format!(
                            "the provider's value does not satisfy the contract: {invalid}"
                        ),
                        details: Some(invalid_details(&invalid)),
                    }),
                },
                Err(CallError::Application { name, data }) => match method.errors.get(&name) {
                    Some(schema) if schema.validate(&data).is_ok() => {
                        Ok(json!({ "error": { "name": name, "data": data } }))
                    }
                    _ => Err(OperationalError::new(
                        ErrorCode::InvalidResult,
                        format!("the provider returned undeclared or invalid error {name:?}"),
                    )),
                },
                Err(CallError::Operational {
                    code,
                    message,
                    details,
                }) => Err(OperationalError {
                    code: ErrorCode::parse_wire(&code).unwrap_or(ErrorCode::ExecutionFailed),
                    message,
                    details,
                }),
            };
            // A value or a declared error is a settled call: its writers
            // are sealed. Anything else fails the channels it wrote.
            settle.healthy = answer.is_ok();
            answer
        })
    }
}

/// Who serves a capability call: a loaded provider, or a builtin by name.
pub(super) enum CallTarget {
    Provider(Arc<dyn jig_provider_api::Provider>),
    Builtin(String),
}

/// The target, the method, the exact contract identity, and the
/// method's raw `channels` declarations (when it has any).
pub(super) type PreparedCall = (
    CallTarget,
    flow::contract::Method,
    ContractIdentity,
    Option<Value>,
);

impl InvocationServices {
    pub(super) fn prepare_call(
        &self,
        params: &CapabilityCallParams,
    ) -> Result<PreparedCall, OperationalError> {
        let unavailable = |m: String| OperationalError::new(ErrorCode::Unavailable, m);
        let contract = self.package.contract(&params.slot).ok_or_else(|| {
            unavailable(format!(
                "no capability slot {:?} is bound here",
                params.slot
            ))
        })?;
        let method = contract.method(&params.method).cloned().ok_or_else(|| {
            OperationalError::new(
                ErrorCode::InvalidInput,
                format!("the contract has no method {:?}", params.method),
            )
        })?;
        if let Err(invalid) = method.input.validate(&params.input) {
            return Err(OperationalError {
                code: ErrorCode::InvalidInput,
                message: format!("the input does not satisfy the contract: {invalid}"),
                details: Some(invalid_details(&invalid)),
            });
        }
        let identity = ContractIdentity {
            id: contract.id.clone(),
            version: contract.version.clone(),
            digest: contract.digest.clone(),
        };
        let pin = self.resolved.providers.get(&params.slot).ok_or_else(|| {
            unavailable(format!(
                "no provider was admitted for slot {:?}",
                params.slot
            ))
        })?;
        let target = match crate::providers::builtin_pin(pin) {
            Some(name) => CallTarget::Builtin(name.to_string()),
            None => CallTarget::Provider(
                self.executor
                    .providers
                    .resolve(pin, &identity)
                    .map_err(unavailable)?,
            ),
        };
        let declared_channels = contract
            .descriptor
            .get("methods")
            .and_then(|m| m.get(&params.method))
            .and_then(|m| m.get("channels"))
            .cloned();
        Ok((target, method, identity, declared_channels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::{Diagnostics, Failure};

    fn failed(stderr: String, details: Option<Value>) -> Failure {
        Failure {
            code: ErrorCode::InvalidResult.into(),
            message: "the result does not satisfy result.schema.json".into(),
            details,
            diagnostics: Diagnostics {
                stderr_bytes: stderr.len() as u64,
                stderr,
                stderr_truncated: false,
            },
        }
    }

    #[test]
    fn a_child_failure_names_its_slot_target_and_code() {
        let e = attributed(
            "classifier",
            "flow:flows/code",
            &failed("oops\n".into(), Some(json!({"keyword": "type"}))),
        );
        assert_eq!(e.code, ErrorCode::InvalidResult);
        assert_eq!(
            e.message,
            "child slot \"classifier\" (flow:flows/code) failed with INVALID_RESULT: the result does not satisfy result.schema.json"
        );
        assert_eq!(
            e.details.unwrap(),
            json!({"child": {"slot": "classifier", "target": "flow:flows/code",
                "code": "INVALID_RESULT", "message": "the result does not satisfy result.schema.json",
                "details": {"keyword": "type"}, "stderr": "oops\n", "stderrBytes": 5,
                "stderrTruncated": false}})
        );
    }

    #[test]
    fn a_host_only_child_code_reaches_the_parent_as_execution_failed_and_is_kept() {
        let mut failure = failed(String::new(), None);
        failure.code = crate::code::HostCode::CleanupFailed.into();
        let e = attributed("s", "binding:b", &failure);
        assert_eq!(e.code, ErrorCode::ExecutionFailed);
        assert_eq!(e.details.unwrap()["child"]["code"], "JIG_CLEANUP_FAILED");
    }

    #[test]
    fn a_child_stderr_tail_and_its_details_are_bounded() {
        // At the bound, all of it; one past, its end (on a character).
        let at = "x".repeat(CHILD_STDERR_BYTES);
        let child = attributed("s", "flow:f", &failed(at.clone(), None))
            .details
            .unwrap();
        assert_eq!(child["child"]["stderr"], at);
        assert_eq!(child["child"]["stderrTruncated"], false);
        let over = format!("é{}", "x".repeat(CHILD_STDERR_BYTES - 1));
        let child = attributed("s", "flow:f", &failed(over, None))
            .details
            .unwrap();
        assert_eq!(child["child"]["stderr"], "x".repeat(CHILD_STDERR_BYTES - 1));
        assert_eq!(child["child"]["stderrTruncated"], true);

        // A string serializes to its bytes and its two quotes.
        let fits = json!("y".repeat(CHILD_DETAILS_BYTES - 2));
        let child = attributed("s", "flow:f", &failed(String::new(), Some(fits.clone())));
        let child = child.details.unwrap();
        assert_eq!(child["child"]["details"], fits);
        assert!(child["child"].get("detailsOmitted").is_none());
        let over = json!("y".repeat(CHILD_DETAILS_BYTES - 1));
        let child = attributed("s", "flow:f", &failed(String::new(), Some(over)));
        let child = child.details.unwrap();
        assert_eq!(child["child"]["details"], Value::Null);
        assert_eq!(child["child"]["detailsOmitted"], true);
    }
}
