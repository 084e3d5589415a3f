//! The "channels component" of the Run/1 conformance scenarios.
//!
//! Creates a direct channel, lends its send endpoint to capability call
//! `answer` (slot `worker`, method `run`, input = root input) as `events`,
//! and reads the receiver to its end while the call runs. A `LAGGED` read
//! failure marks `complete: false`; any other read failure fails the Run
//! after the call settles. Output: `{"complete", "values", "work"}`.

use std::collections::BTreeMap;

use flow_sdk::{
    CapabilityCall, ChannelOptions, ErrorCode, HandlerError, RunContext, RunResult, handle,
};
use serde_json::json;

async fn run(ctx: RunContext) -> Result<RunResult, HandlerError> {
    let pair = ctx
        .channel(ChannelOptions::default())
        .await?
        .into_pair()
        .ok_or("the host returned a broadcast channel for a direct request")?;
    let work = ctx.call_capability(CapabilityCall {
        operation_id: "answer".into(),
        slot: "worker".into(),
        method: "run".into(),
        input: ctx.input().clone(),
        channels: BTreeMap::from([("events".to_string(), pair.sender.endpoint().to_string())]),
    });
    let mut values = Vec::new();
    let mut complete = true;
    let mut read_failure = None;
    loop {
        match pair.receiver.next().await {
            Ok(Some(v)) => values.push(v),
            Ok(None) => break,
            Err(e) if e.code == ErrorCode::Lagged => {
                // The failed read settled the receiver; it is not released,
                // so nothing more goes on the wire for it.
                complete = false;
                break;
            }
            Err(e) => {
                read_failure = Some(e);
                break;
            }
        }
    }
    let work = work.await?;
    if let Some(e) = read_failure {
        return Err(e.into());
    }
    Ok(RunResult::done(
        json!({ "complete": complete, "values": values, "work": work }),
    ))
}

fn main() {
    handle(run)
}
