//! The "standard component" of the Run/1 conformance scenarios.
//!
//! 1. At once: child Flow `research:1` (slot `research`) with the root input,
//!    and capability call `store:1` (`artifacts`.`write`).
//! 2. After both settle: `missing:1` (`artifacts`.`read`), whose declared
//!    error name is kept.
//! 3. Returns `{research, stored, missing}`.
//!
//! Root cancellation fails every open call with `CANCELLED`; the `?` below
//! then ends the handler and the SDK answers the root with `CANCELLED`.

use flow_sdk::{
    CallError, CapabilityCall, ChildFlowRequest, HandlerError, RunContext, RunResult, handle,
};
use serde_json::json;

async fn run(ctx: RunContext) -> Result<RunResult, HandlerError> {
    // Both calls are on the wire as soon as they are made.
    let research = ctx.run_child_flow(ChildFlowRequest {
        operation_id: "research:1".into(),
        slot: "research".into(),
        intent: Some("Find a useful comparison target.".into()),
        input: ctx.input().clone(),
        ..Default::default()
    });
    let stored = ctx.call_capability(CapabilityCall {
        operation_id: "store:1".into(),
        slot: "artifacts".into(),
        method: "write".into(),
        input: json!({ "source": "research" }),
        ..Default::default()
    });
    let stored = stored.await;
    let research = research.await;
    let (research, stored) = (research?, stored?);

    let missing = ctx
        .call_capability(CapabilityCall {
            operation_id: "missing:1".into(),
            slot: "artifacts".into(),
            method: "read".into(),
            input: json!({ "uri": "artifact://missing" }),
            ..Default::default()
        })
        .await;
    let missing = match missing {
        Err(CallError::Capability(e)) => json!(e.error_name),
        Ok(value) => value,
        Err(e) => return Err(e.into()),
    };
    Ok(RunResult::done(json!({
        "research": research.to_value(),
        "stored": stored,
        "missing": missing,
    })))
}

fn main() {
    handle(run)
}
