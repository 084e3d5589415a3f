//! Looks a key up through the `store` capability slot.
//!
//! Input: a string key (anything else looks up "world").
//! Output: `{"value": <value>}`, or `{"error": <declared error name>}` when
//! the capability answers with one of its declared errors.

use flow_sdk::{CallError, CapabilityCall, HandlerError, RunContext, RunResult, handle};
use serde_json::json;

async fn run(ctx: RunContext) -> Result<RunResult, HandlerError> {
    let key = ctx.input().as_str().unwrap_or("world").to_string();
    let looked_up = ctx
        .call_capability(CapabilityCall {
            operation_id: "lookup:1".into(),
            slot: "store".into(),
            method: "get".into(),
            input: json!({ "key": key }),
            ..Default::default()
        })
        .await;
    let output = match looked_up {
        Ok(value) => json!({ "value": value }),
        Err(CallError::Capability(e)) => json!({ "error": e.error_name }),
        Err(e) => return Err(e.into()),
    };
    Ok(RunResult::done(output))
}

fn main() {
    handle(run)
}
