//! The "channel-wiring component" of the Run/1 conformance scenarios.
//!
//! `input.role` selects the behaviour:
//!
//! - `root`: creates a direct channel with contract `./updates.json`, lends
//!   its send endpoint to child `incompatible` (which must fail
//!   `INVALID_INPUT`: the child's declared port does not match), then runs
//!   children `worker` (send endpoint as `events`) and `monitor` (receive
//!   endpoint as `events`, plus the root's own `progress` port when it holds
//!   one) concurrently. Output `{"incompatible": true, "work", "monitor"}`
//!   with the complete child results.
//! - `worker`: capability call `answer` (`agent`.`run`, input null) with its
//!   `events` endpoint forwarded; returns the unwrapped value.
//! - `monitor`: reads `events`, keeps the `text` member of object items,
//!   forwards each kept text to `progress` when present, stops after the
//!   first kept item when `stop` is true (releasing the reader), and closes
//!   `progress` at the end. `LAGGED` or stopping early makes
//!   `complete: false`; either way the reader is released once (after
//!   `LAGGED` the host answers `{"status": "failed", "code": "LAGGED"}`).
//!   Output `{"complete", "selected"}`.

use std::collections::BTreeMap;

use flow_sdk::{
    CapabilityCall, ChildFlowRequest, ErrorCode, HandlerError, RunContext, RunResult, Value, handle,
};
use serde_json::json;

async fn root(ctx: &RunContext) -> Result<Value, HandlerError> {
    let updates = ctx
        .channel(flow_sdk::ChannelOptions {
            contract: Some("./updates.json".into()),
            ..Default::default()
        })
        .await?
        .into_pair()
        .ok_or("the host returned a broadcast channel for a direct request")?;
    let send = updates.sender.endpoint().to_string();
    let receive = updates.receiver.endpoint().to_string();

    let incompatible = ctx
        .run_child_flow(ChildFlowRequest {
            operation_id: "incompatible".into(),
            slot: "incompatible".into(),
            input: Value::Null,
            channels: BTreeMap::from([("events".to_string(), send.clone())]),
            ..Default::default()
        })
        .await;
    match incompatible {
        Err(e) if e.code == ErrorCode::InvalidInput => {}
        Err(e) => return Err(e.into()),
        Ok(_) => return Err("the incompatible child accepted the events channel".into()),
    }

    let mut monitor_channels = BTreeMap::from([("events".to_string(), receive)]);
    if let Some(progress) = ctx.channels().get("progress") {
        monitor_channels.insert("progress".into(), progress.endpoint.clone());
    }
    let stop = ctx.input().get("stop").cloned().unwrap_or(json!(false));
    // Both children are on the wire before either is awaited.
    let work = ctx.run_child_flow(ChildFlowRequest {
        operation_id: "worker".into(),
        slot: "worker".into(),
        input: json!({ "role": "worker" }),
        channels: BTreeMap::from([("events".to_string(), send)]),
        ..Default::default()
    });
    let monitor = ctx.run_child_flow(ChildFlowRequest {
        operation_id: "monitor".into(),
        slot: "monitor".into(),
        input: json!({ "role": "monitor", "stop": stop }),
        channels: monitor_channels,
        ..Default::default()
    });
    let (work, monitor) = (work.await, monitor.await);
    let (work, monitor) = (work?, monitor?);
    Ok(json!({
        "incompatible": true,
        "work": work.to_value(),
        "monitor": monitor.to_value(),
    }))
}

async fn worker(ctx: &RunContext) -> Result<Value, HandlerError> {
    let events = ctx
        .channels()
        .get("events")
        .ok_or("the worker holds no events port")?;
    let value = ctx
        .call_capability(CapabilityCall {
            operation_id: "answer".into(),
            slot: "agent".into(),
            method: "run".into(),
            input: Value::Null,
            channels: BTreeMap::from([("events".to_string(), events.endpoint.clone())]),
        })
        .await?;
    Ok(value)
}

async fn monitor(ctx: &RunContext) -> Result<Value, HandlerError> {
    let events = ctx
        .granted_receiver("events")
        .ok_or("the monitor holds no events receive port")?;
    let progress = ctx.granted_sender("progress");
    let stop = ctx.input().get("stop") == Some(&json!(true));
    let mut selected = Vec::new();
    let mut complete = true;
    loop {
        match events.next().await {
            Ok(Some(Value::Object(update))) => {
                let Some(text) = update.get("text") else {
                    continue;
                };
                selected.push(text.clone());
                if let Some(progress) = &progress {
                    progress.send(text.clone()).await?;
                }
                if stop {
                    events.release().await?;
                    complete = false;
                    break;
                }
            }
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) if e.code == ErrorCode::Lagged => {
                // Leaving the read closes the receiver, as Python's `async
                // with` does: one release, which the host answers with the
                // failure it recorded (the disposition, not a new error).
                events.release().await?;
                complete = false;
                break;
            }
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(progress) = &progress {
        progress.close().await?;
    }
    Ok(json!({ "complete": complete, "selected": selected }))
}

async fn run(ctx: RunContext) -> Result<RunResult, HandlerError> {
    let output = match ctx.input().get("role").and_then(Value::as_str) {
        Some("root") => root(&ctx).await?,
        Some("worker") => worker(&ctx).await?,
        Some("monitor") => monitor(&ctx).await?,
        _ => return Err("input.role must be root, worker or monitor".into()),
    };
    Ok(RunResult::done(output))
}

fn main() {
    handle(run)
}
